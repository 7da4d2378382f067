"""Finding and reading the summary files of a run: ours (`pipeline import`, `run`) or msprof's.

Both write ``mindstudio_profiler_output/{op_statistic,api_statistic,op_summary}_{timestamp}.{csv,json}``
(op_summary may be sliced: ``op_summary_slice_{k}_{timestamp}``). When a folder holds several
timestamps, the newest is read.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.offline import checked_prof_dir, default_output, import_quietly, is_prof_dir

SUMMARY_DIR = "mindstudio_profiler_output"
_NAME = re.compile(r"^(op_statistic|api_statistic|op_summary(?:_slice_\d+)?)_(\d{14})\.(csv|json)$")

Row = dict[str, str]


@dataclass
class RunResults:
    """The summary files of one run (one timestamp)."""

    folder: Path
    stamp: str
    op_statistic: Path | None = None
    api_statistic: Path | None = None
    op_summary: list[Path] = field(default_factory=list)

    @property
    def unfinished(self) -> str | None:
        """Why these files may not hold the whole job: the run that wrote them was interrupted or failed."""
        report = self._report()
        if report is None or report.get("state") in (None, "completed"):
            return None
        state, wall_s = report["state"], float(report.get("wall_s", 0))
        how = {"interrupted": "was interrupted (Ctrl-C)", "aborted": "was aborted"}.get(str(state), f"ended {state}")
        losses = len(self.losses)
        why = (f"these figures are incomplete ({losses} problem(s), listed under problems in its run_report.json)"
               if losses else "they may not hold the whole job")
        return f"run {report.get('run_id', '?')}, which wrote these files, {how} after {wall_s:.1f} s: {why}"

    @property
    def losses(self) -> list[str]:
        """Why the figures are incomplete: the problems of the run that wrote these files, one line each (none
        when it completed)."""
        report = self._report()
        if report is None or report.get("state") in (None, "completed"):
            return []
        problems = report.get("problems")
        return [str(line) for line in problems] if isinstance(problems, list) else []

    def _report(self) -> dict[str, Any] | None:
        """The run report of the run that wrote these files (None: msprof's folder, a run still going, whose
        report is written at the end, or a later run's report, an export into the same folder)."""
        try:
            report = json.loads((self.folder / "run_report.json").read_text(encoding="utf-8"))
            if not isinstance(report, dict) or report.get("stamp") != self.stamp:
                return None
            float(report.get("wall_s", 0))
        except (OSError, ValueError, TypeError):
            return None
        return report

    @property
    def advice(self) -> Path | None:
        path = self.folder / "advice.json"
        return path if path.is_file() else None


def locate(folder: Path) -> RunResults | None:
    """The newest summary files under ``folder`` (or ``folder/mindstudio_profiler_output``), if any."""
    for where in (folder / SUMMARY_DIR, folder):
        if not where.is_dir():
            continue
        found: dict[str, dict[str, list[Path]]] = {}
        for path in sorted(where.iterdir()):
            match = _NAME.match(path.name)
            if match:
                kind = "op_summary" if match.group(1).startswith("op_summary") else match.group(1)
                found.setdefault(match.group(2), {}).setdefault(kind, []).append(path)
        stamps = [stamp for stamp, kinds in found.items() if "op_statistic" in kinds or "api_statistic" in kinds]
        if stamps:
            stamp = max(stamps)
            kinds = found[stamp]
            return RunResults(folder, stamp, _first(kinds.get("op_statistic")), _first(kinds.get("api_statistic")),
                              kinds.get("op_summary", []))
    return None


def _first(paths: list[Path] | None) -> Path | None:
    return paths[0] if paths else None


def results_of(target: str | Path, verb: str, output: Path | None = None) -> RunResults:
    """A run's results from its output folder, or from a PROF directory (parsed first when needed)."""
    path = Path(target).expanduser()
    if not path.exists():
        raise UserError(f"{verb}: {path} does not exist", "pass a run's output folder or a PROF_… directory")
    found = locate(path) if path.is_dir() else None
    if found is not None:
        return found
    if not path.is_dir() or not is_prof_dir(path):
        raise UserError(f"{verb}: {path} holds no op_statistic / api_statistic files and is not a PROF directory",
                        "pass the output folder of `pipeline import` / `pipeline run`, or a PROF_… directory")
    prof = checked_prof_dir(path, verb)
    out = output or default_output(prof)
    found = locate(out) if out.is_dir() else None
    if found is None:
        import_quietly(prof, out, verb)
        found = locate(out)
    if found is None:
        raise UserError(f"{verb}: parsing {prof} wrote no statistics under {out}",
                        "is the directory empty? `pipeline import` shows the run report")
    return found


def read_rows(path: Path) -> list[Row]:
    """A summary file as rows of text cells (CSV with a header, or our JSON array of objects)."""
    try:
        if path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            return [{str(k): str(v) for k, v in row.items()} for row in data]
        with open(path, newline="", encoding="utf-8") as handle:
            return [{k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
                    for row in csv.DictReader(handle)]
    except (OSError, ValueError, AttributeError) as exc:
        raise UserError(f"cannot read {path}: {exc}", "is it a summary file written by msprof or pipeline?") from None


def iter_rows(paths: list[Path]) -> Iterator[Row]:
    """op_summary rows, file by file, without holding them all."""
    for path in paths:
        if path.suffix == ".json":
            yield from read_rows(path)
            continue
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                yield {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}


def micros(text: str) -> Decimal:
    """A µs cell as an exact decimal (msprof prints at most three decimals); N/A and blanks are 0."""
    try:
        return Decimal(text.strip() or "0")
    except InvalidOperation:
        return Decimal(0)


def count(text: str) -> int:
    try:
        return int(text.strip() or "0")
    except ValueError:
        return 0
