#!/usr/bin/env python3
"""Compare our op_summary PMU, AI CPU and L2 cache values with msprof's on simulated boards.

For each AI Core metric group given: ``pipeline simulate --chip CHIP --aic-metrics GROUP`` writes a PROF_…
directory; ``pipeline import`` parses it; msprof's Python parser (``import``, ``export summary``) parses a
copy. msprof exports the 310 (``mini``) per iteration only, at most 5 at a time: there the run has at most
5 iterations and msprof exports them together (``--model-id M --iteration-id 1 --iteration-count N``).
Rows of both op_summary files are matched by (Stream ID, Task ID, n-th occurrence in start order) and every
PMU column both headers have is compared. The AI CPU columns of AI_CPU rows are compared with
msprof's ``aicpu_*.csv`` and the L2 cache rates with its ``l2_cache_*.csv`` the same way.

msprof prints PMU values rounded to 3 decimals (L2 rates to 6) and we print 3 decimals, so a value
agrees when the two differ by no more than one unit in the 3rd decimal (rounding of a last-digit tie);
the report counts exact agreement separately. Exit status: 0 when every compared value agrees, 1 when
not, 2 on a setup error.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_with_msprof import (  # noqa: E402  (a sibling script, not a package)
    MSPROF_MAX_ITERATIONS_PER_EXPORT,
    Msprof,
    SetupError,
    find_msprof_script,
    query_models,
    run_logged,
)

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = [sys.executable, "-m", "pipeline"]  # this checkout's code, run from its root

GROUPS = ("PipeUtilization", "ArithmeticUtilization", "Memory", "ResourceConflictRatio", "PipeUtilizationExct",
          "PipelineExecuteUtilization", "MemoryL0", "MemoryUB", "L2Cache", "MemoryAccess")
TOLERANCE = 0.001 + 1e-9
FIRST_PMU_COLUMN = "aicore_time(us)"
# our op_summary column → msprof's aicpu / l2_cache CSV column
AICPU = {"aicpu_compute_time(us)": "Compute_time(us)", "aicpu_memcpy_time(us)": "Memcpy_time(us)",
         "aicpu_task_time(us)": "Task_time(us)", "aicpu_dispatch_time(us)": "Dispatch_time(us)",
         "aicpu_total_time(us)": "Total_time(us)"}
L2 = {"l2_cache_hit_rate": "Hit Rate", "l2_cache_victim_rate": "Victim Rate"}

Row = dict[str, str]
Key = tuple[str, str, int]


@dataclass
class Figures:
    """Agreement of one compared column."""

    compared: int = 0
    exact: int = 0
    within: int = 0
    max_diff: float = 0.0
    only_one_side: int = 0  # a value on one side, N/A (or no row) on the other


@dataclass
class GroupResult:
    group: str
    rows_ours: int
    rows_msprof: int
    columns: dict[str, Figures] = field(default_factory=dict)
    missing_in_msprof: list[str] = field(default_factory=list)  # our PMU columns msprof's header lacks

    @property
    def ok(self) -> bool:
        return all(f.compared == f.exact + f.within and not f.only_one_side for f in self.columns.values())


def read_rows(path: Path) -> tuple[list[str], list[Row]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = [{k: (v or "").strip() for k, v in row.items()} for row in reader]
        return list(reader.fieldnames or []), rows


def keyed(rows: Iterable[Row], stream: str, task: str, start: str | None) -> dict[Key, Row]:
    """Rows by (stream, task, occurrence), occurrences counted in start-time order (or file order)."""
    ordered = sorted(rows, key=lambda r: float(r[start])) if start else list(rows)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    out: dict[Key, Row] = {}
    for row in ordered:
        pair = (row[stream], row[task])
        out[(*pair, seen[pair])] = row
        seen[pair] += 1
    return out


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def compare(ours: dict[Key, Row], theirs: dict[Key, Row], pairs: dict[str, str], figures: dict[str, Figures]) -> None:
    for key in ours.keys() | theirs.keys():
        mine, other = ours.get(key), theirs.get(key)
        for our_column, their_column in pairs.items():
            a = number(mine[our_column]) if mine else None
            b = number(other[their_column]) if other else None
            if a is None and b is None:
                continue
            f = figures.setdefault(our_column, Figures())
            f.compared += 1
            if a is None or b is None:
                f.only_one_side += 1
                continue
            diff = abs(a - b)
            f.max_diff = max(f.max_diff, diff)
            if diff <= 1e-9:
                f.exact += 1
            elif diff <= TOLERANCE:
                f.within += 1


def single(folder: Path, prefix: str) -> Path:
    found = sorted(folder.glob(f"{prefix}_*.csv"))
    if len(found) != 1:
        raise SetupError(f"expected one {prefix} CSV in {folder}, found {[p.name for p in found]}")
    return found[0]


def run_group(group: str, msprof: Msprof, work: Path, chip: str, iterations: int) -> GroupResult:
    board = work / group / "board"
    run_logged([*PIPELINE, "simulate", str(board), "--chip", chip, "--iterations", str(iterations), "--rate", "max",
                "--seed", "0", "--aic-metrics", group], work / "logs" / f"{group}_simulate.log", cwd=ROOT)
    prof = next(board.glob("PROF_*"))
    run_logged([*PIPELINE, "import", str(prof), "--output", str(work / group / "ours")],
               work / "logs" / f"{group}_import.log", cwd=ROOT)
    copy = work / group / "msprof" / prof.name
    shutil.copytree(prof, copy)  # msprof writes into the PROF dir
    msprof.run(["import", "-dir", str(copy)], f"{group}_msprof_import.log")
    export = ["export", "summary", "-dir", str(copy)]
    if chip == "mini":  # the 310 is exported per iteration: ask for all of them at once
        (model, _), *_ = query_models(msprof, copy)
        export += ["--model-id", str(model), "--iteration-id", "1", "--iteration-count", str(iterations)]
    msprof.run(export, f"{group}_msprof_export.log")
    our_header, our_rows = read_rows(single(work / group / "ours" / "mindstudio_profiler_output", "op_summary"))
    their_out = copy / "mindstudio_profiler_output"
    their_header, their_rows = read_rows(single(their_out, "op_summary"))
    start = "Task Start Time(us)"
    ours = keyed(our_rows, "Stream ID", "Task ID", start)
    theirs = keyed(their_rows, "Stream ID", "Task ID", start)
    pmu = our_header[our_header.index(FIRST_PMU_COLUMN):]
    extras = set(AICPU) | set(L2)
    result = GroupResult(group, len(our_rows), len(their_rows))
    result.missing_in_msprof = [c for c in pmu if c not in their_header and c not in extras]
    compare(ours, theirs, {c: c for c in pmu if c in their_header}, result.columns)
    # AI CPU rows carry a start time; l2_cache rows come in record (task end) order.
    for prefix, pairs, stream, task, order in (("aicpu", AICPU, "Stream ID", "Task ID", "Timestamp(us)"),
                                               ("l2_cache", L2, "Stream Id", "Task Id", None)):
        if any(c in our_header for c in pairs):
            _, rows = read_rows(single(their_out, prefix))
            compare(ours, keyed(rows, stream, task, order), pairs, result.columns)
    return result


def report(result: GroupResult) -> None:
    print(f"\n== {result.group}: op_summary rows ours {result.rows_ours}, msprof {result.rows_msprof}")
    if not result.columns:
        print("  msprof exported no PMU column of this group")
    if result.missing_in_msprof:
        print(f"  columns msprof does not export: {', '.join(result.missing_in_msprof)}")
    header = ("column", "compared", "exact", "last-digit", "one side only", "max |diff|")
    rows = [(name, str(f.compared), str(f.exact), str(f.within), str(f.only_one_side), f"{f.max_diff:.6f}")
            for name, f in result.columns.items()]
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=False)]
    for line in (header, *rows):
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    print(f"  {result.group}: {'agrees' if result.ok else 'DIFFERS'}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--msprof-src", type=Path, required=True, help="a checkout of github.com/Ascend/msprof")
    parser.add_argument("--groups", nargs="+", choices=GROUPS, default=["PipeUtilization", "Memory"])
    parser.add_argument("--chip", choices=("cloud", "mini"), default="cloud")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--work", type=Path, help="working folder (default: a new temporary one)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.chip == "mini" and not 1 <= args.iterations <= MSPROF_MAX_ITERATIONS_PER_EXPORT:
        print(f"--chip mini needs 1..{MSPROF_MAX_ITERATIONS_PER_EXPORT} iterations (one msprof export)",
              file=sys.stderr)
        return 2
    script = find_msprof_script(args.msprof_src)
    if script is None:
        print(f"msprof source not found in {args.msprof_src}", file=sys.stderr)
        return 2
    work = (args.work or Path(tempfile.mkdtemp(prefix="compare_op_summary_"))).resolve()
    for group in args.groups:
        shutil.rmtree(work / group, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    msprof = Msprof(script, work / "logs")
    try:
        results = [run_group(group, msprof, work, args.chip, args.iterations) for group in args.groups]
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for result in results:
        report(result)
    print(f"\nworking folder: {work}")
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
