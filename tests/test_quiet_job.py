"""A run following a job that has gone quiet (no new bytes, no end_info) says what it waits for, once, and what to
do when the job died; Ctrl-C then ends the run with what it read."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline_runs import pipeline_env, read_report, run_cli

NOTICE = "nothing new in"


def test_a_quiet_job_is_said_with_what_the_run_waits_for(tmp_path: Path) -> None:
    assert run_cli("simulate", str(tmp_path / "board"), "--chip", "mini", "--iterations", "5", "--rate", "max",
                   timeout=120).returncode == 0
    prof = next((tmp_path / "board").glob("PROF_*"))
    for marker in prof.rglob("end_info*"):  # the job died: it never wrote its end
        marker.unlink()
    config = tmp_path / "follow.yaml"
    config.write_text(f"""
run: {{name: quiet, output: "{tmp_path / 'out'}"}}
stages:
  collect: {{type: collector, path: "{prof}", follow: true, idle_notice_s: 2}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
""")
    run = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                           env=pipeline_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = _stderr_until(run, NOTICE, timeout_s=90)
        notices = [line for line in lines if NOTICE in line]
        assert notices, "".join(lines[-20:])
        assert notices[0].startswith("warning: collector: ")
        assert str(prof) in notices[0] and "end_info" in notices[0] and f"pipeline import {prof}" in notices[0]
    finally:
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err[-2000:]  # Ctrl-C drains: the run ends with what it read
    assert read_report(tmp_path / "out")["state"] == "interrupted"
    assert (err + "".join(lines)).count(NOTICE) == 1  # said once, not at every poll


def _stderr_until(run: subprocess.Popen[str], text: str, timeout_s: float) -> list[str]:
    """The lines of ``run``'s stderr up to the first that holds ``text``, or all said within ``timeout_s`` (read
    from the pipe itself with a deadline: a blocking readline would wait for ever for a notice that never comes)."""
    assert run.stderr is not None
    fd, said = run.stderr.fileno(), b""
    deadline = time.monotonic() + timeout_s
    while text.encode() not in said:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        said += chunk
    return said.decode(errors="replace").splitlines(keepends=True)
