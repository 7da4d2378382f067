"""Runs leave no socket folders behind: a finished import removes its own, and the folder of a run whose
supervisor was killed (which cannot clean up) is found by the tests' session cleanup."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from pipeline_runs import run_cli, run_socket_folders, stage_config, start_run

pytestmark = pytest.mark.slow


def _socket_folder(out: Path) -> Path:
    """A run's socket folder, as its run.json names it (the supervisor's view socket is in it)."""
    endpoint: str = json.loads((out / "run.json").read_text())["top_endpoint"]
    assert endpoint.startswith("ipc://"), endpoint
    return Path(endpoint.removeprefix("ipc://")).parent


def test_an_import_removes_its_socket_folder(tmp_path: Path) -> None:
    made = run_cli("simulate", str(tmp_path / "board"), "--iterations", "20", "--rate", "max")
    assert made.returncode == 0, made.stderr
    out = tmp_path / "out"
    result = run_cli("import", str(next((tmp_path / "board").glob("PROF_*"))), "--output", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    folder = _socket_folder(out)
    assert folder.parent.is_dir()  # the folder it was in is there: the run's own folder went
    assert not folder.exists(), sorted(p.name for p in folder.iterdir())
    assert run_socket_folders(tmp_path) == []


def test_the_folder_of_a_killed_run_is_found_for_the_session_cleanup(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "c.yaml"
    config.write_text(stage_config(out, iterations=100_000))
    run = start_run(config, capture=False)
    try:
        deadline = time.monotonic() + 120
        while not (out / "run.json").exists() or "stage_pids" not in json.loads((out / "run.json").read_text()):
            assert run.poll() is None and time.monotonic() < deadline, "the run never started its stages"
            time.sleep(0.1)
        pids = json.loads((out / "run.json").read_text())["stage_pids"]
    finally:
        run.kill()  # as a crash would: the supervisor removes nothing
        run.wait()
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    folder = _socket_folder(out)
    assert folder.is_dir()
    assert run_socket_folders(tmp_path) == [folder]
    assert run_socket_folders(tmp_path / "another") == []  # only the runs writing under the folder given
