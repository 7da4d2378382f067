"""`pipeline stage` run by hand stops on the first Ctrl-C (SIGINT) and removes its ipc socket file.

A consumer finishes with what has arrived and does not wait long for inputs that do not end, nor for a
consumer that takes nothing; a source stops reading and ends its stream, so the stages after it end cleanly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import pipeline_env

from pipeline.runner import INTERRUPT_GRACE_S
from pipeline.transport import socket_root

pytestmark = pytest.mark.slow
EXIT_GUARD_S = 60  # a hang guard only: an interrupted stage ends within a few seconds


@pytest.fixture
def run_name() -> Iterator[str]:
    """A run name of this test alone; its socket folder (stages run alone share the run's) goes afterwards."""
    name = f"sig{os.getpid()}-{time.monotonic_ns() % 100_000}"
    yield name
    shutil.rmtree(socket_root() / name, ignore_errors=True)


def _start(stage_id: str, config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pipeline", "stage", stage_id, "--config", str(config)],
                            env=pipeline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_until(condition: Callable[[], bool], what: str, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        for proc in procs:
            assert proc.poll() is None, f"a stage ended before {what}: {proc.communicate()[1][-2000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _finished(stderr: str) -> dict[str, Any]:
    """The stage's closing log line (its logs are JSON lines on stderr)."""
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    (finished,) = [line for line in lines if line.get("event") == "stage finished"]
    return finished


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_consumer_alone_stops_on_one_sigint_and_removes_its_socket(tmp_path: Path, run_name: str) -> None:
    """decode with neither its producer nor its consumer running: nothing arrives, nothing is taken."""
    config = tmp_path / "alone.yaml"
    config.write_text(f"""
run: {{name: {run_name}, output: "{tmp_path / 'out'}"}}
stages:
  collect: {{type: collector, path: board, follow: true}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
""")
    socket_file = socket_root() / run_name / "in-decode.ipc"
    decode = _start("decode", config)
    try:
        _wait_until(socket_file.exists, "decode bound its input", [decode])
        decode.send_signal(signal.SIGINT)
        _, stderr = decode.communicate(timeout=EXIT_GUARD_S)
    finally:
        _stop([decode])
    assert decode.returncode == 130, stderr[-2000:]
    assert not socket_file.exists()
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: stage 'decode': interrupted, and consumer 'aggregate' took nothing for "
                      f"{INTERRUPT_GRACE_S:g} s"], stderr
    assert "Traceback" not in stderr


def test_sigint_to_the_sources_ends_the_chain_cleanly(tmp_path: Path, run_name: str) -> None:
    """The board and its collector get Ctrl-C mid-stream: each ends its stream, and the stages after them
    end with every record sent reconciled, their outputs written and their sockets removed."""
    out = tmp_path / "out"
    config = tmp_path / "chain.yaml"
    config.write_text(f"""
run: {{name: {run_name}, output: "{out}"}}
stages:
  board: {{type: simulator, chip: mini, iterations: 100000, rate: realtime, seed: 3, output: board}}
  collect: {{type: collector, path: board, follow: true, wait_s: 60}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], format: csv}}
""")
    consumers = {sid: _start(sid, config) for sid in ("summary", "aggregate", "decode")}
    sources = {sid: _start(sid, config) for sid in ("collect", "board")}
    procs = [*consumers.values(), *sources.values()]
    folder = out / "mindstudio_profiler_output"
    try:
        _wait_until(lambda: any(folder.glob("op_summary_*.csv")), "task rows reached the summary", procs)
        for proc in sources.values():
            proc.send_signal(signal.SIGINT)
        stderr = {sid: proc.communicate(timeout=EXIT_GUARD_S)[1] for sid, proc in {**sources, **consumers}.items()}
    finally:
        _stop(procs)
    codes = {sid: proc.returncode for sid, proc in {**sources, **consumers}.items()}
    assert codes == dict.fromkeys(codes, 0), {sid: stderr[sid][-1500:] for sid in codes if codes[sid]}
    assert all(_finished(stderr[sid])["ok"] for sid in consumers)
    (op_summary,) = folder.glob("op_summary_*.csv")
    assert len(op_summary.read_text().splitlines()) > 1
    assert not list((socket_root() / run_name).glob("*.ipc"))
