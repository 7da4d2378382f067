"""Row-by-row comparison of msprof's per-record summaries with ours: task_time, step_trace, msprof_tx, aicpu,
l2_cache (used by compare_with_msprof.py).

Rows of the two sides are matched by a key per table plus the row's occurrence among rows with that key
(in the order of a time column, or in file order), then every column is compared: exactly for text,
within a tolerance for numbers. msprof's Python path adds a local-time offset it computes as a float64
number of µs; at ~1.8e15 µs a float64 steps by 0.25 µs, so its wall-clock time
points can be off by up to that step while ours are exact integers. Its durations come from tick
differences and agree to the printed digit. The headers must be equal, with one known exception: on the
Ascend 310 (chip v1) msprof's Python path still writes task_time in the pre-CANN 6.3 form, one row of
statistics per (stream, task) (``Time(%),Time(us),Count,Avg(us),Min(us),Max(us),…``; msprof_export_data.py
``_get_task_time_data``). Ours are then summed per (stream, task) to that form, and Count, Time, Avg, Min
and Max are compared. Another: msprof's Python path leaves FFTS+ tasks out of task_time (task_op_viewer), while
its C++ path, which real installs run for the 910B, keeps their context 0, as ours does; our rows of tasks that
our op_summary shows with a Context ID are counted apart as explained.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

TIME_POINT_TOLERANCE_US = 0.25  # one float64 step at ~1.8e15 µs
DURATION_TOLERANCE_US = 0.01
RATE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class RowTableSpec:
    """How rows of one table are matched and how its columns are compared."""

    kind: str
    key_columns: tuple[str, ...]
    order_column: str | None  # occurrences are counted in this column's order (None: file order)
    time_points: tuple[str, ...] = ()
    rates: tuple[str, ...] = ()

    def tolerance(self, column: str) -> float:
        if column in self.time_points or column.startswith("Reduce Start"):
            return TIME_POINT_TOLERANCE_US
        if column in self.rates:
            return RATE_TOLERANCE
        return DURATION_TOLERANCE_US


ROW_SPECS = {spec.kind: spec for spec in (
    RowTableSpec("task_time", ("Device_id", "stream_id", "task_id"), "task_start(us)",
                 ("task_start(us)", "task_stop(us)")),
    RowTableSpec("step_trace", ("Device_id", "Model ID", "Iteration ID"), None,
                 ("FP Start(us)", "BP End(us)", "Iteration End(us)")),
    RowTableSpec("msprof_tx", ("Device_id", "pid", "tid", "message"), "Start_time(us)",
                 ("Start_time(us)", "End_time(us)", "Device Start_time(us)", "Device End_time(us)")),
    RowTableSpec("aicpu", ("Device_id", "Stream ID", "Task ID"), "Timestamp(us)", ("Timestamp(us)",)),
    RowTableSpec("l2_cache", ("Device_id", "Stream Id", "Task Id"), None, (), ("Hit Rate", "Victim Rate")),
)}
ROW_KINDS = tuple(ROW_SPECS)

Key = tuple[str, ...]


@dataclass
class RowTable:
    header: list[str] = field(default_factory=list)
    rows: dict[Key, dict[str, str]] = field(default_factory=dict)


OLD_TASK_TIME_COLUMNS = ("Count", "Time(us)", "Avg(us)", "Min(us)", "Max(us)")
OLD_TASK_TIME_NOTE = "msprof's 310 path writes task_time in the pre-CANN 6.3 per-task statistics form"
FFTS_NOTE = "FFTS+ tasks (context 0 in ours, as msprof's C++ path keeps them; its Python path leaves them out)"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def ffts_tasks(op_summary: Sequence[Path]) -> frozenset[tuple[str, str, str]]:
    """(device, stream, task) of the rows our op_summary shows with a Context ID (FFTS+ tasks)."""
    found = set()
    for path in op_summary:
        with path.open(newline="", encoding="utf-8") as handle:
            for record in csv.DictReader(handle):
                if record.get("Context ID", "N/A") not in ("N/A", ""):
                    found.add((record["Device_id"], record["Stream ID"], record["Task ID"]))
    return frozenset(found)


def read_row_tables(paths: Sequence[Path], spec: RowTableSpec) -> RowTable:
    """Rows of one or more CSVs of a table (msprof's per-iteration exports are concatenated)."""
    table = RowTable()
    records: list[dict[str, str]] = []
    earlier: set[tuple[str, ...]] = set()  # rows of earlier files: per-iteration exports repeat some tables whole
    for path in paths:
        current: set[tuple[str, ...]] = set()
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if table.header and header != table.header:
                header = header if len(header) > len(table.header) else table.header
            table.header = header
            for cells in reader:
                cells = [cell.strip() for cell in cells]
                if tuple(cells) in earlier:
                    continue
                current.add(tuple(cells))
                records.append(dict(zip(header, cells, strict=False)))
        earlier |= current
    if spec.order_column is not None:
        order = spec.order_column
        records.sort(key=lambda r: _number(r.get(order, "")) or 0.0)
    seen: dict[Key, int] = defaultdict(int)
    for record in records:
        key = tuple(record.get(column, "") for column in spec.key_columns)
        table.rows[(*key, str(seen[key]))] = record
        seen[key] += 1
    return table


def is_old_task_time(table: RowTable) -> bool:
    return "Time(%)" in table.header


def old_task_time(ours: RowTable, msprof: RowTable) -> tuple[RowTable, RowTable, RowTableSpec]:
    """Our task_time rows summed per (device, stream, task) into msprof's old form; both keyed alike."""
    sums: dict[Key, list[float]] = {}
    for record in ours.rows.values():
        key: Key = (record["Device_id"], record["stream_id"], record["task_id"], "0")
        duration = float(record["task_time(us)"])
        count, total, low, high = sums.get(key, [0, 0.0, duration, duration])
        sums[key] = [count + 1, total + duration, min(low, duration), max(high, duration)]
    mine = RowTable(header=["Device_id", *OLD_TASK_TIME_COLUMNS, "Task ID", "Stream ID"])
    for task_key, (count, total, low, high) in sums.items():
        values = [f"{count:g}", f"{total:.3f}", f"{total / count:.3f}", f"{low:.3f}", f"{high:.3f}"]
        mine.rows[task_key] = {"Device_id": task_key[0], "Stream ID": task_key[1], "Task ID": task_key[2],
                          **dict(zip(OLD_TASK_TIME_COLUMNS, values, strict=True))}
    theirs = RowTable(header=msprof.header)
    for record in msprof.rows.values():  # per-iteration exports: one row per (stream, task) in each, summed
        key = (record["Device_id"], record["Stream ID"], record["Task ID"], "0")
        into = theirs.rows.get(key)
        if into is None:
            theirs.rows[key] = dict(record)
            continue
        count = float(into["Count"]) + float(record["Count"])
        total = float(into["Time(us)"]) + float(record["Time(us)"])
        into.update({"Count": f"{count:g}", "Time(us)": f"{total:.3f}", "Avg(us)": f"{total / count:.3f}",
                     "Min(us)": str(min(float(into["Min(us)"]), float(record["Min(us)"]))),
                     "Max(us)": str(max(float(into["Max(us)"]), float(record["Max(us)"])))})
    return mine, theirs, RowTableSpec("task_time", ("Device_id", "Stream ID", "Task ID"), None)


@dataclass
class RowComparison:
    kind: str
    header_equal: bool
    headers: tuple[list[str], list[str]]
    rows_equal: int
    differing: dict[Key, list[tuple[str, str, str]]]  # key → (column, ours, msprof)
    only_ours: list[Key]
    only_msprof: list[Key]
    max_diff: dict[str, float]  # column → largest numeric |diff| among matched rows
    inexact: dict[str, int]  # column → rows whose values differ within the tolerance
    note: str = ""
    known_header_difference: str = ""  # why the headers differ, when msprof's form is known to differ
    explained_only_ours: list[Key] = field(default_factory=list)  # rows msprof's Python path is known to leave out

    @property
    def equal(self) -> bool:
        header_ok = self.header_equal or bool(self.known_header_difference)
        return header_ok and not (self.differing or self.only_ours or self.only_msprof)

    def verdict(self) -> str:
        total = self.rows_equal + len(self.differing) + len(self.only_ours) + len(self.only_msprof)
        header = "" if self.header_equal else ", headers differ"
        explained = len(self.explained_only_ours)
        extra = f", {explained} more only ours: {FFTS_NOTE}" if explained else ""
        if self.equal:
            known = f" ({self.known_header_difference}: values compared in that form)" \
                if self.known_header_difference else ""
            return f"{self.kind}: {total} rows, all equal{known}{extra}"
        return (f"{self.kind}: {total} rows, {self.rows_equal} equal, {len(self.differing)} differ, "
                f"{len(self.only_ours)} only ours, {len(self.only_msprof)} only msprof{header}{extra}")


def compare_row_tables(ours: RowTable, msprof: RowTable, spec: RowTableSpec, note: str = "",
                       ffts_tasks: frozenset[tuple[str, str, str]] = frozenset()) -> RowComparison:
    """``ffts_tasks``: (device, stream, task) of FFTS+ tasks (task_time rows only ours there are explained)."""
    known = ""
    header_equal = ours.header == msprof.header
    if spec.kind == "task_time" and is_old_task_time(msprof):
        headers = (ours.header, msprof.header)
        ours, msprof, spec = old_task_time(ours, msprof)
        known = OLD_TASK_TIME_NOTE
    else:
        headers = (ours.header, msprof.header)
    columns = [c for c in msprof.header if c in ours.header]
    differing: dict[Key, list[tuple[str, str, str]]] = {}
    max_diff: dict[str, float] = {}
    inexact: dict[str, int] = defaultdict(int)
    equal = 0
    for key in sorted(ours.rows.keys() & msprof.rows.keys()):
        mine, theirs = ours.rows[key], msprof.rows[key]
        wrong = []
        for column in columns:
            a, b = mine.get(column, ""), theirs.get(column, "")
            if a == b:
                continue
            x, y = _number(a), _number(b)
            if x is not None and y is not None:
                delta = abs(x - y)
                max_diff[column] = max(max_diff.get(column, 0.0), delta)
                if delta <= spec.tolerance(column) + 1e-9:
                    if delta > 1e-9:  # not only printed differently ("39.94" vs "39.940")
                        inexact[column] += 1
                    continue
            wrong.append((column, a, b))
        if wrong:
            differing[key] = wrong
        else:
            equal += 1
    only_ours = sorted(ours.rows.keys() - msprof.rows.keys())
    explained = [key for key in only_ours if spec.kind == "task_time" and key[:3] in ffts_tasks]
    return RowComparison(spec.kind, header_equal, headers, equal, differing,
                         [key for key in only_ours if key not in explained],
                         sorted(msprof.rows.keys() - ours.rows.keys()), max_diff, dict(inexact), note, known, explained)


def report_rows(comparison: RowComparison, limit: int = 10) -> None:
    print(f"\n== {comparison.kind}")
    if comparison.note:
        print(f"  note: {comparison.note}")
    if comparison.known_header_difference:
        print(f"  {comparison.known_header_difference}; ours summed per (stream, task) and compared in that form")
    if not comparison.header_equal:
        print(f"  header ours:   {','.join(comparison.headers[0])}")
        print(f"  header msprof: {','.join(comparison.headers[1])}")
    for key, wrong in list(comparison.differing.items())[:limit]:
        cells = "; ".join(f"{column}: ours {a!r}, msprof {b!r}" for column, a, b in wrong)
        print(f"  {' / '.join(key)}: {cells}")
    if len(comparison.differing) > limit:
        print(f"  … {len(comparison.differing) - limit} more differing rows")
    if comparison.explained_only_ours:
        print(f"  {len(comparison.explained_only_ours)} rows only ours are {FFTS_NOTE}")
    for side, keys in (("ours", comparison.only_ours), ("msprof", comparison.only_msprof)):
        if keys:
            shown = ", ".join(" / ".join(key) for key in keys[:limit])
            print(f"  {len(keys)} rows only {side} has: {shown}{' …' if len(keys) > limit else ''}")
    for column, largest in sorted(comparison.max_diff.items()):
        within = comparison.inexact.get(column, 0)
        print(f"  max |diff| {column}: {largest:.6f} ({within} rows differ within the tolerance "
              f"{ROW_SPECS[comparison.kind].tolerance(column)})")
    print(comparison.verdict())
