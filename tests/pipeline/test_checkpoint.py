"""Checkpoint building blocks: barrier messages, alignment, epoch completion, stage state and its clock."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import checkpoint, wire
from pipeline.stage import Stage, StageContext, Transform


def test_a_barrier_crosses_the_wire_and_a_malformed_one_is_refused() -> None:
    message = wire.decode(wire.encode_barrier("collect", "out", 7, 12, True))
    assert (message.kind, message.producer, message.port, message.seq, message.epoch, message.final) == \
        (wire.KIND_BARRIER, "collect", "out", 7, 12, True)
    header = wire.encode_barrier("collect", "out", 7, 12, False)[0]
    assert not wire.decode([header, b""]).final
    for epoch, meta in ((0, {"final": False}), (3, {})):
        bad = msgpack.packb([wire.VERSION, wire.KIND_BARRIER, "collect", "out", 0, "barrier", epoch, meta])
        with pytest.raises(wire.WireError):
            wire.decode([bad, b""])


# Each input delivers its records in order, with barriers 1..n between them; the inputs interleave freely.
# shape[input][epoch - 1] = records that input delivers before barrier ``epoch``
streams = st.integers(1, 4).flatmap(lambda epochs: st.lists(
    st.lists(st.integers(0, 3), min_size=epochs, max_size=epochs), min_size=1, max_size=3))


@settings(max_examples=200, deadline=None)
@given(shape=streams, data=st.data())
def test_alignment_saves_each_epoch_after_exactly_the_records_before_its_barrier(
        shape: list[list[int]], data: st.DataObject) -> None:
    epochs = len(shape[0])
    inputs: dict[str, list[tuple[str, Any]]] = {}
    before: dict[int, set[tuple[str, int]]] = {n: set() for n in range(1, epochs + 1)}
    for number, counts in enumerate(shape):
        key, items, record = f"in{number}", [], 0
        for epoch in range(1, epochs + 1):
            for _ in range(counts[epoch - 1]):
                items.append(("data", record))
                for later in range(epoch, epochs + 1):
                    before[later].add((key, record))
                record += 1
            items.append(("barrier", epoch))
        items.append(("data", record))  # after the last barrier
        inputs[key] = items
    arrival = []  # a random interleaving that keeps each input's order
    cursors = dict.fromkeys(inputs, 0)
    while any(cursors[k] < len(inputs[k]) for k in inputs):
        key = data.draw(st.sampled_from(sorted(k for k in inputs if cursors[k] < len(inputs[k]))))
        arrival.append((key, inputs[key][cursors[key]]))
        cursors[key] += 1

    aligner = checkpoint.BarrierAligner(inputs)
    queue = list(arrival)
    delivered: list[tuple[str, int]] = []
    saved: dict[int, set[tuple[str, int]]] = {}
    while queue:  # what StageRunner._next_batch does with each message
        key, (kind, value) = queue.pop(0)
        if aligner.is_blocked(key):
            aligner.hold((key, (kind, value)))
        elif kind == "barrier":
            if aligner.barrier(key, value, final=False):
                saved[value] = set(delivered)
                queue[:0] = aligner.release()
        else:
            delivered.append((key, value))
    assert saved == before
    assert Counter(delivered) == Counter((k, v) for k, items in inputs.items() for kind, v in items if kind == "data")
    for key in inputs:
        assert [v for k, v in delivered if k == key] == sorted(v for k, v in delivered if k == key)


def test_an_epoch_completes_once_every_stage_saved_it() -> None:
    book = checkpoint.EpochBook(["collect", "decode", "db"])
    assert not book.ack("collect", 1) and not book.ack("decode", 1)
    assert not book.ack("collect", 2) and not book.ack("decode", 2)
    assert book.ack("db", 2)  # 2 is complete before 1 is: 1 is never needed
    assert book.complete == 2
    assert not book.ack("db", 1)  # older than the complete one
    assert not book.ack("board", 3)  # not a participant
    book.reset(1)
    assert book.complete == 1 and not book.acks


def test_complete_epoch_files_prune_and_discard(tmp_path: Path) -> None:
    for epoch in (1, 2, 3, 4):
        checkpoint.write_atomic(checkpoint.stage_file(tmp_path, epoch, "decode"), b"x")
    assert checkpoint.read_complete(tmp_path) is None
    checkpoint.write_complete(tmp_path, checkpoint.CompleteEpoch(3, "run-1", "20250101000000", [["a", "b"]], 1.5))
    assert checkpoint.read_complete(tmp_path) == checkpoint.CompleteEpoch(3, "run-1", "20250101000000",
                                                                          [["a", "b"]], 1.5)
    checkpoint.prune_before(tmp_path, 3)
    checkpoint.discard_after(tmp_path, 3)
    assert checkpoint.saved_epochs(tmp_path) == [3]
    assert not list(tmp_path.rglob("*.tmp"))


class _Counting(Transform):
    """State that refers to the stage itself (a bound method), as the decoder's parts do."""

    def __init__(self, config: Any, ctx: StageContext) -> None:
        super().__init__(config, ctx)
        self.seen: Counter[str] = Counter()
        self.report = self._note

    def _note(self, reason: str) -> None:
        self.seen[reason] += 1
        self.ctx.reject(reason)


def test_restored_state_refers_to_the_new_stage_and_its_context(tmp_path: Path) -> None:
    first = _Counting({"a": 1}, StageContext("t", "run", tmp_path))
    first.report("late")
    blob = first.snapshot()
    second = _Counting({"a": 1}, StageContext("t", "run", tmp_path))
    second.restore(blob)
    assert second.seen == Counter(late=1)
    second.report("late")  # the restored bound method updates the new stage and reports to its context
    assert second.seen == Counter(late=2) and second.ctx.rejected == Counter(late=1)
    assert first.seen == Counter(late=1)


def test_stage_clock_stands_still_while_the_stage_is_down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    first = Stage({}, StageContext("t", "run", tmp_path))
    blob = first.snapshot()
    now[0] = 4_000.0  # the restart took an hour
    second = Stage({}, StageContext("t", "run", tmp_path))
    second.restore(blob)
    assert second.clock() == 100.0
    now[0] = 4_002.5
    assert second.clock() == 102.5


def test_stage_clock_also_leaves_out_the_waits_its_context_clock_leaves_out(tmp_path: Path) -> None:
    """The runner's stage clock (time waiting for a consumer left out) under the restart shift: a join timeout
    sees neither a paused sink nor a restart."""
    now = [100.0]
    first = Stage({}, StageContext("t", "run", tmp_path, clock=lambda: now[0]))
    blob = first.snapshot()
    later = [7.0]  # the new process's context clock: a fresh runner, a different origin
    second = Stage({}, StageContext("t", "run", tmp_path, clock=lambda: later[0]))
    second.restore(blob)
    assert second.clock() == 100.0
    later[0] = 9.5
    assert second.clock() == 102.5


class _Guarded(Stage):
    """Holds its context's output guard, as the summary tables and timeline files do."""

    def __init__(self, config: Any, ctx: StageContext) -> None:
        super().__init__(config, ctx)
        self.writer = {"guard": ctx.output_guard, "rows": 3}


def test_a_state_names_the_output_guard_instead_of_copying_it(tmp_path: Path) -> None:
    """The guard's callbacks reach the runner (sockets: not picklable); the restored state uses the new
    process's guard."""
    first = _Guarded({}, StageContext("t", "run", tmp_path))
    first.ctx.output_guard.on_wait = lambda: None  # a lambda does not pickle: the guard must not be copied
    blob = first.snapshot()
    second = _Guarded({}, StageContext("t", "run", tmp_path))
    second.writer = {}
    second.restore(blob)
    assert second.writer["rows"] == 3
    assert second.writer["guard"] is second.ctx.output_guard


def test_a_state_saved_with_persistent_ids_still_restores(tmp_path: Path) -> None:
    """States written before anchors were named by reduction (pickle persistent ids) load as they did."""
    import io
    import pickle

    class _OldPickler(pickle.Pickler):
        def __init__(self, file: io.BytesIO, anchors: dict[int, str]) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.anchors = anchors

        def persistent_id(self, obj: Any) -> str | None:
            return self.anchors.get(id(obj))

    first = _Counting({"a": 1}, StageContext("t", "run", tmp_path))
    first.report("early")
    anchors = {id(first): "stage", id(first.ctx): "ctx", id(first.config): "config"}
    buffer = io.BytesIO()
    _OldPickler(buffer, anchors).dump({k: v for k, v in vars(first).items() if k not in ("ctx", "config")})
    second = _Counting({"a": 1}, StageContext("t", "run", tmp_path))
    checkpoint.restore_state(second, buffer.getvalue())
    second.report("early")
    assert second.seen == Counter(early=2) and second.ctx.rejected == Counter(early=1)
    assert len(checkpoint.pickle_state(second)) < len(buffer.getvalue()) + 64  # anchors named, not copied
