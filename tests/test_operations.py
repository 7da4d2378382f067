"""Operating a run: attach `pipeline top`, Ctrl-C drains, stages started alone over tcp."""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pipeline_runs import pipeline_env, read_report, run_cli, stage_config, start_run

pytestmark = pytest.mark.slow


def _top_view(out: Path, deadline_s: float = 60) -> dict:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if (out / "run.json").exists():
            result = run_cli("top", str(out), "--json", "--once", "--timeout", "5", timeout=30)
            if result.returncode == 0:
                view: dict = json.loads(result.stdout.splitlines()[0])
                if view["stats"].get("ops"):
                    return view
        time.sleep(0.5)
    raise AssertionError("pipeline top never showed operator statistics")


def test_top_attaches_and_ctrl_c_drains(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "c.yaml"
    # A short heartbeat timeout: the simulated board writes for longer than it, and must not look stuck.
    config.write_text(stage_config(out, iterations=100_000).replace("progress_s: 1}", "progress_s: 1, "
                                                                    "heartbeat_timeout_s: 6}"))
    run = start_run(config)
    try:
        view = _top_view(out)
        time.sleep(max(0.0, 7.5 - view["elapsed_s"]))  # past the heartbeat timeout
        view = _top_view(out)
        assert view["stages"]["board"]["progress"]["records_written"] > 0  # its figures move while it writes
        second = run_cli("run", str(config), "--live", "off", timeout=60)  # into the folder this run writes
        assert second.returncode == 2 and second.stderr.startswith(f"error: run {view['run_id']} (pid "), \
            second.stderr[-2000:]
        assert set(view["stages"]) == {"board", "collect", "decode", "aggregate", "timeline", "summary", "db", "top"}
        op_types = {row[1] for row in view["stats"]["ops"]}
        assert {"Conv2D", "TransData", "NonMaxSuppressionV3"} <= op_types
        assert all(row[3] > 0 and row[4] >= row[5] * row[3] for row in view["stats"]["ops"])  # total ≥ min × count
        shown = run_cli("top", str(out), "--once", "--timeout", "5", timeout=30)  # piped: not a terminal
        assert shown.returncode == 0, shown.stderr
        assert all(stage in shown.stdout for stage in view["stages"]), shown.stdout
        assert max(len(line) for line in shown.stdout.splitlines()) > 80, shown.stdout  # not cut to 80 columns
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-2000:]
    assert "draining" in stderr
    report = read_report(out)
    assert report["problems"] == [] and report["state"] == "interrupted"
    assert report["stalls"] == {}, report["stalls"]
    assert f"run {report['run_id']}: interrupted in " in stdout
    shown = run_cli("show", str(out), timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert f"note: run {report['run_id']}, which wrote these files, was interrupted (Ctrl-C)" in shown.stdout
    for final in report["stages"].values():
        assert all(row["ok"] for row in final["reconcile"])
    decoder = report["stages"]["decode"]["accounting"]
    assert decoder["records_in"] == decoder["decoded"] > 0
    truth = json.loads((out / "board" / "simulator_truth.json").read_text())
    assert truth["complete"]  # the board was stopped cleanly too


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_stages_started_alone_over_tcp(tmp_path: Path) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--iterations", "20", "--rate", "max")
    assert result.returncode == 0, result.stderr
    prof = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())["prof_dir"]
    decode_port, aggregate_port, summary_port = _free_port(), _free_port(), _free_port()
    config = tmp_path / "split.yaml"
    config.write_text(f"""
run: {{name: split, output: "{tmp_path / 'out'}", insecure_tcp: true}}  # plain tcp: the CURVE path is in test_security
stages:
  collect: {{type: collector, path: "{prof}", follow: false}}
  decode: {{type: decoder, inputs: [collect], endpoint: "tcp://127.0.0.1:{decode_port}"}}
  aggregate: {{type: aggregator, inputs: [decode], endpoint: "tcp://127.0.0.1:{aggregate_port}"}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], endpoint: "tcp://127.0.0.1:{summary_port}"}}
""")
    processes = {sid: subprocess.Popen([sys.executable, "-m", "pipeline", "stage", sid, "--config", str(config)],
                                       env=pipeline_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for sid in ("summary", "aggregate", "decode", "collect")}
    try:
        codes = {sid: proc.wait(timeout=120) for sid, proc in processes.items()}
    finally:
        for proc in processes.values():
            proc.kill()
    assert codes == dict.fromkeys(processes, 0), {sid: p.stderr.read()[-500:] for sid, p in processes.items()}
    op_statistic = next((tmp_path / "out" / "mindstudio_profiler_output").glob("op_statistic_*.csv"))
    assert "Conv2D" in op_statistic.read_text()


def test_on_a_terminal_the_live_view_is_not_torn_by_stage_logs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "c.yaml"
    config.write_text(stage_config(out, iterations=40, rate="max"))
    controller, terminal = pty.openpty()  # stdout and stderr on one terminal, as a user's shell has them
    run = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config)], stdin=subprocess.DEVNULL,
                           stdout=terminal, stderr=terminal, env=pipeline_env())
    os.close(terminal)
    shown = bytearray()

    def read() -> None:  # keep the terminal drained, or the live view's writes would block
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the run ended: its side of the terminal is closed
                return
            if not chunk:
                return
            shown.extend(chunk)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert run.wait(timeout=240) == 0, shown.decode(errors="replace")[-3000:]
    finally:
        run.kill()
    reader.join(timeout=10)
    os.close(controller)
    text = shown.decode(errors="replace")
    (log,) = (out / "logs").glob("stages_*.log")
    assert f"stage logs in {log}" in text
    assert "peer connected" not in text and "stage finished" not in text  # in the log, not on the view
    assert log.read_text().count('"event": "stage finished"') == 8  # every stage's own lines


def test_a_closed_terminal_drains_the_run_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "c.yaml"
    config.write_text(stage_config(out, iterations=100_000))
    run = start_run(config)
    try:
        _top_view(out)
        run.send_signal(signal.SIGHUP)  # what a shell sends its jobs when its terminal closes
        stdout, _ = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0
    report = read_report(out)
    assert report["state"] == "interrupted" and report["problems"] == []
    assert "all counts reconcile" not in stdout  # the report went to the file, not to the closed terminal

