"""Column batches on the aggregator's ports: typed Arrow tables that round-trip the positional rows exactly."""

from __future__ import annotations

from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stages import schema, tables
from stages.schema import SymbolTable, pack_rows, unpack_rows
from stages.sinks._format import us, us_trimmed
from stages.sinks._text_columns import us_text, us_trimmed_text

U64_MAX = (1 << 64) - 1


def _task_row(**overrides: Any) -> list[Any]:
    row: dict[str, Any] = {name: 0 for name in schema.TASK_COLUMNS}
    row.update(model_id=schema.MODEL_ID_NONE, context_id=schema.CONTEXT_ID_NONE, stream_id=-1, start_ns=1,
               end_ns=2, pmu=[1.5, None, 0.0], op_name=3)
    row.update(overrides)
    return [row[name] for name in schema.TASK_COLUMNS]


ROWS: dict[str, list[list[Any]]] = {
    "task": [_task_row(), _task_row(pmu=[], task_id=65535, batch_id=7)],
    "api": [[10, 20, 20000, 1, 2, 77, 5, U64_MAX], [30, 40, 5000, 0, 3, 77, 6, 0]],
    "tx": [[1, 2, 3, 4, 5, 6, 7, U64_MAX, 9, "frame 27355", U64_MAX, U64_MAX]],
    "step_trace": [[0, 1, 1, 10, None, 30, 20, None, 5, None, [[1, 2], [3, None]]], [0, 1, 2, *[None] * 7, []]],
    "aicpu": [[0, 100, 4, 1, None, 3, 4, 5, 6, 7]],
    "l2_cache": [[0, 1, 2, None, 0.25, 0, 9]],
    "aicore_freq": [[0, 123, 1800]],
    "op_statistic": [[0, "Conv2D", "AI_CORE", 3, 300, 90, 110]],
    "api_statistic": [["acl", "aclmdlExecute", 2, 40, 10, 30, 1e-3]],
}


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_every_kind_round_trips_its_rows_exactly(kind: str) -> None:
    batch = tables.pack_columns(kind, ROWS[kind], "tasks", {"symbols": [[3, "Add"]]})
    assert tables.is_table(batch) and batch.count == len(ROWS[kind])
    assert unpack_rows(batch) == ROWS[kind]
    assert [type(value) for value in unpack_rows(batch)[0]] == [type(value) for value in ROWS[kind][0]]


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_an_empty_batch_keeps_its_schema(kind: str) -> None:
    table = tables.unpack_table(tables.pack_columns(kind, [], "stats"))
    assert table.num_rows == 0 and table.schema == tables.SCHEMAS[kind]


def test_a_sink_hands_the_table_to_polars_in_one_call_and_reads_texts() -> None:
    symbols = SymbolTable()
    ids = [symbols.intern(text) for text in ("aclmdlExecute", "ACL_MODEL")]
    batch = tables.pack_columns("api", [[10, 25, 20000, ids[1], ids[0], 1, 0, 5]], "tasks",
                                {"symbols": symbols.take_unsent()})
    receiving = SymbolTable()
    receiving.learn(batch.meta["symbols"])
    frame = pl.from_arrow(tables.resolve_symbols(tables.unpack_table(batch), "api", receiving))
    assert isinstance(frame, pl.DataFrame)
    assert frame.select("name", "struct_type").row(0) == ("aclmdlExecute", "ACL_MODEL")
    assert frame["end_ns"][0] - frame["start_ns"][0] == 15


def test_a_value_outside_its_column_type_is_refused() -> None:
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)):
        tables.pack_columns("aicore_freq", [[0, "soon", 1800]], "tasks")


def test_msgpack_rows_still_read_as_rows() -> None:
    assert unpack_rows(pack_rows("hash", [[1, "Add"]], "out")) == [[1, "Add"]]


def test_a_merge_over_all_devices_names_them_all() -> None:
    batch = tables.pack_columns("op_statistic", [["all", "Add", "AI_CORE", 1, 5, 5, 5]], "out", None,
                                tables.OP_STATISTIC_ALL_DEVICES)
    assert unpack_rows(batch)[0][0] == "all"


@given(st.lists(st.integers(min_value=-(10**15), max_value=10**15), max_size=50))
def test_us_text_columns_equal_the_per_value_text(values: list[int]) -> None:
    frame = pl.DataFrame({"ns": values}, schema={"ns": pl.Int64})
    cells = frame.select(us_text(pl.col("ns")).alias("a"), us_trimmed_text(pl.col("ns")).alias("b"))
    assert cells["a"].to_list() == [us(value) for value in values]
    assert cells["b"].to_list() == [us_trimmed(value) for value in values]
