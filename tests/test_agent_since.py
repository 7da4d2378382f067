"""The board agent takes the job's directory even when the application wrote it before the agent was up: the
launcher passes when the job started (``--since``); without it, a directory older than the agent by more than a
second was taken for an earlier job's ("the application ended without writing a PROF_… directory")."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pipeline_board.agent import AgentError, Follower


def _job_that_already_ended(base: Path, written_at: float) -> Path:
    prof = base / "PROF_000001_20240101000000000_ABCDEFGHIJKLMNOP"
    (prof / "host" / "data").mkdir(parents=True)
    (prof / "device_0" / "data").mkdir(parents=True)
    os.utime(prof, (written_at, written_at))
    (base.parent / "app_exit").write_text("3\n")  # the application has ended
    return prof


def _root(follower: Follower) -> str:
    for _ in follower._find_root():
        pass
    return follower.root


def test_a_directory_written_before_the_agent_started_is_the_jobs_when_the_launcher_says_so(tmp_path: Path) -> None:
    base = tmp_path / "profiling"
    base.mkdir()
    job_start = time.time() - 5.0  # the application started and wrote its directory; the agent came 5 s later
    prof = _job_that_already_ended(base, job_start + 0.5)
    marker = str(tmp_path / "app_exit")
    assert _root(Follower(str(base), end_marker=marker, since=job_start)) == str(prof)
    with pytest.raises(AgentError, match="ended without writing a PROF_"):
        _root(Follower(str(base), end_marker=marker))  # no --since: taken for an earlier job's
