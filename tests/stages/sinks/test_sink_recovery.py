"""Sinks after a crash: a sink restored from its checkpoint that is sent again what followed the checkpoint
writes exactly what one sink that never stopped writes (crash recovery, docs/architecture.md)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sink_batches import TIMESTAMP, Feed

from pipeline.output_guard import FAULT_CUE_ENV, OutputGuard
from pipeline.stage import Batch, Sink, StageContext
from stages.sinks._table import Commit
from stages.sinks.sqlite import SqliteSink
from stages.sinks.summary import SummarySink
from stages.sinks.timeline import TimelineSink

PMU = ["aicore_time(us)", "total_cycles"]
WIDER_PMU = [*PMU, "mac_ratio"]  # a later device's layout: the op_summary header widens mid-run
T0 = 1_736_413_971_000_000_000


def _batches() -> list[Batch]:
    feed = Feed()
    devices = {"0": {"platform": 5, "chip": "Ascend910B", "aic_frequency_mhz": 1800.0}}
    out = [feed.run_info(devices=devices)]
    for i in range(10):
        base = T0 + i * 1_000_000
        if i in (3, 6):  # AI Core clock changes: AICORE_FREQ rows
            out.append(feed.batch("aicore_freq", [[0, base, 1600 - 100 * i]]))
        if i == 8:  # end_info: the session's end row is written, then updated in place
            out.append(feed.run_info(devices=devices, end_ns=T0 + 20_000_000))
        out.append(feed.batch("api", [feed.api(base + k * 1_000, base + k * 1_000 + 800, connection_id=i * 10 + k,
                                               name=f"op_{i % 3}_{k}", thread_id=100 + k % 2) for k in range(4)]))
        out.append(feed.batch("task", [
            feed.task(base + k * 2_000, base + k * 2_000 + 1_500, task_id=i * 10 + k, stream_id=3 + k % 2,
                      connection_id=i * 10 + k, op_name=f"op_{i % 3}_{k}", pmu=[float(k), 2.0 * i, 0.5])
            for k in range(5)], pmu_columns=PMU if i < 5 else WIDER_PMU))
        out.append(feed.batch("api", [feed.api(base + 900_000, base + 900_100, connection_id=None)]))  # minted id
        out.append(feed.batch("tx", [feed.tx(base + 100, base + 600, message=f"step {i}")]))
        out.append(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", i + 1, 1_000 * (i + 1), 500, 1_500]]))
        out.append(feed.batch("api_statistic", [["node", "MatMul_1", i + 1, 800 * (i + 1), 800, 800, 0.0]]))
    out.append(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 11, 11_000, 500, 1_500]], final=True))
    return out


BATCHES = _batches()
SINKS: dict[str, tuple[type[Sink], dict[str, Any]]] = {
    "summary": (SummarySink, {"max_rows": 7, "refresh_s": 0}),  # op_summary slices, rewritten as it widens
    "summary_json": (SummarySink, {"format": "json", "max_rows": 7}),
    "timeline": (TimelineSink, {"rotate_bytes": 3_000}),  # several rotations
    "sqlite": (SqliteSink, {}),
}


def _sink(kind: str, folder: Path, state_dir: bool, guard: OutputGuard | None = None) -> Sink:
    cls, config = SINKS[kind]
    ctx = StageContext(stage_id=kind, run_id="test", output_dir=folder,
                       state_dir=folder / "checkpoints" if state_dir else None, output_guard=guard or OutputGuard())
    return cls(cls.Config(timestamp=TIMESTAMP, **config), ctx)


def _die(sink: Sink) -> None:
    """What a killed process leaves: its descriptors closed, nothing finished."""
    if isinstance(sink, SqliteSink) and sink.conn is not None:
        sink.conn.close()
    writers = [getattr(sink, "op_summary", None), *getattr(sink, "tables", {}).values()]
    for writer in writers:
        if writer is None:
            continue
        if writer._fd >= 0:
            os.close(writer._fd)
        if writer._json is not None:
            writer._json.close()
    timeline = getattr(sink, "_file", None)
    if timeline is not None:
        timeline.close()


def _outputs(folder: Path) -> dict[str, Any]:
    """Every output file's bytes, the database's rows instead of its bytes."""
    found: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or "checkpoints" in path.parts or path.name.endswith(("-wal", "-shm")):
            continue
        if path.suffix == ".db":
            with sqlite3.connect(path) as db:
                tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                found[path.name] = {t: sorted(db.execute(f"SELECT * FROM {t}"), key=repr) for t in tables}
        else:
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def _run(kind: str, folder: Path, checkpoint_at: int | None, crash_at: int | None) -> dict[str, Any]:
    """Write every batch; with a checkpoint and a crash, restart from the checkpoint and write the rest again."""
    sink = _sink(kind, folder, state_dir=checkpoint_at is not None)
    sink.open()
    saved = b""
    for index, batch in enumerate(BATCHES):
        if index == checkpoint_at:
            saved = sink.snapshot()
        if index == crash_at:
            _die(sink)
            sink = _sink(kind, folder, state_dir=True)
            sink.restore(saved)
            for replayed in BATCHES[checkpoint_at:index]:  # type: ignore[misc]
                sink.write_batch(replayed)
        sink.write_batch(batch)
    sink.close()
    return _outputs(folder)


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return {kind: _run(kind, tmp_path_factory.mktemp(kind), None, None) for kind in SINKS}


@pytest.mark.parametrize("kind", sorted(SINKS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_restored_sink_writes_each_batch_once(kind: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory,
                                              undisturbed: dict[str, dict[str, Any]]) -> None:
    checkpoint_at = data.draw(st.integers(0, len(BATCHES) - 1), label="checkpoint after batch")
    crash_at = data.draw(st.integers(checkpoint_at, len(BATCHES) - 1), label="crash before batch")
    assert _run(kind, tmp_path_factory.mktemp(kind), checkpoint_at, crash_at) == undisturbed[kind]


class _Killed(Exception):
    """The process dies here."""


@pytest.mark.parametrize("crash_in_commit", [False, True])
def test_summary_closed_before_the_crash_keeps_its_sorted_files(
        tmp_path: Path, crash_in_commit: bool, undisturbed: dict[str, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary that sorted its tables and then died (or whose pipeline then restarted from an earlier epoch)
    finishes the recorded commit and ignores the batches sent to it again."""
    sink = _sink("summary", tmp_path, state_dir=True)
    sink.open()
    saved = b""
    for index, batch in enumerate(BATCHES):
        if index == 20:
            saved = sink.snapshot()
        sink.write_batch(batch)
    if crash_in_commit:  # killed once the sorted files are written and the commit recorded, before any rename
        with monkeypatch.context() as patch:
            def die(commit: Commit) -> None:
                raise _Killed

            patch.setattr(Commit, "apply", die)
            with pytest.raises(_Killed):
                sink.close()
    else:
        sink.close()
    restarted = _sink("summary", tmp_path, state_dir=True)
    restarted.restore(saved)
    for batch in BATCHES[20:]:
        restarted.write_batch(batch)
    restarted.close()
    assert restarted.accounting()["op_summary_rows"] == 50
    assert _outputs(tmp_path) == undisturbed["summary"]


class _FullOnce:
    """An output guard whose disk is full until the first wait (the fault cue, removed when waited on)."""

    def __init__(self, cue: Path) -> None:
        self.cue = cue
        self.waits = 0
        self.guard = OutputGuard(retry_s=0.0)
        self.guard.on_wait = self._waited
        self.guard.log = mock.Mock()

    def fill(self) -> None:
        self.cue.touch()

    def _waited(self) -> None:
        if self.cue.exists():
            self.waits += 1
            self.cue.unlink()


@pytest.mark.parametrize("kind", sorted(SINKS))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_sink_restored_on_a_full_disk_waits_and_writes_each_batch_once(
        kind: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory,
        undisturbed: dict[str, dict[str, Any]]) -> None:
    """The checkpoint is taken right after a paused write went through; the restart's cut-back meets a full disk
    too (a restored sink pauses like a running one), and so do some of the replayed writes."""
    checkpoint_at = data.draw(st.integers(3, len(BATCHES) - 1), label="checkpoint after batch")  # files begun
    crash_at = data.draw(st.integers(checkpoint_at, len(BATCHES) - 1), label="crash before batch")
    full_at = data.draw(st.sets(st.integers(checkpoint_at, len(BATCHES) - 1), max_size=4), label="full before")
    folder = tmp_path_factory.mktemp(kind)
    disk = _FullOnce(folder.parent / f"{folder.name}.cue")
    with mock.patch.dict(os.environ, {FAULT_CUE_ENV: str(disk.cue)}):
        sink = _sink(kind, folder, state_dir=True, guard=disk.guard)
        sink.open()
        saved = b""
        for index, batch in enumerate(BATCHES):
            if index == checkpoint_at - 1:
                disk.fill()  # this batch pauses; the checkpoint after it holds it once
            if index == checkpoint_at:
                saved = sink.snapshot()
            if index == crash_at:
                _die(sink)
                disk.fill()
                waits = disk.waits
                sink = _sink(kind, folder, state_dir=True, guard=disk.guard)
                sink.restore(saved)
                if kind in ("sqlite", "timeline", "summary_json"):  # a transaction, a JSON ending to write back
                    assert disk.waits == waits + 1
                disk.cue.unlink(missing_ok=True)  # a restore with nothing to cut back writes nothing
                for replayed in BATCHES[checkpoint_at:index]:
                    sink.write_batch(replayed)
            if index in full_at:
                disk.fill()
            sink.write_batch(batch)
            disk.cue.unlink(missing_ok=True)  # a batch this sink ignores writes nothing
        sink.close()
    assert _outputs(folder) == undisturbed[kind]
