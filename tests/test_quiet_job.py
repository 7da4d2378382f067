"""A run following a job that has gone quiet (no new bytes, no end_info) says what it waits for, once, and what to
do when the job died; Ctrl-C then ends the run with what it read."""

from __future__ import annotations

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
    lines: list[str] = []
    assert run.stderr is not None
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            line = run.stderr.readline()
            if not line:
                break
            lines.append(line)
            if NOTICE in line:
                break
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
