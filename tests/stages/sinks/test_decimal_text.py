"""decimal_rows (numpy, a whole batch) against num3 / num6 per value."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.sinks._decimal_text import PIECE_VALUES, decimal_rows
from stages.sinks._format import NA, num3
from stages.sinks._summary_columns import pmu_cells
from stages.sinks._summary_tables import num6

PRINTERS = {3: num3, 6: num6}


def near_halves(decimals: int) -> st.SearchStrategy[float]:
    """Values whose scaled product lies on or next to a half between two integers (the rounding's hard cases)."""
    halves = st.integers(-10**9, 10**9).map(lambda k: (k + 0.5) / 10**decimals)
    return st.tuples(halves, st.integers(-3, 3)).map(lambda pair: _step(*pair))


def _step(value: float, ulps: int) -> float:
    for _ in range(abs(ulps)):
        value = math.nextafter(value, math.copysign(math.inf, ulps))
    return value


def values(decimals: int) -> st.SearchStrategy[float | None]:
    bound = 2.0**49 / 10**decimals
    return st.one_of(
        st.none(), near_halves(decimals), st.floats(-bound, bound),
        st.integers(-10**6, 10**6).map(lambda k: k / 2**7),  # exact ties
        st.sampled_from([0.0, -0.0, -0.0004, 0.0005, 10.0, 100.05, 5e-324, -5e-324]))


def expected_rows(numbers: list[float | None], decimals: int, width: int) -> list[str]:
    cells = [NA if value is None else PRINTERS[decimals](value) for value in numbers]
    return [",".join(cells[i : i + width]) for i in range(0, len(cells), width)]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), decimals=st.sampled_from([3, 6]), width=st.integers(1, 5), rows=st.integers(0, 12))
def test_rows_read_as_each_value_alone(data: st.DataObject, decimals: int, width: int, rows: int) -> None:
    numbers = data.draw(st.lists(values(decimals), min_size=width * rows, max_size=width * rows))
    array = np.array([math.nan if value is None else value for value in numbers], dtype=np.float64)
    texts = decimal_rows(array, decimals, width)
    assert texts is not None
    assert texts.to_pylist() == expected_rows(numbers, decimals, width)


def test_a_batch_larger_than_one_piece_reads_as_each_value_alone() -> None:
    rng = np.random.default_rng(7)
    width = 7
    array = np.round(rng.normal(0, 1e4, width * (2 * PIECE_VALUES // width + 3)), 4)  # two pieces of rows, a rest
    array[::97] = math.nan
    texts = decimal_rows(array, 3, width)
    assert texts is not None
    numbers = [None if math.isnan(value) else value for value in array.tolist()]
    assert texts.to_pylist() == expected_rows(numbers, 3, width)


def test_values_it_cannot_print_are_left_to_the_caller() -> None:
    for value in (math.inf, -math.inf, 1e14, -1e14):
        assert decimal_rows(np.array([1.0, value]), 3, 2) is None


def expected_pmu_cells(rows: list[list[float | None] | None], sources: list[int | None]) -> list[str]:
    return [",".join(NA if k is None or row is None or k >= len(row) or row[k] is None else num3(row[k])
                     for k in sources) for row in rows]


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.lists(st.one_of(values(3), st.just(math.nan)), max_size=4)),
                     min_size=1, max_size=8),
       sources=st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=4))
def test_pmu_cells_read_as_each_value_alone(rows: list[list[float | None] | None],
                                            sources: list[int | None]) -> None:
    """pmu_cells (a frame's list column, all rows at once) against num3 of each value under its source: the
    batch's columns matched by name, or in the header's order."""
    frame = pl.DataFrame({"pmu": rows}, schema={"pmu": pl.List(pl.Float64)})
    in_order: list[int | None] = list(range(len(sources)))
    for under in (sources, in_order):
        cells = pmu_cells(frame, under)
        assert cells is not None
        assert cells.to_list() == expected_pmu_cells(rows, under)
