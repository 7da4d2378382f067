"""report.html: written at the end of a real `pipeline import` and by `pipeline report`, checked against the
run's own files and in a real headless Chromium (screenshot, console, drawn charts). The browser checks skip,
saying why, where no Chromium is installed (Debian's package `chromium`)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import struct
import subprocess
from collections import defaultdict
from decimal import Decimal
from html import escape
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import run_cli

from pipeline.html_report import MAX_POINTS, TOP_N, bucket_maxima
from stages.simulator.run import simulate

pytestmark = pytest.mark.slow

ITERATIONS = 30
WINDOW = (1280, 3600)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A simulated cloud-chip board (step trace, msproftx, advice) parsed by a real `pipeline import`."""
    root = tmp_path_factory.mktemp("html_report")
    prof = simulate(root / "board", chip="cloud", iterations=ITERATIONS, rate="max", seed=11)
    out = root / "out"
    result = run_cli("import", str(prof), "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    return {"out": out, "stdout": result.stdout, "page": (out / "report.html").read_text(encoding="utf-8")}


def _summary(out: Path, module: str) -> Path:
    (path,) = (out / "mindstudio_profiler_output").glob(f"{module}_*.csv")
    return path


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [{k: v.strip() for k, v in row.items()} for row in csv.DictReader(handle)]


def _traces(page: str, div_id: str) -> list[dict[str, Any]]:
    """The data plotly draws in one chart: the JSON array passed to Plotly.newPlot for ``div_id``."""
    call = re.search(rf'Plotly\.newPlot\(\s*"{div_id}",\s*', page)
    assert call, f"no chart {div_id} in the page"
    data, _ = json.JSONDecoder().raw_decode(page, call.end())
    assert isinstance(data, list)
    return data


def test_import_ends_by_writing_a_self_contained_report(imported: dict[str, Any]) -> None:
    out: Path = imported["out"]
    assert f"report: {out / 'report.html'} (open it in a browser)" in imported["stdout"].splitlines()
    page: str = imported["page"]
    assert not re.search(r"<script[^>]*\bsrc=", page), "a script loaded from elsewhere"
    assert not re.search(r"<link[^>]*stylesheet", page), "a stylesheet loaded from elsewhere"
    assert "Plotly.newPlot" in page and "plotly.js" in page.lower()  # plotly.js itself is in the page
    assert page.count("Plotly.newPlot(") == 3


def test_bar_charts_hold_the_statistics_files(imported: dict[str, Any]) -> None:
    out: Path = imported["out"]
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for row in _csv_rows(_summary(out, "op_statistic")):
        totals[f"{row['OP Type']} ({row['Core Type']})"] += Decimal(row["Total Time(us)"])
    expected = sorted(totals.items(), key=lambda item: -item[1])[:TOP_N]
    (bars,) = _traces(imported["page"], "chart-operators")
    shown = dict(zip(bars["y"], bars["x"], strict=True))
    assert list(shown) == [label for label, _ in reversed(expected)]  # the longest at the top
    assert shown == pytest.approx({label: float(total) / 1000 for label, total in expected})

    apis = {f"{row['API Name']} ({row['Level']})": float(row["Time(us)"]) / 1000
            for row in _csv_rows(_summary(out, "api_statistic"))}
    (api_bars,) = _traces(imported["page"], "chart-apis")
    top = dict(sorted(apis.items(), key=lambda item: -item[1])[:TOP_N])
    assert dict(zip(api_bars["y"], api_bars["x"], strict=True)) == pytest.approx(top)


def test_line_chart_holds_every_iteration_of_the_step_trace(imported: dict[str, Any]) -> None:
    rows = _csv_rows(_summary(imported["out"], "step_trace"))
    assert len(rows) == ITERATIONS
    (line,) = _traces(imported["page"], "chart-iterations")
    assert line["x"] == [int(row["Iteration ID"]) for row in rows]
    assert line["y"] == pytest.approx([float(row["Iteration Time(us)"]) / 1000 for row in rows])


def test_summary_advice_and_how_to_open_the_timeline_and_database(imported: dict[str, Any]) -> None:
    out: Path = imported["out"]
    page: str = imported["page"]
    report = json.loads((out / "run_report.json").read_text())
    assert report["run_id"] in page and "completed" in page
    collected = report["stages"]["collect"]["accounting"]["records_collected"]
    assert f"{collected:,}" in page
    advice = json.loads((out / "advice.json").read_text())["advice"]
    assert advice, "the simulated board should draw advice"
    for item in advice:
        assert escape(item["title"]) in page
        for key in item["evidence"]:
            assert f"<th>{escape(key)}</th>" in page
    (database,) = out.glob("msprof_*.db")
    assert f"datasette {database.resolve()}" in page
    (timeline,) = (out / "mindstudio_profiler_output").glob("msprof_*.json")
    assert 'href="https://ui.perfetto.dev"' in page and str(timeline.resolve()) in page
    assert f'href="mindstudio_profiler_output/{timeline.name}"' in page  # relative: the folder can move


def test_report_verb_rewrites_the_page_elsewhere(imported: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "pages" / "run.html"
    result = run_cli("report", str(imported["out"]), "--html", str(target))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == f"report: {target} (open it in a browser)"
    page = target.read_text(encoding="utf-8")
    (timeline,) = (imported["out"] / "mindstudio_profiler_output").glob("msprof_*.json")
    expected = os.path.relpath(timeline, target.parent)
    assert f'href="{expected}"' in page


def test_report_of_msprof_style_statistics_alone_escapes_what_the_data_says(tmp_path: Path) -> None:
    summaries = tmp_path / "mindstudio_profiler_output"
    summaries.mkdir()
    hostile = "<script>alert(1)</script>"
    (summaries / "op_statistic_20260101000000.csv").write_text(
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        f"0,{hostile},AI_CORE,2,30.5,10,15.25,20.5,75\n0,MatMul,AI_CORE,1,10,10,10,10,25\n")
    result = run_cli("report", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert hostile not in page
    (bars,) = _traces(page, "chart-operators")
    assert bars["y"] == ["MatMul (AI_CORE)", f"{hostile} (AI_CORE)"] and bars["x"] == [0.01, 0.0305]
    assert "No run_report.json here" in page and "No step_trace file" in page and "No findings" in page
    assert "chart-apis" not in page and "chart-iterations" not in page


def test_an_export_beside_an_earlier_run_links_its_own_database(tmp_path: Path) -> None:
    """`pipeline export db` into a folder holding an earlier run's summaries: the statistics are the earlier
    run's (the newest there), the database the export's own."""
    summaries = tmp_path / "mindstudio_profiler_output"
    summaries.mkdir()
    (summaries / "op_statistic_20260101000000.csv").write_text(
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "0,MatMul,AI_CORE,1,10,10,10,10,100\n")
    (tmp_path / "msprof_20260101000000.db").write_bytes(b"")
    (tmp_path / "msprof_20260202000000.db").write_bytes(b"")
    (tmp_path / "run_report.json").write_text(json.dumps({"run_id": "export-1", "stamp": "20260202000000",
                                                          "state": "completed", "wall_s": 1.5, "stages": {}}))
    result = run_cli("report", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"datasette {tmp_path.resolve() / 'msprof_20260202000000.db'}" in page
    assert "msprof_20260101000000.db" not in page and "op_statistic_20260101000000.csv" in page


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_report_of_a_folder_without_results_is_one_line(tmp_path: Path, make: str) -> None:
    target = tmp_path / "nothing"
    if make == "empty":
        target.mkdir()
    result = run_cli("report", str(target))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: report: {target} ") and "Traceback" not in result.stderr
    assert not (target / "report.html").exists()


def test_bucket_maxima_keep_the_slowest_iteration_of_each_bucket() -> None:
    xs = list(range(1, 3 * MAX_POINTS + 2))
    ys = [float(x % 7) for x in xs]
    ys[12345] = 99.0  # an outlier
    kept_x, kept_y, size = bucket_maxima(xs, ys)
    assert size == 4 and len(kept_x) <= MAX_POINTS
    assert 99.0 in kept_y and kept_x[kept_y.index(99.0)] == xs[12345]
    assert kept_x == sorted(kept_x)
    assert bucket_maxima(xs[:10], ys[:10]) == (xs[:10], ys[:10], 1)


# --- in a real browser -------------------------------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on this machine (Debian: apt-get install chromium): report.html is not opened in a "
                "browser here")


def _browse(page: Path, profile: Path, *action: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` (fresh profile, no network of its own), its console on stderr."""
    command = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
               f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=10000", *action, page.as_uri()]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _console(stderr: str) -> list[str]:
    """What the page said on its console (Chromium logs each message as a CONSOLE line); a quiet page says
    nothing, so any line, an error or not, is reported."""
    return re.findall(r":CONSOLE[^\]]*\] (.*)", stderr)


def _chart_dom(dom: str, div_id: str) -> str:
    start = dom.index(f'id="{div_id}"')
    following = dom.find('id="chart-', start + 1)
    return dom[start:following if following > 0 else len(dom)]


def test_chromium_draws_every_chart_with_a_quiet_console(imported: dict[str, Any], tmp_path: Path) -> None:
    page = imported["out"] / "report.html"
    loaded = _browse(page, tmp_path / "profile", "--dump-dom")
    assert _console(loaded.stderr) == []
    dom = loaded.stdout
    operators = _traces(imported["page"], "chart-operators")[0]["y"]
    for div_id in ("chart-operators", "chart-apis", "chart-iterations"):
        assert 'class="main-svg"' in _chart_dom(dom, div_id), f"{div_id} was not drawn"
    drawn_bars = re.findall(r'<g class="point"><path d="M[^"]+"', _chart_dom(dom, "chart-operators"))
    assert len(drawn_bars) == len(operators)
    assert re.search(r'class="js-line"[^>]*d="M[^"]+"|d="M[^"]+"[^>]*class="js-line"',
                     _chart_dom(dom, "chart-iterations")), "no iteration line drawn"


def test_chromium_screenshot_of_the_report(imported: dict[str, Any], tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    taken = _browse(imported["out"] / "report.html", tmp_path / "profile", f"--screenshot={shot}")
    assert _console(taken.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == WINDOW
    assert len(data) > 100_000  # text, tables and charts; a blank page of this size compresses to a few KB
