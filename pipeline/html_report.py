"""`report.html`: one self-contained page of a run's results, for a browser.

The run's summary (run_report.json), the top operator types and APIs as bar charts (op_statistic,
api_statistic), the iteration times as a line chart (step_trace), the advice with its evidence
(advice.json), and how to open the timeline in Perfetto's UI and the database in Datasette. The charts
are drawn by plotly.js, embedded in the page, so it opens offline and fetches nothing.

The figures are plain JSON handed to ``Plotly.newPlot``; plotly.js is read from the installed plotly
package's files (read once per process), and no plotly module is imported.
"""

from __future__ import annotations

import functools
import html
import importlib.util
import json
import os
import re
import shlex
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pipeline.errors import UserError
from pipeline.results import SUMMARY_DIR, RunResults, count, iter_rows, locate, micros, read_rows, results_of

REPORT_NAME = "report.html"
TOP_N = 15  # bars per chart
MAX_POINTS = 5000  # points per iteration-time line; longer runs are shown as bucket maxima
PERFETTO_UI = "https://ui.perfetto.dev"
PLOTLY_JS = ("package_data", "plotly.min.js")  # inside the installed plotly package
_CHART_CONFIG = {"displaylogo": False, "responsive": True}
_AXIS = {"gridcolor": "#e6e9ed", "zerolinecolor": "#c9ced6", "linecolor": "#c9ced6", "automargin": True}
_LAYOUT: dict[str, Any] = {"paper_bgcolor": "white", "plot_bgcolor": "white",
                           "font": {"family": "system-ui, sans-serif", "size": 12, "color": "#1f2933"},
                           "colorway": ["#3b6ea8", "#d9822b", "#2f9e6e", "#a14fa8", "#c23b3b"],
                           "margin": {"l": 10, "r": 20, "t": 32, "b": 40}}
# Characters that could end the <script> element or open a comment in it, as JSON escapes.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


@dataclass
class RunFolder:
    """What a run left in its output folder, as far as the report uses it."""

    folder: Path
    run_report: dict[str, Any] | None
    results: RunResults | None
    stamp: str | None
    step_trace: list[Path] = field(default_factory=list)
    timeline: list[Path] = field(default_factory=list)
    database: Path | None = None
    advice: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Bar:
    label: str
    value_ms: float
    hover: str


def write_report(folder: Path, destination: Path | None = None) -> Path:
    """Write the report of the run in ``folder`` (to ``folder/report.html`` unless told) and return its path."""
    run = read_run_folder(folder)
    path = destination or folder / REPORT_NAME
    from pipeline.checkpoint import write_atomic

    write_atomic(path, render_page(run, path.parent).encode("utf-8"))
    return path


def run_report_verb(target: str, html_path: Path | None = None, output: Path | None = None) -> int:
    """`pipeline report TARGET`: a run's output folder, or a PROF_… directory (parsed first when needed)."""
    folder = Path(target).expanduser()
    if not (folder / "run_report.json").is_file():
        folder = results_of(folder, "report", output).folder
    path = write_report(folder, html_path)
    print(f"report: {path} (open it in a browser)", flush=True)
    return 0


def write_after_run(folder: Path) -> Path | None:
    """The end of `pipeline run` / `import`: write the report and say where; a failure is one warning line,
    never the run's failure."""
    try:
        path = write_report(folder)
    except ImportError as exc:
        print(f"warning: report.html not written: {exc} (pip install plotly)", file=sys.stderr, flush=True)
        return None
    except UserError as exc:
        print(f"warning: report.html not written: {exc.what}", file=sys.stderr, flush=True)
        return None
    except OSError as exc:
        print(f"warning: report.html not written: {exc.filename}: {exc.strerror}", file=sys.stderr, flush=True)
        return None
    except Exception as exc:  # a page that fails to render must not turn a finished run into a crash
        print(f"warning: report.html not written: {type(exc).__name__}: {exc} (the run's other outputs are "
              "complete; `pipeline report` on the folder shows the traceback)", file=sys.stderr, flush=True)
        return None
    print(f"report: {path} (open it in a browser)", flush=True)
    return path


def read_run_folder(folder: Path) -> RunFolder:
    """The run report, statistics, step trace, timeline, database and advice under ``folder``."""
    if not folder.is_dir():
        raise UserError(f"report: {folder} is not a folder", "pass the output folder of `pipeline run` or "
                        "`pipeline import`")
    run_report = _json_object(folder / "run_report.json")
    results = locate(folder)
    stamp = results.stamp if results is not None else (run_report or {}).get("stamp")
    if run_report is None and results is None:
        raise UserError(f"report: {folder} holds no run_report.json and no op_statistic / api_statistic files",
                        "pass the output folder of `pipeline run` or `pipeline import`")
    advice_doc = _json_object(folder / "advice.json") or {}
    advice = [item for item in advice_doc.get("advice", []) if isinstance(item, dict)]
    run = RunFolder(folder, run_report, results, str(stamp) if stamp else None, advice=advice)
    # An export of one sink into a folder leaves the other sinks' files of an earlier run there: the step trace
    # goes with the statistics shown, the timeline and database are the latest run's where it wrote them.
    latest = [str(s) for s in dict.fromkeys(((run_report or {}).get("stamp"), run.stamp)) if s]
    summaries = folder / SUMMARY_DIR
    run.step_trace = _first_found(latest[::-1], summaries, r"step_trace(?:_slice_\d+)?_{}\.(?:csv|json)")
    run.timeline = _first_found(latest, summaries, r"msprof(?:_slice_\d+)?_{}(?:_\d+)?\.json")
    run.database = next(iter(_first_found(latest, folder, r"msprof_{}\.db")), None)
    return run


def _first_found(stamps: list[str], folder: Path, pattern: str) -> list[Path]:
    """The files of the first timestamp that has any (``pattern`` has ``{}`` where the timestamp goes)."""
    for stamp in stamps:
        found = _matching(folder, pattern.replace("{}", re.escape(stamp)))
        if found:
            return found
    return []


def _matching(folder: Path, pattern: str) -> list[Path]:
    if not folder.is_dir():
        return []
    name = re.compile(pattern)
    return sorted((path for path in folder.iterdir() if name.fullmatch(path.name)), key=_natural)


def _natural(path: Path) -> list[Any]:
    """msprof_slice_2 before msprof_slice_10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _json_object(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# --- the figures -------------------------------------------------------------------------------------------


def top_operator_types(results: RunResults) -> list[Bar]:
    """op_statistic's op types by total device time, summed over devices."""
    if results.op_statistic is None:
        return []
    totals: dict[tuple[str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for row in read_rows(results.op_statistic):
        key = (row.get("OP Type", "?"), row.get("Core Type", ""))
        totals[key][0] += micros(row.get("Total Time(us)", ""))
        totals[key][1] += count(row.get("Count", ""))
    device_total = sum((total for total, _ in totals.values()), Decimal(0)) or Decimal(1)
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:TOP_N]
    return [Bar(f"{op_type} ({core})" if core else op_type, float(total) / 1000,
                f"{int(tasks):,} tasks, avg {float(total / tasks if tasks else 0):,.3f} µs, "
                f"{float(total / device_total * 100):.1f}% of device time")
            for (op_type, core), (total, tasks) in ranked]


def top_apis(results: RunResults) -> list[Bar]:
    """api_statistic's APIs by total host time, summed over devices."""
    if results.api_statistic is None:
        return []
    totals: dict[tuple[str, str], list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for row in read_rows(results.api_statistic):
        key = (row.get("API Name", "?"), row.get("Level", ""))
        totals[key][0] += micros(row.get("Time(us)", ""))
        totals[key][1] += count(row.get("Count", ""))
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:TOP_N]
    return [Bar(f"{name} ({level})" if level else name, float(total) / 1000,
                f"{int(calls):,} calls, avg {float(total / calls if calls else 0):,.3f} µs")
            for (name, level), (total, calls) in ranked]


def iteration_series(paths: list[Path]) -> dict[str, tuple[list[int], list[float]]]:
    """Iteration id → iteration time (ms), one series per device and model, from step_trace."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for row in iter_rows(paths):
        try:
            iteration, time_us = int(row["Iteration ID"]), float(row["Iteration Time(us)"])
        except (KeyError, ValueError):
            continue  # N/A: an iteration without its end
        name = f"device {row.get('Device_id', '?')}, model {row.get('Model ID', '?')}"
        xs, ys = series.setdefault(name, ([], []))
        xs.append(iteration)
        ys.append(time_us / 1000)
    return series


def bucket_maxima(xs: list[int], ys: list[float], limit: int = MAX_POINTS) -> tuple[list[int], list[float], int]:
    """At most ``limit`` points: each the slowest iteration of its bucket (outliers stay visible)."""
    size = -(-len(xs) // limit) if len(xs) > limit else 1
    if size == 1:
        return xs, ys, 1
    keep = [max(range(start, min(start + size, len(xs))), key=ys.__getitem__) for start in range(0, len(xs), size)]
    return [xs[i] for i in keep], [ys[i] for i in keep], size


@dataclass(frozen=True)
class Chart:
    """One plotly.js chart: its traces and layout as plain JSON-ready values."""

    traces: list[dict[str, Any]]
    layout: dict[str, Any]


def _axis(title: str | None = None, **more: Any) -> dict[str, Any]:
    return {**_AXIS, **({"title": {"text": title}} if title else {}), **more}


def bar_chart(bars: list[Bar], axis_title: str) -> Chart:
    """Horizontal bars, the largest at the top, each with its detail on hover."""
    shown = list(reversed(bars))  # plotly.js draws the first bar at the bottom
    trace = {"type": "bar", "orientation": "h", "x": [bar.value_ms for bar in shown],
             "y": [bar.label for bar in shown], "customdata": [bar.hover for bar in shown],
             "marker": {"color": "#3b6ea8"},
             "hovertemplate": "%{y}<br>%{x:,.3f} ms<br>%{customdata}<extra></extra>"}
    layout = {**_LAYOUT, "height": 112 + 26 * len(bars), "xaxis": _axis(axis_title),
              "yaxis": _axis(type="category")}
    return Chart([trace], layout)


def line_chart(series: dict[str, tuple[list[int], list[float]]]) -> tuple[Chart, int]:
    """One line per series (at most MAX_POINTS points each) and the largest bucket of iterations a point stands for."""
    traces = []
    bucket = 1
    for name, (xs, ys) in sorted(series.items()):
        xs, ys, size = bucket_maxima(xs, ys)
        bucket = max(bucket, size)
        traces.append({"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys,
                       "hovertemplate": "iteration %{x}<br>%{y:,.3f} ms<extra>%{fullData.name}</extra>"})
    layout = {**_LAYOUT, "height": 360, "xaxis": _axis("iteration"), "yaxis": _axis("iteration time (ms)"),
              "showlegend": len(series) > 1, "legend": {"orientation": "h", "y": 1.08}}
    return Chart(traces, layout), bucket


def _chart(chart: Chart, div_id: str) -> str:
    """The chart's element and the script that draws it into it."""
    arguments = ", ".join(_script_json(value) for value in (chart.traces, chart.layout, _CHART_CONFIG))
    return (f"<div id=\"{div_id}\" class=\"chart\" style=\"height:{int(chart.layout['height'])}px\"></div>"
            f"<script>Plotly.newPlot(\"{div_id}\", {arguments});</script>")


def _script_json(value: Any) -> str:
    """JSON to put inside a <script> element (nothing in the data can end it)."""
    return json.dumps(value, ensure_ascii=False).translate(_SCRIPT_SAFE)


@functools.cache
def plotly_js() -> str:
    """plotly.js as the installed plotly package ships it (found without importing plotly)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("plotly is not installed")
    path = Path(next(iter(spec.submodule_search_locations)), *PLOTLY_JS)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ImportError(f"plotly.js is not where the plotly package keeps it: {path}: {exc.strerror}") from None


# --- the page ----------------------------------------------------------------------------------------------


def render_page(run: RunFolder, page_dir: Path) -> str:
    """The whole page; links to the run's files are relative to ``page_dir``, where the page goes."""
    report = run.run_report or {}
    title = f"pipeline report: {report.get('run_id') or run.folder.name}"
    sections = [_summary_section(run), _statistics_section(run), _iterations_section(run), _advice_section(run),
                _open_section(run, page_dir)]
    generated = datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{_e(title)}</title><style>{_CSS}</style>"
            f"<script type=\"text/javascript\">{plotly_js()}</script></head><body><main>"
            f"<h1>{_e(title)}</h1><p class=\"muted\">{_e(str(run.folder.resolve()))} · written {_e(generated)}</p>"
            f"{_NAV}"
            + "".join(sections) + "</main></body></html>\n")


def _summary_section(run: RunFolder) -> str:
    report = run.run_report
    if report is None:
        return _section("run", "Run", _muted("No run_report.json here (a run still going, or msprof's folder): the "
                                             "summary is left out."))
    stages: dict[str, dict[str, Any]] = {sid: final for sid, final in (report.get("stages") or {}).items()
                                         if isinstance(final, dict)}
    collected = sum(int((final.get("accounting") or {}).get("records_collected", 0)) for final in stages.values())
    rejected = sum(sum(int(n) for n in (final.get("rejected") or {}).values()) for final in stages.values())
    state = str(report.get("state", "?"))
    tiles = [("state", state, "good" if state == "completed" else "bad"),
             ("wall time", f"{float(report.get('wall_s', 0)):,.1f} s", ""),
             ("records collected", f"{collected:,}", ""),
             ("rejected", f"{rejected:,}", "bad" if rejected else ""),
             ("problems", f"{len(report.get('problems') or [])}", "bad" if report.get("problems") else "")]
    parts = ["<div class=\"tiles\">"]
    parts += [f"<div class=\"tile {kind}\"><div class=\"label\">{_e(label)}</div><div class=\"value\">{_e(value)}"
              "</div></div>" for label, value, kind in tiles]
    parts.append("</div>")
    parts.append(f"<p class=\"muted\">run {_e(str(report.get('run_id', '?')))} · config "
                 f"<code>{_e(str(report.get('config', '?')))}</code> · timestamp {_e(str(report.get('stamp', '?')))}"
                 "</p>")
    parts += _lines_list("Problems", report.get("problems"), "bad")
    parts += _lines_list("Warnings", report.get("warnings"), "warn")
    if stages:
        parts.append(_stage_table(stages))
    return _section("run", "Run", "".join(parts))


def _lines_list(title: str, lines: Any, kind: str) -> list[str]:
    if not lines:
        return []
    items = "".join(f"<li>{_e(str(line))}</li>" for line in lines)
    return [f"<div class=\"callout {kind}\"><strong>{_e(title)}</strong><ul>{items}</ul></div>"]


def _stage_table(stages: dict[str, dict[str, Any]]) -> str:
    head = ("<table><thead><tr><th>stage</th><th>type</th><th class=\"n\">in</th><th class=\"n\">out</th>"
            "<th class=\"n\">rejected</th><th class=\"n\">wall s</th><th class=\"n\">CPU s</th>"
            "<th class=\"n\">peak MB</th><th>ok</th></tr></thead><tbody>")
    rows = []
    failed = '<span class="badtext">no</span>'
    for sid, final in stages.items():
        rejected = final.get("rejected") or {}
        why = "; ".join(f"{reason}: {n:,}" for reason, n in rejected.items())
        unit = " bytes" if final.get("stage_type") == "collector" and rejected else ""
        rows.append(
            f"<tr><td>{_e(sid)}</td><td>{_e(str(final.get('stage_type', '')))}</td>"
            f"<td class=\"n\">{int(final.get('in') or 0):,}</td>"
            f"<td class=\"n\">{sum(int(n) for n in (final.get('out') or {}).values()):,}</td>"
            f"<td class=\"n\" title=\"{_e(why)}\">{sum(int(n) for n in rejected.values()):,}{unit}</td>"
            f"<td class=\"n\">{float(final.get('wall_s') or 0):,.1f}</td>"
            f"<td class=\"n\">{float(final.get('cpu_s') or 0):,.1f}</td>"
            f"<td class=\"n\">{float(final.get('peak_rss_mb') or 0):,.0f}</td>"
            f"<td>{'yes' if final.get('ok') else failed}</td></tr>")
    return head + "".join(rows) + "</tbody></table>"


def _statistics_section(run: RunFolder) -> str:
    if run.results is None:
        return _section("statistics", "Top operators and APIs", _muted(
            "No op_statistic or api_statistic file (the run read no device task, or had no summary sink)."))
    parts = _lines_list("Incomplete", [run.results.unfinished] if run.results.unfinished else [], "warn")
    operators, apis = top_operator_types(run.results), top_apis(run.results)
    for bars, source, heading, axis, div_id in (
            (operators, run.results.op_statistic, "Operator types by device time", "total device time (ms)",
             "chart-operators"),
            (apis, run.results.api_statistic, "APIs by host time", "total time in the API (ms)", "chart-apis")):
        if bars and source is not None:
            parts.append(f"<h3>{heading} <span class=\"muted\">(top {len(bars)}, {_e(source.name)})</span></h3>")
            parts.append(_chart(bar_chart(bars, axis), div_id))
    if not operators and not apis:
        parts.append(_muted("The statistics files hold no rows."))
    return _section("statistics", "Top operators and APIs", "".join(parts))


def _iterations_section(run: RunFolder) -> str:
    series = iteration_series(run.step_trace) if run.step_trace else {}
    if not series:
        return _section("iterations", "Iteration times", _muted(
            "No step_trace file with finished iterations (the device wrote no step-trace keypoints)."))
    chart, bucket = line_chart(series)
    iterations = sum(len(xs) for xs, _ in series.values())
    note = f"; each point is the slowest of {bucket} iterations" if bucket > 1 else ""
    names = ", ".join(path.name for path in run.step_trace)
    return _section("iterations", "Iteration times", _muted(f"{iterations:,} iterations from {names}{note}")
                    + _chart(chart, "chart-iterations"))


def _advice_section(run: RunFolder) -> str:
    if not run.advice:
        return _section("advice", "Advice", _muted("No findings (advice.json is absent or empty)."))
    cards = []
    for item in run.advice:
        severity = str(item.get("severity", "info"))
        cards.append(
            f"<div class=\"advice {_e(severity)}\"><div><span class=\"badge\">{_e(severity)}</span> "
            f"<strong>{_e(str(item.get('title', '')))}</strong> <span class=\"muted\">({_e(str(item.get('rule', '')))})"
            f"</span></div><p>{_e(str(item.get('detail', '')))}</p>"
            f"<p><em>What to do:</em> {_e(str(item.get('suggestion', '')))}</p>"
            f"{_evidence_table(item.get('evidence'))}</div>")
    return _section("advice", "Advice", "".join(cards))


def _evidence_table(evidence: Any) -> str:
    """The figures a finding rests on, one row per key (nested values as compact JSON)."""
    if not isinstance(evidence, dict) or not evidence:
        return ""
    rows = "".join(f"<tr><th>{_e(str(key))}</th><td><code>{_e(_evidence_value(value))}</code></td></tr>"
                   for key, value in evidence.items())
    return f"<table class=\"evidence\"><caption>evidence</caption>{rows}</table>"


def _evidence_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, dict, list)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def _open_section(run: RunFolder, page_dir: Path) -> str:
    parts = []
    if run.timeline:
        files = "".join(f"<li><code>{_e(str(path.resolve()))}</code> ({_size(path)}) · "
                        f"<a href=\"{_e(_href(path, page_dir))}\">the file</a></li>" for path in run.timeline)
        parts.append(
            f"<h3>Timeline in Perfetto</h3><ol><li>Open <a href=\"{PERFETTO_UI}\" target=\"_blank\" "
            f"rel=\"noopener\">{PERFETTO_UI}</a>.</li><li>Choose <em>Open trace file</em> in its menu, or drag the "
            "file onto the page. A page cannot hand a file on your disk to another site, so pick it there: "
            "Perfetto reads it inside your browser and uploads nothing.</li></ol>"
            f"<ul>{files}</ul><p class=\"muted\">The same files open in chrome://tracing and MindStudio Insight. "
            "A timeline of several files (rotated while the run went) opens one file at a time.</p>")
    else:
        parts.append("<p class=\"muted\">No timeline (msprof_*.json) here: the run had no timeline sink.</p>")
    if run.database is not None:
        command = f"datasette {shlex.quote(str(run.database.resolve()))}"
        parts.append(
            f"<h3>Database in Datasette</h3><pre class=\"command\">{_e(command)}</pre>"
            "<p>then open the address it prints (http://127.0.0.1:8001). Datasette is not installed with the "
            "pipeline: <code>pip install datasette</code>. Without it: <code>sqlite-utils tables "
            f"{_e(shlex.quote(str(run.database.resolve())))} --counts</code>.</p>")
    else:
        parts.append("<p class=\"muted\">No database (msprof_*.db) here: the run had no sqlite sink.</p>")
    summaries = _summary_files(run)
    if summaries:
        links = "".join(f"<li><a href=\"{_e(_href(path, page_dir))}\">{_e(path.name)}</a> ({_size(path)})</li>"
                        for path in summaries)
        parts.append(f"<h3>Summary files</h3><ul class=\"files\">{links}</ul>")
    return _section("open", "Open the timeline and the database", "".join(parts))


def _summary_files(run: RunFolder) -> list[Path]:
    if not run.stamp:
        return []
    return [path for path in _matching(run.folder / SUMMARY_DIR, rf".+_{run.stamp}\.(?:csv|json)")
            if path not in run.timeline]


def _href(path: Path, page_dir: Path) -> str:
    relative = os.path.relpath(path.resolve(), page_dir.resolve())
    return "/".join(quote(part) for part in Path(relative).parts)


def _size(path: Path) -> str:
    try:
        size = float(path.stat().st_size)
    except OSError:
        return "gone"
    for unit in ("B", "KB", "MB", "GB"):  # decimal units, as the progress and run report give MB
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{size:,.1f} GB"


def _section(anchor: str, title: str, body: str) -> str:
    return f"<section id=\"{anchor}\"><h2>{_e(title)}</h2>{body}</section>"


def _muted(text: str) -> str:
    return f"<p class=\"muted\">{_e(text)}</p>"


def _e(text: str) -> str:
    return html.escape(text, quote=True)


_NAV = ("<nav><a href=\"#run\">Run</a><a href=\"#statistics\">Operators and APIs</a><a href=\"#iterations\">"
        "Iterations</a><a href=\"#advice\">Advice</a><a href=\"#open\">Timeline and database</a></nav>")
_CSS = """
body{margin:0;background:#f5f6f8;color:#1f2933;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:0 0 12px}h3{font-size:15px;margin:18px 0 6px}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:18px 20px;margin:18px 0}
.muted{color:#6b7785;font-weight:normal}code,pre{font:13px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{background:#f0f2f5;padding:10px;border-radius:6px;overflow:auto;white-space:pre-wrap}
pre.command{background:#1f2933;color:#e6edf3}
.tiles{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:10px}
.tile{flex:1 1 150px;border:1px solid #dde1e6;border-radius:6px;padding:8px 12px}
.tile .label{color:#6b7785;font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.tile .value{font-size:22px;font-weight:600}.tile.good .value{color:#1a7f37}.tile.bad .value{color:#c62828}
table{border-collapse:collapse;width:100%;font-size:14px;margin-top:10px}
th,td{padding:4px 8px;border-bottom:1px solid #e6e9ed;text-align:left}th{background:#f7f8fa}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.badtext{color:#c62828;font-weight:600}
.callout{border-left:4px solid;padding:6px 12px;margin:10px 0;border-radius:4px}
.callout.bad{border-color:#c62828;background:#fdecea}.callout.warn{border-color:#b7791f;background:#fff8e1}
.callout ul{margin:4px 0 0;padding-left:20px}
.advice{border:1px solid #dde1e6;border-left:5px solid #3b6ea8;border-radius:6px;padding:10px 14px;margin:10px 0}
.advice.warning{border-left-color:#b7791f}.advice.error,.advice.critical{border-left-color:#c62828}
.advice p{margin:6px 0}.badge{display:inline-block;font-size:11px;text-transform:uppercase;padding:1px 7px;
border-radius:10px;background:#e3ecf7;color:#24507f}.advice.warning .badge{background:#fff1cc;color:#7a5200}
.advice.error .badge,.advice.critical .badge{background:#fdecea;color:#a01e1e}
ul.files{columns:2}nav a{margin-right:16px}
table.evidence{width:auto;font-size:13px;margin-top:4px}table.evidence caption{text-align:left;color:#6b7785;
font-size:12px;text-transform:uppercase;letter-spacing:.04em}table.evidence th{background:none;font-weight:normal;
color:#6b7785}table.evidence td{white-space:normal}
"""
