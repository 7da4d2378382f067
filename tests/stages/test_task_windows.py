"""Task rows and op statistics made a window at a time give what the per-task code gives: statistics queued as
codes and added a group at a time equal those added task by task (keys in order of first task), and a table of
column blocks and row lists equals the table of the same rows as lists."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.stats import StatsBook
from stages.aggregator.task_rows import PMU_AT, TaskBlock, TaskRowStore, record_counts
from stages.schema import TASK_COLUMNS
from stages.tables import table_of_rows

OP_TYPES = [("MatMul", "AI_CORE"), ("Add", "AI_VECTOR_CORE"), ("Cast", "AI_CORE"), ("Send", "AI_CPU")]
tasks = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(OP_TYPES), st.integers(-5, 10 ** 12)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(tasks, st.lists(st.integers(0, 60), max_size=4), st.lists(st.integers(0, 60), max_size=3))
def test_queued_op_statistics_equal_those_added_one_by_one(
        ops: list[tuple[int, tuple[str, str], int]], cuts: list[int], reads: list[int]) -> None:
    one_by_one, queued = StatsBook(), StatsBook()
    bounds = sorted({0, len(ops), *(min(c, len(ops)) for c in cuts), *(min(r, len(ops)) for r in reads)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        part = ops[start:end]
        for device, (op_type, core), duration in part:
            one_by_one.add_op(device, op_type, core, duration)
        queued.queue_ops([device for device, _, _ in part], [queued.name_code(*names) for _, names, _ in part],
                         [duration for _, _, duration in part])
        if end in reads:
            assert queued.op_rows() == one_by_one.op_rows()
    assert queued.op_rows() == one_by_one.op_rows()
    assert queued.changed == one_by_one.changed


def _row(i: int, pmu: Any) -> list[Any]:
    row: list[Any] = [i * 7 + at for at in range(len(TASK_COLUMNS))]
    row[PMU_AT] = pmu
    return row


def _block(rows: list[list[Any]]) -> TaskBlock:
    """Rows whose ``pmu`` values are float lists (None: no value) as a block."""
    columns = [np.array([row[at] for row in rows], np.int64) for at in range(len(TASK_COLUMNS)) if at != PMU_AT]
    widths = [len(row[PMU_AT]) for row in rows]
    offsets = np.concatenate(([0], np.cumsum(widths))).astype(np.int64)
    values = np.array([v for row in rows for v in row[PMU_AT]], np.float64).reshape(-1)
    return TaskBlock(columns, offsets, values)


cells = st.lists(st.one_of(st.none(), st.floats(-1e9, 1e9)), max_size=4)
segments = st.lists(st.tuples(st.booleans(), st.lists(cells, min_size=1, max_size=6)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(segments, st.integers(1, 9))
def test_tables_of_blocks_and_row_lists_equal_tables_of_the_rows(
        parts: list[tuple[bool, list[list[float | None]]]], limit: int) -> None:
    store, rows = TaskRowStore(), []
    for as_block, pmu_cells in parts:
        made = [_row(len(rows) + i, cell) for i, cell in enumerate(pmu_cells)]
        rows += made
        if as_block:
            store.add_block(_block(made))
        else:
            for row in made:
                store.add_row(row)
    tables = []
    while len(store):
        tables.append(store.table(limit))
        assert tables[-1].num_rows <= limit
    expected = table_of_rows("task", rows)
    found = pa.concat_tables(tables) if tables else expected.slice(0, 0)
    assert found.to_pylist() == expected.to_pylist()


def test_record_counts_take_each_record_from_its_chunk() -> None:
    dtype = np.dtype([("total_cycle", "<u8"), ("pmu", "<u8", (2,)), ("block", "<u2")])
    first, second = np.zeros(3, dtype), np.zeros(2, dtype)
    first["total_cycle"], second["total_cycle"] = [10, 11, 12], [20, 21]
    first["block"], second["block"] = [1, 0, 3], [4, 5]
    cycles, counters, blocks = record_counts([(first, 2), (first, 0), (second, 1), (first, 1), (second, 0)])
    assert cycles.tolist() == [12, 10, 21, 11, 20]
    assert blocks.tolist() == [3, 1, 5, 0, 4]
    assert counters.shape == (5, 2)


PIPE = [0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55]
STARS_FACTS = [
    {"platform": 5, "aic_frequency_mhz": 1800.0, "ai_core_num": 24, "aiv_num": 48, "pmu_events": PIPE,
     "aiv_pmu_events": PIPE},
    {"platform": 5, "aic_frequency_mhz": 1650.0, "ai_core_num": 20, "pmu_events": [0x8, 0xA, 0x303, 0xA]},
    {"platform": 7, "aic_frequency_mhz": 0, "ai_core_num": 0, "aiv_pmu_events": [0x54, 0x55, 0xC]},
]
counts = st.one_of(st.integers(0, 3), st.integers(0, 2 ** 40), st.integers(2 ** 53 - 2, 2 ** 64 - 1))
pmu_records = st.lists(st.tuples(counts, st.lists(counts, min_size=8, max_size=8), st.sampled_from([0, 1, 2, 3]),
                                 st.integers(0, 80), st.integers(-3, 10 ** 10),
                                 st.one_of(st.none(), st.sampled_from([0.0, 1300.0, 1850.5]))),
                       min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(STARS_FACTS))), pmu_records)
def test_stars_batch_values_equal_those_of_one_record(facts_at: int, found: list[Any]) -> None:
    from stages.aggregator.stars import StarsPmu
    from stages.decoder import records

    stars = StarsPmu(STARS_FACTS[facts_at])
    arr = np.zeros(len(found), records.CONTEXT_PMU)
    for i, (cycles, counters, core, _, _, _) in enumerate(found):
        arr[i]["total_cycle"], arr[i]["pmu"], arr[i]["core"] = cycles, counters, core
    blocks = np.array([block for *_, block, _, _ in found], np.int64)
    durations = np.array([duration for *_, duration, _ in found], np.int64)
    clocks = np.array([clock for *_, clock in found], np.float64)  # None → NaN
    shown, hidden, inexact = stars.batch_values(arr["total_cycle"], arr["pmu"], arr["core"], blocks, durations,
                                                clocks)
    for i, (*_, block, duration, clock) in enumerate(found):
        if inexact[i]:
            continue
        expected = stars.split_values(arr[i], block, duration, clock)
        assert [None if v != v else v for v in shown[i].tolist()] == expected[0]
        assert [None if v != v else v for v in hidden[i].tolist()] == expected[1]
