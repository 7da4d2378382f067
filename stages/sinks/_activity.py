"""Timeline facts for the advice rules, from task, api and tx column batches that arrive in any order.

Rows reach a sink in the order the aggregator resolves them, not in time order: an import reads
host and device files side by side, so device tasks can trail the host's records by much of the
run. Everything here is therefore order-free and of fixed size: per device the first start, last
end and summed task time; per msproftx message its count and time; the longest ranges; and two
:class:`BusyHistogram` s (AscendCL calls, device tasks) to tell how much of a range had work in it.
"""

from __future__ import annotations

import heapq

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.advice import DeviceSpan, TimelineFacts, TxRange, TxStat
from stages.formats.raw import LEVEL_ACL

BUCKETS = 65536
FIRST_WIDTH_NS = 1_000_000
LONGEST_RANGES = 32
MAX_MESSAGES = 1000
OTHER_MESSAGES = "(other messages)"
RANGE_EVENT_TYPES = (1, 2)  # msproftx push/pop and range start/stop; 0 and 3 are marks


class BusyHistogram:
    """Busy time per equal time bucket over the whole run, whatever order intervals arrive in.

    The bucket width starts at 1 ms and doubles whenever the run outgrows the buckets, so memory
    stays fixed (512 KiB) while resolution degrades gently: 1 ms for the first 65 s, 55 ms for an
    hour. :meth:`busy_within` prorates the two edge buckets.
    """

    def __init__(self, buckets: int = BUCKETS, width_ns: int = FIRST_WIDTH_NS) -> None:
        self.width = width_ns
        self.origin: int | None = None
        self.sums = np.zeros(buckets, np.int64)

    def add(self, starts: np.ndarray, ends: np.ndarray) -> None:
        keep = ends > starts
        starts, ends = starts[keep].astype(np.int64), ends[keep].astype(np.int64)
        if not len(starts):
            return
        self._cover(int(starts.min()), int(ends.max()))
        assert self.origin is not None
        w = self.width
        s, e = starts - self.origin, ends - self.origin
        first, last = s // w, (e - 1) // w
        one = first == last
        np.add.at(self.sums, first[one], (e - s)[one])
        many = ~one
        if many.any():
            f, g = first[many], last[many]
            np.add.at(self.sums, f, (f + 1) * w - s[many])
            np.add.at(self.sums, g, e[many] - g * w)
            inner = g - f > 1
            if inner.any():
                steps = np.zeros(len(self.sums) + 1, np.int64)
                np.add.at(steps, f[inner] + 1, w)
                np.add.at(steps, g[inner], -w)
                self.sums += np.cumsum(steps)[:-1]

    def busy_within(self, start: int, end: int) -> int:
        """Busy time inside [start, end) (edge buckets prorated), at most end − start."""
        if self.origin is None or end <= start:
            return 0
        w, n = self.width, len(self.sums)
        s = max(start - self.origin, 0)
        e = min(end - self.origin, n * w)
        if e <= s:
            return 0
        first, last = s // w, (e - 1) // w
        if first == last:
            total = self.sums[first] * (e - s) / w
        else:
            total = (self.sums[first] * ((first + 1) * w - s) / w + self.sums[last] * (e - last * w) / w
                     + float(self.sums[first + 1:last].sum()))
        return int(min(total, end - start))

    def _cover(self, low: int, high: int) -> None:
        n = len(self.sums)
        if self.origin is None:
            self.origin = low // self.width * self.width
        if low >= self.origin and high <= self.origin + n * self.width:
            return
        width = self.width
        origin = min(self.origin, low) // width * width
        while max(high, self.origin + n * self.width) > origin + n * width:
            width *= 2
            origin = min(self.origin, low) // width * width
        sums = np.zeros(n, np.int64)
        starts = self.origin + np.arange(n, dtype=np.int64) * self.width
        np.add.at(sums, (starts - origin) // width, self.sums)
        self.origin, self.width, self.sums = origin, width, sums


class TimelineTracker:
    """Per-device spans, msproftx statistics and busy histograms, fed with aggregator rows."""

    def __init__(self) -> None:
        self.devices: dict[int, list[int]] = {}  # device → [tasks, first start, last end, Σ durations]
        self.messages: dict[str, list[int]] = {}  # message → [count, Σ durations, longest]
        self.longest: list[tuple[int, int, int, str]] = []  # min-heap of (duration, start, end, message)
        self.acl = BusyHistogram()
        self.device_work = BusyHistogram()
        self.seen = False

    def add_tasks(self, table: pa.Table) -> None:
        """A ``task`` column batch (stages/tables.py): its devices, starts and ends."""
        if not table.num_rows:
            return
        self.seen = True
        devices, starts, ends = (_ints(table, name) for name in ("device_id", "start_ns", "end_ns"))
        for device in np.unique(devices):
            mine = devices == device
            first, last = int(starts[mine].min()), int(ends[mine].max())
            span = self.devices.setdefault(int(device), [0, first, last, 0])
            span[0] += int(mine.sum())
            span[1] = min(span[1], first)
            span[2] = max(span[2], last)
            span[3] += int((ends[mine] - starts[mine]).sum())
        self.device_work.add(starts, ends)

    def add_apis(self, table: pa.Table) -> None:
        """An ``api`` column batch; AscendCL calls count as host work."""
        if not table.num_rows:
            return
        self.seen = True
        acl = _ints(table, "level") == LEVEL_ACL
        if acl.any():
            self.acl.add(_ints(table, "start_ns")[acl], _ints(table, "end_ns")[acl])

    def add_tx(self, table: pa.Table) -> None:
        """A ``tx`` column batch: its ranges (push/pop, start/stop) by message; marks are left out."""
        ranges = table.filter(pc.is_in(table.column("event_type"), pa.array(RANGE_EVENT_TYPES, pa.int64())))
        ranges = ranges.filter(pc.greater_equal(ranges.column("end_ns"), ranges.column("start_ns")))
        if not ranges.num_rows:
            return
        self.seen = True
        columns = (ranges.column(name).to_pylist() for name in ("start_ns", "end_ns", "message"))
        for start, end, message in zip(*columns, strict=True):  # one per marked range: not a hot path
            key = message if message in self.messages or len(self.messages) < MAX_MESSAGES else OTHER_MESSAGES
            stat = self.messages.setdefault(key, [0, 0, 0])
            stat[0] += 1
            stat[1] += end - start
            stat[2] = max(stat[2], end - start)
            entry = (end - start, start, end, message)
            if len(self.longest) < LONGEST_RANGES:
                heapq.heappush(self.longest, entry)
            elif entry > self.longest[0]:
                heapq.heapreplace(self.longest, entry)

    def idle_within(self, start: int, end: int) -> int:
        """Time in [start, end) with neither an AscendCL call nor a device task (approximately: the larger
        of the two busy times stands for their union)."""
        busy = max(self.acl.busy_within(start, end), self.device_work.busy_within(start, end))
        return max(0, end - start - busy)

    def facts(self) -> TimelineFacts:
        devices = tuple(DeviceSpan(device, tasks, first, last, min(busy, last - first))
                        for device, (tasks, first, last, busy) in sorted(self.devices.items()))
        tx = tuple(sorted((TxStat(message, count, total, longest)
                           for message, (count, total, longest) in self.messages.items()),
                          key=lambda stat: -stat.total_ns))
        ranges = tuple(TxRange(message, start, end, self.idle_within(start, end))
                       for _, start, end, message in sorted(self.longest, reverse=True))
        return TimelineFacts(devices, tx, ranges)


def _ints(table: pa.Table, name: str) -> np.ndarray:
    """An integer column as int64 numpy (nulls, which these columns do not hold, would be 0)."""
    return table.column(name).to_numpy().astype(np.int64, copy=False)
