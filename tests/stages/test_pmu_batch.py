"""The batch PMU evaluator gives the one-record formulas' floats bit for bit (pmu_batch vs metrics.pmu_values)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.metrics import pmu_values
from stages.aggregator.pmu_batch import EXACT_LIMIT, pmu_batch, round_array
from stages.formats.raw import PMU_EVENT_SETS

GROUPS = sorted(PMU_EVENT_SETS)
SLOTS = 8
# counts and cycles: zeros, small, typical, near the exact-path limit and beyond it (the one-record fallback)
COUNT = st.one_of(st.just(0), st.integers(0, 50), st.integers(0, 5_000_000),
                  st.integers(EXACT_LIMIT - 3, EXACT_LIMIT + 3), st.integers(0, 2**64 - 1))
RECORD = st.tuples(COUNT, st.lists(COUNT, min_size=SLOTS, max_size=SLOTS), st.integers(0, 200),
                   st.integers(0, 10**9), st.one_of(st.none(), st.just(0.0), st.floats(50, 2000)))


def rows_of(block: np.ndarray) -> list[list[float | None]]:
    """A batch's rows as the one-record formulas give them (NaN: no value, None)."""
    return [[None if v != v else v for v in row] for row in block.tolist()]


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=300, deadline=None)
@given(group=st.sampled_from([*GROUPS, "custom"]), platform=st.sampled_from([0, 1, 4]),
       cores=st.integers(1, 32), mhz=st.sampled_from([0.0, 680.0, 1000.0, 1800.0]),
       records=st.lists(RECORD, min_size=1, max_size=12))
def test_batch_equals_one_record_formulas(group: str, platform: int, cores: int, mhz: float,
                                          records: list[tuple[int, list[int], int, int, float | None]]) -> None:
    events = [0x8, 0x2, 0x54, 0x55] if group == "custom" else list(PMU_EVENT_SETS[group])
    metric = "" if group == "custom" else group
    expected = [pmu_values(events, cycles, counters, block, cores, mhz, metric=metric, platform=platform,
                           duration_ns=duration, time_mhz=clock)
                for cycles, counters, block, duration, clock in records]
    got = rows_of(pmu_batch(events, np.array([r[0] for r in records], np.uint64),
                            np.array([r[1] for r in records], np.uint64),
                            np.array([r[2] for r in records]), cores, mhz, metric=metric, platform=platform,
                            duration_ns=np.array([r[3] for r in records]),
                            time_mhz=np.array([np.nan if r[4] is None else r[4] for r in records])))
    assert len(got) == len(expected)
    for row, want in zip(got, expected, strict=True):
        assert len(row) == len(want)
        assert all(same(a, b) for a, b in zip(row, want, strict=True)), (row, want)


def test_a_large_batch_of_typical_records_matches_too() -> None:
    rng = np.random.default_rng(5)
    n = 2000
    cycles = rng.integers(0, 3_000_000, n).astype(np.uint64)
    counters = (cycles[:, None] * rng.uniform(0, 1, (n, SLOTS))).astype(np.uint64)
    block, duration = rng.integers(0, 48, n), rng.integers(0, 2_000_000, n)
    clocks = np.where(rng.uniform(size=n) < 0.2, rng.uniform(800, 1800, n), np.nan)
    for group in GROUPS:
        for platform in (0, 1):
            events = list(PMU_EVENT_SETS[group])
            got = rows_of(pmu_batch(events, cycles, counters, block, 30, 1000.0, metric=group, platform=platform,
                                    duration_ns=duration, time_mhz=clocks))
            for i in range(n):
                clock = None if np.isnan(clocks[i]) else float(clocks[i])
                want = pmu_values(events, int(cycles[i]), [int(v) for v in counters[i]], int(block[i]), 30, 1000.0,
                                  metric=group, platform=platform, duration_ns=int(duration[i]), time_mhz=clock)
                assert all(same(a, b) for a, b in zip(got[i], want, strict=True)), (group, platform, i)


@given(values=st.lists(st.floats(allow_nan=True, allow_infinity=True)
                       | st.integers(-10**7, 10**7).map(lambda k: k / 2000)
                       | st.integers(-10**6, 10**6).map(lambda k: k / 1000 + 0.0005), max_size=50),
       digits=st.sampled_from([2, 3]))
def test_round_array_is_python_round_bit_for_bit(values: list[float], digits: int) -> None:
    """Ties (k/2000, k/1000 + 0.0005), huge, tiny, signed zeros, NaN and inf round as Python's round does."""
    got = round_array(np.array(values, np.float64), digits)
    expected = np.array([round(v, digits) for v in values], np.float64)
    for a, b in zip(got.tolist(), expected.tolist(), strict=True):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
