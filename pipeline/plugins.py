"""Stage type discovery: built-ins and third-party plugins share one entry-point group."""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import EntryPoint, entry_points

from pipeline.errors import UserError
from pipeline.stage import Stage

ENTRY_POINT_GROUP = "ascend_pipeline.stages"


@functools.cache
def _registered() -> tuple[EntryPoint, ...]:
    """The group's entry points, read once per process (each read scans every installed distribution, and a
    config names a type per stage)."""
    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def available_types() -> dict[str, str]:
    """Registered type name → ``module:Class`` (not imported, so one broken plugin breaks nothing)."""
    return {ep.name: ep.value for ep in _registered()}


def load_stage_class(type_name: str, where: str = "") -> type[Stage]:
    """Resolve a config ``type``: a registered name or ``package.module:Class``."""
    prefix = f"{where}: " if where else ""
    if ":" in type_name:
        module_name, _, attr = type_name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UserError(f"{prefix}cannot import module '{module_name}' for type '{type_name}': {exc}",
                            "install the package that provides it or fix the module path") from None
        found = getattr(module, attr, None)
        if found is None:
            raise UserError(f"{prefix}module '{module_name}' has no class '{attr}'")
    else:
        matches = [ep for ep in _registered() if ep.name == type_name]
        if not matches:
            known = ", ".join(sorted(available_types())) or "none installed"
            raise UserError(f"{prefix}unknown stage type '{type_name}'",
                            f"known types: {known}; or use 'package.module:Class'")
        try:
            found = matches[0].load()
        except Exception as exc:  # a plugin that fails to import is reported, not fatal to others
            raise UserError(f"{prefix}stage type '{type_name}' failed to load: {exc}") from None
    if not (isinstance(found, type) and issubclass(found, Stage)):
        raise UserError(f"{prefix}'{type_name}' is not a pipeline stage class (subclass pipeline.stage.Stage)")
    return found
