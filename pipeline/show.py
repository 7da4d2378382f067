"""`pipeline show`: a run's op_statistic, api_statistic, slowest op_summary tasks and advice as tables,
like `msprof show`."""

from __future__ import annotations

import heapq
import json
from pathlib import Path

from rich.table import Table

from pipeline.results import RunResults, iter_rows, micros, read_rows, results_of
from pipeline.views import advice_table, output_console

OP_STATISTIC_COLUMNS = ("Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                        "Avg Time(us)", "Max Time(us)", "Ratio(%)")
API_STATISTIC_COLUMNS = ("Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance")
OP_SUMMARY_COLUMNS = ("Device_id", "Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)",
                      "Task Wait Time(us)", "Block Dim", "Input Shapes")
NUMERIC = {"Device_id", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)",
           "Time(us)", "Avg(us)", "Min(us)", "Max(us)", "Variance", "Task Start Time(us)", "Task Duration(us)",
           "Task Wait Time(us)", "Block Dim"}
MAX_LOSSES_SHOWN = 10  # a failed run's problem lines shown above the tables


def run_show(target: str, top: int = 20, output: Path | None = None) -> int:
    results = results_of(target, "show", output)
    console = output_console()
    console.print(f"[bold]{results.folder}[/bold]  (timestamp {results.stamp})")
    if results.unfinished:
        console.print(f"[yellow]note: {results.unfinished}[/yellow]")
    losses = results.losses
    for line in losses[:MAX_LOSSES_SHOWN]:  # what each loss cost, as the run said it
        console.print(f"  {line}", markup=False, highlight=False)
    if len(losses) > MAX_LOSSES_SHOWN:
        console.print(f"  … and {len(losses) - MAX_LOSSES_SHOWN} more in run_report.json", markup=False)
    for table in show_tables(results, top):
        console.print(table)
    return 0


def show_tables(results: RunResults, top: int) -> list[Table]:
    tables: list[Table] = []
    if results.op_statistic is not None:
        rows = sorted(read_rows(results.op_statistic), key=lambda r: -micros(r.get("Total Time(us)", "")))
        tables.append(_table(f"op_statistic ({results.op_statistic.name})", OP_STATISTIC_COLUMNS, rows, top))
    if results.api_statistic is not None:
        rows = sorted(read_rows(results.api_statistic), key=lambda r: -micros(r.get("Time(us)", "")))
        tables.append(_table(f"api_statistic ({results.api_statistic.name})", API_STATISTIC_COLUMNS, rows, top))
    if results.op_summary:
        slowest = heapq.nlargest(top, iter_rows(results.op_summary),
                                 key=lambda r: micros(r.get("Task Duration(us)", "")))
        names = ", ".join(path.name for path in results.op_summary)
        tasks = f"op_summary: the {len(slowest)} longest tasks ({names})"
        tables.append(_table(tasks, OP_SUMMARY_COLUMNS, slowest, top))
    if results.advice is not None:
        advice = json.loads(results.advice.read_text(encoding="utf-8")).get("advice", [])
        tables.append(advice_table(advice, incomplete=results.unfinished is not None))
    return tables


def _table(title: str, columns: tuple[str, ...], rows: list[dict[str, str]], top: int) -> Table:
    present = [c for c in columns if any(c in row for row in rows)] or list(columns)
    left = len(rows) - top
    caption = f"{left:,} more rows in the file" if left > 0 else None
    table = Table(title=title, caption=caption)
    for column in present:
        table.add_column(column, justify="right" if column in NUMERIC else "left", overflow="fold")
    for row in rows[:top]:
        table.add_row(*(_plain(row.get(column, "")) for column in present))
    return table



def _plain(cell: str) -> str:
    """msprof quotes tensor shapes inside the cell (``"1,3;16"``): show them without."""
    return cell[1:-1] if len(cell) > 1 and cell[0] == cell[-1] == '"' else cell
