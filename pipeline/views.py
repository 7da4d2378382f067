"""Rendering of the live view (`pipeline top`, `pipeline run` on a terminal) and progress lines.

The live view lays itself out for the console it is drawn on, each time it is drawn: columns are
added in order of importance while they fit the width (a number is never cut), and on a terminal
the operator table gets the lines the stage table leaves free. The advice panel comes when the
terminal is wide enough; a narrower one gets the count of findings in the header.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

TOP_ROWS = 20
WIDTH_OFF_TERMINAL = 200  # piped into a file or `less`: rich would squeeze the tables to 80 columns
MIN_OP_ROWS = 5  # fewer operator rows than this on the screen: the stage table gives up its wrapped details
ADVICE_MIN_WIDTH = 100  # the advice panel's findings and suggestions need this much to be read
COLUMN_GAP = 2  # spaces between two columns of the live view's tables
WRAP_MIN = 16  # a column of words (the stage details) is never made narrower than this

Cell = str | Text


def output_console() -> Console:
    """A console for standard output: the terminal's width, or a wide page when it is not a terminal."""
    return Console() if sys.stdout.isatty() else Console(width=WIDTH_OFF_TERMINAL)


def records_out(metrics: dict[str, Any]) -> int:
    """What a stage has put out: the records it sent on its ports, or, for a source that writes files instead
    (the simulated board), the records it wrote."""
    sent = sum(metrics.get("out", {}).values())
    return sent or int(metrics.get("progress", {}).get("records_written", 0))


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


def render_view(view: dict[str, Any], fit_screen: bool = True) -> RenderableType:
    """The live view of a snapshot. ``fit_screen``: on a terminal, use no more lines than it has (for a view
    redrawn in place); otherwise every table gets its full number of rows."""
    if not view:
        return Text("waiting for the pipeline…")
    return LiveView(view, fit_screen)


# -- columns ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[dict[str, Any]], Cell]
    numeric: bool = True
    wraps: bool = False  # words that may wrap onto more lines (only where the width leaves room)
    reserve: int = 0  # width kept even when the cells are narrower, so that the layout does not flicker

    def width(self, rows: Sequence[dict[str, Any]]) -> int:
        """The width this column needs: its widest cell (a wrapping column: its longest word, at least WRAP_MIN)."""
        cells = [_plain(self.cell(row)) for row in rows]
        if self.wraps:
            longest = max((cell_len(word) for cell in cells for word in cell.split()), default=0)
            return max(cell_len(self.header), min(max(WRAP_MIN, longest), max(map(cell_len, cells), default=0)))
        return max([cell_len(self.header), self.reserve, *map(cell_len, cells)])


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _count(value: int | float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


STATUS_STYLES = (("failed", "bold red"), ("killed", "bold red"), ("stuck", "red"), ("paused", "yellow"),
                 ("waiting", "yellow"), ("peer disconnected", "yellow"), ("done", "green"))


def _status_cell(status: str, short: bool) -> Text:
    style = next((style for prefix, style in STATUS_STYLES if status.startswith(prefix)), "")
    return Text(short_status(status) if short else status, style=style)


def short_status(status: str) -> str:
    """A stage's status in a few words: ``waiting: db`` for ``waiting for 'db' to read (3 s)``, ``paused:
    disk full`` for ``paused: disk full: PATH (FREE free)``, ``stuck 12 s`` for ``stuck (no heartbeat for 12 s)``."""
    waiting = re.match(r"waiting for '(.+)' to read", status)
    if waiting:
        return f"waiting: {waiting.group(1)}"
    silent = re.match(r"(stuck|killed) \(no heartbeat for (\d+) s\)", status)
    if silent:
        return f"{silent.group(1)} {silent.group(2)} s"
    return ": ".join(status.split(": ")[:2])


def _details(stage: dict[str, Any]) -> str:
    return ", ".join(f"{key}={_short(value)}" for key, value in stage.get("progress", {}).items())


COUNT_WIDTH = 9  # up to 9,999,999 records
RATE_WIDTH = 7  # up to 999,999 records/s
SHORT_STATE_WIDTH = 18  # waiting: aggregate


def _stage_columns(short_status: bool) -> dict[str, Column]:
    return {
        "stage": Column("stage", lambda s: s["id"], numeric=False),
        "role": Column("role", lambda s: s["role"], numeric=False),
        "state": Column("state", lambda s: _status_cell(s["shown_status"], short_status), numeric=False,
                        reserve=SHORT_STATE_WIDTH if short_status else 0),
        "records": Column("records", lambda s: _count(s["records"]), reserve=COUNT_WIDTH),
        "in": Column("in", lambda s: _count(s["shown_in"]), reserve=COUNT_WIDTH),
        "out": Column("out", lambda s: _count(s["shown_out"]), reserve=COUNT_WIDTH),
        "in/s": Column("in/s", lambda s: _count(s["shown_rate_in"]), reserve=RATE_WIDTH),
        "out/s": Column("out/s", lambda s: _count(s["shown_rate_out"]), reserve=RATE_WIDTH),
        "rejected": Column("rejected", lambda s: Text(f"{s['rejected']:,}", style="red" if s["rejected"] else "")),
        "lag": Column("lag", lambda s: _count(s["lag"]), reserve=COUNT_WIDTH),
        "MB": Column("MB", lambda s: f"{s.get('rss_mb', 0):.0f}", reserve=4),
        "details": Column("details", _details, numeric=False, wraps=True),
    }


# The stage table's layouts, richest first: the first that fits the width is drawn. ``records`` is what a
# stage has handled (a source: put out; the others: taken in), for a width without room for both totals.
STAGE_LAYOUTS = (
    ("stage", "role", "state", "in", "out", "in/s", "out/s", "rejected", "lag", "MB", "details"),
    ("stage", "role", "state", "in", "out", "in/s", "out/s", "rejected", "lag", "MB"),
    ("stage", "state", "in", "out", "in/s", "out/s", "rejected", "lag", "MB"),
    ("stage", "state", "in", "out", "in/s", "out/s", "rejected", "lag"),
    ("stage", "state", "records", "in/s", "out/s", "rejected", "lag", "MB"),
    ("stage", "state", "records", "in/s", "out/s", "rejected", "lag"),
    ("stage", "state", "in/s", "out/s", "rejected", "lag"),  # the essential columns
)
FULL_STATUS_LAYOUTS = 2  # the first layouts are tried with the full status first (it may be long)

OP_COLUMNS = {
    "device": Column("device", lambda r: str(r["device"])),
    "op type": Column("op type", lambda r: r["op_type"], numeric=False),
    "core": Column("core", lambda r: r["core_type"], numeric=False),
    "count": Column("count", lambda r: f"{r['count']:,}"),
    "total (us)": Column("total (us)", lambda r: f"{r['total_us']:,.0f}"),
    "avg (us)": Column("avg (us)", lambda r: f"{r['avg_us']:,.1f}"),
    "min (us)": Column("min (us)", lambda r: f"{r['min_us']:,.1f}"),
    "max (us)": Column("max (us)", lambda r: f"{r['max_us']:,.1f}"),
    "ratio %": Column("ratio %", lambda r: f"{r['ratio']:.1f}"),
}
OP_ORDER = tuple(OP_COLUMNS)
OP_ESSENTIAL = ("op type", "count", "total (us)", "ratio %")
OP_EXTRA = ("avg (us)", "core", "device", "max (us)", "min (us)")


def stage_rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    """The stages of a view with what the table shows: ``-`` for the input side of a source and the output
    side of a sink, and ``lag``, the records sent to a stage that it has not taken in yet."""
    stages = view.get("stages", {})
    rows = []
    for sid, stage in stages.items():
        restarts = stage.get("restarts", 0)
        role = stage["role"]
        rows.append({**stage, "id": sid,
                     "shown_status": f"{stage['status']} ↻{restarts}" if restarts else stage["status"],
                     "shown_in": None if role == "source" else stage["in"],
                     "shown_rate_in": None if role == "source" else stage["rate_in"],
                     "shown_out": None if role == "sink" else stage["out"],
                     "shown_rate_out": None if role == "sink" else stage["rate_out"],
                     "records": stage["out"] if role == "source" else stage["in"],
                     "lag": backlog(sid, stage, stages)})
    return rows


def backlog(sid: str, stage: dict[str, Any], stages: dict[str, dict[str, Any]]) -> int | None:
    """Records the stage's producers sent on the ports it reads, less those it has taken in (None: unknown). A
    producer that sends a partition only its devices' records counts what it sent on that link."""
    sent = [_sent_to(stages[producer], port, sid)
            for producer, _, port in (ref.partition(".") for ref in stage.get("inputs", []))
            if producer in stages]
    if not sent:
        return None
    return max(0, sum(sent) - stage["in"])


def _sent_to(producer: dict[str, Any], port: str, consumer: str) -> int:
    links = producer.get("out_links", {})
    key = f"{port}>{consumer}"
    return int(links[key]) if key in links else int(producer.get("out_ports", {}).get(port, 0))


def pick_columns(order: Sequence[str], essential: Sequence[str], extra: Sequence[str],
                 columns: dict[str, Column], rows: Sequence[dict[str, Any]], width: int) -> list[str] | None:
    """The essential columns and as many extras (in their order) as fit ``width``; None if not even the
    essential ones fit."""
    for kept in range(len(extra), -1, -1):
        chosen = [name for name in order if name in essential or name in extra[:kept]]
        if table_width([columns[name] for name in chosen], rows) <= width:
            return chosen
    return None


def table_width(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> int:
    return sum(column.width(rows) for column in columns) + COLUMN_GAP * (len(columns) - 1)


def build_table(columns: Sequence[Column], rows: Iterable[dict[str, Any]], title: str | None = None) -> Table:
    """A borderless table: a rule under the header, two spaces between columns, numbers never wrapped or cut."""
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, COLUMN_GAP - 1, 0, 0), title_justify="left", title_style="bold")
    for column in columns:
        table.add_column(column.header, justify="right" if column.numeric else "left", min_width=column.reserve or None,
                         no_wrap=not column.wraps, overflow="fold" if column.wraps else "ellipsis")
    for row in rows:
        table.add_row(*(column.cell(row) for column in columns))
    return table


# -- the view ---------------------------------------------------------------------------------

class LiveView:
    """A snapshot laid out for the console it is rendered on (see the module's docstring)."""

    def __init__(self, view: dict[str, Any], fit_screen: bool = True) -> None:
        self.view = view
        self.fit_screen = fit_screen

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        height = options.size.height if self.fit_screen and console.is_terminal else None
        yield from self.parts(console, options, options.max_width, height)

    def parts(self, console: Console, options: ConsoleOptions, width: int, height: int | None) -> Iterator[
            RenderableType]:
        """Header, stage table, operator table and (with room) the advice panel, for ``width`` × ``height``."""
        stages_table = self._stages_table(width, wrap_details=True)
        advice = self.view.get("stats", {}).get("advice")
        show_advice = advice is not None and width >= ADVICE_MIN_WIDTH
        header = self._header(width, advice if not show_advice else None)
        ops = op_rows(self.view)
        op_columns = self._op_columns(ops, width)
        if height is None:
            yield Group(header, stages_table, *self._ops_and_advice(ops, op_columns, TOP_ROWS, advice, show_advice))
            return

        def lines(renderable: RenderableType) -> int:
            return len(console.render_lines(renderable, options.update(height=None), pad=False))

        free = height - lines(header) - lines(stages_table)
        op_frame = lines(self._ops_table(ops, op_columns, 0)) if op_columns else 0
        if free - op_frame < MIN_OP_ROWS:
            stages_table = self._stages_table(width, wrap_details=False)
            free = height - lines(header) - lines(stages_table)
        if show_advice and advice is not None:
            advice_lines = lines(advice_panel(advice)) + 1  # and the blank line before it
            if free - op_frame - advice_lines >= MIN_OP_ROWS:
                free -= advice_lines
            else:
                show_advice = False
                header = self._header(width, advice)
        op_count = max(0, min(TOP_ROWS, free - op_frame - 1))  # and the blank line before the table
        yield Group(header, stages_table, *self._ops_and_advice(ops, op_columns, op_count, advice, show_advice))

    def _header(self, width: int, unshown_advice: list[dict[str, Any]] | None) -> Text:
        """The state and the time, then what else fits in this order: lag, the advice not shown below, the run
        id, the checkpoint."""
        view = self.view
        lags = [stage.get("progress", {}).get("lag_s") for stage in view.get("stages", {}).values()]
        lag = max((value for value in lags if isinstance(value, int | float)), default=None)
        candidates = {"run": f"run {view.get('run_id', '?')}", "state": str(view.get("state", "?")),
                      "time": f"{view.get('elapsed_s', 0):.1f} s", "lag": f"lag {lag:.1f} s" if lag is not None else "",
                      "checkpoint": _checkpoint_text(view.get("checkpoint")).strip(),
                      "advice": _advice_count(unshown_advice) if unshown_advice is not None else ""}
        shown = {"state", "time"}
        for name in ("lag", "advice", "run", "checkpoint"):
            line = "  ".join(text for key, text in candidates.items() if key in shown | {name} and text)
            if candidates[name] and cell_len(line) <= width:
                shown.add(name)
        line = "  ".join(text for key, text in candidates.items() if key in shown and text)
        return Text(line, style="bold", overflow="ellipsis", no_wrap=True)

    def _stages_table(self, width: int, wrap_details: bool) -> Table:
        """The richest layout that fits ``width`` (the full status where it fits, else the short one)."""
        rows = stage_rows(self.view)
        details = wrap_details and any(row.get("progress") for row in rows)
        layouts = [layout for layout in STAGE_LAYOUTS if details or "details" not in layout]
        attempts = [(layout, False) for layout in layouts[:FULL_STATUS_LAYOUTS]]
        attempts += [(layout, True) for layout in layouts]
        for names, short in attempts:
            columns = [_stage_columns(short)[name] for name in names]
            if table_width(columns, rows) <= width:
                return build_table(columns, rows)
        return self._squeezed(columns, rows, width)

    @staticmethod
    def _squeezed(columns: list[Column], rows: list[dict[str, Any]], width: int) -> Table:
        """The essential columns on a terminal narrower than they need: the state is cut short, not a number."""
        state = next(index for index, column in enumerate(columns) if column.header == "state")
        others = table_width([column for index, column in enumerate(columns) if index != state], rows)
        table = build_table(columns, rows)
        table.columns[state].min_width = None
        table.columns[state].width = max(1, width - others - COLUMN_GAP)
        return table

    def _op_columns(self, ops: list[dict[str, Any]], width: int) -> list[str]:
        devices = {row["device"] for row in ops}
        essential = (*OP_ESSENTIAL, "device") if len(devices) > 1 else OP_ESSENTIAL
        extra = tuple(name for name in OP_EXTRA if name not in essential)
        return pick_columns(OP_ORDER, essential, extra, OP_COLUMNS, ops[:TOP_ROWS], width) or list(essential)

    @staticmethod
    def _ops_table(ops: list[dict[str, Any]], names: list[str], count: int) -> Table:
        shown = f"top {min(count, len(ops))} of {len(ops)}" if len(ops) > count else f"{len(ops)}"
        return build_table([OP_COLUMNS[name] for name in names], ops[:count],
                           title=f"operators by device time ({shown} types)")

    def _ops_and_advice(self, ops: list[dict[str, Any]], op_columns: list[str], count: int,
                        advice: list[dict[str, Any]] | None, show_advice: bool) -> list[RenderableType]:
        parts: list[RenderableType] = []
        if ops and count > 0:
            parts += [Text(""), self._ops_table(ops, op_columns, count)]
        if show_advice and advice is not None:
            parts += [Text(""), advice_panel(advice)]
        return parts


def _advice_count(advice: list[dict[str, Any]]) -> str:
    if not advice:
        return "advice: none so far"
    counts: dict[str, int] = {}
    for item in advice:
        counts[str(item.get("severity", "info"))] = counts.get(str(item.get("severity", "info")), 0) + 1
    return "advice: " + ", ".join(f"{count} {severity}" for severity, count in counts.items())


ADVICE_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def advice_panel(advice: list[dict[str, Any]]) -> Table:
    """The live view's advice: severity, finding, the first sentence of what to do and the rule, in the view's
    style."""
    columns = [Column("", lambda item: Text(str(item.get("severity", "")),
                                            style=ADVICE_STYLES.get(str(item.get("severity", "")), "")),
                      numeric=False),
               Column("finding", lambda item: str(item.get("title", "")), numeric=False, wraps=True),
               Column("what to do", lambda item: _first_sentence(str(item.get("suggestion", ""))), numeric=False,
                      wraps=True),
               Column("rule", lambda item: str(item.get("rule", "")), numeric=False)]
    rows = advice or [{"title": "nothing to point out so far"}]
    return build_table(columns, rows, title="advice")


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".") + "." if text else ""


def advice_table(advice: list[dict[str, Any]], incomplete: bool = False) -> Table:
    """The Advice panel: one row per finding of the advice sink (pipeline/advice.py). ``incomplete``: the run
    that wrote them lost data or was cut short, so they rest on part of the job."""
    title = "advice (on incomplete figures: see the note above)" if incomplete else "advice"
    table = Table(title=title, expand=False, show_lines=False)
    for column in ("", "finding", "what to do", "rule"):
        table.add_column(column, overflow="fold")
    if not advice:
        table.add_row("", "nothing to point out in what was read, but the figures are incomplete (see the note "
                      "above): what is missing was not looked at" if incomplete else "nothing to point out so far",
                      "", "")
    for item in advice:
        severity = str(item.get("severity", ""))
        table.add_row(Text(severity, style=ADVICE_STYLES.get(severity, "")), str(item.get("title", "")),
                      _first_sentence(str(item.get("suggestion", ""))), str(item.get("rule", "")))
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
        if stage["role"] == "source" and not stage.get("out_ports") and "records_written" in stage["progress"]:
            parts.append(f"{sid} wrote={stage['progress']['records_written']:,}")
            continue
        parts.append(f"{sid} in={stage['in']:,} out={stage['out']:,} ({stage['rate_out'] or stage['rate_in']:,.0f}/s)")
    top = op_rows(view)[:1]
    if top:
        parts.append(f"top op {top[0]['op_type']} {top[0]['count']:,} calls {top[0]['total_us']:,.0f} us")
    return " | ".join(parts)
