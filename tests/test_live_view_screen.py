"""The live view on real terminals (tmux panes of 80×24 and 160×45, read back with capture-pane while the demo
runs), the view's layout at many sizes, `pipeline top` of a run that has ended, `pipeline ctl` on a run without
a windows stage."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import ROOT, pipeline_env, read_report, run_cli, stage_config
from rich.console import Console
from rich.live_render import LiveRender

from pipeline.views import render_view

ESSENTIAL_HEADERS = ("stage", "state", "in/s", "out/s", "rejected", "lag")
CUT_NUMBER = re.compile(r"\d…|…\d|\d\.\.\.|^\s*\.\.\.\s*$")  # a number cut short, or rich's "rows left out" line
OP_ROW = re.compile(r"^\s*(\d+\s+)?[A-Za-z][\w.]*\s.*\d[\d,]*\s+[\d,]+\s.*\d+\.\d\s*$")
OPS_TITLE = "operators by device time"
SCREEN_WAIT_S = 240  # the demo runs for about a minute; a loaded machine is slower


# -- on real terminals ------------------------------------------------------------------------

class Pane:
    """A tmux pane of a fixed size on a tmux server of its own, running one command."""

    def __init__(self, name: str, width: int, height: int, command: list[str], env: dict[str, str]) -> None:
        self.server = ["tmux", "-L", f"{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"]  # a server of its own
        self.width, self.height = width, height
        shell = f"cd {shlex.quote(str(ROOT))} && {shlex.join(command)}; echo pane-command-exit=$?; sleep 600"
        # the server's environment is the command's: without COLUMNS and LINES (pytest's), which would fix the size
        env = {key: value for key, value in env.items() if key not in ("COLUMNS", "LINES")}
        subprocess.run([*self.server, "-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y", str(height),
                        shell], check=True, env=env)
        size, self.socket = subprocess.run(
            [*self.server, "display-message", "-p", "#{window_width}x#{window_height}\n#{socket_path}"],
            capture_output=True, text=True, check=True).stdout.splitlines()
        assert size == f"{width}x{height}", size

    def screen(self, history: bool = False) -> list[str]:
        """The pane's lines as shown (``history``: from the top of its scrollback), wrapped lines joined."""
        start = ["-S", "-"] if history else []
        shown = subprocess.run([*self.server, "capture-pane", "-p", "-J", *start], capture_output=True, text=True,
                               check=True).stdout
        return shown.splitlines()

    def wait_for(self, ready: Any, what: str) -> list[str]:
        deadline = time.monotonic() + SCREEN_WAIT_S
        while time.monotonic() < deadline:
            lines = self.screen()
            if ready(lines):
                return lines
            time.sleep(0.3)
        raise AssertionError(f"the pane never showed {what}:\n" + "\n".join(self.screen()))

    def close(self) -> None:
        subprocess.run([*self.server, "kill-server"], capture_output=True)
        Path(self.socket).unlink(missing_ok=True)  # tmux leaves it behind


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Any]:
    """`pipeline run configs/live.yaml` (the demo) in a pane of the size asked for."""
    panes: list[Pane] = []

    def start(width: int, height: int) -> Pane:
        env = {**pipeline_env(), "OUT_DIR": str(tmp_path / "out"), "TERM": "xterm-256color"}
        pane = Pane("live-view", width, height, [sys.executable, "-m", "pipeline", "run", "configs/live.yaml"], env)
        panes.append(pane)
        return pane

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the live view is read back from a tmux pane")
    yield start
    for pane in panes:
        pane.close()


def _ops_shown(lines: list[str]) -> list[str]:
    """The operator rows on the screen (below the operator table's title and its header rule)."""
    start = next((index for index, line in enumerate(lines) if line.startswith(OPS_TITLE)), None)
    if start is None:
        return []
    rows = []
    for line in lines[start + 3:]:
        if not OP_ROW.match(line):
            break
        rows.append(line)
    return rows


def _mid_demo(min_ops: int, advice: bool) -> Any:
    def ready(lines: list[str]) -> bool:
        header = lines[0] if lines else ""
        return ("running" in header and len(_ops_shown(lines)) >= min_ops
                and (not advice or any(line.startswith("advice") for line in lines)))
    return ready


def _cell(lines: list[str], header: str, row_start: str) -> str:
    """The cell under a right-aligned column ``header`` in the row that starts with ``row_start``."""
    head = next(line for line in lines if re.match(r"^stage\s+", line))
    end = re.search(rf"(?<!\S){re.escape(header)}(?!\S)", head)
    assert end is not None, head
    row = next(line for line in lines if line.startswith(row_start + " "))
    return row[:end.end()].split()[-1]


def _check_screen(lines: list[str], width: int, height: int) -> None:
    assert len(lines) <= height
    assert all(len(line) <= width for line in lines), "\n".join(lines)  # joined with -J: no line wrapped
    assert not [line for line in lines if CUT_NUMBER.search(line)], "\n".join(lines)
    head = next(line for line in lines if re.match(r"^stage\s+", line)).split()
    assert all(name in head for name in ESSENTIAL_HEADERS), head
    for stage in ("board", "collect", "decode", "aggregate", "timeline", "summary", "db", "top", "advice"):
        assert any(line.startswith(stage + " ") for line in lines), (stage, "\n".join(lines))


@pytest.mark.slow
def test_live_view_at_80x24_mid_demo_then_the_report_fits(demo: Any) -> None:
    pane = demo(80, 24)
    lines = pane.wait_for(_mid_demo(min_ops=5, advice=False), "five operator rows while the demo runs")
    _check_screen(lines, 80, 24)
    assert len(_ops_shown(lines)) >= 5
    assert int(_cell(lines, "records", "board").replace(",", "")) > 0  # the board counts what it wrote
    assert any(word in lines[0] for word in ("lag ", "advice: ", "checkpoint ")), lines[0]
    pane.wait_for(lambda shown: any(line.startswith("pane-command-exit=") for line in shown), "the run's end")
    history = pane.screen(history=True)
    assert "pane-command-exit=0" in history, "\n".join(history)
    start = next(index for index, line in enumerate(history) if re.match(r"run \S+: completed in ", line))
    end = next(index for index, line in enumerate(history) if line.strip() == "all counts reconcile")
    report = history[start:end + 1]
    assert all(len(line) <= 80 for line in report), "\n".join(report)  # joined with -J: no line wrapped
    assert re.match(r"\s+stage\s+.*\bin\s+out\s+rejected\b", report[1]), report[1]


@pytest.mark.slow
def test_live_view_at_160x45_mid_demo_has_every_column_and_the_advice(demo: Any) -> None:
    pane = demo(160, 45)
    # the operator table gets the lines the stage table and the advice leave: more findings, fewer rows
    lines = pane.wait_for(_mid_demo(min_ops=8, advice=True), "eight operator rows and the advice")
    _check_screen(lines, 160, 45)
    head = next(line for line in lines if re.match(r"^stage\s+", line)).split()
    assert {"role", "in", "out", "MB"} <= set(head), head
    ops_head = lines[next(i for i, line in enumerate(lines) if line.startswith(OPS_TITLE)) + 1].split()
    assert {"core", "avg", "min", "max"} <= set(ops_head), ops_head
    assert int(_cell(lines, "out", "board").replace(",", "")) > 0  # the board counts what it wrote
    assert lines[0].startswith("run ") and "running" in lines[0]


# -- the layout at many sizes -----------------------------------------------------------------

def _view() -> dict[str, Any]:
    """A snapshot like the demo's, with wide figures (millions of records, long statuses)."""
    roles = {"board": "source", "collect": "source", "decode": "transform", "aggregate": "transform",
             "timeline": "sink", "summary": "sink", "db": "sink", "top": "sink", "advice": "sink"}
    inputs = {"decode": ["collect.out"], "aggregate": ["decode.out"], "timeline": ["aggregate.tasks"],
              "summary": ["aggregate.tasks", "aggregate.stats"], "db": ["aggregate.tasks", "aggregate.stats"],
              "top": ["aggregate.stats"], "advice": ["aggregate.stats", "aggregate.tasks"]}
    ports = {"collect": {"out": 9_876_543}, "decode": {"out": 9_123_456},
             "aggregate": {"tasks": 3_456_789, "stats": 1_234}}
    stages = {}
    for index, (sid, role) in enumerate(roles.items()):
        out_ports = ports.get(sid, {})
        stages[sid] = {"role": role, "in": 0 if role == "source" else 9_000_000 - index * 1_000_003,
                       "out": sum(out_ports.values()) or 9_999_999, "out_ports": out_ports,
                       "inputs": inputs.get(sid, []), "rejected": 12_345 if sid == "decode" else 0,
                       "rate_in": 123_456.7, "rate_out": 98_765.4, "progress": {"lag_s": 3.25} if
                       sid == "aggregate" else {}, "rss_mb": 1234.0,
                       "status": "waiting for 'aggregate' to read (12 s)" if sid == "decode" else "running",
                       "restarts": 0}
    ops = [[0, f"OperatorType{index:02d}", "AI_CORE", 1_000_000 + index, 9_876_543_210_000 - index * 10**9,
            1_234, 987_654_321] for index in range(25)]
    advice = [{"severity": "warning", "title": "10.0 TransData tasks per model execution (15,000 in 1,500)",
               "suggestion": "please check and reduce the transData: feed each operator the layout it computes in. "
                             "More.", "rule": "transdata"}]
    return {"run_id": "live-20260101000000-abcdef", "state": "running", "elapsed_s": 12.5, "stages": stages,
            "stats": {"ops": ops, "advice": advice}, "checkpoint": {"epoch": 3, "recovery": "on", "restarts": 0}}


def _drawn(view: dict[str, Any], width: int, height: int) -> list[str]:
    console = Console(width=width, height=height, force_terminal=True, color_system=None)
    with console.capture() as captured:
        console.print(LiveRender(render_view(view)))  # as rich.live draws it: cut to the screen's height
    return captured.get().splitlines()


@pytest.mark.parametrize("width,height", [(68, 24), (80, 24), (100, 30), (120, 40), (160, 45), (220, 60)])
def test_every_size_keeps_numbers_whole_and_fits_the_screen(width: int, height: int) -> None:
    view = _view()
    lines = _drawn(view, width, height)
    assert len(lines) <= height and all(len(line) <= width for line in lines), "\n".join(lines)
    assert not [line for line in lines if CUT_NUMBER.search(line)], "\n".join(lines)
    text = "\n".join(lines)
    for figure in ("123,457", "98,765", "12,345"):  # rates and the rejected count, whole
        assert figure in text, text
    assert "9,999,999" in text or width < 80  # the board's records written (out, or records at 80 columns)
    shown = _ops_shown(lines)
    assert len(shown) >= 5, text
    assert len(shown) == 20 or len(lines) >= height - 1, text  # the operator table takes the lines left over
    assert any(line.rstrip() == "advice" for line in lines) == (width >= 100), text  # the advice panel's title
    assert ("advice: 1 warning" in lines[0]) == (width < 100), lines[0]  # or its count in the header


def test_the_view_off_a_screen_has_every_row() -> None:
    console = Console(width=200, height=10, force_terminal=False, color_system=None)
    with console.capture() as captured:
        console.print(render_view(_view(), fit_screen=False))
    assert len(_ops_shown(captured.get().splitlines())) == 20  # TOP_ROWS, whatever the height


# -- a run that has ended: `top` and `ctl` ------------------------------------------------------

@pytest.fixture(scope="module")
def ended_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short run with no windows stage, ended."""
    folder = tmp_path_factory.mktemp("ended")
    out = folder / "out"
    config = folder / "c.yaml"
    config.write_text(stage_config(out, iterations=30))
    result = run_cli("run", str(config), "--live", "off", timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return out


@pytest.mark.slow
def test_top_of_an_ended_run_shows_its_final_figures(ended_run: Path) -> None:
    report = read_report(ended_run)
    written = report["stages"]["board"]["accounting"]["records_written"]
    shown = run_cli("top", str(ended_run), "--json", "--timeout", "600", timeout=120)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["state"] == "ended" and view["outcome"] == "completed" and view["run_id"] == report["run_id"]
    assert view["stages"]["board"]["out"] == written > 0  # the board counts what it wrote
    assert view["stages"]["db"]["in"] == report["stages"]["db"]["in"] > 0
    assert {row[1] for row in view["stats"]["ops"]} >= {"Conv2D", "TransData"}
    table = run_cli("top", str(ended_run), "--timeout", "600", timeout=120)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith(f"run {report['run_id']} has ended (completed after "), table.stdout
    assert "Conv2D" in table.stdout and f"{written:,}" in table.stdout


@pytest.mark.slow
def test_ctl_refuses_a_run_without_a_windows_stage(ended_run: Path) -> None:
    for action in ("start", "status"):
        result = run_cli("ctl", action, str(ended_run), timeout=60)
        assert result.returncode == 2, result.stdout
        assert result.stderr.startswith(f"error: ctl: the run in {ended_run} has no windows stage"), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (ended_run / "control.json").exists()


@pytest.mark.slow
def test_top_of_an_ended_run_with_a_damaged_report_is_one_line(ended_run: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "out"
    shutil.copytree(ended_run, damaged)
    report = damaged / "run_report.json"
    report.write_text(report.read_text()[:200])  # cut off while it was written
    os.utime(report, (time.time() + 5, time.time() + 5))  # newer than run.json: the run has ended
    shown = run_cli("top", str(damaged), "--json", "--timeout", "600", timeout=120)
    assert shown.returncode == 2, shown.stdout
    assert shown.stderr.startswith(f"error: top: cannot read the ended run's report {report}"), shown.stderr
    assert "Traceback" not in shown.stderr and len(shown.stderr.strip().splitlines()) == 1
