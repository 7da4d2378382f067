"""Incremental, mergeable statistics: op_statistic and api_statistic (count, sum, min, max, Σx²)."""

from __future__ import annotations

from typing import Any

import numpy as np


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

    def add_group(self, count: int, total: int, low: int, high: int, sum_sq_us2: float) -> None:
        """:meth:`add` of ``count`` durations of these sums, lowest and highest."""
        if self.count == 0 or low < self.low:
            self.low = low
        if high > self.high:
            self.high = high
        self.count += count
        self.total += total
        self.sum_sq_us2 += sum_sq_us2

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
        self.names: dict[tuple[str, str], int] = {}  # (op type, core type) → its code (name_code)
        self.name_list: list[tuple[str, str]] = []
        self.queued_devices: list[int] = []  # tasks queued by queue_ops
        self.queued_names: list[int] = []
        self.queued_durations: list[int] = []
        self.changed = False

    def add_op(self, device: int, op_type: str, core_type: str, duration_ns: int) -> None:
        if self.queued_durations:
            self.settle()
        found = self.ops.get((device, op_type, core_type))  # (_entry, inline: once per task)
        if found is None:
            found = self.ops[(device, op_type, core_type)] = RunningStats()
        found.add(duration_ns)
        self.changed = True

    def name_code(self, op_type: str, core_type: str) -> int:
        """A number for an (op type, core type) pair, for :meth:`queue_ops`."""
        code = self.names.get((op_type, core_type))
        if code is None:
            code = self.names[(op_type, core_type)] = len(self.name_list)
            self.name_list.append((op_type, core_type))
        return code

    def queue_ops(self, devices: list[int], names: list[int], durations_ns: list[int]) -> None:
        """:meth:`add_op` of tasks (``names``: codes of their op and core types, :meth:`name_code`), added
        together when the statistics are next read or added to otherwise (:meth:`settle`)."""
        self.queued_devices += devices
        self.queued_names += names
        self.queued_durations += durations_ns
        self.changed = True

    def settle(self) -> None:
        """The queued tasks added, a group of equal keys at a time, new keys in the order of their first task."""
        if not self.queued_durations:
            return
        devices = np.array(self.queued_devices, np.int64)
        keys = np.array(self.queued_names, np.int64) << 32 | devices
        durations = np.array(self.queued_durations, np.int64)
        self.queued_devices, self.queued_names, self.queued_durations = [], [], []
        found, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        counts = np.bincount(inverse, minlength=len(found))
        totals = np.zeros(len(found), np.int64)
        np.add.at(totals, inverse, durations)
        lows = np.full(len(found), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(lows, inverse, durations)
        highs = np.full(len(found), np.iinfo(np.int64).min, np.int64)
        np.maximum.at(highs, inverse, durations)
        squares = np.zeros(len(found), np.float64)
        np.add.at(squares, inverse, (durations / 1000) ** 2)
        for group in np.argsort(first, kind="stable").tolist():
            at = int(first[group])
            key = (int(devices[at]), *self.name_list[int(found[group]) >> 32])
            _entry(self.ops, key).add_group(int(counts[group]), int(totals[group]), int(lows[group]),
                                            int(highs[group]), float(squares[group]))

    def add_api(self, level: str, name: str, duration_ns: int) -> None:
        _entry(self.apis, (level, name)).add(duration_ns)
        self.changed = True

    def add_apis(self, level: str, name: str, durations_ns: list[int]) -> None:
        _entry(self.apis, (level, name)).add_many(durations_ns)
        self.changed = True

    def op_rows(self) -> list[list[Any]]:
        self.settle()
        return [[dev, op_type, core, s.count, s.total, s.low, s.high] for (dev, op_type, core), s in self.ops.items()]

    def api_rows(self) -> list[list[Any]]:
        return [[level, name, s.count, s.total, s.low, s.high, s.sum_sq_us2] for (level, name), s in self.apis.items()]


def _entry(table: dict[Any, RunningStats], key: Any) -> RunningStats:
    """The statistics under ``key``, made when first needed (``setdefault`` would make one every time)."""
    found = table.get(key)
    if found is None:
        found = table[key] = RunningStats()
    return found
