"""`${VAR}` interpolation of config string values (Vector's rules, applied after YAML parsing).

Supported: ``${VAR}`` (error when unset), ``${VAR:-default}`` (default when unset or empty),
``${VAR-default}`` (default when unset), ``${VAR:+alt}`` (alt when set and non-empty, else
empty), ``${VAR:?message}`` (error with message when unset or empty) and ``$${`` for a literal
``${``. Defaults may themselves contain ``${…}``. Values with newlines are refused so an
environment variable can never inject YAML structure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_INNERMOST = re.compile(r"\$\{(" + _NAME + r")(?:(:-|-|:\+|:\?)([^${}]*))?\}")
_ESCAPE = "\x00DOLLAR_BRACE\x00"


class InterpolationError(ValueError):
    """A variable is missing or its value is not allowed."""


def interpolate_text(text: str, env: Mapping[str, str]) -> str:
    work = text.replace("$${", _ESCAPE)

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3) or ""
        value = env.get(name)
        if op is None:
            if value is None:
                raise InterpolationError(f"environment variable {name} is not set (use ${{{name}:-default}})")
            result = value
        elif op == ":-":
            result = value if value else arg
        elif op == "-":
            result = value if value is not None else arg
        elif op == ":+":
            result = arg if value else ""
        else:  # ":?"
            if not value:
                raise InterpolationError(f"{name}: {arg or 'must be set'}")
            result = value
        if "\n" in result:
            raise InterpolationError(f"value of {name} contains a newline, which is not allowed in configs")
        return result

    previous = None
    while previous != work:  # resolve innermost first, so defaults may nest
        previous = work
        work = _INNERMOST.sub(substitute, work)
    if "${" in work:
        raise InterpolationError(f"malformed ${{…}} expression in {text!r}")
    return work.replace(_ESCAPE, "${")


def interpolate_tree(node: Any, env: Mapping[str, str], where: str = "") -> Any:
    """Interpolate every string scalar of a parsed YAML tree; errors name the key path."""
    if isinstance(node, str):
        try:
            return interpolate_text(node, env)
        except InterpolationError as exc:
            raise InterpolationError(f"{where or 'value'}: {exc}") from None
    if isinstance(node, dict):
        return {key: interpolate_tree(value, env, f"{where}.{key}" if where else str(key))
                for key, value in node.items()}
    if isinstance(node, list):
        return [interpolate_tree(value, env, f"{where}[{index}]") for index, value in enumerate(node)]
    return node
