"""The sinks on a disk that refuses writes now and then (the fault cue): while paused their files
stay valid, and once the disk takes writes again they end byte for byte as an undisturbed run."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from sink_batches import TIMESTAMP, Feed

from pipeline.output_guard import FAULT_CUE_ENV, OutputGuard
from pipeline.stage import Batch, Sink, StageContext
from stages.sinks.sqlite import SqliteSink
from stages.sinks.summary import SummarySink
from stages.sinks.timeline import TimelineSink

ROUNDS = 12


def batches() -> list[Batch]:
    """APIs, device tasks (with flows and PMU values), tx ranges and statistics snapshots."""
    feed = Feed()
    out = [feed.run_info(4242)]
    for i in range(ROUNDS):
        base = 1_795_347_125_600_000_000 + i * 100_000
        out.append(feed.batch("api", [
            feed.api(base + k * 2_000, base + k * 2_000 + 1_500, connection_id=i * 10 + k, name=f"Op_{i}_{k}")
            for k in range(3)]))
        out.append(feed.batch("task", [
            feed.task(base + 50_000 - k * 1_000, base + 50_000 - k * 1_000 + 700, connection_id=i * 10 + k,
                      op_name=f"Op_{i}_{k}", task_id=k, device_id=k % 2, pmu=[1.5 * k, None])
            for k in range(3)], pmu_columns=["aic_time", "aic_total_cycles"]))
        out.append(feed.batch("tx", [feed.tx(base, base + 20_000, message=f"step {i}")]))
        out.append(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", i + 1, 700 * (i + 1), 700, 700]]))
        out.append(feed.batch("api_statistic", [["node", f"Op_{i}_0", 1, 1_500, 1_500, 1_500, 2.25]]))
    return out


SINKS: dict[str, Callable[[StageContext], Sink]] = {
    "timeline": lambda ctx: TimelineSink(TimelineSink.Config(timestamp=TIMESTAMP, rotate_bytes=4_000), ctx),
    "summary": lambda ctx: SummarySink(SummarySink.Config(timestamp=TIMESTAMP, refresh_s=0, max_rows=10,
                                                          sort_chunk_rows=7), ctx),
    "sqlite": lambda ctx: SqliteSink(SqliteSink.Config(timestamp=TIMESTAMP), ctx),
}


def outputs(folder: Path) -> dict[str, Any]:
    """Every file's bytes, and the database as SQL text."""
    found: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".db":
            with closing(sqlite3.connect(path)) as db:
                found[path.name] = list(db.iterdump())
        elif path.is_file():
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def assert_valid_now(folder: Path) -> None:
    """What a reader sees while the sink is paused: complete JSON, whole CSV rows, an open database."""
    for path in folder.rglob("*"):
        if path.name.startswith("."):
            continue
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".csv":
            text = path.read_text()
            assert text.endswith("\n"), path
            rows = list(csv.reader(text.splitlines()))
            assert all(len(row) == len(rows[0]) for row in rows), path
        elif path.suffix == ".db":
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                assert db.execute("PRAGMA quick_check").fetchone() == ("ok",), path
                for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                    db.execute(f"SELECT count(*) FROM {table}").fetchone()


class FlakyDisk:
    """Switches the fault cue on before chosen writes; it goes off again after ``retries`` waits."""

    def __init__(self, folder: Path, retries: int) -> None:
        self.folder = folder
        self.cue = folder.parent / "cue"
        self.retries = retries
        self.left = 0
        self.states: list[str | None] = []
        self.logged: list[str] = []

    def guard(self) -> OutputGuard:
        guard = OutputGuard(retry_s=0.0)
        guard.on_wait = self._waited
        guard.on_state = self.states.append
        guard.log = mock.Mock(error=lambda event, **kw: self.logged.append(event),
                              info=lambda event, **kw: self.logged.append(event))
        return guard

    def fail_next_writes(self) -> None:
        self.cue.touch()
        self.left = self.retries

    def _waited(self) -> None:
        if not self.cue.exists():
            return  # a heartbeat during the sort at close, not a pause
        assert_valid_now(self.folder)
        self.left -= 1
        if self.left <= 0:
            self.cue.unlink()


@settings(max_examples=25, deadline=None)
@given(sink_name=st.sampled_from(sorted(SINKS)), faulty=st.sets(st.integers(0, 5 * ROUNDS + 2), max_size=8),
       retries=st.integers(1, 3))
def test_paused_writes_leave_valid_files_and_end_as_an_undisturbed_run(sink_name: str, faulty: set[int],
                                                                       retries: int) -> None:
    """Index 0 is open(), 1 … the batches, the last one close()."""
    feed = batches()
    with tempfile.TemporaryDirectory() as root, mock.patch.dict(os.environ, {FAULT_CUE_ENV: f"{root}/cue"}):
        clean_dir, flaky_dir = Path(root) / "clean", Path(root) / "flaky"
        clean = SINKS[sink_name](StageContext(stage_id="clean", run_id="t", output_dir=clean_dir))
        disk = FlakyDisk(flaky_dir, retries)
        flaky = SINKS[sink_name](StageContext(stage_id="flaky", run_id="t", output_dir=flaky_dir,
                                              output_guard=disk.guard()))
        steps: list[Callable[[Sink], None]] = [lambda sink: sink.open()]
        steps += [lambda sink, batch=batch: sink.write_batch(batch) for batch in feed]  # type: ignore[misc]
        steps += [lambda sink: sink.flush(), lambda sink: sink.close()]
        for index, step in enumerate(steps):
            step(clean)
            if index in faulty:
                disk.fail_next_writes()
            step(flaky)
            disk.cue.unlink(missing_ok=True)  # a step that wrote nothing was not held up
        assert outputs(flaky_dir) == outputs(clean_dir)
        pauses = disk.logged.count("output paused")
        assert pauses == sum(1 for state in disk.states if state is None)  # each pause ended
        assert all(s is None or s.startswith("paused: disk full: ") for s in disk.states)
        assert len([e for e in disk.logged if e.startswith("output resumed after")]) == pauses
        assert flaky.accounting() == clean.accounting()
