"""Every CLI flag and config key is documented, and the README opens with its two commands."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from pipeline.cli import build_parser
from pipeline.config import COMMON_STAGE_KEYS, BatchSettings, RunSettings
from pipeline.plugins import available_types, load_stage_class

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
CONFIG_DOC = ROOT / "docs" / "configuration.md"

README_COMMANDS = [
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && pipeline run configs/live.yaml",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest",
]
BUILT_IN_TYPES = {"simulator", "collector", "decoder", "aggregator", "timeline", "summary", "sqlite", "live"}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse offers no public way to list subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("pipeline's parser has no subcommands")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings
            if option not in ("-h", "--help")]


def _documented(text: str, word: str) -> bool:
    """``word`` appears in ``text`` as a whole token (``--live`` does not count inside ``--live-x``)."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def _fields(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def _sections(text: str) -> dict[str, str]:
    """Heading name (its first `code` word, or its plain text) → the text up to the next heading."""
    sections: dict[str, str] = {}
    parts = re.split(r"^#{2,3} (.+)$", text, flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        code = re.match(r"`([^`]+)`", heading)
        sections[code.group(1) if code else heading.strip()] = body
    return sections


def _missing_keys(section: str, keys: list[str]) -> list[str]:
    """Keys without a table row of their own (a line starting with ``| `key` |``)."""
    return [key for key in keys if not re.search(rf"^\| `{re.escape(key)}` \|", section, flags=re.MULTILINE)]


def _own_stage_types() -> list[str]:
    """Stage types this distribution registers (a third-party plugin in the environment documents itself)."""
    return sorted(name for name, target in available_types().items() if target.startswith("stages."))


def test_every_subcommand_and_flag_is_in_cli_doc() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    missing = []
    for name, sub in _subcommands(build_parser()).items():
        if f"pipeline {name}" not in text:
            missing.append(f"subcommand `pipeline {name}`")
        missing.extend(f"`pipeline {name} {option}`" for option in _options(sub) if not _documented(text, option))
    assert not missing, f"not documented in {CLI_DOC.relative_to(ROOT)}: {', '.join(missing)}"


def test_the_built_in_stage_types_are_registered() -> None:
    assert set(_own_stage_types()) >= BUILT_IN_TYPES


@pytest.mark.parametrize("type_name", _own_stage_types())
def test_every_stage_config_key_is_in_its_section_of_configuration_doc(type_name: str) -> None:
    sections = _sections(CONFIG_DOC.read_text(encoding="utf-8"))
    assert type_name in sections, f"{CONFIG_DOC.name} has no section for stage type {type_name!r}"
    missing = _missing_keys(sections[type_name], _fields(load_stage_class(type_name).Config))
    assert not missing, f"{type_name}: keys not documented in its section of {CONFIG_DOC.name}: {missing}"


def test_every_run_batch_and_common_key_is_in_configuration_doc() -> None:
    sections = _sections(CONFIG_DOC.read_text(encoding="utf-8"))
    expected = {"run": _fields(RunSettings), "run.batch": _fields(BatchSettings),
                "Keys common to every stage": list(COMMON_STAGE_KEYS)}
    missing = [f"{section}: {key}" for section, keys in expected.items()
               for key in _missing_keys(sections.get(section, ""), keys)]
    top = CONFIG_DOC.read_text(encoding="utf-8").split("\n## ", 1)[0]
    missing += [f"top level: {key}" for key in _missing_keys(top, ["version", "run", "stages"])]
    assert not missing, f"not documented in {CONFIG_DOC.name}: {missing}"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.startswith("# pipeline — live Ascend profiling pipeline\n")
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    assert [(language, body.strip()) for language, body in blocks[:2]] == [("bash", c) for c in README_COMMANDS]
