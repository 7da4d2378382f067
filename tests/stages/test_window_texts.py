"""The texts of host tasks described a window at a time, across windows."""

from __future__ import annotations

import time
from pathlib import Path

from chain import decoded_batch as _batch
from chain import make_ctx

from pipeline.stage import Batch
from stages.aggregator import AggregatorStage
from stages.decoder import records
from stages.formats import raw
from stages.schema import SymbolTable, pack_rows, unpack_rows

EVENT_RECORD, EVENT_WAIT, MEMCPY_ASYNC = 3, 4, 5
THREAD, STREAM = 7, 2


def _tracks(tasks: list[tuple[int, int, int]]) -> Batch:
    return _batch("task_track", [{"thread_id": THREAD, "ts_ns": ts, "device_id": 0, "stream_id": STREAM,
                                  "task_id": task, "task_type": task_type} for ts, task_type, task in tasks],
                  "unaging.compact.task_track")


def test_a_task_type_keeps_its_own_name_in_a_later_window_of_other_types(tmp_path: Path) -> None:
    """Tasks without a node (their op name is their runtime type) in two chunks of task_tracks whose sets of
    types differ: each row names its own type."""
    tasks = [(1500, EVENT_RECORD, 1), (1600, MEMCPY_ASYNC, 2), (1700, EVENT_WAIT, 3)]
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path))
    batches = [
        Batch("device_info", 0, {"facts": {"device": 0, "platform": 0}}),
        pack_rows("type_info", [[raw.LEVEL_RUNTIME, EVENT_RECORD, "EVENT_RECORD"],
                                [raw.LEVEL_RUNTIME, EVENT_WAIT, "EVENT_WAIT"],
                                [raw.LEVEL_RUNTIME, MEMCPY_ASYNC, "MEMCPY_ASYNC"]], "out"),
        _batch("api", [{"thread_id": THREAD, "level": raw.LEVEL_ACL, "type": 1, "start_ns": 1000, "end_ns": 10_000}],
               "unaging.api_event.data"),
        _tracks(tasks[:2]), _tracks(tasks[2:]),
        _batch("task_log", [{"device_id": 0, "stream_id": STREAM, "task_id": task, "state": state,
                             "ts_ns": 100_000 * task + offset}
                            for _, _, task in tasks
                            for state, offset in ((records.STATE_START, 0), (records.STATE_END, 50_000))],
               "hwts.data.0"),
        _batch("step", [{"device_id": 0, "ts_ns": 10**6}], "ts_track.data.0")]
    out: list[Batch] = []
    for batch in batches:
        out.extend(agg.process(batch))
    out.extend(agg.tick(time.monotonic()))
    out.extend(agg.finish())
    symbols, rows = SymbolTable(), []
    for batch in out:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            rows.extend(unpack_rows(batch))
    assert [(row[4], symbols[row[8]], symbols[row[10]]) for row in rows] == [
        (1, "EVENT_RECORD", "EVENT_RECORD"), (2, "MEMCPY_ASYNC", "MEMCPY_ASYNC"), (3, "EVENT_WAIT", "EVENT_WAIT")]
    assert agg.slow_path == {}
