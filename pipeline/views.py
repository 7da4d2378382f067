"""Rendering of the live view (`pipeline top`, `pipeline run` on a terminal) and progress lines."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

TOP_ROWS = 20
WIDTH_OFF_TERMINAL = 200  # piped into a file or `less`: rich would squeeze the tables to 80 columns


def output_console() -> Console:
    """A console for standard output: the terminal's width, or a wide page when it is not a terminal."""
    return Console() if sys.stdout.isatty() else Console(width=WIDTH_OFF_TERMINAL)


def op_rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    """Op statistics rows of a view, largest total first, with ratio per device."""
    rows = view.get("stats", {}).get("ops", [])
    totals: dict[int, int] = {}
    for device, _, _, _, total, _, _ in rows:
        totals[device] = totals.get(device, 0) + total
    result = []
    for device, op_type, core_type, count, total, low, high in rows:
        result.append({"device": device, "op_type": op_type, "core_type": core_type, "count": count,
                       "total_us": total / 1000, "avg_us": total / count / 1000 if count else 0.0,
                       "min_us": low / 1000, "max_us": high / 1000,
                       "ratio": 100 * total / totals[device] if totals[device] else 0.0})
    return sorted(result, key=lambda row: -row["total_us"])


def render_view(view: dict[str, Any]) -> Group:
    if not view:
        return Group(Text("waiting for the pipeline…"))
    header = Text(f"run {view.get('run_id', '?')}  {view.get('state', '?')}  {view.get('elapsed_s', 0):.1f} s"
                  f"{_checkpoint_text(view.get('checkpoint'))}")
    stages = Table(title="stages", expand=False)
    numeric = ("in", "out", "in/s", "out/s", "rejected", "MB")
    for column in ("stage", "role", "status", "in", "out", "in/s", "out/s", "rejected", "MB", "lag / progress"):
        stages.add_column(column, justify="right" if column in numeric else "left")
    for sid, stage in view.get("stages", {}).items():
        progress = ", ".join(f"{k}={_short(v)}" for k, v in stage.get("progress", {}).items())
        rejected = stage["rejected"]
        restarts = stage.get("restarts", 0)
        status = f"{stage['status']} ↻{restarts}" if restarts else stage["status"]
        stages.add_row(sid, stage["role"], status, f"{stage['in']:,}", f"{stage['out']:,}",
                       f"{stage['rate_in']:,.0f}", f"{stage['rate_out']:,.0f}",
                       Text(f"{rejected:,}", style="red" if rejected else ""),
                       f"{stage.get('rss_mb', 0):.0f}", progress)
    ops = Table(title="operator statistics (live)")
    for column in ("device", "op type", "core", "count", "total (us)", "avg (us)", "min (us)", "max (us)", "ratio %"):
        ops.add_column(column, justify="left" if column in ("op type", "core") else "right")
    for row in op_rows(view)[:TOP_ROWS]:
        ops.add_row(str(row["device"]), row["op_type"], row["core_type"], f"{row['count']:,}",
                    f"{row['total_us']:,.3f}", f"{row['avg_us']:,.3f}", f"{row['min_us']:,.3f}",
                    f"{row['max_us']:,.3f}", f"{row['ratio']:.2f}")
    advice = view.get("stats", {}).get("advice")
    if advice is None:
        return Group(header, stages, ops)
    return Group(header, stages, ops, advice_table(advice))


ADVICE_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def advice_table(advice: list[dict[str, Any]]) -> Table:
    """The Advice panel: one row per finding of the advice sink (pipeline/advice.py)."""
    table = Table(title="advice", expand=False, show_lines=False)
    for column in ("", "finding", "what to do", "rule"):
        table.add_column(column, overflow="fold")
    if not advice:
        table.add_row("", "nothing to point out so far", "", "")
    for item in advice:
        severity = str(item.get("severity", ""))
        suggestion = str(item.get("suggestion", ""))
        first_sentence = suggestion.split(". ", 1)[0].rstrip(".") + "." if suggestion else ""
        table.add_row(Text(severity, style=ADVICE_STYLES.get(severity, "")), str(item.get("title", "")),
                      first_sentence, str(item.get("rule", "")))
    return table


def _checkpoint_text(checkpoint: dict[str, Any] | None) -> str:
    """Crash recovery in the header: the newest complete epoch and restarts so far."""
    if not checkpoint:
        return ""
    if checkpoint.get("recovery") != "on":
        return "  recovery off"
    restarts = checkpoint.get("restarts", 0)
    return f"  checkpoint {checkpoint.get('epoch', 0)}" + (f"  restarts {restarts}" if restarts else "")


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def progress_line(view: dict[str, Any]) -> str:
    parts = [f"[{view['elapsed_s']:6.1f}s {view['state']}]"]
    for sid, stage in view["stages"].items():
        if stage["role"] == "source" and not stage["out"] and "records_written" in stage["progress"]:
            parts.append(f"{sid} wrote={stage['progress']['records_written']:,}")
            continue
        parts.append(f"{sid} in={stage['in']:,} out={stage['out']:,} ({stage['rate_out'] or stage['rate_in']:,.0f}/s)")
    top = op_rows(view)[:1]
    if top:
        parts.append(f"top op {top[0]['op_type']} {top[0]['count']:,} calls {top[0]['total_us']:,.0f} us")
    return " | ".join(parts)
