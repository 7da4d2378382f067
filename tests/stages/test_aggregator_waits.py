"""Join waits end when the partner's stream has passed the record or the job ends, never by the wall clock: a
starved live run (its clock far ahead of its streams) gives the rows of an undisturbed import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chain import decode_dir, make_ctx

from pipeline.stage import Batch
from stages.aggregator import AggregatorStage
from stages.collector import CollectorStage
from stages.decoder import DecoderStage
from stages.schema import SymbolTable, unpack_rows
from stages.simulator.run import simulate

A_DAY_S = 86_400.0


class FakeClock:
    """The aggregator's clock: stands at 0 until a test moves it (a starved machine: the wall clock runs on while
    the partner is still on disk)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _stage(out: Path) -> tuple[AggregatorStage, FakeClock]:
    clock = FakeClock()
    ctx = make_ctx("aggregate", out)
    ctx.clock = clock
    return AggregatorStage(AggregatorStage.Config(), ctx), clock


def _rows(batches: list[Batch]) -> list[tuple[Any, ...]]:
    """Task rows with their texts resolved, in a stable order."""
    symbols = SymbolTable()
    rows = []
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            for row in unpack_rows(batch):
                texts = tuple(symbols[row[i]] for i in (8, 9, 10, 11, 16, 17, 18, 19, 20, 21))
                rows.append((*row[:8], *texts, row[12], row[14]))
    return sorted(rows)


def _decoded(tmp_path: Path, layout: str) -> list[Batch]:
    """The decoded batches of a finished directory, read in chunks of 16 records (streams in many batches)."""
    prof = simulate(tmp_path / "board", chip="cloud", iterations=3, rate="max", seed=7, layout=layout)
    out = tmp_path / "decoded"
    collector = CollectorStage(CollectorStage.Config(path=str(prof), follow=False, chunk_records=16),
                               make_ctx("collect", out))
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", out))
    decoded = [batch for raw in collector.batches() if raw is not None for batch in decoder.process(raw)]
    return decoded + list(decoder.finish())


def _reference(decoded: list[Batch], out: Path) -> list[tuple[Any, ...]]:
    agg, _ = _stage(out)
    emitted = [out_batch for batch in decoded for out_batch in agg.process(batch)]
    emitted += agg.finish()
    return _rows(emitted)


def _held_back(decoded: list[Batch], held: Callable[[Batch], bool]) -> tuple[list[Batch], list[Batch]]:
    """(the batches delivered at once, those held back: a stream behind the others). A chunk's batches stay
    together (chunk_end)."""
    first: list[Batch] = []
    later: list[Batch] = []
    for batch in decoded:
        (later if held(batch) else first).append(batch)
    return first, later


def _tensor_stream_after_its_first_batch() -> Callable[[Batch], bool]:
    seen = []

    def held(batch: Batch) -> bool:
        if batch.kind not in ("tensor", "ge_tensor"):
            return False
        seen.append(batch)
        return len(seen) > 1  # the stream exists (its first batch is in), the rest is behind

    return held


@pytest.mark.parametrize("layout", ["current", "legacy"])
def test_a_task_waits_for_its_tensors_however_far_the_clock_runs(tmp_path: Path, layout: str) -> None:
    decoded = _decoded(tmp_path, layout)
    reference = _reference(decoded, tmp_path / "reference")
    assert any("," in row[12] for row in reference)  # input shapes: the rows have tensors to lose
    first, later = _held_back(decoded, _tensor_stream_after_its_first_batch())
    assert later
    agg, clock = _stage(tmp_path / "out")
    emitted: list[Batch] = []
    for batch in first:
        emitted += agg.process(batch)
        clock.now += 1.0
        emitted += agg.tick(clock.now)
    clock.now += A_DAY_S  # starved: a day of wall time, and the tensor stream has not moved on
    emitted += agg.tick(clock.now)
    emitted += agg.tick(clock.now + A_DAY_S)
    early = _rows(emitted)
    assert len(early) < len(reference)  # tasks past the tensor stream still wait
    assert set(early) <= set(reference)  # and none went out without its tensors
    for batch in later:  # the tensor stream catches up: its watermark passes the waiting tasks
        emitted += agg.process(batch)
    emitted += agg.tick(clock.now)
    assert len(_rows(emitted)) > len(early)  # the waits ended before the end of the job
    emitted += agg.finish()
    assert _rows(emitted) == reference
    assert agg.accounting()["joins_given_up"] == {}


def _fed_then_a_day_later(agg: AggregatorStage, clock: FakeClock, batches: list[Batch]) -> list[Batch]:
    """What the aggregator emits for ``batches``, then on a tick a day of wall time later."""
    emitted: list[Batch] = []
    for batch in batches:
        emitted += agg.process(batch)
    clock.now += A_DAY_S
    emitted += agg.tick(clock.now)
    return emitted


def test_a_device_task_waits_for_the_flip_stream_until_it_passes_its_start(tmp_path: Path) -> None:
    decoded = _decoded(tmp_path, "current")
    reference = _reference(decoded, tmp_path / "reference")
    first, later = _held_back(decoded, lambda batch: str(batch.meta.get("stream")).startswith("ts_track"))
    assert later
    agg, clock = _stage(tmp_path / "out")
    emitted = _fed_then_a_day_later(agg, clock, first)
    assert _rows(emitted) == [] and agg.pending_device  # no flips known yet: the batch ids are not
    for batch in later:
        emitted += agg.process(batch)
    emitted += agg.tick(clock.now)
    assert _rows(emitted)  # ts_track has passed them: named before the end of the job
    emitted += agg.finish()
    assert _rows(emitted) == reference


def test_the_end_of_the_job_ends_every_wait_and_is_not_counted_as_giving_up(tmp_path: Path) -> None:
    decoded = _decoded(tmp_path, "current")
    reference = _reference(decoded, tmp_path / "reference")
    first, _ = _held_back(decoded, _tensor_stream_after_its_first_batch())  # the rest never comes
    agg, clock = _stage(tmp_path / "out")
    emitted = _fed_then_a_day_later(agg, clock, first)
    waiting = len(agg.pending_host)
    assert waiting
    emitted += agg.finish()
    rows = _rows(emitted)
    assert len(rows) == len(reference)  # every task, those past the tensor stream without their shapes
    assert sum(row[12] == "N/A" for row in rows) > sum(row[12] == "N/A" for row in reference)
    assert agg.accounting()["joins_given_up"] == {}


def test_a_chip_v6_task_waiting_for_its_host_track_does_not_hold_the_others(tmp_path: Path) -> None:
    """A static model's last registration waits for tensor_info past it until the end of the job; on chip v6 its
    executions' tasks wait for that track to name their stream, parked by task id: the other tasks go on."""
    prof = simulate(tmp_path / "board", chip="v6", iterations=6, rate="max", seed=3, mode="static")
    decoded, _, _ = decode_dir(prof, tmp_path / "decoded")
    reference = _reference(decoded, tmp_path / "reference")
    agg, clock = _stage(tmp_path / "out")
    emitted: list[Batch] = []
    for batch in decoded:
        emitted += agg.process(batch)
        clock.now += A_DAY_S
        emitted += agg.tick(clock.now)
    live = len(_rows(emitted))
    assert len(agg.pending_host) == 1 and sum(map(len, agg.parked.values())) == 6  # one task per execution
    assert live == len(reference) - 6
    emitted += agg.finish()
    assert _rows(emitted) == reference and agg.ctx.rejected == {}
