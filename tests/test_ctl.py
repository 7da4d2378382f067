"""Collection windows: the schedule, the control file, the windows stage and `pipeline ctl` on a live job."""

from __future__ import annotations

import csv
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pipeline_runs import pipeline_env, read_report, run_cli
from test_launch import APP, launch_config

from pipeline.errors import UserError
from pipeline.stage import StageContext
from pipeline.windows import Schedule, read_control, update_control
from stages.schema import SymbolTable
from stages.sinks._format import us_to_ns
from stages.sinks.windows import WindowsSink
from stages.tables import pack_columns

WINDOWS_STAGE = "stages.sinks.windows:WindowsSink"


# -- the schedule ---------------------------------------------------------------------------------

def _expanded(schedule: Schedule, steps: int) -> list[tuple[str, int]]:
    """torch_npu's schedule written out step by step: skip_first, then (wait, warmup, active) × repeat."""
    phases: list[tuple[str, int]] = [("skip", 0)] * schedule.skip_first
    cycle = 0
    while len(phases) < steps and (schedule.repeat == 0 or cycle < schedule.repeat):
        cycle += 1
        phases += [("wait", cycle)] * schedule.wait + [("warmup", cycle)] * schedule.warmup
        phases += [("active", cycle)] * schedule.active
    return (phases + [("done", 0)] * steps)[:steps]


@given(st.integers(0, 4), st.integers(0, 3), st.integers(0, 3), st.integers(1, 4), st.integers(0, 3))
def test_schedule_phases_follow_torch_npus_definition(skip_first: int, wait: int, warmup: int, active: int,
                                                      repeat: int) -> None:
    schedule = Schedule(wait=wait, active=active, warmup=warmup, skip_first=skip_first, repeat=repeat)
    assert [schedule.phase(step) for step in range(60)] == _expanded(schedule, 60)


@pytest.mark.parametrize("settings", [{"wait": 1, "active": 0}, {"wait": -1, "active": 1},
                                      {"wait": 0, "active": 1, "repeat": -2}])
def test_a_schedule_that_cannot_collect_is_refused(settings: dict[str, int]) -> None:
    with pytest.raises(UserError):
        Schedule(**settings)


# -- the control file -----------------------------------------------------------------------------

def test_windows_open_and_close_in_order_and_survive_the_file(tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    update_control(path, lambda c: c.open_window(100))
    with pytest.raises(UserError, match="still open"):
        update_control(path, lambda c: c.open_window(150))  # a forgotten stop
    scheduled = update_control(path, lambda c: c.open_window(160, Schedule(wait=1, active=2)))
    closed = update_control(path, lambda c: c.close_window(200))
    assert (closed.id, closed.end_ns) == (scheduled.id, 200)  # the newest open one
    update_control(path, lambda c: c.close_window(300, window_id=1))
    with pytest.raises(UserError, match="no window is open"):
        update_control(path, lambda c: c.close_window(400))
    windows = read_control(path).windows
    assert [(w.id, w.start_ns, w.end_ns, w.schedule) for w in windows] == \
        [(1, 100, 300, None), (2, 160, 200, Schedule(wait=1, active=2))]
    assert windows[0].contains(100) and windows[0].contains(299) and not windows[0].contains(300)


def test_a_damaged_control_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    path.write_text('{"version": 1, "windows": [{"id": 1}]}')
    with pytest.raises(UserError, match="not a control file"):
        read_control(path)
    path.write_text("{")
    with pytest.raises(UserError, match="not JSON"):
        read_control(path)


def test_concurrent_ctl_processes_lose_no_window(tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    script = ("import sys, time; from pathlib import Path; from pipeline.windows import update_control\n"
              "for _ in range(15):\n"
              "    update_control(Path(sys.argv[1]), lambda c: c.open_window(time.time_ns(), __import__("
              "'pipeline.windows').windows.Schedule(wait=0, active=1)))\n")
    children = [subprocess.Popen([sys.executable, "-c", script, str(path)]) for _ in range(4)]
    assert all(child.wait(timeout=120) == 0 for child in children)
    windows = read_control(path).windows
    assert sorted(w.id for w in windows) == list(range(1, 61))


# -- the windows stage, fed scripted batches ------------------------------------------------------

def _task(symbols: SymbolTable, iteration: int, start: int, duration: int, op_type: str) -> list[Any]:
    row: list[Any] = [0, 1, iteration, 2, 7, 0, start, start + duration, symbols.intern(f"{op_type}_1"),
                      symbols.intern(op_type), symbols.intern("AI_CORE"), symbols.intern("static"), 1, None, 0, 9]
    return row + [0] * 6 + [[], 4294967295, symbols.intern(f"{op_type}_kernel"), symbols.intern("KERNEL_AICORE"),
                            symbols.intern("NO")]


def _stat_rows(path: Path) -> dict[str, tuple[int, str]]:
    with open(path, newline="") as handle:
        return {r["OP Type"]: (int(r["Count"]), r["Total Time(us)"]) for r in csv.DictReader(handle)}


def test_the_stage_counts_tasks_by_their_start_whenever_they_arrive(tmp_path: Path) -> None:
    control = tmp_path / "control.json"
    sink = WindowsSink({"refresh_s": 0, "schedule": {"skip_first": 1, "wait": 1, "active": 2, "repeat": 2}},
                       StageContext("windows", "test", tmp_path, export_stamp="20240101000000"))
    sink.open()
    symbols = SymbolTable()
    # Steps 1..8, 1000 ns apart; each runs one Conv2D (100 ns) and one Relu (10 ns).
    tasks = [_task(symbols, it, it * 1000 + k * 200, 100 if k == 0 else 10, "Conv2D" if k == 0 else "Relu")
             for it in range(1, 9) for k in (0, 1)]
    update_control(control, lambda c: c.open_window(2500))  # window 1: Conv2D of steps 3-5, Relu of 3-4
    update_control(control, lambda c: c.close_window(5100))
    update_control(control, lambda c: c.open_window(3100, Schedule(wait=0, active=1, repeat=2)))
    late, early = tasks[6:], tasks[:6]  # rows arrive out of time order: the window still gets them
    sink.write_batch(pack_columns("task", late, "tasks", {"symbols": symbols.take_unsent()}))
    sink.write_batch(pack_columns("task", early, "tasks"))
    api_symbols = [[100, "aclmdlExecute"]]
    sink.write_batch(pack_columns("api", [[2400, 2450, 20000, 0, 100, 9, 1, 0], [2600, 2700, 20000, 0, 100, 9, 2, 0]],
                               "tasks", {"symbols": api_symbols}))
    sink.close()

    out = tmp_path / "windows"
    assert _stat_rows(out / "1" / "op_statistic_20240101000000.csv") == \
        {"Conv2D": (3, "0.3"), "Relu": (2, "0.02")}
    with open(out / "1" / "api_statistic_20240101000000.csv", newline="") as handle:
        assert [(r["API Name"], r["Count"], r["Time(us)"]) for r in csv.DictReader(handle)] == \
            [("aclmdlExecute", "1", "0.1")]
    # The config's schedule: step 0 = iteration 1 skipped; cycles of wait 1, active 2: iterations 3-4, 6-7.
    job = out / "schedule"
    assert _stat_rows(job / "cycle_1" / "op_statistic_20240101000000.csv") == {"Conv2D": (2, "0.2"),
                                                                               "Relu": (2, "0.02")}
    assert _stat_rows(job / "op_statistic_20240101000000.csv") == {"Conv2D": (4, "0.4"), "Relu": (4, "0.04")}
    # Window 2 opens at 3100: iteration 3 had started before, so its steps begin at iteration 4.
    status = {w["id"]: w for w in json.loads((out / "windows.json").read_text())["windows"]}
    assert status["2"]["first_step"] == 4
    assert status["2"]["cycles"] == {"1": {"steps": [4, 4], "tasks": 2}, "2": {"steps": [5, 5], "tasks": 2}}
    assert status["schedule"]["cycles"]["2"]["steps"] == [6, 7]
    assert status["1"]["tasks"] == 5 and status["1"]["api_calls"] == 1
    # The job ended: window 2 (and the schedule) closed with it, so a next run's tasks are not counted in it,
    # and a window without rows of that run gets no file.
    windows = read_control(control).windows
    assert [w.id for w in windows if w.is_open] == [] and windows[1].end_ns is not None
    after = WindowsSink({"refresh_s": 0}, StageContext("windows", "test", tmp_path, export_stamp="20240101000100"))
    after.open()
    fresh = SymbolTable()  # the next run's aggregator
    later = [_task(fresh, it, windows[1].end_ns + it * 1000, 100, "Conv2D") for it in range(1, 3)]
    after.write_batch(pack_columns("task", later, "tasks", {"symbols": fresh.take_unsent()}))
    after.close()
    assert not list(out.glob("*/*_20240101000100.csv"))


def test_an_endless_schedule_keeps_only_max_cycles_folders(tmp_path: Path) -> None:
    sink = WindowsSink({"refresh_s": 0, "max_cycles": 2, "schedule": {"wait": 0, "active": 1}},
                       StageContext("windows", "test", tmp_path, export_stamp="20240101000000"))
    sink.open()
    symbols = SymbolTable()
    rows = [_task(symbols, it, it * 1000, 100, "Conv2D") for it in range(1, 6)]
    sink.write_batch(pack_columns("task", rows, "tasks", {"symbols": symbols.take_unsent()}))
    sink.close()
    job = tmp_path / "windows" / "schedule"
    assert sorted(p.name for p in job.iterdir() if p.is_dir()) == ["cycle_1", "cycle_2"]
    assert _stat_rows(job / "op_statistic_20240101000000.csv") == {"Conv2D": (5, "0.5")}
    status = json.loads((tmp_path / "windows" / "windows.json").read_text())["windows"][0]
    assert status["tasks"] == 5 and status["tasks_in_cycles_beyond_max_cycles"] == 3


# -- pipeline ctl ---------------------------------------------------------------------------------

def test_ctl_refuses_a_folder_without_a_run_and_an_ended_run(tmp_path: Path) -> None:
    result = run_cli("ctl", "start", str(tmp_path), timeout=60)
    assert result.returncode == 2 and "no run has used" in result.stderr
    (tmp_path / "run.json").write_text("{}")
    time.sleep(0.01)
    (tmp_path / "run_report.json").write_text("{}")
    result = run_cli("ctl", "stop", str(tmp_path), timeout=60)
    assert result.returncode == 2 and "has ended" in result.stderr
    assert not (tmp_path / "control.json").exists()
    forced = run_cli("ctl", "start", str(tmp_path), "--force", timeout=60)
    assert forced.returncode == 0, forced.stderr
    assert [w.id for w in read_control(tmp_path / "control.json").windows] == [1]
    status = run_cli("ctl", "status", str(tmp_path), "--json", timeout=60)
    assert json.loads(status.stdout)["windows"][0]["open"] is True


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _ctl(*args: str) -> None:
    result = run_cli("ctl", *args, timeout=120)
    assert result.returncode == 0, result.stderr


def _wait_for(condition: Any, what: str, proc: subprocess.Popen[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _status(out: Path) -> dict[str, dict[str, Any]]:
    try:
        return {w["id"]: w for w in json.loads((out / "windows" / "windows.json").read_text())["windows"]}
    except (FileNotFoundError, ValueError):
        return {}


def _truth_written_ns(out: Path) -> int:
    try:
        return (out / "profiling" / "simulator_truth.json").stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def _app_images(out: Path) -> int:
    """Images the simulated app has run (its truth file, rewritten every simulated second)."""
    try:
        return int(json.loads((out / "profiling" / "simulator_truth.json").read_text())["iterations"])
    except (FileNotFoundError, ValueError, KeyError):
        return 0


@pytest.mark.slow
def test_ctl_opens_and_closes_windows_of_a_running_job(tmp_path: Path) -> None:
    config = launch_config(tmp_path, f"""  windows: {{type: "{WINDOWS_STAGE}", inputs: [aggregate.tasks],
             refresh_s: 0.2, schedule: {{skip_first: 1, wait: 1, warmup: 1, active: 2, repeat: 2}}}}
""")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off", "--", *APP,
                             "--iterations", "100000", "--mark-every", "0"], env=pipeline_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:  # paced by the app's progress, not the pipeline's: a loaded machine may parse far behind
        _wait_for(lambda: _app_images(out) >= 20, "the app's first images", proc)
        _ctl("start", str(out))
        time.sleep(1.0)
        _ctl("stop", str(out))
        _ctl("schedule", str(out), "--wait", "1", "--active", "3", "--repeat", "1")
        scheduled_ns = time.time_ns()
        # Two rewrites of the truth file later, the app has run a simulated second past the window's start.
        _wait_for(lambda: _truth_written_ns(out) > scheduled_ns, "the app's next second", proc)
        first_rewrite = _truth_written_ns(out)
        _wait_for(lambda: _truth_written_ns(out) > first_rewrite, "the app's second after that", proc)
        proc.send_signal(signal.SIGINT)  # the app stops; the pipeline drains
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    report = read_report(out)
    assert report["problems"] == [], stderr[-3000:]

    output = out / "mindstudio_profiler_output"
    summary = _csv_rows(next(output.glob("op_summary_*.csv")))
    windows = {w.id: w for w in read_control(out / "control.json").windows}
    timed = windows[1]
    assert timed.end_ns is not None and timed.end_ns - timed.start_ns >= 1_000_000_000

    # Window 1 holds exactly the tasks of op_summary that start inside it, whenever they arrived.
    expected: Counter[tuple[str, str]] = Counter()
    expected_ns: Counter[tuple[str, str]] = Counter()
    for row in summary:
        start = us_to_ns(row["Task Start Time(us)"])
        if timed.contains(start):
            expected[(row["OP Type"], row["Task Type"])] += 1
            expected_ns[(row["OP Type"], row["Task Type"])] += us_to_ns(row["Task Duration(us)"])
    assert sum(expected.values()) > 0
    folder = out / "windows" / "1"
    got = {(r["OP Type"], r["Core Type"]): r for r in _csv_rows(next(folder.glob("op_statistic_*.csv")))}
    assert {key: int(r["Count"]) for key, r in got.items()} == dict(expected)
    assert {key: us_to_ns(r["Total Time(us)"]) for key, r in got.items()} == dict(expected_ns)

    # Its API calls are the database's CANN_API rows that start inside it.
    db = sqlite3.connect(next(out.glob("msprof_*.db")))
    api_expected = Counter(name for name, start in db.execute(
        "SELECT s.value, a.startNs FROM CANN_API a JOIN STRING_IDS s ON a.name = s.id") if timed.contains(start))
    db.close()
    api_got: Counter[str] = Counter()
    for row in _csv_rows(next(folder.glob("api_statistic_*.csv"))):
        api_got[row["API Name"]] += int(row["Count"])
    assert api_got == api_expected and api_got["aclmdlExecute"] > 0

    # Scheduled windows keep whole steps: each active step runs every op of the model once.
    truth = json.loads((out / "profiling" / "simulator_truth.json").read_text())
    per_image = {t["op_type"]: t["count"] // truth["iterations"] for t in truth["op_statistic"]}
    status = _status(out)
    job = status["schedule"]
    assert {c: info["steps"] for c, info in job["cycles"].items()} == {"1": [4, 5], "2": [8, 9]}
    live = status["2"]
    assert live["first_step"] > 1 and live["cycles"]["1"]["steps"] == [live["first_step"] + 1,
                                                                       live["first_step"] + 3]
    for folder, steps in ((out / "windows" / "schedule" / "cycle_2", 2), (out / "windows" / "2" / "cycle_1", 3)):
        counts: Counter[str] = Counter()
        for row in _csv_rows(next(folder.glob("op_statistic_*.csv"))):
            counts[row["OP Type"]] += int(row["Count"])
        assert counts == {op: n * steps for op, n in per_image.items()}, folder

    shown = run_cli("ctl", "status", str(out), timeout=60)
    assert shown.returncode == 0 and "cycle 1: steps" in shown.stdout
    by_file = run_cli("ctl", "status", str(out / "control.json"), timeout=60)  # the same counts from its file
    assert by_file.returncode == 0 and by_file.stdout == shown.stdout
    assert not any(window.is_open for window in windows.values())  # the schedule closed with the job
