"""AI Core PMU metrics per task (spec §1.9): aicore time, pipe ratios and times."""

from __future__ import annotations

import math

# PMU event id → metric stem whose <stem>_ratio = r<event> / total_cycles (and <stem>_time(us)).
RATIO_EVENTS = {0x8: "vec", 0xA: "mac", 0x9: "scalar", 0xB: "mte1", 0xC: "mte2", 0xD: "mte3", 0x303: "fixpipe"}
ICACHE_REQ, ICACHE_MISS = 0x54, 0x55


def pmu_columns(events: list[int]) -> list[str]:
    """op_summary PMU column names, in msprof's order, for a device's event list."""
    columns = ["aicore_time(us)", "total_cycles"]
    for event in events:
        stem = RATIO_EVENTS.get(event)
        if stem:
            columns += [f"{stem}_time(us)", f"{stem}_ratio"]
    if ICACHE_REQ in events and ICACHE_MISS in events:
        columns.append("icache_miss_rate")
    return columns


def pmu_values(events: list[int], total_cycle: int, counters: list[int], block: int, core_num: int,
               aic_mhz: float) -> list[float | None]:
    """Values aligned with :func:`pmu_columns`; ``None`` where a formula has no defined value."""
    block = max(block, 1)
    aicore_us = total_cycle / aic_mhz / block * math.ceil(block / max(core_num, 1)) if aic_mhz else None
    values: list[float | None] = [aicore_us, float(total_cycle)]
    by_event = dict(zip(events, counters, strict=False))
    for event in events:
        stem = RATIO_EVENTS.get(event)
        if stem:
            ratio = by_event[event] / total_cycle if total_cycle else None
            values += [ratio * aicore_us if ratio is not None and aicore_us is not None else None, ratio]
    if ICACHE_REQ in by_event and ICACHE_MISS in by_event:
        values.append(by_event[ICACHE_MISS] / by_event[ICACHE_REQ] if by_event[ICACHE_REQ] else None)
    return values
