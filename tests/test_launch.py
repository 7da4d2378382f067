"""`pipeline run CONFIG -- APP` and `pipeline acl-json`: the simulated application as a real profiled job."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import pipeline_env, read_report, run_cli

from pipeline.config import load_config
from pipeline.launch import combined_exit_code, exit_status
from pipeline.plugins import load_stage_class
from stages.formats import raw
from stages.sinks.windows import WindowsSink

APP = [sys.executable, "-m", "stages.simulator.app"]


def launch_config(tmp_path: Path, extra_stages: str = "", collector_extra: str = "") -> Path:
    out = tmp_path / "out"
    config = tmp_path / "board.yaml"
    config.write_text(f"""
run: {{name: l{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", progress_s: 1}}
stages:
  collect: {{type: collector, path: elsewhere{collector_extra}}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.5}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
{extra_stages}""")
    return config


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {folder}, found {found}"
    return found[0]


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _timeline_events(out: Path) -> list[dict[str, Any]]:
    data = json.loads(_one(out / "mindstudio_profiler_output", "msprof_*.json").read_text())
    events: list[dict[str, Any]] = data if isinstance(data, list) else data["traceEvents"]
    return events


# -- acl.json and the environment ---------------------------------------------------------------

def test_acl_json_writes_the_profiler_section_and_keeps_other_sections(tmp_path: Path) -> None:
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"dump": {"dump_path": "/tmp/dump"}, "profiler": {"switch": "off"}}))
    result = run_cli("acl-json", str(path), "--output", str(tmp_path / "prof"), "--aic-metrics", "PipeUtilization",
                     "--aicpu", "off", "--interval", "2", "--msproftx", "on", timeout=60)
    assert result.returncode == 0, result.stderr
    written = json.loads(path.read_text())
    assert written["dump"] == {"dump_path": "/tmp/dump"}
    assert written["profiler"] == {"switch": "on", "output": str(tmp_path / "prof"), "aic_metrics": "PipeUtilization",
                                   "aicpu": "off", "acl_api": "on", "interval": "2", "msproftx": "on"}
    assert (tmp_path / "prof").is_dir()  # the runtime wants the output folder to exist


def test_acl_json_env_prints_exports_a_shell_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "acl.json"
    result = run_cli("acl-json", str(path), "--output", str(tmp_path / "prof"), "--switch", "off", "--env",
                     timeout=60)
    assert result.returncode == 0, result.stderr
    shell = subprocess.run(["sh", "-c", result.stdout + 'printf "%s\\n%s\\n%s" "$PIPELINE_ACL_JSON" '
                            '"$PROFILING_MODE" "$PROFILING_OPTIONS"'], capture_output=True, text=True, check=True)
    acl_json, mode, options = shell.stdout.split("\n")
    assert Path(acl_json) == path.resolve()
    assert mode == "false"
    assert json.loads(options)["output"] == str(tmp_path / "prof")
    assert json.loads(path.read_text())["profiler"]["switch"] == "off"


def test_acl_json_refuses_to_overwrite_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "acl.json"
    path.write_text("{not json")
    result = run_cli("acl-json", str(path), timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "is not JSON" in result.stderr
    assert path.read_text() == "{not json"


@pytest.mark.parametrize(("pipeline_code", "app_status", "expected"),
                         [(0, 0, 0), (1, 0, 1), (0, 3, 3), (1, 143, 143), (0, None, 0), (1, None, 1)])
def test_the_applications_status_wins_unless_it_succeeded(pipeline_code: int, app_status: int | None,
                                                          expected: int) -> None:
    assert combined_exit_code(pipeline_code, app_status) == expected


def test_a_signal_becomes_128_plus_its_number() -> None:
    assert exit_status(-signal.SIGTERM) == 128 + signal.SIGTERM
    assert exit_status(4) == 4


def test_usage_errors_are_one_line_and_start_nothing(tmp_path: Path) -> None:
    config = launch_config(tmp_path)
    for args, needle in ((["run", str(config), "--"], "nothing to launch"),
                         (["run", str(config), "--", "no-such-program-xyz"], "not on PATH"),
                         (["run", str(config), "--aicpu", "off"], "applies when launching"),
                         (["validate", str(config), "--", "python"], "only `pipeline run`")):
        result = run_cli(*args, timeout=60)
        assert result.returncode == 2, (args, result.stderr)
        assert needle in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "out" / "run.json").exists()


def test_the_board_config_is_valid_and_its_windows_stage_is_registered() -> None:
    root = Path(__file__).resolve().parents[1]
    group = (root / "pyproject.toml").read_text().split('[project.entry-points."ascend_pipeline.stages"]')[1]
    found = re.search(r'^windows = "([^"]+)"$', group.split("\n[", 1)[0], flags=re.MULTILINE)
    assert found is not None, "pyproject.toml registers no windows stage type"
    target = found.group(1)
    assert load_stage_class(target) is WindowsSink
    # The installed metadata may predate the entry point (pip install -e . registers it): name the class.
    config = load_config(root / "configs" / "board.yaml", {"stages.windows.type": target})
    kinds = {sid: spec.cls.__name__ for sid, spec in config.enabled_stages().items()}
    assert kinds["collect"] == "CollectorStage" and kinds["windows"] == "WindowsSink"
    assert not any(name == "SimulatorStage" for name in kinds.values())  # the application is the board


# -- end to end ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_run_launches_the_app_follows_its_profiling_output_and_passes_its_status_on(tmp_path: Path) -> None:
    config = launch_config(tmp_path)
    images = 40
    result = run_cli("run", str(config), "--live", "off", "--aic-metrics", "PipeUtilization", "--", *APP,
                     "--iterations", str(images), "--mark-every", "10", "--exit-code", "3")
    out = tmp_path / "out"
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    assert "application exited with status 3" in result.stdout

    acl = json.loads((out / "acl.json").read_text())["profiler"]
    assert acl["switch"] == "on" and acl["output"] == str(out / "profiling")
    prof = _one(out / "profiling", "PROF_*")
    assert (prof / "host" / "end_info").is_file()  # a clean run of the app
    assert json.loads((prof / "device_0" / "sample.json").read_text())["ai_core_metrics"] == "PipeUtilization"

    report = read_report(out)
    assert report["problems"] == [] and report["app"]["exit_status"] == 3
    assert report["app"]["command"][-1] == "3"
    truth = json.loads((out / "profiling" / "simulator_truth.json").read_text())
    tx_file = prof / "host" / "data" / "aging.additional.msproftx.slice_0"
    annotations = tx_file.stat().st_size // raw.MSPROFTX.itemsize
    assert annotations == images // 10 + 1  # four markers and the loop's range
    assert report["stages"]["collect"]["accounting"]["records_collected"] == truth["records_total"] + annotations

    statistic = {(r["OP Type"], r["Core Type"]): int(r["Count"])
                 for r in _csv(_one(out / "mindstudio_profiler_output", "op_statistic_*.csv"))}
    assert statistic == {(t["op_type"], t["core_type"]): t["count"] for t in truth["op_statistic"]}

    events = _timeline_events(out)
    frames = {e["name"]: float(e["ts"]) for e in events if e.get("name", "").startswith("frame ")}
    marks = {e["name"]: e for e in events if e.get("name", "").startswith("app: image ")}
    assert sorted(marks) == [f"app: image {n}" for n in (10, 20, 30, 40)]
    for name, event in marks.items():
        assert event["args"]["event_type"] == "marker" and event["tid"] != 0
        image = int(name.rsplit(" ", 1)[1])
        # Made in the app right after image N: on the board's clock, after image N began and near the start of
        # image N + 1 (within 2 s: the tests may share the machine with another test's pipeline).
        after = frames.get(f"frame {image + 1}", frames[f"frame {image}"])
        assert frames[f"frame {image}"] < float(event["ts"]), (name, event["ts"], frames[f"frame {image}"])
        assert abs(float(event["ts"]) - after) < 2_000_000, (name, event["ts"], after)
    loop = [e for e in events if e.get("name") == "app: inference loop"]
    assert len(loop) == 1 and loop[0]["args"]["event_type"] == "start/end"
    assert frames["frame 1"] < float(loop[0]["ts"]) < frames["frame 2"] + 500_000

    db = sqlite3.connect(_one(out, "msprof_*.db"))
    messages = {row[0] for row in db.execute("SELECT s.value FROM MSTX_EVENTS m JOIN STRING_IDS s "
                                             "ON m.message = s.id")}
    assert {"app: image 10", "app: inference loop", "frame 1"} <= messages
    db.close()
    tx_rows = _csv(_one(out / "mindstudio_profiler_output", "msprof_tx_*.csv"))
    assert {r["message"] for r in tx_rows if r["message"].startswith("app: ")} == {*marks, "app: inference loop"}


@pytest.mark.slow
def test_annotations_sent_to_the_collectors_socket_reach_every_output(tmp_path: Path) -> None:
    """With a collector tx_endpoint the app's pipeline.tx records go over ZeroMQ, not into the PROF directory."""
    sockets = Path(tempfile.mkdtemp(prefix="tx-", dir="/tmp"))  # ipc paths are limited to 107 bytes
    try:
        config = launch_config(tmp_path, collector_extra=f', tx_endpoint: "ipc://{sockets}/tx.ipc"')
        images = 40
        result = run_cli("run", str(config), "--live", "off", "--", *APP, "--iterations", str(images),
                         "--mark-every", "10")
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    out = tmp_path / "out"
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    prof = _one(out / "profiling", "PROF_*")
    assert not (prof / "host" / "data" / "aging.additional.msproftx.slice_0").exists()
    annotations = images // 10 + 1  # four markers and the loop's range
    spool = out / "tx_socket" / "data" / "aging.additional.msproftx.slice_0"
    assert spool.stat().st_size == annotations * raw.MSPROFTX.itemsize

    report = read_report(out)
    truth = json.loads((out / "profiling" / "simulator_truth.json").read_text())
    accounting = report["stages"]["collect"]["accounting"]
    assert report["problems"] == [] and accounting["tx_socket_records"] == annotations
    assert accounting["records_collected"] == truth["records_total"] + annotations
    marks = sorted(e["name"] for e in _timeline_events(out) if e.get("name", "").startswith("app: "))
    assert marks == ["app: image 10", "app: image 20", "app: image 30", "app: image 40", "app: inference loop"]
    tx_rows = _csv(_one(out / "mindstudio_profiler_output", "msprof_tx_*.csv"))
    assert sorted(r["message"] for r in tx_rows if r["message"].startswith("app: ")) == marks


@pytest.mark.slow
def test_an_app_that_crashes_ends_the_run_through_the_end_marker(tmp_path: Path) -> None:
    config = launch_config(tmp_path)
    result = run_cli("run", str(config), "--live", "off", "--", *APP, "--iterations", "2000",
                     "--crash-after", "25", "--exit-code", "7")
    out = tmp_path / "out"
    assert result.returncode == 7, result.stdout[-3000:] + result.stderr[-3000:]
    prof = _one(out / "profiling", "PROF_*")
    assert not (prof / "host" / "end_info").exists()  # CANN never finished the job
    assert json.loads((out / "app_exit.json").read_text())["exit_status"] == 7
    report = read_report(out)
    assert report["state"] == "completed" and report["problems"] == []
    names = {e["name"] for e in _timeline_events(out) if e.get("name", "").startswith("frame ")}
    assert {f"frame {n}" for n in range(1, 16)} <= names
    assert len(_csv(_one(out / "mindstudio_profiler_output", "op_summary_*.csv"))) > 0

    # Run again in the same folder: the crashed job's directory (no end_info) is not this run's job.
    time.sleep(1.5)  # a second apart: output file names carry the run's second
    again = run_cli("run", str(config), "--live", "off", "--", *APP, "--iterations", "12", "--mark-every", "4")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    fresh = [p for p in (out / "profiling").glob("PROF_*") if p != prof]
    assert len(fresh) == 1 and (fresh[0] / "host" / "end_info").is_file()
    assert not (prof / "host" / "end_info").exists()
    truth = json.loads((out / "profiling" / "simulator_truth.json").read_text())
    annotations = (fresh[0] / "host" / "data" / "aging.additional.msproftx.slice_0").stat().st_size // 256
    assert annotations == 12 // 4 + 1  # the app's markers and its range went to the new job, not the old
    collected = read_report(out)["stages"]["collect"]["accounting"]["records_collected"]
    assert collected == truth["records_total"] + annotations


@pytest.mark.slow
def test_an_app_that_never_profiles_is_one_clear_error_and_its_signal_is_the_status(tmp_path: Path) -> None:
    config = launch_config(tmp_path)
    result = run_cli("run", str(config), "--live", "off", "--", sys.executable, "-c",
                     "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-3000:]
    assert "the application ended without writing a PROF_… directory" in result.stderr
    assert "application exited with status 143 (and the pipeline reported the problems above)" in result.stderr
    report = read_report(tmp_path / "out")
    assert report["app"]["exit_status"] == 143 and report["problems"]


@pytest.mark.slow
def test_ctrl_c_reaches_the_app_and_the_pipeline_drains_what_it_wrote(tmp_path: Path) -> None:
    config = launch_config(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off", "--", *APP,
                             "--iterations", "100000"], env=pipeline_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "profiling").glob("PROF_*/device_0/data/*.slice_0")):
            assert time.monotonic() < deadline and proc.poll() is None, "the app wrote no data"
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    app_status = read_report(out)["app"]["exit_status"]
    assert app_status in (128 + signal.SIGINT, 1), stderr[-2000:]  # Python re-raises SIGINT, or exits 1
    assert proc.returncode == app_status
    assert "stopping the application, then draining" in stderr
    report = read_report(out)
    assert report["problems"] == [] and all(final["ok"] for final in report["stages"].values()), stderr[-3000:]
    assert len(_csv(_one(out / "mindstudio_profiler_output", "op_summary_*.csv"))) > 0
