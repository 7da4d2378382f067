"""Every process a run started ends with it: a stage whose supervisor is killed stops by itself within seconds
(it leaves its checkpoint for a resume), and a stage that ends on an error closes its sockets and exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pipeline_runs import pipeline_env, run_cli, stage_config, start_run

pytestmark = pytest.mark.slow
STAGES_GONE_WITHIN_S = 45  # they notice within a second; a loaded machine may take longer to schedule them


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its (dead) parent's reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stage_pids(out: Path, deadline_s: float = 60, min_stages: int = 7) -> dict[str, int]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            pids: dict[str, int] = json.loads((out / "run.json").read_text()).get("stage_pids") or {}
        except (OSError, ValueError):
            pids = {}
        if len(pids) >= min_stages:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"no stage pids in {out / 'run.json'}")


def test_stages_of_a_killed_import_supervisor_exit_within_seconds(tmp_path: Path) -> None:
    board = tmp_path / "board"
    made = run_cli("simulate", str(board), "--chip", "cloud", "--iterations", "400", "--rate", "max")
    assert made.returncode == 0, made.stderr
    prof = next(board.glob("PROF_*"))
    out = tmp_path / "out"
    supervisor = subprocess.Popen([sys.executable, "-m", "pipeline", "import", str(prof), "--output", str(out)],
                                  env=pipeline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pids = _stage_pids(out)
        time.sleep(1.0)  # records are flowing through every stage
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait(timeout=10)
        deadline = time.monotonic() + STAGES_GONE_WITHIN_S
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids.values()):
            time.sleep(0.2)
        left = {stage: pid for stage, pid in pids.items() if _alive(pid)}
        assert not left, f"stages still running {STAGES_GONE_WITHIN_S} s after their supervisor was killed: {left}"
    finally:
        for pid in _stage_pids(out, 0.1).values() if (out / "run.json").exists() else ():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_stage_stuck_in_its_own_work_ends_with_its_killed_supervisor(tmp_path: Path) -> None:
    """A sink that does not return from write_batch never gets back to its loop, where it would notice."""
    out, cue = tmp_path / "out", tmp_path / "stall.cue"
    cue.touch()
    config = tmp_path / "stall.yaml"
    config.write_text(stage_config(out, iterations=2_000, rate="max", extra_stages=(
        f"  stall: {{type: 'stall_sink:StallSink', inputs: [aggregate.tasks], cue: \"{cue}\"}}\n")))
    supervisor = start_run(config, capture=False)
    pids: dict[str, int] = {}
    try:
        pids = _stage_pids(out, min_stages=9)
        deadline = time.monotonic() + 60
        while not list(out.glob("mindstudio_profiler_output/op_summary_*")) and time.monotonic() < deadline:
            time.sleep(0.1)  # task rows are flowing: the stall sink has its first batch, and is stuck in it
        time.sleep(1.0)
        assert _alive(pids["stall"])
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait(timeout=10)
        deadline = time.monotonic() + STAGES_GONE_WITHIN_S
        while time.monotonic() < deadline and _alive(pids["stall"]):
            time.sleep(0.2)
        assert not _alive(pids["stall"]), "a stage stuck in its own work outlived its killed supervisor"
    finally:
        cue.unlink(missing_ok=True)
        for pid in pids.values():
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
