"""The built-in stages over a finished directory: `pipeline import`, `export`, and the import that
`show` and `compare` run when they are given a PROF directory not parsed yet."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pipeline.errors import UserError

# `pipeline export KIND`: the stage of builtin_configs/import.yaml that writes it.
EXPORT_STAGES = {"summary": "summary", "timeline": "timeline", "db": "db", "advice": "advice"}
DEFAULT_OUTPUT = "pipeline_output"


def checked_prof_dir(path: str | Path, verb: str) -> Path:
    """A directory that holds profiling data, or a one-line error naming the verb."""
    prof = Path(path).expanduser()
    if not prof.is_dir():
        raise UserError(f"{verb}: {prof} is not a directory",
                        "pass a PROF_… directory written by CANN or the simulator")
    if not is_prof_dir(prof):
        raise UserError(f"{verb}: {prof} holds no host/ or device_N/ folder (nor a legacy JOB…/data/)",
                        "pass a PROF_… (or legacy JOB…) directory written by CANN or the simulator")
    return prof


def is_prof_dir(path: Path) -> bool:
    return ((path / "host").is_dir() or any(path.glob("device_*")) or any(path.glob("PROF_*"))
            or (path / "data").is_dir() or any(path.glob("JOB*")))


def default_output(prof: Path) -> Path:
    return prof / DEFAULT_OUTPUT


def run_import(prof: Path, output: Path | None = None, only: Sequence[str] | None = None,
               summary_format: str | None = None) -> int:
    """Run builtin_configs/import.yaml over ``prof``; ``only``: the sink stages to keep (all by default)."""
    from pipeline.config import load_config
    from pipeline.supervisor import run_pipeline

    output = (output or default_output(prof)).expanduser().resolve()
    overrides: dict[str, Any] = {"run.output": str(output), "stages.collect.path": str(prof.resolve()),
                                 "run.name": f"import-{os.getpid()}"}
    if only is not None:
        for stage_id in EXPORT_STAGES.values():
            if stage_id not in only:
                overrides[f"stages.{stage_id}.enabled"] = False
    if summary_format is not None:
        overrides["stages.summary.format"] = summary_format
    template = resources.files("pipeline") / "builtin_configs" / "import.yaml"
    with resources.as_file(template) as path:
        return run_pipeline(load_config(path, overrides), live=False)


def import_quietly(prof: Path, output: Path, verb: str) -> None:
    """Import for `show` / `compare`: the run report goes to stderr, so stdout keeps only their tables."""
    print(f"{verb}: parsing {prof} into {output} first", file=sys.stderr, flush=True)
    with contextlib.redirect_stdout(sys.stderr):
        code = run_import(prof, output)
    if code != 0:
        raise UserError(f"{verb}: parsing {prof} failed (exit {code})", "the run report above says why")
