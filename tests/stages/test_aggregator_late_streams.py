"""A host stream that describes tasks (context_id_info, tensor_info) whose first slice turns up after the task tracks
it describes, as a live run may see it: the tasks wait for it, so the rows equal the import's. A kind the job never
writes lets the tasks go once the task_track stream is UNSEEN_STREAM_LAG_NS past them (data time, not wall time)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from chain import aggregate, decode_dir, make_ctx
from chain import decoded_batch as _batch

from pipeline.stage import Batch
from stages.aggregator import UNSEEN_STREAM_LAG_NS, AggregatorStage
from stages.decoder import records
from stages.formats import raw
from stages.schema import CONTEXT_ID_NONE, TASK_COLUMNS, TASK_TEXT_COLUMNS, SymbolTable, pack_rows, unpack_rows
from stages.simulator import simulate

TEXT_AT = [TASK_COLUMNS.index(name) for name in TASK_TEXT_COLUMNS]
CONTEXT_AT = TASK_COLUMNS.index("context_id")
TASK_TRACK, CONTEXT_ID_INFO = "unaging.compact.task_track", "unaging.additional.context_id_info"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> list[Batch]:
    """The decoded batches of a 910B board of two devices (FFTS+ launches), in an import's order."""
    out = tmp_path_factory.mktemp("board")
    prof = simulate(out / "board", chip="910b", iterations=2, rate="max", seed=3, devices=2)
    decoded, _, _ = decode_dir(prof, out)
    return decoded


def _task_rows(emitted: list[Batch]) -> list[tuple[Any, ...]]:
    """Task rows with their texts in place of symbol ids (each run numbers its symbols in its own order)."""
    symbols, rows = SymbolTable(), []
    for batch in emitted:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            for row in unpack_rows(batch):
                for at in TEXT_AT:
                    row[at] = symbols[row[at]]
                rows.append(tuple(repr(value) for value in row))
    return sorted(rows)


def _first_after_task_tracks(decoded: list[Batch], late: str) -> list[Batch]:
    """The batches with every one of stream ``late`` moved behind the first task_track batch that follows a
    ``late`` one's place: the late stream's first slice was listed after the task tracks it describes."""
    stream = [b for b in decoded if b.meta.get("stream") == late]
    rest = [b for b in decoded if b.meta.get("stream") != late]
    first_track = next(i for i, b in enumerate(rest) if b.meta.get("stream") == TASK_TRACK)
    return rest[: first_track + 1] + stream + rest[first_track + 1:]


@pytest.mark.parametrize("late", [CONTEXT_ID_INFO, "unaging.additional.tensor_info"])
def test_a_describing_stream_seen_after_the_task_tracks_gives_the_imports_rows(
        board: list[Batch], late: str, tmp_path: Path) -> None:
    assert any(b.meta.get("stream") == late for b in board)
    imported, agg = aggregate(board, tmp_path / "import")
    live, live_agg = aggregate(_first_after_task_tracks(board, late), tmp_path / "live")
    want = _task_rows(imported)
    assert any(row[CONTEXT_AT] != repr(CONTEXT_ID_NONE) for row in want)  # FFTS+ contexts make rows
    assert _task_rows(live) == want
    assert live_agg.ctx.rejected == agg.ctx.rejected == {}


# -- a kind the job never writes ------------------------------------------------------------------------------
THREAD, OP, OP_TYPE, FFTS_PLUS = 7, 1111, 2222, 52
FACTS = {"device": 0, "platform": 5, "aic_frequency_mhz": 1800.0, "ai_core_num": 24, "aiv_num": 48,
         "hwts_frequency_mhz": 50.0}


def _launch(ts: int, task: int) -> list[Batch]:
    """An FFTS+ launch of one op at host time ``ts``: Node API ⊃ node_basic_info, tensor_info, task_track, and its
    start/end logs on the device."""
    return [_batch("api", [{"thread_id": THREAD, "level": raw.LEVEL_NODE, "type": 5, "item_id": OP,
                            "start_ns": ts - 500, "end_ns": ts + 500}], "unaging.api_event.data"),
            _batch("node_basic", [{"thread_id": THREAD, "ts_ns": ts - 300, "op_name": OP, "op_type": OP_TYPE,
                                   "task_type": 4, "block_num": 8}], "unaging.compact.node_basic_info"),
            _batch("tensor", [{"thread_id": THREAD, "ts_ns": ts - 200, "op_name": OP}],
                   "unaging.additional.tensor_info"),
            _batch("task_track", [{"thread_id": THREAD, "ts_ns": ts, "device_id": 0, "stream_id": 2, "task_id": task,
                                   "task_type": FFTS_PLUS}], TASK_TRACK),
            _batch("task_log", [{"device_id": 0, "stream_id": 2, "task_id": task, "state": state, "ts_ns": at}
                                for state, at in ((records.STATE_START, ts), (records.STATE_END, ts + 100))],
                   "stars_soc.data.0"),
            _batch("step", [{"device_id": 0, "ts_ns": ts + 1000}], "ts_track.data.0")]


def test_without_a_context_id_info_stream_tasks_go_once_the_task_tracks_are_the_lag_past(tmp_path: Path) -> None:
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path))
    start = 10_000

    def rows_out(batches: list[Batch]) -> list[list[Any]]:
        """The task rows these batches let out (a tick sends rows held for a fuller batch)."""
        out = [b for batch in batches for b in agg.process(batch)] + list(agg.tick(time.monotonic()))
        return [row for b in out if b.kind == "task" for row in unpack_rows(b)]

    head = [Batch("device_info", 0, {"facts": FACTS}),
            pack_rows("hash", [[OP, "conv1/Conv2D"], [OP_TYPE, "Conv2D"]], "out"),
            pack_rows("type_info", [[raw.LEVEL_RUNTIME, FFTS_PLUS, "FFTS_PLUS"]], "out")]
    assert rows_out(head + _launch(start, 10) + _launch(start + UNSEEN_STREAM_LAG_NS - 1, 11)) == []
    joined = rows_out(_launch(start + UNSEEN_STREAM_LAG_NS, 12))
    assert [(row[4], row[CONTEXT_AT]) for row in joined] == [(10, CONTEXT_ID_NONE)]  # not the end of the job
    assert agg.accounting()["joins_given_up"] == {}
    rest = [row for b in agg.finish() if b.kind == "task" for row in unpack_rows(b)]
    assert sorted((row[4], row[CONTEXT_AT]) for row in rest) == [(11, CONTEXT_ID_NONE), (12, CONTEXT_ID_NONE)]
    assert agg.ctx.rejected == {}
