#!/usr/bin/env python3
"""Compare our msprof_{ts}.db with the one msprof's own exporter writes for a simulated board.

Steps: ``pipeline simulate`` writes a PROF_… directory; ``pipeline import`` parses it; msprof parses a
copy (``msprof.py import``, then ``msprof.py export db``). msprof writes its database only with its C++
library, ``analysis/lib64/msprof_analysis.so`` (built from the same checkout, with the bounds-checking
``libc_sec.so`` beside it), and only for chips other than the 310 (``mini``): its ExportDBScene whitelist.

Compared, table by table: which tables each side has; each common table's columns (name, declared type,
primary key, in order); row counts; and the values of the run-level tables, the enum tables, TASK,
COMPUTE_TASK_INFO, COMMUNICATION_SCHEDULE_TASK_INFO, CANN_API, MSTX_EVENTS and TASK_PMU_INFO. String
ids are resolved to their text and globalTaskId to the task it names (device, stream, task id, start),
because the two sides number them differently.

Exit status: 0 when everything compared is equal, 1 when not, 2 on a usage or setup error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_with_msprof import (  # noqa: E402  (a sibling script, not a package)
    Msprof,
    SetupError,
    find_msprof_script,
    import_ours,
    simulate,
)

TOLERANCE = 1e-6  # relative, for REAL / NUMERIC values
# columns holding STRING_IDS ids, per table (msprof's msprof_db.cpp)
STRING_COLUMNS = {
    "TASK": {"taskType"}, "CANN_API": {"name"}, "MSTX_EVENTS": {"message", "domainId"}, "TASK_PMU_INFO": {"name"},
    "COMMUNICATION_SCHEDULE_TASK_INFO": {"name", "taskType", "opType"},
    "COMPUTE_TASK_INFO": {"name", "taskType", "opType", "inputFormats", "inputDataTypes", "inputShapes",
                          "outputFormats", "outputDataTypes", "outputShapes", "attrInfo", "opState", "hf32Eligible",
                          "gridDim", "blockDim"},
}
VALUE_TABLES = ("SESSION_TIME_INFO", "NPU_INFO", "RANK_DEVICE_MAP", "HOST_INFO", "META_DATA", "TASK",
                "COMPUTE_TASK_INFO", "COMMUNICATION_SCHEDULE_TASK_INFO", "CANN_API", "MSTX_EVENTS", "TASK_PMU_INFO")
# columns left out of the value comparison: ids each side mints its own way (globalTaskId is replaced by the task)
NOT_COMPARED = {"CANN_API": {"connectionId"}, "TASK": {"connectionId"}}


@dataclass
class TableResult:
    name: str
    notes: list[str] = field(default_factory=list)
    equal: bool = True

    def differ(self, note: str) -> None:
        self.equal = False
        self.notes.append(note)


def columns(db: sqlite3.Connection, table: str) -> list[tuple[str, str, int]]:
    return [(row[1], row[2], row[5]) for row in db.execute(f"PRAGMA table_info({table})")]


def tables(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def resolved_rows(db: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    """Rows with string ids as text and globalTaskId as (device, stream, task, start); msprof's column order."""
    strings = dict(db.execute("SELECT id, value FROM STRING_IDS"))
    tasks: dict[int, tuple[int, int, int, int]] = {}
    if "TASK" in tables(db):
        tasks = {gid: (device, stream, task, start) for gid, device, stream, task, start in
                 db.execute("SELECT globalTaskId, deviceId, streamId, taskId, startNs FROM TASK")}
    names = [name for name, _, _ in columns(db, table)]
    text_columns = STRING_COLUMNS.get(table, set())
    skipped = NOT_COMPARED.get(table, set())
    result = []
    for row in db.execute(f"SELECT * FROM {table}"):
        values = []
        for name, value in zip(names, row, strict=True):
            if name in skipped:
                continue
            if name in text_columns:
                value = strings.get(value, f"<missing string id {value}>")
            elif name == "globalTaskId" and table != "TASK":
                value = tasks.get(value, ("<no task>", value))
            elif name == "globalTaskId":
                continue
            values.append(value)
        result.append(tuple(values))
    return result


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= TOLERANCE * max(1.0, abs(float(a)), abs(float(b)))
        except (TypeError, ValueError):
            return False
    return bool(a == b)


def compare_values(result: TableResult, ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]],
                   names: list[str], limit: int = 5) -> None:
    """Rows paired after sorting both sides (values last in each row, so a float that differs in its last
    digits does not move its row); exact equality except for floats (relative TOLERANCE)."""
    if Counter(ours) == Counter(theirs):
        return
    mine, other = sorted(ours, key=repr), sorted(theirs, key=repr)
    per_column: Counter[str] = Counter()
    examples: list[str] = []
    inexact = 0
    for a, b in zip(mine, other, strict=False):
        for name, x, y in zip(names, a, b, strict=True):
            inexact += x != y
            if not _close(x, y):
                per_column[name] += 1
                if len(examples) < limit:
                    examples.append(f"{name}: ours {x!r} msprof {y!r}")
    if len(mine) == len(other) and not per_column:
        result.notes.append(f"equal within the float tolerance ({inexact} values not identical)")
        return
    result.differ(f"values differ ({len(mine)} rows ours, {len(other)} msprof); columns differing after sorting: "
                  f"{dict(per_column)}")
    result.notes.extend(f"  e.g. {example}" for example in examples)


def compare_dbs(ours_path: Path, msprof_path: Path) -> list[TableResult]:
    ours, theirs = sqlite3.connect(ours_path), sqlite3.connect(msprof_path)
    ours_tables, their_tables = tables(ours), tables(theirs)
    results = []
    for name in sorted(ours_tables | their_tables):
        result = TableResult(name)
        results.append(result)
        if name not in their_tables:
            result.differ("only ours")
            continue
        if name not in ours_tables:
            result.differ(f"only msprof ({theirs.execute(f'SELECT count(*) FROM {name}').fetchone()[0]} rows)")
            continue
        if columns(ours, name) != columns(theirs, name):
            result.differ(f"columns: ours {columns(ours, name)} msprof {columns(theirs, name)}")
            continue
        counts = [db.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for db in (ours, theirs)]
        if counts[0] != counts[1]:
            result.differ(f"rows: ours {counts[0]}, msprof {counts[1]}")
        result.notes.append(f"{counts[0]} rows ours, {counts[1]} msprof")
        if name in VALUE_TABLES or name.startswith("ENUM_"):
            names = [c for c, _, _ in columns(ours, name)
                     if c not in NOT_COMPARED.get(name, set()) and not (name == "TASK" and c == "globalTaskId")]
            compare_values(result, resolved_rows(ours, name), resolved_rows(theirs, name), names)
    return results


def report(results: Iterable[TableResult]) -> bool:
    all_equal = True
    for result in results:
        all_equal &= result.equal
        print(f"{'=' if result.equal else '≠'} {result.name}")
        for note in result.notes:
            print(f"    {note}")
    return all_equal


def msprof_db(msprof: Msprof, prof: Path) -> Path:
    msprof.run(["import", "-dir", str(prof)], "msprof_import.log")
    msprof.run(["export", "db", "-dir", str(prof)], "msprof_export_db.log")
    found = sorted(prof.glob("msprof_*.db"))
    if not found:
        raise SetupError(f"msprof wrote no msprof_*.db in {prof} (logs in {msprof.log_dir}); is "
                         "analysis/lib64/msprof_analysis.so there?")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--msprof-src", type=Path, required=True,
                        help="msprof checkout whose analysis/lib64 holds msprof_analysis.so (and libc_sec.so)")
    parser.add_argument("--chip", choices=("cloud", "910b"), default="910b")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--prof", type=Path, help="compare this PROF_… directory instead of simulating one")
    parser.add_argument("--work", type=Path, help="keep intermediate files here (default: a temporary folder)")
    args = parser.parse_args(argv)
    script = find_msprof_script(args.msprof_src)
    if script is None:
        print(f"error: no msprof.py under {args.msprof_src}", file=sys.stderr)
        return 2
    lib = script.parent.parent / "lib64"
    os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib), os.environ.get("LD_LIBRARY_PATH")]))
    work = args.work or Path(tempfile.mkdtemp(prefix="compare_db_"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        prof = args.prof.resolve() if args.prof else simulate(work, args.chip, args.iterations)
        ours_out = work / "ours"
        shutil.rmtree(ours_out, ignore_errors=True)
        import_ours(prof, ours_out, work / "logs")
        copy = work / "msprof" / prof.name
        shutil.rmtree(copy.parent, ignore_errors=True)
        shutil.copytree(prof, copy)
        theirs = msprof_db(Msprof(script, work / "logs"), copy)
        ours = next(ours_out.glob("msprof_*.db"))
    except (SetupError, StopIteration) as exc:
        print(f"error: {exc or 'pipeline import wrote no database'}", file=sys.stderr)
        return 2
    print(f"ours:   {ours}\nmsprof: {theirs}")
    return 0 if report(compare_dbs(ours, theirs)) else 1


if __name__ == "__main__":
    sys.exit(main())
