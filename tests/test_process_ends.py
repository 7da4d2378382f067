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
from pipeline_runs import pipeline_env, run_cli

pytestmark = pytest.mark.slow
STAGES_GONE_WITHIN_S = 45  # they notice within a second; a loaded machine may take longer to schedule them


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its (dead) parent's reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _stage_pids(out: Path, deadline_s: float = 60) -> dict[str, int]:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            pids: dict[str, int] = json.loads((out / "run.json").read_text()).get("stage_pids") or {}
        except (OSError, ValueError):
            pids = {}
        if len(pids) >= 7:
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
