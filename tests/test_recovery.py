"""Crash recovery with real processes: kill -9 a stage of each type mid-run, or the whole
pipeline; the supervisor (or a second `pipeline run`) resumes from the checkpoints and the outputs equal those
of an undisturbed run of the same directory: same rows, none twice.

The board is a finished PROF directory written again step by step (tests/board_replay.py). A test lets its first
part through and waits until a complete checkpoint covers it, stops (SIGSTOP) a leaf stage so that no later
checkpoint can complete, lets the second part through and kills once the victim has handled records no checkpoint
covers. The board holds again until the kill is done: every kill lands mid-run, with records to replay.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq
from board_replay import BoardReplay
from pipeline_runs import read_report, run_cli, start_run
from run_outputs import assert_same_outputs

pytestmark = pytest.mark.slow

ITERATIONS = 40
SLICE_BYTES = 16384
RUN_TIMEOUT_S = 180
STAGE_TYPES = {"collect": "collector", "decode": "decoder", "aggregate": "aggregator", "timeline": "timeline",
               "summary": "summary", "db": "sqlite", "top": "live"}


def _config(out: Path, board: Path, checkpoint_s: float = 0.3, max_restarts: int = 3) -> str:
    # joins wait for their partner's stream however loaded the machine is (no wall-clock timeout), so the
    # outputs do not depend on timing and two runs can be compared row for row
    return f"""
run: {{name: rec{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", progress_s: 1,
       checkpoint_s: {checkpoint_s}, max_restarts: {max_restarts}}}
stages:
  collect: {{type: collector, path: "{board}", follow: true, wait_s: 60}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.5}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
  top: {{type: live, inputs: [aggregate.stats]}}
"""


@pytest.fixture(scope="module")
def finished_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("board")
    result = run_cli("simulate", str(folder), "--iterations", str(ITERATIONS), "--slice-bytes", str(SLICE_BYTES),
                     "--seed", "3")
    assert result.returncode == 0, result.stderr[-2000:]
    (prof,) = folder.glob("PROF_*")
    return prof


@pytest.fixture(scope="module")
def reference(finished_board: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The undisturbed run: the same config over the finished directory."""
    base = tmp_path_factory.mktemp("reference")
    board = base / "board" / finished_board.name
    shutil.copytree(finished_board, board)
    config = base / "reference.yaml"
    config.write_text(_config(base / "out", board))
    result = run_cli("run", str(config), "--live", "off", timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_report(base / "out")["recovery"]["restarts"] == {}
    return base / "out"


class ViewWatcher:
    """The run's live view (what `pipeline top` shows), newest snapshot only."""

    def __init__(self, out: Path) -> None:
        _wait_for(lambda: (out / "run.json").is_file(), 60)
        endpoint = json.loads((out / "run.json").read_text())["top_endpoint"]
        self.zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sub = self.zctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.CONFLATE, 1)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(endpoint)
        self.view: dict[str, Any] = {}

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sub.poll(200):
                self.view = msgpack.unpackb(self.sub.recv(), raw=False)
                if predicate(self.view):
                    return self.view
        raise AssertionError(f"the run's view never showed what the test waits for; last: {self.view}")

    def close(self) -> None:
        self.sub.close(0)
        self.zctx.term()


def _wait_for(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)


def _count(view: dict[str, Any], stage: str, key: str = "") -> int:
    """Records the stage has handled (a source: sent; the others: received), now or at the newest complete
    checkpoint (key ``checkpointed``)."""
    row = view.get("stages", {}).get(stage, {})
    counts = row.get(key, {}) if key else row
    return int(counts.get("out" if row.get("role") == "source" else "in", 0))


def _checkpointed(view: dict[str, Any], *stages: str) -> bool:
    """An epoch is complete and these stages have handled records."""
    return view.get("checkpoint", {}).get("epoch", 0) >= 1 and all(_count(view, s) for s in stages)


def _past_checkpoint(view: dict[str, Any], *stages: str) -> bool:
    """These stages have handled records after the newest complete epoch: a crash now must replay them."""
    return all(_count(view, s) > _count(view, s, "checkpointed") for s in stages)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has ended
    except FileNotFoundError:
        return True


def _stage_pid(out: Path, stage: str) -> int:
    pid: int = json.loads((out / "run.json").read_text())["stage_pids"][stage]
    return pid


def _setup(tmp_path: Path, board: Path, **config: Any) -> tuple[Path, Path, BoardReplay]:
    """A config following a replay of ``board`` that holds after steps 6 and 12 of 20: the test checkpoints
    the first part and kills during the second, and the job cannot end before the kill."""
    out = tmp_path / "out"
    live_board = tmp_path / "board" / board.name
    path = tmp_path / "run.yaml"
    path.write_text(_config(out, live_board, **config))
    return path, out, BoardReplay(board, live_board, holds=(6, 12))


def _records_in_flight(out: Path, replay: BoardReplay, watcher: ViewWatcher, *stages: str) -> tuple[int, int]:
    """Bring the run to where ``stages`` hold records no complete checkpoint covers; (epoch, pid of the frozen
    stage). Once the board's first part is all in a complete epoch, a leaf stage none of ``stages`` waits for is
    stopped (SIGSTOP), so no later epoch can complete; then the board writes its second part (and holds again:
    the job is not over) and ``stages`` take new records."""
    frozen = "timeline" if "top" in stages else "top"

    def covered(view: dict[str, Any]) -> bool:  # the collector sent nothing after the newest complete epoch
        return _checkpointed(view, *stages) and _count(view, "collect") == _count(view, "collect", "checkpointed")

    epoch, since = 0, time.monotonic()
    while True:  # the same epoch for a second: no barrier is on its way
        view = watcher.wait_for(covered, 120)
        if view["checkpoint"]["epoch"] != epoch:
            epoch, since = view["checkpoint"]["epoch"], time.monotonic()
        elif time.monotonic() - since >= 1.0:
            break
    frozen_pid = _stage_pid(out, frozen)
    os.kill(frozen_pid, signal.SIGSTOP)
    replay.release()
    view = watcher.wait_for(lambda v: _past_checkpoint(v, *stages), 120)
    assert view["checkpoint"]["epoch"] == epoch
    return epoch, frozen_pid


def _assert_clean(out: Path) -> dict[str, Any]:
    report = read_report(out)
    assert report["problems"] == []
    assert all(final["ok"] and all(row["ok"] for row in final["reconcile"]) for final in report["stages"].values())
    assert not (out / "checkpoints").exists()  # a run that ended well keeps none
    return report


@pytest.mark.parametrize("victim", sorted(STAGE_TYPES), ids=lambda sid: STAGE_TYPES[sid])
def test_a_stage_killed_mid_run_is_restarted_and_nothing_is_lost_or_doubled(
        victim: str, finished_board: Path, reference: Path, tmp_path: Path) -> None:
    config, out, replay = _setup(tmp_path, finished_board)
    supervisor = start_run(config)
    replay.start()
    try:
        watcher = ViewWatcher(out)
        try:
            epoch, frozen = _records_in_flight(out, replay, watcher, victim)
            os.kill(_stage_pid(out, victim), signal.SIGKILL)
            watcher.wait_for(lambda v: v["state"] == "recovering", 30)
            os.kill(frozen, signal.SIGCONT)  # it is told to stop for the restart, and saves nothing more
            restarted = watcher.wait_for(lambda v: v["stages"][victim].get("restarts") == 1, 60)
            assert restarted["checkpoint"]["restarts"] == 1
        finally:
            watcher.close()
    finally:
        replay.release_all()
    _, stderr = supervisor.communicate(timeout=RUN_TIMEOUT_S)
    assert replay.error is None
    assert supervisor.returncode == 0, stderr[-3000:]
    assert f"stage '{victim}' crashed (killed by signal 9)" in stderr
    report = _assert_clean(out)
    recovery = report["recovery"]
    assert recovery["restarts"] == {victim: 1}
    assert recovery["recoveries"] == [{"stage": victim, "exit": -9, "resumed_epoch": epoch,
                                       "at_s": recovery["recoveries"][0]["at_s"]}]
    assert all(final["resumed_from"] == epoch for final in report["stages"].values())
    assert_same_outputs(out, reference)


def test_a_stage_killed_before_the_first_checkpoint_starts_over(
        finished_board: Path, reference: Path, tmp_path: Path) -> None:
    config, out, replay = _setup(tmp_path, finished_board, checkpoint_s=3600)
    supervisor = start_run(config)
    replay.start()
    try:
        watcher = ViewWatcher(out)
        try:
            watcher.wait_for(lambda v: _count(v, "aggregate") > 0, 120)
            os.kill(_stage_pid(out, "decode"), signal.SIGKILL)
            watcher.wait_for(lambda v: v["stages"]["decode"].get("restarts") == 1, 60)
        finally:
            watcher.close()
    finally:
        replay.release_all()
    _, stderr = supervisor.communicate(timeout=RUN_TIMEOUT_S)
    assert supervisor.returncode == 0, stderr[-3000:]
    report = _assert_clean(out)
    assert [r["resumed_epoch"] for r in report["recovery"]["recoveries"]] == [0]
    assert_same_outputs(out, reference)


def test_a_killed_pipeline_resumes_from_its_checkpoints(
        finished_board: Path, reference: Path, tmp_path: Path) -> None:
    config, out, replay = _setup(tmp_path, finished_board)
    supervisor = start_run(config, capture=False)
    replay.start()
    try:
        watcher = ViewWatcher(out)
        try:
            epoch, _ = _records_in_flight(out, replay, watcher, "aggregate", "db", "timeline", "summary")
        finally:
            watcher.close()
        pids = [supervisor.pid, *json.loads((out / "run.json").read_text())["stage_pids"].values()]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        supervisor.wait()
        _wait_for(lambda: all(_gone(pid) for pid in pids), 30)
    finally:
        replay.release_all()
    first_run = json.loads((out / "run.json").read_text())["run_id"]
    assert not (out / "run_report.json").exists()
    result = run_cli("run", str(config), "--live", "off", timeout=RUN_TIMEOUT_S)
    assert replay.error is None
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming run {first_run} from checkpoint epoch {epoch} " in result.stdout
    report = _assert_clean(out)
    assert report["run_id"] == first_run
    assert report["recovery"]["resumed"]["epoch"] == epoch
    assert report["recovery"]["restarts"] == {}
    assert all(final["resumed_from"] == epoch for final in report["stages"].values())
    assert_same_outputs(out, reference)


def test_past_its_restart_limit_the_run_fails_keeps_its_checkpoints_and_resumes_later(
        finished_board: Path, reference: Path, tmp_path: Path) -> None:
    config, out, replay = _setup(tmp_path, finished_board, max_restarts=0)
    supervisor = start_run(config)
    replay.start()
    try:
        watcher = ViewWatcher(out)
        try:
            _, frozen = _records_in_flight(out, replay, watcher, "aggregate")
            os.kill(_stage_pid(out, "aggregate"), signal.SIGKILL)
            os.kill(frozen, signal.SIGCONT)
        finally:
            watcher.close()
    finally:
        replay.release_all()
    _, stderr = supervisor.communicate(timeout=RUN_TIMEOUT_S)
    assert supervisor.returncode == 1
    assert "stage 'aggregate' ended without a report (exit -9)" in stderr
    assert "checkpoints kept in" in stderr
    failed = read_report(out)
    assert failed["recovery"]["restarts"] == {} and failed["state"] == "failing"
    assert (out / "checkpoints" / "complete.json").is_file()
    result = run_cli("run", str(config), "--live", "off", timeout=RUN_TIMEOUT_S)
    assert replay.error is None
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming run {failed['run_id']} from checkpoint epoch" in result.stdout
    _assert_clean(out)
    assert_same_outputs(out, reference)


def test_fresh_starts_over_and_says_so(finished_board: Path, tmp_path: Path) -> None:
    """Checkpoints of an unfinished run are resumed only when asked for nothing else: --fresh discards them."""
    config, out, _ = _setup(tmp_path, finished_board)
    shutil.copytree(finished_board, tmp_path / "board" / finished_board.name)
    (out / "checkpoints" / "epoch-00000004").mkdir(parents=True)
    (out / "checkpoints" / "complete.json").write_text(json.dumps(
        {"epoch": 4, "run_id": "old-run", "stamp": "20240101000000", "graph": [], "saved_at": 0}))
    result = run_cli("run", str(config), "--live", "off", "--fresh", timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "starting over: the checkpoints of run old-run" in result.stderr
    assert read_report(out)["run_id"] != "old-run"
    assert read_report(out)["recovery"]["resumed"] is None


def test_checkpoints_of_another_graph_are_not_resumed(finished_board: Path, tmp_path: Path) -> None:
    config, out, _ = _setup(tmp_path, finished_board)
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "complete.json").write_text(json.dumps(
        {"epoch": 4, "run_id": "old-run", "stamp": "20240101000000", "graph": [["collect", "collector"]],
         "saved_at": 0}))
    result = run_cli("run", str(config), "--live", "off", timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "whose stages differ from this config's" in result.stderr
    assert "--fresh" in result.stderr
