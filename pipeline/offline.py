"""The built-in stages over a finished directory: `pipeline import`, `export`, and the import that
`show` and `compare` run when they are given a PROF directory not parsed yet."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

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
               summary_format: str | None = None, verb: str = "import", progress: TextIO | None = None,
               fresh: bool = False, command: str | None = None, partitions: str | None = None) -> int:
    """Run builtin_configs/import.yaml over ``prof``; ``only``: the sink stages to keep (all by default).
    ``fresh``: start over, not resume an import killed in ``output``; ``command``: the line that runs it again.

    The stages' log lines go to the run's log file (named at the end); ``progress`` (default: stdout) shows
    a bar when it is a terminal, a few plain lines when not."""
    from pipeline.config import load_config
    from pipeline.progress import progress_display
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
    if partitions is not None:  # `auto` or N: the decoder and the aggregator by device (pipeline/partitions.py)
        overrides.update({"stages.decode.partitions": partitions, "stages.aggregate.partitions": partitions})
    display = progress_display(verb, progress or sys.stdout)
    template = resources.files("pipeline") / "builtin_configs" / "import.yaml"
    with resources.as_file(template) as path:
        return run_pipeline(load_config(path, overrides), live=False, display=display, logs_to_file=True,
                            fresh=fresh, command=command or f"pipeline {verb} {prof}")


def import_quietly(prof: Path, output: Path, verb: str) -> None:
    """Import for `show` / `compare` / `report`: stdout keeps only their tables. The progress goes to stderr, and
    so does one line on the parse. An import that ended failed (data lost, its problems said on stderr) but wrote
    statistics is one line too: the verb shows them with its note that they are incomplete and why. Any other
    end prints the whole run report and is an error."""
    print(f"{verb}: parsing {prof} into {output} first", file=sys.stderr, flush=True)
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        code = run_import(prof, output, verb=verb, progress=sys.stderr)
    ended = _run_report(output)
    state = str((ended or {}).get("state", "without a run report"))
    if code == 0 and ended is not None and state == "completed":
        print(f"{verb}: {_parsed_line(output, ended)}", file=sys.stderr, flush=True)
        return
    if state == "failed" and _wrote_statistics(output):
        problems = len((ended or {}).get("problems") or [])
        print(f"{verb}: parsing {prof} ended failed ({problems} problem(s), above): its figures are incomplete, "
              "shown with a note that says why", file=sys.stderr, flush=True)
        return
    sys.stderr.write(report.getvalue())
    raise UserError(f"{verb}: parsing {prof} ended {state} (exit {code})", "the run report above says why")


def _run_report(output: Path) -> dict[str, Any] | None:
    try:
        report = json.loads((output / "run_report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _wrote_statistics(output: Path) -> bool:
    from pipeline.results import locate  # results reads through this module: imported when called

    return locate(output) is not None


def _parsed_line(output: Path, report: dict[str, Any]) -> str:
    """`parsed 982,729 records in 27.1 s (run report: …)` for a completed import."""
    records = sum(sum((final or {}).get("out", {}).values()) for final in report.get("stages", {}).values()
                  if (final or {}).get("role") == "source")
    return f"parsed {records:,} records in {report.get('wall_s', 0):.1f} s (run report: {output / 'run_report.json'})"
