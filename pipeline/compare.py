"""`pipeline compare RUN_A RUN_B`: per op type and per API, before and after.

Op types are summed over devices (op_statistic ``Device_id``) per core type; APIs are keyed by
level and name (api_statistic). Totals are exact: the files' µs cells are read as decimals.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TextIO

from rich.table import Table
from rich.text import Text

from pipeline.errors import UserError
from pipeline.results import RunResults, count, micros, read_rows, results_of
from pipeline.views import output_console

CSV_HEADER = ["Section", "Name", "Kind", "Count A", "Count B", "Count Delta", "Total A(us)", "Total B(us)",
              "Total Delta(us)", "Total Delta(%)", "Avg A(us)", "Avg B(us)", "Avg Delta(us)", "Avg Delta(%)"]
EXECUTE = ("api", "aclmdlExecute", "acl")
NA = "N/A"


@dataclass(frozen=True)
class Side:
    count: int = 0
    total_us: Decimal = Decimal(0)

    @property
    def avg_us(self) -> Decimal | None:
        return self.total_us / self.count if self.count else None


@dataclass(frozen=True)
class Change:
    section: str  # "op" or "api"
    name: str  # op type / API name
    kind: str  # core type / API level
    a: Side
    b: Side

    def cells(self) -> list[str]:
        avg_a, avg_b = self.a.avg_us, self.b.avg_us
        avg_delta = avg_b - avg_a if avg_a is not None and avg_b is not None else None
        return [self.section, self.name, self.kind, str(self.a.count), str(self.b.count),
                str(self.b.count - self.a.count), _us(self.a.total_us), _us(self.b.total_us),
                _us(self.b.total_us - self.a.total_us), _percent(self.b.total_us - self.a.total_us, self.a.total_us),
                _us(avg_a), _us(avg_b), _us(avg_delta), _percent(avg_delta, avg_a)]


def _us(value: Decimal | None) -> str:
    return NA if value is None else f"{value:.3f}"


def _percent(delta: Decimal | None, base: Decimal | None) -> str:
    return NA if delta is None or not base else f"{delta * 100 / base:.3f}"


def op_sides(results: RunResults) -> dict[tuple[str, str], Side]:
    sides: dict[tuple[str, str], Side] = {}
    for row in read_rows(results.op_statistic) if results.op_statistic else []:
        key = (row.get("OP Type", ""), row.get("Core Type", ""))
        old = sides.get(key, Side())
        sides[key] = Side(old.count + count(row.get("Count", "")), old.total_us + micros(row.get("Total Time(us)", "")))
    return sides


def api_sides(results: RunResults) -> dict[tuple[str, str], Side]:
    sides: dict[tuple[str, str], Side] = {}
    for row in read_rows(results.api_statistic) if results.api_statistic else []:
        key = (row.get("API Name", ""), row.get("Level", ""))
        old = sides.get(key, Side())
        sides[key] = Side(old.count + count(row.get("Count", "")), old.total_us + micros(row.get("Time(us)", "")))
    return sides


def changes(run_a: RunResults, run_b: RunResults) -> list[Change]:
    """Every op type and API of either run; ops first, each section by the larger total, descending."""
    out: list[Change] = []
    for section, read in (("op", op_sides), ("api", api_sides)):
        a, b = read(run_a), read(run_b)
        keys = sorted(set(a) | set(b), key=lambda k: (-max(a.get(k, Side()).total_us, b.get(k, Side()).total_us), k))
        out.extend(Change(section, name, kind, a.get((name, kind), Side()), b.get((name, kind), Side()))
                   for name, kind in keys)
    return out


def write_csv(rows: list[Change], handle: TextIO) -> None:
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows(row.cells() for row in rows)


def run_compare(target_a: str, target_b: str, csv_path: str | None = None, top: int = 30) -> int:
    run_a, run_b = results_of(target_a, "compare"), results_of(target_b, "compare")
    rows = changes(run_a, run_b)
    if not rows:
        raise UserError("compare: neither run has op_statistic or api_statistic rows")
    if csv_path == "-":
        write_csv(rows, sys.stdout)
        return 0
    if csv_path:
        try:
            with open(Path(csv_path).expanduser(), "w", newline="", encoding="utf-8") as handle:
                write_csv(rows, handle)
        except OSError as exc:
            raise UserError(f"compare: cannot write {csv_path}: {exc.strerror}") from None
    console = output_console()
    console.print(f"A: {run_a.folder}  ({run_a.stamp})\nB: {run_b.folder}  ({run_b.stamp})")
    for side, run in (("A", run_a), ("B", run_b)):
        if run.unfinished:
            console.print(f"[yellow]note: {side}: {run.unfinished}[/yellow]")
    headline = next((row for row in rows if (row.section, row.name, row.kind) == EXECUTE), None)
    if headline is not None and headline.a.avg_us is not None and headline.b.avg_us is not None:
        cells = headline.cells()
        console.print(f"aclmdlExecute: {cells[10]} → {cells[11]} µs per call ({cells[13]} %)")
    for section, title in (("op", "op types (op_statistic)"), ("api", "APIs (api_statistic)")):
        console.print(_table(title, [row for row in rows if row.section == section], top))
    if csv_path:
        console.print(f"CSV: {csv_path}")
    return 0


def _table(title: str, rows: list[Change], top: int) -> Table:
    left = len(rows) - top
    table = Table(title=title, caption=f"{left:,} more rows in the CSV (--csv)" if left > 0 else None)
    for column in ("name", "kind", "count A", "count B", "total A (us)", "total B (us)", "Δ total (us)", "Δ %",
                   "avg A (us)", "avg B (us)", "Δ avg %"):
        table.add_column(column, justify="left" if column in ("name", "kind") else "right")
    for row in rows[:top]:
        cells = row.cells()
        delta = cells[9]
        style = "green" if delta.startswith("-") else ("red" if delta not in (NA, "0.000") else "")
        table.add_row(cells[1], cells[2], cells[3], cells[4], cells[6], cells[7], cells[8], Text(delta, style=style),
                      cells[10], cells[11], cells[13])
    return table
