"""The AI Core PMU columns of many tasks at once: :func:`.metrics.pmu_values`, vectorized.

Every formula of :data:`.metrics.GROUPS` is evaluated column-wise with numpy in the same order of
float operations as the one-record version, so the values are the same floats bit for bit
(tests/stages/test_pmu_batch.py checks this against :func:`.metrics.pmu_values`). Python's
``round`` (correctly rounded to decimals) is applied element by element where msprof rounds.
Records whose counters or cycles reach 2^32 take the one-record path: there Python's exact
integers and numpy's int64 could part ways.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stages.aggregator.metrics import (
    BANDWIDTH_UNIT,
    BOUND_RATIOS,
    CUBE_UTILIZATION,
    MEMORY_BOUND,
    MINI_PLATFORM,
    Formula,
    _derived,
    _group_columns,
    group_of,
    pmu_values,
)

EXACT_LIMIT = 1 << 32
_VECTOR_EVENTS = (0x4C, 0x4D, 0x4B, 0x4E, 0x4F)
_VECTOR_LANES = {True: (128.0, 64.0, 32.0, 64.0, 32.0), False: (128.0, 64.0, 64.0, 64.0, 32.0)}
Column = np.ndarray | None  # float64 values, NaN where the formula has none; None: no value in any row


class _Batch:
    """The inputs of n records, column-wise (what :class:`.metrics.Inputs` is for one)."""

    def __init__(self, events: Sequence[int], cycles: np.ndarray, counters: np.ndarray, block: np.ndarray,
                 core_num: int, freq_hz: float, time_freq_hz: np.ndarray, mini: bool) -> None:
        self.counters = {event: counters[:, i] for i, event in enumerate(events[: counters.shape[1]])}
        self.cycles = cycles
        self.fcycles = cycles.astype(np.float64)
        self.block = block
        self.core_num = core_num
        self.freq_hz = freq_hz
        self.time_freq_hz = time_freq_hz
        self.mini = mini
        self.no_cycles = cycles == 0
        self.cores_used = np.ceil(block / core_num) if core_num else np.zeros(len(block))
        self._aicore: Column = None
        self._aicore_done = False

    def total(self, events: Sequence[int]) -> np.ndarray | None:
        if any(event not in self.counters for event in events):
            return None
        total = np.zeros(len(self.cycles), np.int64)
        for event in events:
            total = total + self.counters[event]
        return total

    def ratio(self, events: Sequence[int]) -> Column:
        if any(event not in self.counters for event in events):
            return None
        divisor = np.where(self.no_cycles, 1.0, self.fcycles)
        value = self.counters[events[0]] / divisor
        for event in events[1:]:
            value = value + self.counters[event] / divisor
        return np.where(self.no_cycles, np.nan, value)

    def aicore_us(self) -> Column:
        if self._aicore_done:
            return self._aicore
        self._aicore_done = True
        if not self.core_num:
            return None
        bad = self.time_freq_hz == 0
        freq = np.where(bad, 1.0, self.time_freq_hz)
        exact = (self.cycles * 1000).astype(np.float64) * 1000.0 / freq / self.block * self.cores_used
        if not self.mini:
            exact = round_array(exact, 2)
        self._aicore = np.where(bad, np.nan, exact)
        return self._aicore


def _time(x: _Batch, events: tuple[int, ...]) -> Column:
    total, aicore = x.total(events), x.aicore_us()
    if total is None or aicore is None:
        return None
    if x.mini:
        freq = np.where(x.time_freq_hz == 0, 1.0, x.time_freq_hz)
        value = (total * 1000000).astype(np.float64) / freq / x.block * x.cores_used
        return np.where(np.isnan(aicore), np.nan, value)
    ratio = x.ratio(events)
    return None if ratio is None else aicore * ratio


def _bandwidth(x: _Batch, event: int, hwts_bytes: float, mini_bytes: float) -> Column:
    count = x.counters.get(event)
    if count is None:
        return None
    if not x.freq_hz:
        return np.zeros(len(count))
    cycles = np.where(x.no_cycles, 1.0, x.fcycles)
    if x.mini:
        seconds = (x.cycles * 1000).astype(np.float64) / (x.freq_hz * 1000.0) / x.block * x.cores_used
        empty = seconds == 0
        value = (count * mini_bytes) / np.where(empty, 1.0, seconds) / BANDWIDTH_UNIT
        return np.where(x.no_cycles, 0.0, np.where(empty, np.nan, value))
    value = (count * hwts_bytes) / (cycles / x.freq_hz) / BANDWIDTH_UNIT
    return np.where(x.no_cycles, 0.0, value)


def _kilobytes(x: _Batch, kb_per_count: float, plus: tuple[int, ...], minus: tuple[int, ...]) -> Column:
    added = x.total(plus)
    taken = x.total(minus) if minus else np.zeros(len(x.cycles), np.int64)
    if added is None or taken is None:
        return None
    return kb_per_count * added - kb_per_count * taken


def _icache_miss_rate(x: _Batch) -> Column:
    miss, req = x.counters.get(0x55), x.counters.get(0x54)
    if miss is None or req is None:
        return None
    no_req = req == 0
    requests = np.where(no_req, 1, req)
    if x.mini:
        return np.where(no_req, np.nan, miss / requests)
    cycles = np.where(x.no_cycles, 1.0, x.fcycles)
    value = np.where(no_req, miss / cycles, (miss / cycles) / (requests / cycles))
    return np.where(x.no_cycles, np.nan, value)


def _cube_fops(x: _Batch) -> Column:
    fp16, int8 = x.counters.get(0x49), x.counters.get(0x4A)
    if fp16 is None or int8 is None:
        return None
    if x.mini:
        return (fp16 * 4096).astype(np.float64) * 2.0 + (int8 * 8192).astype(np.float64) * 2.0
    cycles = np.where(x.no_cycles, 1.0, x.fcycles)
    half = fp16 / cycles * cycles * 16 * 16 * 16 * 2
    byte = int8 / cycles * cycles * 16 * 16 * 32 * 2
    return np.where(x.no_cycles, np.nan, half + byte)


def _vector_fops(x: _Batch) -> Column:
    if any(event not in x.counters for event in _VECTOR_EVENTS):
        return None
    lanes = _VECTOR_LANES[x.mini]
    cycles = np.where(x.no_cycles, 1.0, x.fcycles)
    value: np.ndarray | None = None
    for event, lane in zip(_VECTOR_EVENTS, lanes, strict=True):
        count = x.counters[event]
        term = count * lane if x.mini else count / cycles * cycles * lane
        value = term if value is None else value + term
    assert value is not None
    return value if x.mini else np.where(x.no_cycles, np.nan, value)


def _column(x: _Batch, formula: Formula) -> Column:
    kind, args = formula.kind, formula.args
    if kind == "ratio":
        return x.ratio(args)
    if kind == "time":
        return _time(x, args)
    if kind == "bandwidth":
        return _bandwidth(x, *args)
    if kind == "count":
        found = x.counters.get(args[0])
        return None if found is None else found.astype(np.float64)
    if kind == "kilobytes":
        return _kilobytes(x, *args)
    if kind == "icache_miss_rate":
        return _icache_miss_rate(x)
    if kind == "cube_fops":
        return _cube_fops(x)
    if kind == "vector_fops":
        return _vector_fops(x)
    raise ValueError(f"no batch form for PMU formula kind {kind!r}")


def round_array(values: np.ndarray, digits: int) -> np.ndarray:
    """Python's ``round(v, digits)`` of each value, bit for bit. ``rint(v * 10**digits) / 10**digits`` is that
    value wherever the scaled product is not within its rounding error of a half (then both round the same
    integer N, and N / 10**digits is the double nearest to N·10^-digits, as ``round`` returns); the few others
    (ties, huge, NaN, inf) go through ``round`` itself."""
    scale = 10.0 ** digits
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * scale
        off_half = np.abs(scaled - np.floor(scaled) - 0.5)
        safe = (off_half > np.abs(scaled) * 2.0 ** -50) & (np.abs(scaled) < 2.0 ** 50)
        out = np.rint(scaled) / scale
    for i in np.flatnonzero(~safe).tolist():
        out[i] = round(float(values[i]), digits)
    return out


def _as_values(column: Column, n: int) -> np.ndarray:
    """A formula's column, NaN where it has no value."""
    return np.full(n, np.nan) if column is None else np.asarray(column, np.float64)


def _memory_bound(columns: dict[str, Column], n: int) -> np.ndarray:
    """round(mte2 / max(vec, mac), 3) of the rounded ratios (0.0 where both are 0); None where one is None."""
    triple = next(t for t in BOUND_RATIOS if all(name in columns for name in t))
    found = [columns[name] for name in triple]
    if any(column is None for column in found):
        return np.full(n, np.nan)
    mte2, vec, mac = (round_array(column, 3) for column in found if column is not None)
    top = np.maximum(vec, mac)
    missing = np.isnan(mte2) | np.isnan(top)
    zero = top == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        bound = np.where(zero, 0.0, round_array(mte2 / np.where(zero, 1.0, top), 3))
    return _with_none(bound, missing)


def _cube_utilization(mac_ratio: Column, cycles: np.ndarray, aic_mhz: float, core_num: int,
                      durations: np.ndarray) -> np.ndarray:
    """round(cycles / (aic_mhz · cores · duration) · 1e5, 3) where the rounded mac ratio, cycles, duration and
    clock are all non-zero, else 0.0; None where the mac ratio is None."""
    n = len(cycles)
    if mac_ratio is None:
        return np.full(n, np.nan)
    mac = round_array(mac_ratio, 3)
    missing = np.isnan(mac)
    if not (aic_mhz and core_num):
        return _with_none(np.zeros(n), missing)
    zero = (mac == 0) | (cycles == 0) | (durations == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = round_array(cycles / (aic_mhz * core_num * np.where(zero, 1, durations)) * 1000.0 * 100, 3)
    return _with_none(np.where(zero, 0.0, value), missing)


def _with_none(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """``values``, NaN where ``missing`` (no value)."""
    return np.where(missing, np.nan, values)


def pmu_batch(events: list[int], cycles: np.ndarray, counters: np.ndarray, block: np.ndarray, core_num: int,
              aic_mhz: float, *, metric: str = "", platform: int = 1, duration_ns: np.ndarray | None = None,
              time_mhz: np.ndarray | None = None) -> np.ndarray:
    """:func:`.metrics.pmu_values` of n records: ``cycles`` (n), ``counters`` (n × slots), ``block`` (n),
    ``duration_ns`` (n) and ``time_mhz`` (n; NaN or 0 where info.json's clock applies). One row per record,
    NaN where a value is none (N/A)."""
    n = len(cycles)
    durations = np.zeros(n, np.int64) if duration_ns is None else np.asarray(duration_ns, np.int64)
    clocks = np.full(n, np.nan) if time_mhz is None else np.asarray(time_mhz, np.float64)
    cycles = np.asarray(cycles, np.uint64)
    counters = np.asarray(counters, np.uint64).reshape(n, -1)
    exact = (cycles < EXACT_LIMIT) & (counters < EXACT_LIMIT).all(axis=1)
    outside = np.flatnonzero(~exact)
    exact_rows: dict[int, np.ndarray] = {}
    for i in outside.tolist():  # huge counters: Python's exact integers, one record at a time
        clock = float(clocks[i])
        exact_rows[i] = np.array(pmu_values(
            events, int(cycles[i]), [int(v) for v in counters[i]], int(block[i]), core_num, aic_mhz, metric=metric,
            platform=platform, duration_ns=int(durations[i]), time_mhz=clock if clock == clock and clock else None),
            np.float64)
    if len(outside) == n:
        return np.array([exact_rows[i] for i in range(n)], np.float64).reshape(n, -1)
    inside = np.flatnonzero(exact)
    computed = _computed(events, cycles[inside], counters[inside], np.asarray(block)[inside], core_num, aic_mhz,
                         metric, platform, durations[inside], clocks[inside])
    if not exact_rows:
        return computed
    out = np.empty((n, computed.shape[1]), np.float64)
    out[inside] = computed
    for i, row in exact_rows.items():
        out[i] = row
    return out


def _computed(events: list[int], cycles: np.ndarray, counters: np.ndarray, block: np.ndarray, core_num: int,
              aic_mhz: float, metric: str, platform: int, durations: np.ndarray, clocks: np.ndarray) -> np.ndarray:
    """:func:`pmu_batch` of records whose counters and cycles are below ``EXACT_LIMIT``."""
    mini = platform == MINI_PLATFORM
    time_clock = np.where(np.isnan(clocks) | (clocks == 0), aic_mhz, clocks) * 1e6
    x = _Batch(events, cycles.astype(np.int64), counters.astype(np.int64),
               np.maximum(np.asarray(block, np.int64), 1), core_num, aic_mhz * 1e6, time_clock, mini)
    m = len(x.cycles)
    columns = _group_columns(group_of(metric, events), events, platform)
    found = {name: _column(x, formula) for name, formula in columns}
    table = [_as_values(x.aicore_us(), m), x.fcycles, *(_as_values(column, m) for column in found.values())]
    for name in _derived(list(found)):
        if name == MEMORY_BOUND:
            table.append(_memory_bound(found, m))
        elif name == CUBE_UTILIZATION:
            table.append(_cube_utilization(found["mac_ratio"], x.cycles, aic_mhz, core_num, durations))
    return np.column_stack(table)
