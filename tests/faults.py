"""Helpers for the fault tests: watching a run through `pipeline top`, and comparing its outputs
with an undisturbed import of the same PROF directory."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from pipeline_runs import pipeline_env, run_cli

View = dict[str, Any]


def start(config: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`pipeline run CONFIG` in the background, stdout and stderr captured."""
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                            env={**pipeline_env(), **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def view(out: Path) -> View | None:
    """One snapshot of the run's live view, or None while it is not publishing."""
    if not (out / "run.json").exists():
        return None
    result = run_cli("top", str(out), "--json", "--once", "--timeout", "5", timeout=60)
    if result.returncode != 0:
        return None
    snapshot: View = json.loads(result.stdout.splitlines()[0])
    return snapshot


def wait_for_view(out: Path, run: subprocess.Popen[str], what: str, predicate: Callable[[View], bool],
                  timeout_s: float = 120) -> View:
    """Poll the live view until ``predicate`` holds (the condition, never a duration, is what is tested)."""
    deadline = time.monotonic() + timeout_s
    last: View | None = None
    while time.monotonic() < deadline:
        if run.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {run.communicate()[1][-3000:]}")
        snapshot = view(out)
        if snapshot is not None and snapshot.get("state") != "ended":
            last = snapshot
            if predicate(snapshot):
                return snapshot
        time.sleep(0.3)
    statuses = {sid: stage["status"] for sid, stage in (last or {}).get("stages", {}).items()}
    raise AssertionError(f"never saw {what}; last statuses: {statuses}")


def finish(run: subprocess.Popen[str], out: Path, timeout_s: float = 600) -> tuple[str, str]:
    """Wait for the run to end; if it does not, say where it stands."""
    try:
        return run.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        snapshot = view(out) or {}
        run.kill()
        _, stderr = run.communicate()
        stages = snapshot.get("stages", {})
        statuses = {sid: (stage["status"], stage["in"], stage["out"]) for sid, stage in stages.items()}
        raise AssertionError(f"the run did not end: {statuses}\n{stderr[-2000:]}") from None


def status(snapshot: View, stage: str) -> str:
    text: str = snapshot["stages"][stage]["status"]
    return text


def summary_files(out: Path, module: str) -> list[str]:
    (path,) = sorted((out / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv"))
    return path.read_text().splitlines()


def timeline_events(out: Path) -> Counter[str]:
    """Complete events of every timeline file, as a multiset of their JSON."""
    events: Counter[str] = Counter()
    for path in (out / "mindstudio_profiler_output").glob("msprof_*.json"):
        for event in json.loads(path.read_text()):
            if event.get("ph") == "X":
                events[json.dumps(event, sort_keys=True)] += 1
    return events


DB_QUERIES = {
    "TASK": "SELECT t.startNs, t.endNs, t.deviceId, t.connectionId, t.streamId, t.taskId, t.modelId, s.value "
            "FROM TASK t JOIN STRING_IDS s ON s.id = t.taskType",
    "COMPUTE_TASK_INFO": "SELECT t.startNs, t.deviceId, n.value, o.value, c.blockNum FROM COMPUTE_TASK_INFO c "
                         "JOIN TASK t ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS n ON n.id = c.name "
                         "JOIN STRING_IDS o ON o.id = c.opType",
    "CANN_API": "SELECT a.startNs, a.endNs, a.type, a.globalTid, a.connectionId, s.value FROM CANN_API a "
                "JOIN STRING_IDS s ON s.id = a.name",
    "OP_STATISTIC": "SELECT * FROM OP_STATISTIC",
    "API_STATISTIC": "SELECT * FROM API_STATISTIC",
}


def db_rows(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The database's rows with string ids resolved (ids may be numbered in another order), sorted."""
    (path,) = out.glob("msprof_*.db")
    with closing(sqlite3.connect(path)) as db:
        return {table: sorted(db.execute(query).fetchall()) for table, query in DB_QUERIES.items()}


REFERENCE = """
run: {{name: ref{pid}, output: "{out}"}}
stages:
  collect: {{type: collector, path: "{prof}", follow: false}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
"""


def assert_equals_undisturbed(out: Path, prof: Path, reference: Path) -> None:
    """The run's CSVs, database and timeline hold what an undisturbed run over the finished
    directory holds."""
    config = reference.with_suffix(".yaml")
    config.write_text(REFERENCE.format(pid=os.getpid(), out=reference, prof=prof))
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    for module in ("op_summary", "op_statistic", "api_statistic"):
        assert summary_files(out, module) == summary_files(reference, module), module
    live, offline = db_rows(out), db_rows(reference)
    assert live["TASK"], "the database holds no task"
    for table in DB_QUERIES:
        assert live[table] == offline[table], table
    assert timeline_events(out) == timeline_events(reference)


def log_events(stderr: str, stage: str, event: str) -> list[dict[str, Any]]:
    """The stage's JSON log lines with this event."""
    found = []
    for line in stderr.splitlines():
        if line.startswith("{") and f'"{event}' in line:
            record = json.loads(line)
            if record.get("stage") == stage and str(record.get("event", "")).startswith(event):
                found.append(record)
    return found
