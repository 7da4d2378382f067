"""A run stopped by two Ctrl-Cs and run again into the same folder ends with the outputs of a fresh import.

The board is a finished PROF directory written again step by step (tests/board_replay.py); the SQLite sink is
frozen (SIGSTOP) once a checkpoint is complete, so no later epoch completes and the rerun has records to replay.
The two Ctrl-Cs land where a sink has closed its outputs (its final files written, sorted and renamed) while the
job was still being written, after the job had ended, or before any sink closed. Whichever it was, the rerun
either resumes or starts over, says which, and its CSV files equal a fresh import's byte for byte.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from board_replay import BoardReplay
from pipeline_runs import pipeline_env, read_report, run_cli
from run_outputs import OUTPUT_FOLDER, assert_same_outputs

from pipeline import checkpoint

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 120
INTERRUPTED = "interrupted: draining the pipeline"


def _config(out: Path, board: Path) -> str:
    return f"""
run: {{name: res{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", progress_s: 1, checkpoint_s: 0.3}}
stages:
  collect: {{type: collector, path: "{board}", follow: true, wait_s: 60}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.5}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
"""


@pytest.fixture(scope="module")
def finished_board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("board")
    result = run_cli("simulate", str(folder), "--iterations", "30", "--slice-bytes", "16384", "--seed", "5")
    assert result.returncode == 0, result.stderr[-2000:]
    (prof,) = folder.glob("PROF_*")
    return prof


@pytest.fixture(scope="module")
def fresh_import(finished_board: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fresh") / "out"
    result = run_cli("import", str(finished_board), "--output", str(out), timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def _csv_files(out: Path) -> dict[str, bytes]:
    """Each summary CSV's bytes, by module (the file names carry the run's stamp)."""
    files = sorted((out / OUTPUT_FOLDER).glob("*.csv"))
    return {path.name.rsplit("_", 1)[0]: path.read_bytes() for path in files}


def _wait_for(what: str, predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has ended
    except FileNotFoundError:
        return True


def _stage_pids(out: Path) -> dict[str, int]:
    try:
        pids: dict[str, int] = json.loads((out / "run.json").read_text())["stage_pids"]
    except (OSError, ValueError, KeyError):
        return {}
    return pids


def _epoch(out: Path) -> int:
    complete = checkpoint.read_complete(out)
    return complete.epoch if complete is not None else 0


def _said(log: Path, line: str) -> bool:
    return line in log.read_text(errors="replace")


def _interrupt_twice(supervisor: subprocess.Popen[bytes], log: Path, between: Callable[[], None]) -> None:
    """Ctrl-C, ``between`` once the run drains, Ctrl-C again."""
    supervisor.send_signal(signal.SIGINT)
    _wait_for("the first Ctrl-C is taken", lambda: _said(log, INTERRUPTED))
    between()
    supervisor.send_signal(signal.SIGINT)


# (what is done before the first Ctrl-C, what is waited for between the two)
WHEN = {
    "a sink closed, the job unfinished": ("hold", "summary closed"),
    "a sink closed, the job ended": ("release", "summary closed"),
    "no sink closed yet": ("hold", "nothing"),
}


def _start_replayed(finished_board: Path, tmp_path: Path, out: Path, config: Path,
                    log: Path) -> tuple[BoardReplay, subprocess.Popen[bytes]]:
    """`pipeline run` following the finished board written again step by step (held at step 8), its output in
    ``log``; the replay started."""
    live_board = tmp_path / "board" / finished_board.name
    config.write_text(_config(out, live_board))
    replay = BoardReplay(finished_board, live_board, pause_s=0.05, holds=(8,))
    with open(log, "wb") as sink:
        supervisor = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                                      env=pipeline_env(), stdout=sink, stderr=subprocess.STDOUT)
    replay.start()
    return replay, supervisor


@pytest.mark.parametrize("when", list(WHEN), ids=lambda w: w.replace(" ", "-"))
def test_a_rerun_after_two_ctrl_c_ends_with_a_fresh_imports_outputs(
        when: str, finished_board: Path, fresh_import: Path, tmp_path: Path) -> None:
    before, between = WHEN[when]
    out, config, log = tmp_path / "out", tmp_path / "run.yaml", tmp_path / "first.log"
    replay, supervisor = _start_replayed(finished_board, tmp_path, out, config, log)
    try:
        _wait_for("a complete checkpoint", lambda: _epoch(out) >= 1 and "db" in _stage_pids(out))
        pids = _stage_pids(out)
        os.kill(pids["db"], signal.SIGSTOP)  # no later epoch completes: the rerun resumes from this one or older
        if before == "release":
            replay.release_all()
            replay.join(RUN_TIMEOUT_S)
        summary_closed = lambda: _gone(pids["summary"])  # noqa: E731
        if before == "release":
            _wait_for("the summary sink closes at the job's end", summary_closed)
        _interrupt_twice(supervisor, log, lambda: _wait_for("the summary sink closes", summary_closed)
                         if between == "summary closed" else None)
        assert supervisor.wait(RUN_TIMEOUT_S) == 130, log.read_text()[-3000:]
        _wait_for("every stage process ends", lambda: all(_gone(pid) for pid in pids.values()))
    finally:
        replay.release_all()
        replay.join(RUN_TIMEOUT_S)
        if supervisor.poll() is None:
            supervisor.kill()
    assert replay.error is None
    assert (out / "checkpoints" / "complete.json").is_file()
    assert (out / "checkpoints").stat().st_mode & 0o777 == 0o700  # stage state is pickled: nobody else's to read

    rerun = run_cli("run", str(config), "--live", "off", timeout=RUN_TIMEOUT_S)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    said = rerun.stdout + rerun.stderr
    assert "resuming run" in said or "starting over: run" in said
    if between == "summary closed" and before == "hold":
        assert "starting over: run" in rerun.stderr and "'summary'" in rerun.stderr
    assert read_report(out)["state"] == "completed"
    assert not (out / "checkpoints").exists()
    got, want = _csv_files(out), _csv_files(fresh_import)
    assert sorted(got) == sorted(want)
    for module, data in want.items():
        assert got[module].count(b"\n") == data.count(b"\n"), f"{module}: rows differ from a fresh import's"
        assert got[module] == data, f"{module}: bytes differ from a fresh import's"
    outputs_line = next(line for line in rerun.stdout.splitlines() if line.startswith("outputs in"))
    assert "op_summary_" in outputs_line  # the files this run made again
    assert_same_outputs(out, fresh_import)


def test_an_import_names_its_own_command_to_start_over_and_takes_fresh(
        finished_board: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "complete.json").write_text(json.dumps(
        {"epoch": 4, "run_id": "old-import", "stamp": "20240101000000", "graph": [["collect", "collector"]],
         "saved_at": 0}))
    refused = run_cli("import", str(finished_board), "--output", str(out), timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert f"`pipeline import {finished_board} --output {out} --fresh`" in refused.stderr
    started_over = run_cli("import", str(finished_board), "--output", str(out), "--fresh", timeout=RUN_TIMEOUT_S)
    assert started_over.returncode == 0, started_over.stderr[-3000:]
    assert "starting over: the checkpoints of run old-import" in started_over.stderr
    assert read_report(out)["state"] == "completed"


def test_the_run_table_is_followed_by_each_restart(finished_board: Path, fresh_import: Path, tmp_path: Path) -> None:
    out, config, log = tmp_path / "out", tmp_path / "run.yaml", tmp_path / "run.log"
    replay, supervisor = _start_replayed(finished_board, tmp_path, out, config, log)
    try:
        _wait_for("a complete checkpoint", lambda: _epoch(out) >= 1 and "decode" in _stage_pids(out))
        os.kill(_stage_pids(out)["decode"], signal.SIGKILL)
        _wait_for("the restart", lambda: _said(log, "stage 'decode' crashed (killed by signal 9)"))
    finally:
        replay.release_all()
        replay.join(RUN_TIMEOUT_S)
    assert supervisor.wait(RUN_TIMEOUT_S) == 0, log.read_text()[-3000:]
    printed = log.read_text()
    table = printed[printed.index("all counts reconcile"):printed.index("outputs in")]
    recovery = read_report(out)["recovery"]["recoveries"]
    assert len(recovery) == 1
    assert (f"restarted after stage 'decode' crashed (killed by signal 9) at {recovery[0]['at_s']:.1f} s, from "
            f"checkpoint epoch {recovery[0]['resumed_epoch']}") in table
    assert _csv_files(out) == _csv_files(fresh_import)


# -- a live run's simulated board, which a resumed run does not start again ------------------------------------


def _live_config(out: Path, iterations: int) -> str:
    return f"""
run: {{name: brd{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", progress_s: 1, checkpoint_s: 0.3}}
stages:
  board: {{type: simulator, iterations: {iterations}, rate: 20k, seed: 3, slice_bytes: 16384, output: board}}
  collect: {{type: collector, path: board, follow: true, wait_s: 30}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.5}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
"""


def _start(config: Path, log: Path, *flags: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off", *flags],
                                env=pipeline_env(), stdout=sink, stderr=subprocess.STDOUT)


def _truth(out: Path) -> dict[str, object]:
    try:
        truth: dict[str, object] = json.loads((out / "board" / "simulator_truth.json").read_text())
    except (OSError, ValueError):
        return {}
    return truth


def test_a_board_killed_mid_job_is_not_waited_for_and_fresh_follows_a_new_job(tmp_path: Path) -> None:
    out, config = tmp_path / "out", tmp_path / "live.yaml"
    config.write_text(_live_config(out, iterations=400))
    supervisor = _start(config, tmp_path / "first.log")
    try:
        _wait_for("a complete checkpoint and the board's first truth file", lambda: _epoch(out) >= 1 and "board" in
                  _stage_pids(out) and _truth(out).get("complete") is False)
        pids = _stage_pids(out)
        supervisor.kill()  # the stages die with it (parent-death signal), the board mid-job
        supervisor.wait(RUN_TIMEOUT_S)
        _wait_for("every stage process ends", lambda: all(_gone(pid) for pid in pids.values()))
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    (killed_job,) = (out / "board").glob("PROF_*")
    assert _truth(out)["complete"] is False

    refused = run_cli("run", str(config), "--live", "off", timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "cannot be resumed: its simulated board was killed mid-job" in refused.stderr
    assert f"`pipeline run {config} --fresh`" in refused.stderr and f"pipeline import {killed_job}" in refused.stderr

    fresh = run_cli("run", str(config), "--live", "off", "--fresh", timeout=RUN_TIMEOUT_S)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert f"{killed_job} never ended" in fresh.stderr
    assert (out / "board" / f"unfinished-{killed_job.name}").is_dir()
    truth = _truth(out)
    assert truth["complete"] is True and truth["cut_short"] is False and truth["iterations"] == 400
    report = read_report(out)
    assert report["state"] == "completed"
    collected = report["stages"]["collect"]["out"]["out"]
    assert collected == report["stages"]["board"]["accounting"]["records_written"]  # the new job, all of it


def test_a_resumed_run_whose_board_was_stopped_says_the_job_was_cut_short(tmp_path: Path) -> None:
    out, config, log = tmp_path / "out", tmp_path / "live.yaml", tmp_path / "first.log"
    config.write_text(_live_config(out, iterations=3000))
    supervisor = _start(config, log)
    try:
        _wait_for("a complete checkpoint", lambda: _epoch(out) >= 1 and "aggregate" in _stage_pids(out))
        pids = _stage_pids(out)
        os.kill(pids["aggregate"], signal.SIGSTOP)  # no stream ends, so no sink closes its outputs
        _interrupt_twice(supervisor, log, lambda: _wait_for("the board ends its job", lambda: _truth(out).get(
            "complete") is True))
        assert supervisor.wait(RUN_TIMEOUT_S) == 130, log.read_text()[-3000:]
        _wait_for("every stage process ends", lambda: all(_gone(pid) for pid in pids.values()))
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    truth = _truth(out)
    assert truth["cut_short"] is True and truth["iterations_planned"] == 3000
    done = truth["iterations"]
    assert isinstance(done, int) and 0 < done < 3000

    rerun = run_cli("run", str(config), "--live", "off", timeout=RUN_TIMEOUT_S)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resuming run" in rerun.stdout
    cut_short = f"was cut short: {done} of 3000 iterations were run"
    assert "not started again: 'board'" in rerun.stdout and cut_short in rerun.stdout
    assert cut_short in rerun.stderr  # the warning under the report
    report = read_report(out)
    assert report["state"] == "completed"
    assert any(cut_short in line for line in report["warnings"])
    assert "resumed from checkpoint epoch" in rerun.stdout  # under the run table
