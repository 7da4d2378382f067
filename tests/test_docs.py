"""Every CLI flag and config key is documented, the README opens with its two commands and links the docs, and
nothing a user reads names an internal reference."""

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

# What a user reads: the README, the docs, and the comments, docstrings, help texts, messages and configs of
# the installed packages, the examples, the scripts and benchmarks, and the container files.
USER_TEXT = [README, ROOT / "docs", ROOT / "pipeline", ROOT / "stages", ROOT / "pipeline_board", ROOT / "configs",
             ROOT / "examples", ROOT / "scripts", ROOT / "bench", ROOT / "docker"]
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".txt", ".json", ".cfg", ".ini", ".sh", ""}  # "": Dockerfile
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}  # and *.egg-info (generated)
# References a user cannot resolve: the project's own source documents ("seed 004"), research notes
# ("spec §1.3", "the spec's", "§6 D4", "formats.md", "columnar.md", "reference/peers.md"), design notes
# ("design §5", "shared/design.md") and work log ("session 9", "round 2", "issue 7"). Name the public source
# and say what it says instead.
INTERNAL_REFERENCE = re.compile(
    r"\bseeds?(?: case)? 0\d|\bspec(?: formats\.md)? ?§|\bspec section|\bdesign ?§|shared/design|shared/spec"
    r"|\bformats\.md\b|\bcolumnar\.md\b|\breference/\w+\.md\b|\bthe spec\b|\bspec's|\(§ ?\d|§\d[\d.]* ?D\d"
    r"|\bsessions? \d|\brounds? \d|\bissues? \d", re.IGNORECASE)
# Files other work is rewriting at the moment; each still names internal references (remove it from here once
# it is clean: the test then keeps it clean).
NOT_YET_CLEANED: set[str] = set()


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


def test_readme_links_every_doc_and_every_link_resolves() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {target.split("#", 1)[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)
               if "://" not in target and not target.startswith("#")}
    broken = sorted(target for target in targets if not (ROOT / target).exists())
    docs = sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))
    unlinked = [doc for doc in docs if doc not in targets]
    assert not broken and not unlinked, f"README.md: broken links {broken}, docs not linked {unlinked}"


def _user_text_files() -> list[Path]:
    files: list[Path] = []
    for top in USER_TEXT:
        if top.is_file():
            files.append(top)
            continue
        for path in sorted(top.rglob("*")):
            inside = path.relative_to(top).parts[:-1]
            if (path.is_file() and path.suffix in TEXT_SUFFIXES
                    and not any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in inside)):
                files.append(path)
    return files


def internal_references(files: list[Path]) -> list[str]:
    """``file:line: text`` of every line that names an internal reference."""
    found = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if INTERNAL_REFERENCE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    return found


def test_the_reference_pattern_catches_what_it_must() -> None:
    caught = ["seed 004 got it for the face-mask SSD", "Seeds 000 and 004", "(spec §1.3)", "spec formats.md §6 D3",
              "spec section 2", "design §5", "shared/design.md", "shared/spec/formats.md", "see columnar.md",
              "since session 6", "Session 9 changed", "after round 2", "(issue 7 part 6)", "(§6 D4)",
              "the spec's offsets", "Spec §1.7 / msprof", "GROUP BY of reference/peers.md §3.2"]
    passed = ["seed: 0", "random seed", "--seed 4", "round(x, 2)", "an SSH session", "issue a warning",
              "msprof's time conversion", "the format strings of msprof's parser", "respec", "specs",
              'SQLite\'s "how to corrupt" §2.2.1']
    assert [text for text in caught if not INTERNAL_REFERENCE.search(text)] == []
    assert [text for text in passed if INTERNAL_REFERENCE.search(text)] == []


def test_nothing_a_user_reads_names_an_internal_reference() -> None:
    files = [path for path in _user_text_files() if str(path.relative_to(ROOT)) not in NOT_YET_CLEANED]
    assert len(files) > 100, "the scan found too few files: check USER_TEXT"
    found = internal_references(files)
    assert not found, ("internal references (seed/spec/design/session/round/issue) in what users read; name the "
                       "public source and say what it says:\n" + "\n".join(found))
