"""Incremental, mergeable statistics: op_statistic and api_statistic (count, sum, min, max, Σx²)."""

from __future__ import annotations

from typing import Any


class RunningStats:
    __slots__ = ("count", "total", "low", "high", "sum_sq_us2")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.low = 0
        self.high = 0
        self.sum_sq_us2 = 0.0

    def add(self, duration_ns: int) -> None:
        if self.count == 0 or duration_ns < self.low:
            self.low = duration_ns
        if duration_ns > self.high:
            self.high = duration_ns
        self.count += 1
        self.total += duration_ns
        self.sum_sq_us2 += (duration_ns / 1000) ** 2

    def add_many(self, durations_ns: list[int]) -> None:
        """:meth:`add` for each duration in turn (the same sums, in the same order)."""
        if not durations_ns:
            return
        low = min(durations_ns)
        if self.count == 0 or low < self.low:
            self.low = low
        self.high = max(self.high, max(durations_ns))
        self.count += len(durations_ns)
        self.total += sum(durations_ns)
        sum_sq = self.sum_sq_us2
        for duration_ns in durations_ns:
            sum_sq += (duration_ns / 1000) ** 2
        self.sum_sq_us2 = sum_sq


class StatsBook:
    def __init__(self) -> None:
        self.ops: dict[tuple[int, str, str], RunningStats] = {}
        self.apis: dict[tuple[str, str], RunningStats] = {}
        self.changed = False

    def add_op(self, device: int, op_type: str, core_type: str, duration_ns: int) -> None:
        found = self.ops.get((device, op_type, core_type))  # (_entry, inline: once per task)
        if found is None:
            found = self.ops[(device, op_type, core_type)] = RunningStats()
        found.add(duration_ns)
        self.changed = True

    def add_api(self, level: str, name: str, duration_ns: int) -> None:
        _entry(self.apis, (level, name)).add(duration_ns)
        self.changed = True

    def add_apis(self, level: str, name: str, durations_ns: list[int]) -> None:
        _entry(self.apis, (level, name)).add_many(durations_ns)
        self.changed = True

    def op_rows(self) -> list[list[Any]]:
        return [[dev, op_type, core, s.count, s.total, s.low, s.high] for (dev, op_type, core), s in self.ops.items()]

    def api_rows(self) -> list[list[Any]]:
        return [[level, name, s.count, s.total, s.low, s.high, s.sum_sq_us2] for (level, name), s in self.apis.items()]


def _entry(table: dict[Any, RunningStats], key: Any) -> RunningStats:
    """The statistics under ``key``, made when first needed (``setdefault`` would make one every time)."""
    found = table.get(key)
    if found is None:
        found = table[key] = RunningStats()
    return found
