"""AI Core PMU metrics per task, column by column as msprof's op_summary shows them.

Each metric group (sample.json ``ai_core_metrics``) lists its columns; each column is a formula over the
record's counters, looked up by PMU event id (the slot of an event is its place in
``ai_core_profiling_events``), the record's total cycles, the block and core counts and the AI Core clock.
msprof's Python path computes them two ways, and so do we:

- HWTS chips (the 910 and the like): ``aicore_time(us)`` is rounded to 2 decimals and every
  ``<x>_time(us)`` is that rounded time × ``<x>_ratio``; a bandwidth divides by the record's own
  cycles / clock (msprof ``PmuCalculateFunc``); vector fops count fp32/int32 lanes as 64.
- the 310 (platform 0): every column from msprof's ai_core ``metrics`` formulas: times and bandwidths scale
  by block_num and ceil(block_num / core_num), with their own bytes per request; fp32 lanes count 32.

After the group's columns come msprof's two derived ones where their inputs exist: ``memory_bound`` =
mte2 / max(vec, mac) of the 3-decimal ratios, and ``cube_utilization(%)`` = total cycles / (clock × cores ×
duration). On the 910 msprof's own parser cannot store PipelineExecuteUtilization or MemoryAccess, and on the
310 neither PipeUtilizationExct nor MemoryAccess; there we follow the formulas of its metric configuration
(ai_core_config.py ``metrics``) and its C++ memory-access calculator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stages.formats.raw import PMU_EVENT_SETS

MINI_PLATFORM = 0
BANDWIDTH_UNIT = 8589934592.0  # 2**33: msprof's GB/s divisor
Value = float | None


@dataclass(frozen=True)
class Inputs:
    """One PMU record with the facts its formulas need."""

    counters: dict[int, int]  # event id → count
    cycles: int
    block: int
    core_num: int
    freq_hz: float  # AI Core clock for bandwidths
    time_freq_hz: float  # AI Core clock in effect for times (a frequency change may lower it)
    mini: bool

    def total(self, events: tuple[int, ...]) -> int | None:
        if any(event not in self.counters for event in events):
            return None
        return sum(self.counters[event] for event in events)

    def aicore_us(self) -> float | None:
        if not (self.block and self.core_num and self.time_freq_hz):
            return None
        exact = self.cycles * 1000 * 1000.0 / self.time_freq_hz / self.block * math.ceil(self.block / self.core_num)
        return exact if self.mini else round(exact, 2)

    def ratio(self, events: tuple[int, ...]) -> float | None:
        total = self.total(events)
        if total is None or not self.cycles:
            return None
        return sum(self.counters[event] / self.cycles for event in events)


@dataclass(frozen=True)
class Formula:
    """One column's formula: ``scalar`` computes it for one record; ``kind`` and ``args`` name it for the
    batch evaluator (:mod:`.pmu_batch`), which computes the same floats for many records at once."""

    scalar: Callable[[Inputs], Value]
    kind: str
    args: tuple[Any, ...] = ()

    def __call__(self, x: Inputs) -> Value:
        return self.scalar(x)


def _ratio(*events: int) -> Formula:
    return Formula(lambda x: x.ratio(events), "ratio", events)


def _time(*events: int) -> Formula:
    def time(x: Inputs) -> Value:
        total, ratio, aicore = x.total(events), x.ratio(events), x.aicore_us()
        if total is None or aicore is None:
            return None
        if x.mini:
            return total * 1000000 / x.time_freq_hz / x.block * math.ceil(x.block / x.core_num)
        return aicore * ratio if ratio is not None else None
    return Formula(time, "time", events)


def _bandwidth(event: int, hwts_bytes: float, mini_bytes: float) -> Formula:
    def bandwidth(x: Inputs) -> Value:
        count = x.counters.get(event)
        if count is None or not x.cycles or not x.freq_hz:
            return None if count is None else 0.0
        if x.mini:  # per block, as the 310's formula has it
            seconds = x.cycles * 1000 / (x.freq_hz * 1000.0) / x.block * math.ceil(x.block / x.core_num)
            return count * mini_bytes / seconds / BANDWIDTH_UNIT if seconds else None
        return count * hwts_bytes / (x.cycles / x.freq_hz) / BANDWIDTH_UNIT
    return Formula(bandwidth, "bandwidth", (event, hwts_bytes, mini_bytes))


def _count(event: int) -> Formula:
    return Formula(lambda x: None if event not in x.counters else float(x.counters[event]), "count", (event,))


def _kilobytes(kb_per_count: float, plus: tuple[int, ...], minus: tuple[int, ...] = ()) -> Formula:
    def kilobytes(x: Inputs) -> Value:
        added, taken = x.total(plus), x.total(minus) if minus else 0
        return None if added is None or taken is None else kb_per_count * added - kb_per_count * taken
    return Formula(kilobytes, "kilobytes", (kb_per_count, plus, minus))


def _icache_miss_rate_of(x: Inputs) -> Value:
    miss, req = x.counters.get(0x55), x.counters.get(0x54)
    if miss is None or req is None:
        return None
    if x.mini:
        return miss / req if req else None
    if not x.cycles:
        return None
    return (miss / x.cycles) / (req / x.cycles) if req else miss / x.cycles


def _cube_fops_of(x: Inputs) -> Value:
    fp16, int8 = x.counters.get(0x49), x.counters.get(0x4A)
    if fp16 is None or int8 is None or not x.cycles and not x.mini:
        return None
    if x.mini:
        return fp16 * 16 * 16 * 16 * 2.0 + int8 * 16 * 16 * 32 * 2.0
    return fp16 / x.cycles * x.cycles * 16 * 16 * 16 * 2 + int8 / x.cycles * x.cycles * 16 * 16 * 32 * 2


# Lanes per executed vector instruction: fp16 128-lane, fp16 64-lane, fp32, int32, misc.
_VECTOR_LANES = {True: (128.0, 64.0, 32.0, 64.0, 32.0), False: (128.0, 64.0, 64.0, 64.0, 32.0)}
_VECTOR_EVENTS = (0x4C, 0x4D, 0x4B, 0x4E, 0x4F)


def _vector_fops_of(x: Inputs) -> Value:
    if any(event not in x.counters for event in _VECTOR_EVENTS) or not x.cycles and not x.mini:
        return None
    lanes = _VECTOR_LANES[x.mini]
    if x.mini:
        return sum(x.counters[event] * lane for event, lane in zip(_VECTOR_EVENTS, lanes, strict=True))
    return sum(x.counters[event] / x.cycles * x.cycles * lane for event, lane in zip(_VECTOR_EVENTS, lanes,
                                                                                         strict=True))


_icache_miss_rate = Formula(_icache_miss_rate_of, "icache_miss_rate")
_cube_fops = Formula(_cube_fops_of, "cube_fops")
_vector_fops = Formula(_vector_fops_of, "vector_fops")


def _pipes(*stems: tuple[str, tuple[int, ...]]) -> list[tuple[str, Formula]]:
    """``<stem>_time(us)`` and ``<stem>_ratio`` per pipe, in that order."""
    columns: list[tuple[str, Formula]] = []
    for stem, events in stems:
        columns += [(f"{stem}_time(us)", _time(*events)), (f"{stem}_ratio", _ratio(*events))]
    return columns


def _bandwidths(*specs: tuple[str, int, float, float]) -> list[tuple[str, Formula]]:
    return [(f"{name}(GB/s)", _bandwidth(event, hwts, mini)) for name, event, hwts, mini in specs]


GROUPS: dict[str, list[tuple[str, Formula]]] = {
    "PipeUtilization": _pipes(("vec", (0x8,)), ("mac", (0xA,)), ("scalar", (0x9,)), ("mte1", (0xB,)),
                              ("mte2", (0xC,)), ("mte3", (0xD,))) + [("icache_miss_rate", _icache_miss_rate)],
    "PipeUtilizationExct": _pipes(("mac", (0x416, 0x417)), ("scalar", (0x9,)), ("mte1", (0x302,)),
                                  ("mte2", (0xC,)), ("fixpipe", (0x303,))) + [("icache_miss_rate", _icache_miss_rate)],
    "PipelineExecuteUtilization": _pipes(("vec_exe", (0x12C,)), ("mac_exe", (0x49, 0x4A)), ("scalar_exe", (0x9,)),
                                         ("mte1_exe", (0x302,)), ("mte2_exe", (0xC,)), ("mte3_exe", (0xD,)),
                                         ("fixpipe_exe", (0x303,))),
    "ArithmeticUtilization": [("mac_fp16_ratio", _ratio(0x49)), ("mac_int8_ratio", _ratio(0x4A)),
                              ("vec_fp32_ratio", _ratio(0x4B)), ("vec_fp16_ratio", _ratio(0x4C, 0x4D)),
                              ("vec_int32_ratio", _ratio(0x4E)), ("vec_misc_ratio", _ratio(0x4F)),
                              ("cube_fops", _cube_fops), ("vector_fops", _vector_fops)],
    # (name, event, bytes per count on HWTS chips, on the 310)
    "Memory": _bandwidths(("ub_read_bw", 0x15, 1024, 1024), ("ub_write_bw", 0x16, 1024, 1024),
                          ("l1_read_bw", 0x31, 4096, 4096), ("l1_write_bw", 0x32, 2048, 1024),
                          ("l2_read_bw", 0xF, 2048, 2048), ("l2_write_bw", 0x10, 2048, 2048),
                          ("main_mem_read_bw", 0x12, 64, 2048), ("main_mem_write_bw", 0x13, 64, 2048)),
    "MemoryL0": _bandwidths(("l0a_read_bw", 0x1B, 4096, 4096), ("l0a_write_bw", 0x1C, 4096, 4096),
                            ("l0b_read_bw", 0x21, 2048, 4096), ("l0b_write_bw", 0x22, 2048, 2048),
                            ("l0c_read_bw", 0x27, 2048, 2048), ("l0c_write_bw", 0x29, 2048, 2048),
                            ("l0c_read_bw_cube", 0x28, 2048, 8192), ("l0c_write_bw_cube", 0x2A, 2048, 8192)),
    "MemoryUB": _bandwidths(("ub_read_bw_mte", 0x3D, 128, 1024), ("ub_write_bw_mte", 0x3E, 128, 1024),
                            ("ub_read_bw_vector", 0x43, 256, 4096), ("ub_write_bw_vector", 0x44, 256, 2048),
                            ("ub_read_bw_scalar", 0x37, 128, 8192), ("ub_write_bw_scalar", 0x38, 128, 8192)),
    "ResourceConflictRatio": [("vec_bankgroup_cflt_ratio", _ratio(0x64)), ("vec_bank_cflt_ratio", _ratio(0x65)),
                              ("vec_resc_cflt_ratio", _ratio(0x66))],
    "L2Cache": [(name, _count(event)) for name, event in (
        ("write_cache_hit", 0x500), ("write_cache_miss_allocate", 0x502), ("r0_read_cache_hit", 0x504),
        ("r0_read_cache_miss_allocate", 0x506), ("r1_read_cache_hit", 0x508), ("r1_read_cache_miss_allocate", 0x50A))],
    "MemoryAccess": [("read_main_memory_datas(KB)", _kilobytes(0.125, (0x50D, 0x50E))),
                     ("write_main_memory_datas(KB)", _kilobytes(0.125, (0x50C,))),
                     ("gm_to_l1_datas(KB)", _kilobytes(0.25, (0x32,), (0x206,))),
                     ("l0c_to_l1_datas(KB)", _kilobytes(0.125, (0x206,))),
                     ("l0c_to_gm_datas(KB)", _kilobytes(0.125, (0x20C,), (0x206,))),
                     ("gm_to_ub_datas(KB)", _kilobytes(0.125, (0x3E,))),
                     ("ub_to_gm_datas(KB)", _kilobytes(0.125, (0x3D,)))],
}
# Columns msprof's HWTS path drops from a group (AicPmuUtils.remove_unused_column).
HWTS_DROPPED = {"Memory": {"l2_read_bw(GB/s)", "l2_write_bw(GB/s)"},
                "MemoryUB": {"ub_read_bw_mte(GB/s)", "ub_write_bw_mte(GB/s)"}}
# memory_bound: mte2 / max(vec, mac), from the first of these ratio triples the columns hold.
BOUND_RATIOS = (("mte2_ratio", "vec_ratio", "mac_ratio"), ("mte2_exe_ratio", "vec_exe_ratio", "mac_exe_ratio"))
MEMORY_BOUND, CUBE_UTILIZATION = "memory_bound", "cube_utilization(%)"
BASE_COLUMNS = ["aicore_time(us)", "total_cycles"]


def group_of(metric: str, events: list[int]) -> str | None:
    """The metric group whose columns a device shows: its sample.json name, or the one with its event set."""
    if metric in GROUPS:
        return metric
    return next((name for name, found in PMU_EVENT_SETS.items() if list(found) == list(events)), None)


def _group_columns(group: str | None, events: list[int], platform: int) -> list[tuple[str, Formula]]:
    if group is None:  # a custom event list: the raw counters, named as msprof names them (r<hex>)
        return [(f"r{event:x}", _count(event)) for event in events]
    dropped = set() if platform == MINI_PLATFORM else HWTS_DROPPED.get(group, set())
    return [(name, formula) for name, formula in GROUPS[group] if name not in dropped]


def _derived(names: list[str]) -> list[str]:
    extra = []
    if any(all(ratio in names for ratio in triple) for triple in BOUND_RATIOS):
        extra.append(MEMORY_BOUND)
    if "mac_ratio" in names:
        extra.append(CUBE_UTILIZATION)
    return extra


def pmu_columns(events: list[int], metric: str = "", platform: int = 1) -> list[str]:
    """op_summary PMU column names, in msprof's order, for a device's metric group and event list."""
    names = [name for name, _ in _group_columns(group_of(metric, events), events, platform)]
    return BASE_COLUMNS + names + _derived(names)


def pmu_values(events: list[int], total_cycle: int, counters: list[int], block: int, core_num: int,
               aic_mhz: float, *, metric: str = "", platform: int = 1, duration_ns: int = 0,
               time_mhz: float | None = None) -> list[Value]:
    """Values aligned with :func:`pmu_columns`; ``None`` where a formula has no defined value.

    ``time_mhz``: the AI Core clock in effect for this task when it differs from ``aic_mhz`` (bandwidths
    keep ``aic_mhz``, as msprof does).
    """
    mini = platform == MINI_PLATFORM
    x = Inputs(dict(zip(events, counters, strict=False)), total_cycle, max(block, 1), core_num,
               aic_mhz * 1e6, (time_mhz or aic_mhz) * 1e6, mini)
    columns = _group_columns(group_of(metric, events), events, platform)
    values: dict[str, Value] = {name: formula(x) for name, formula in columns}
    row: list[Value] = [x.aicore_us(), float(total_cycle), *values.values()]
    for name in _derived(list(values)):
        row.append(_memory_bound(values) if name == MEMORY_BOUND else
                   _cube_utilization(values, total_cycle, aic_mhz, core_num, duration_ns))
    return row


def _round3(value: Value) -> Value:
    return None if value is None else round(value, 3)


def _memory_bound(values: dict[str, Value]) -> Value:
    """msprof computes it from the ratios as printed (3 decimals)."""
    triple = next(t for t in BOUND_RATIOS if all(name in values for name in t))
    mte2, vec, mac = (_round3(values[name]) for name in triple)
    if mte2 is None or vec is None or mac is None:
        return None
    return round(mte2 / max(vec, mac), 3) if max(vec, mac) else 0.0


def _cube_utilization(values: dict[str, Value], total_cycle: int, aic_mhz: float, core_num: int,
                      duration_ns: int) -> Value:
    mac = _round3(values["mac_ratio"])
    if mac is None:
        return None
    if not (mac and total_cycle and duration_ns and aic_mhz and core_num):
        return 0.0
    return round(total_cycle / (aic_mhz * core_num * duration_ns) * 1000.0 * 100, 3)


# STARS chips (stars.py) keep their own layout and arithmetic: one `<stem>_time(us)`, `<stem>_ratio` pair per
# pipe event of a side's event list, then `icache_miss_rate`; the aicore time is not rounded.
RATIO_EVENTS = {0x8: "vec", 0xA: "mac", 0x9: "scalar", 0xB: "mte1", 0xC: "mte2", 0xD: "mte3", 0x303: "fixpipe"}
ICACHE_REQ, ICACHE_MISS = 0x54, 0x55


def event_columns(events: list[int]) -> list[str]:
    """Column names, in msprof's order, for one STARS side's event list."""
    columns = list(BASE_COLUMNS)
    for event in events:
        stem = RATIO_EVENTS.get(event)
        if stem:
            columns += [f"{stem}_time(us)", f"{stem}_ratio"]
    if ICACHE_REQ in events and ICACHE_MISS in events:
        columns.append("icache_miss_rate")
    return columns


def event_values(events: list[int], total_cycle: int, counters: list[int], block: int, core_num: int,
                 aic_mhz: float) -> list[Value]:
    """Values aligned with :func:`event_columns`; ``None`` where a formula has no defined value."""
    block = max(block, 1)
    aicore_us = total_cycle / aic_mhz / block * math.ceil(block / max(core_num, 1)) if aic_mhz else None
    values: list[Value] = [aicore_us, float(total_cycle)]
    by_event = dict(zip(events, counters, strict=False))
    for event in events:
        stem = RATIO_EVENTS.get(event)
        if stem:
            ratio = by_event[event] / total_cycle if total_cycle else None
            values += [ratio * aicore_us if ratio is not None and aicore_us is not None else None, ratio]
    if ICACHE_REQ in by_event and ICACHE_MISS in by_event:
        values.append(by_event[ICACHE_MISS] / by_event[ICACHE_REQ] if by_event[ICACHE_REQ] else None)
    return values


EXACT_FLOATS = 1 << 53  # integers below this convert to float64 exactly: Python's int / int is then float / float


def event_batch(events: list[int], total_cycle: np.ndarray, counters: np.ndarray, block: np.ndarray, core_num: int,
                aic_mhz: np.ndarray) -> np.ndarray:
    """:func:`event_values` of n records (counts below EXACT_FLOATS; ``aic_mhz`` per record), n × columns, NaN where
    a value is None: the same floats, as every step is the same IEEE operation on the same doubles."""
    cycles = total_cycle.astype(np.float64)
    blocks = np.maximum(block, 1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        aicore_us = np.where(aic_mhz != 0, cycles / aic_mhz / blocks * np.ceil(blocks / max(core_num, 1)), np.nan)
        by_event = {event: counters[:, at].astype(np.float64) for at, event in enumerate(events[:counters.shape[1]])}
        no_cycles = cycles == 0
        columns = [aicore_us, cycles]
        for event in events:
            if RATIO_EVENTS.get(event):
                ratio = np.where(no_cycles, np.nan, by_event[event] / cycles)
                columns += [ratio * aicore_us, ratio]
        if ICACHE_REQ in by_event and ICACHE_MISS in by_event:
            requests = by_event[ICACHE_REQ]
            columns.append(np.where(requests == 0, np.nan, by_event[ICACHE_MISS] / requests))
    return np.column_stack(columns)
