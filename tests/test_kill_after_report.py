"""A stage SIGKILLed after its final report, while it waits for a slow consumer to read the end of its stream (what
it sent but the consumer has not read dies with it): restarted like any crash, and the outputs equal an undisturbed
run's; with crash recovery off, the run fails with one line naming the kill. A report is never lost with a kill that
comes after the stage said it finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import msgpack
import pytest
import zmq
from pipeline_runs import pipeline_env, read_report, run_cli
from run_outputs import assert_same_outputs

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 300
REPORT_TRIALS = 40
ARRIVAL_TIMEOUT_MS = 30_000  # how long a report that survived may take to be read: never, if it was lost


def _config(out: Path, prof: Path, checkpoint_s: float) -> str:
    # the slow sink reads a message every 20 ms: the aggregator ends far ahead of it and waits for it to read all
    return f"""
run: {{name: kar{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", checkpoint_s: {checkpoint_s},
       batch: {{max_records: 8}}}}
stages:
  collect: {{type: collector, path: "{prof}", follow: false}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], format: csv}}
  slow: {{type: 'slow_sink:SlowSink', inputs: [aggregate.tasks], delay_s: 0.02}}
"""


@pytest.fixture(scope="module")
def prof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("board")
    result = run_cli("simulate", str(folder), "--iterations", "40", "--rate", "max", "--seed", "7")
    assert result.returncode == 0, result.stderr[-2000:]
    (found,) = folder.glob("PROF_*")
    return found


def _run_killing_aggregate_after_its_report(config: Path, out: Path) -> tuple[int, str, bool]:
    """`pipeline run CONFIG`; the aggregator is SIGKILLed as soon as it logs 'stage finished' (its report has gone,
    it waits for its consumers). (exit status, stderr, whether the kill landed)."""
    run = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                           env=pipeline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    killed = threading.Event()

    def watch() -> None:
        for line in run.stderr or []:
            lines.append(line)
            if not killed.is_set() and line.startswith("{") and '"stage finished"' in line:
                if json.loads(line).get("stage") == "aggregate":
                    pid = json.loads((out / "run.json").read_text())["stage_pids"]["aggregate"]
                    os.kill(pid, signal.SIGKILL)
                    killed.set()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    try:
        code = run.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if run.poll() is None:
            run.kill()
    reader.join(timeout=30)
    return code, "".join(lines), killed.is_set()


def test_a_stage_killed_after_its_report_before_its_consumer_read_all_is_restarted(prof: Path,
                                                                                   tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    config = tmp_path / "reference.yaml"
    config.write_text(_config(reference, prof, checkpoint_s=0.5))
    result = run_cli("run", str(config), "--live", "off", timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]

    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    config.write_text(_config(out, prof, checkpoint_s=0.5))
    code, stderr, killed = _run_killing_aggregate_after_its_report(config, out)
    assert killed, "the aggregator never logged 'stage finished'"
    assert code == 0, stderr[-3000:]
    assert "stage 'aggregate' crashed (killed by signal 9)" in stderr
    report = read_report(out)
    assert report["state"] == "completed" and report["problems"] == []
    assert report["recovery"]["restarts"] == {"aggregate": 1}
    assert_same_outputs(out, reference)
    slow = json.loads((out / "slow_sink.json").read_text())
    assert sum(slow.values()) == report["stages"]["aggregate"]["out"]["tasks"]


def test_with_recovery_off_the_run_fails_naming_the_kill(prof: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    config.write_text(_config(out, prof, checkpoint_s=0))
    code, stderr, killed = _run_killing_aggregate_after_its_report(config, out)
    assert killed, "the aggregator never logged 'stage finished'"
    assert code == 1, stderr[-3000:]
    line = ("error: stage 'aggregate' was killed (signal 9) after its report, before the stages reading it had "
            "read all it sent")
    assert line in stderr.splitlines()
    report = read_report(out)
    assert report["problems"][0] == line.removeprefix("error: ")


# For each line read, a forked child reports through a stage's Control, closes it and says so, then waits to be killed.
_REPORT_AND_WAIT = """
import os, sys
from pipeline.runner import Control
for _ in sys.stdin:
    child = os.fork()
    if child == 0:
        control = Control(sys.argv[1], "aggregate")
        control.send({"type": "final", "ok": True}, must_arrive=True)
        control.close()
        print(os.getpid(), flush=True)
        os.pause()
        os._exit(0)
    os.waitpid(child, 0)
"""


def test_a_report_survives_a_kill_that_follows_the_stages_last_words(tmp_path: Path) -> None:
    """A stage logs 'stage finished' once Control.close() has returned: a SIGKILL from then on cannot take its report
    with it (a report only queued for ZeroMQ's I/O thread was lost when a loaded machine ran that thread late)."""
    endpoint = f"ipc://{tmp_path / 'control.ipc'}"
    zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    supervisor = zctx.socket(zmq.PULL)
    supervisor.bind(endpoint)
    stages = subprocess.Popen([sys.executable, "-c", _REPORT_AND_WAIT, endpoint], env=pipeline_env(),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert stages.stdin is not None and stages.stdout is not None
    try:
        for trial in range(REPORT_TRIALS):
            stages.stdin.write("\n")
            stages.stdin.flush()
            said = stages.stdout.readline()
            assert said.strip().isdigit(), f"the reporting process ended: {said!r}"
            os.kill(int(said), signal.SIGKILL)
            assert supervisor.poll(ARRIVAL_TIMEOUT_MS), f"report {trial + 1} of {REPORT_TRIALS} was lost"
            assert msgpack.unpackb(supervisor.recv())["type"] == "final"
    finally:
        stages.kill()
        zctx.destroy(linger=0)
