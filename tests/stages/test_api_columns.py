"""API records resolved a batch at a time give what naming them one at a time gives: the same rows, symbols in
the same order, statistics keys in order of first occurrence with their durations in record order, and the
first record whose name is unknown holding back the rest."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.apis import NAMED_LEVELS, ApiChunk, ApiResolver
from stages.aggregator.columns import ColumnRows
from stages.decoder import records
from stages.formats import raw
from stages.schema import SymbolTable

LEVELS = [raw.LEVEL_ACL, raw.LEVEL_MODEL, raw.LEVEL_NODE, raw.LEVEL_RUNTIME, raw.LEVEL_HCCL, 7]


def _reference(chunk: ApiChunk, types: dict[Any, str], hashes: dict[int, str], symbols: SymbolTable,
               expired: bool) -> tuple[list[list[Any]], dict[tuple[str, str], list[int]], int]:
    """One record at a time, as the aggregator did before it worked on columns."""
    rows: list[list[Any]] = []
    durations: dict[tuple[str, str], list[int]] = {}
    unnamed = 0
    for i in range(chunk.cursor, len(chunk)):
        level, type_id, item = int(chunk.levels[i]), int(chunk.types[i]), int(chunk.items[i])
        name = types.get((level, type_id)) if level in NAMED_LEVELS else hashes.get(item)
        if name is None:
            if not expired:
                break
            unnamed += 1
        if not name:
            name = str(item if level not in raw.LEVEL_NAMES else type_id)
        struct = raw.ACL_API_CLASS.get(type_id >> 16, "") if level == raw.LEVEL_ACL else ""
        ids = symbols.intern(struct), symbols.intern(name)
        start, end = int(chunk.starts[i]), int(chunk.ends[i])
        durations.setdefault((raw.LEVEL_NAMES.get(level) or str(level), name), []).append(end - start)
        rows.append([start, end, level, ids[0], ids[1], int(chunk.threads[i]), chunk.first_connection + i, item])
    return rows, durations, unnamed


def _chunk(draw: Any) -> ApiChunk:
    n = draw(st.integers(1, 60))
    arr = np.zeros(n, records.DTYPES["api"])
    arr["level"] = draw(st.lists(st.sampled_from(LEVELS), min_size=n, max_size=n))
    arr["type"] = draw(st.lists(st.sampled_from([1, 2, 0x10001, 0x20003]), min_size=n, max_size=n))
    arr["item_id"] = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    arr["start_ns"] = draw(st.lists(st.integers(0, 10**12), min_size=n, max_size=n))
    arr["end_ns"] = arr["start_ns"] + np.array(draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n)))
    arr["thread_id"] = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    return ApiChunk.of(arr, first_connection=draw(st.integers(1, 1000)))


@st.composite
def cases(draw: Any) -> tuple[ApiChunk, dict[Any, str], dict[int, str], bool]:
    chunk = _chunk(draw)
    types = {(level, t): draw(st.sampled_from(["", "aclmdlExecute", "launch", "same"]))
             for level in NAMED_LEVELS for t in (1, 2, 0x10001, 0x20003) if draw(st.booleans())}
    hashes = {item: draw(st.sampled_from(["", "Conv2D", "same"])) for item in range(6) if draw(st.booleans())}
    return chunk, types, hashes, draw(st.booleans())


@settings(max_examples=100, deadline=None)
@given(cases())
def test_a_batch_of_api_records_resolves_as_one_at_a_time(case: tuple[ApiChunk, dict[Any, str], dict[int, str],
                                                                      bool]) -> None:
    chunk, types, hashes, expired = case
    expected_symbols = SymbolTable()
    expected_rows, expected_durations, expected_unnamed = _reference(chunk, types, hashes, expected_symbols, expired)
    symbols = SymbolTable()
    durations: dict[tuple[str, str], list[int]] = {}
    columns, unnamed = ApiResolver(symbols.intern).resolve(chunk, types, hashes, durations, expired)
    rows = [list(map(int, row)) for row in zip(*columns, strict=True)] if columns else []
    assert rows == expected_rows
    assert list(durations.items()) == list(expected_durations.items())  # key order too
    assert unnamed == expected_unnamed
    assert symbols.texts == expected_symbols.texts
    assert chunk.cursor == len(expected_rows)


def test_rows_held_as_columns_leave_in_order_a_number_at_a_time() -> None:
    held = ColumnRows(2)
    held.add([np.arange(5), np.arange(5) * 10])
    held.add([np.arange(5, 8), np.arange(5, 8) * 10])
    assert len(held) == 8
    first = held.take(6)
    assert first[0].tolist() == [0, 1, 2, 3, 4, 5] and first[1].tolist() == [0, 10, 20, 30, 40, 50]
    rest = held.take(6)
    assert rest[0].tolist() == [6, 7] and len(held) == 0
