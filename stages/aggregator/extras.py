"""Per-task device values beyond the AI Core PMU: AI CPU kernel times, L2 cache rates, AI Core frequency.

- AI CPU records join AI_CPU tasks on (device, stream, task) with the record's run end inside the task's
  device interval, as msprof matches them (viewer/aicpu_viewer.py); their times become op_summary columns.
- L2 cache records join AI Core tasks on (device, stream, task) in arrival order; hit and victim rates come
  from the events msprof assigns to each platform (msconfig/l2_cache_config.py). msprof shows the hit rate
  as N/A on STARS chips, and so do we.
- AI Core frequency change points: on the chips where msprof applies them (FreqParser: 910B-class
  platforms), a task's times use the clock in effect at its end instead of info.json's aic_frequency.

Every binary AI CPU record and every L2 cache record also becomes one row of its own table (``rows``: msprof's
aicpu and l2_cache CSVs), named by the op of the task that took it, or unnamed ("") when none did.

Records these joins cannot use are counted in the aggregator's ``unused`` figures by reason. A task
waits for its AI CPU or L2 cache record when the device's sample.json switched them on, until that stream
has passed it (the aggregator decides); once the aggregator gave up such a wait (its bound on waiting tasks)
on a device that has sent none of them, its later tasks no longer wait.
"""

from __future__ import annotations

import bisect
from collections import Counter, deque
from itertools import repeat
from typing import Any

import numpy as np

from stages.decoder import records
from stages.formats import raw

AICPU_COLUMNS = ["aicpu_compute_time(us)", "aicpu_memcpy_time(us)", "aicpu_task_time(us)", "aicpu_dispatch_time(us)",
                 "aicpu_total_time(us)"]
_AICPU_FIELDS = ("compute_ns", "memcpy_ns", "task_ns", "dispatch_ns", "total_ns")
L2_COLUMNS = ["l2_cache_hit_rate", "l2_cache_victim_rate"]

# platform → (request, hit, victim) events; a negative id is subtracted (msprof l2_cache_config.py).
L2_EVENTS: dict[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {
    1: ((0x59,), (0x5B,), (0x5C,)),
    **{p: ((0x78, 0x79), (0x6A,), (0x71,)) for p in (2, 3, 4)},
    **{p: ((0xFB, 0xFC), (0x90, 0x91), (0x9C,)) for p in (5, 7, 8, 11)},
    **{p: ((0x00,), (0x00, -0x81, -0x82, -0x83, -0x74, -0x75), (0x74, 0x75)) for p in (15, 16)},
}
FREQ_PLATFORMS = {5, 7, 15, 16}  # where msprof parses lpmFreqConv (data_parsers_config FreqParser)

Key = tuple[int, int, int]


def l2_configured(facts: dict[str, Any]) -> bool:
    """Whether a device reports L2 cache task counters msprof can turn into rates."""
    events = facts.get("l2_events") or []
    table = L2_EVENTS.get(int(facts.get("platform", 1)))
    return bool(events) and table is not None and all(abs(e) in events for group in table for e in group)


def extra_columns(facts: dict[str, Any]) -> list[str]:
    return (AICPU_COLUMNS if facts.get("aicpu_trace") else []) + (L2_COLUMNS if l2_configured(facts) else [])


class DeviceExtras:
    def __init__(self, unused: Counter[str]) -> None:
        self.unused = unused
        self.aicpu: dict[Key, deque[Any]] = {}
        self.aicpu_seen: dict[int, int] = {}  # device → latest run end (ns) received
        self.l2: dict[Key, deque[Any]] = {}
        self.freq: dict[int, tuple[list[int], list[int]]] = {}  # device → sorted change times, MHz
        self.freq_used_until: dict[int, int] = {}  # device → latest task time a clock was looked up for
        self.l2_seen: set[int] = set()
        self.l2_sequence: dict[int, int] = {}  # device → L2 cache records received
        self.gave_up: set[tuple[str, int]] = set()  # (stream, device) whose records never came
        # rows of the aicpu and l2_cache tables (schema.AICPU_COLUMNS, L2_CACHE_COLUMNS; names as text)
        self.rows: dict[str, list[list[Any]]] = {"aicpu": [], "l2_cache": []}

    # -- intake ---------------------------------------------------------------------------
    def add_aicpu(self, arr: np.ndarray) -> None:
        text = arr["form"] != records.AICPU_BINARY
        if text.any():
            self.unused["AI CPU text records (DATA_PREPROCESS.AICPU text form: no stream/task id to join)"] += \
                int(text.sum())
        binary = arr[~text]
        names = binary.dtype.names or ()
        for values in binary.tolist():
            record = dict(zip(names, values, strict=True))
            device = record["device_id"]
            key = (device, record["stream_id"], record["task_id"])
            self.aicpu.setdefault(key, deque()).append(record)
            self.aicpu_seen[device] = max(self.aicpu_seen.get(device, 0), record["end_ns"])

    def add_l2(self, arr: np.ndarray, facts_of: dict[int, dict[str, Any]]) -> None:
        """Each record queued under its task with its place among its device's records, its rates as the device's
        facts of now give them, worked out for the whole chunk at once, and where its event counts are (the chunk,
        its row): a task taking the record under other facts than those the rates came from works them out again."""
        l2 = self.l2
        devices = arr["device_id"].tolist()
        rates, used = _chunk_rates(arr, facts_of)
        keys = zip(devices, arr["stream_id"].tolist(), arr["task_id"].tolist(), strict=True)
        for key, entry in zip(keys, zip(self._sequences(devices), rates, used, repeat(arr, len(arr)), range(len(arr)),
                                        strict=True), strict=True):
            found = l2.get(key)
            if found is None:
                l2[key] = deque((entry,))
            else:
                found.append(entry)
        self.l2_seen.update(devices)

    def _sequences(self, devices: list[int]) -> list[int] | range:
        """Each record's place among its device's L2 cache records."""
        counts = self.l2_sequence
        if devices and devices.count(devices[0]) == len(devices):  # the usual chunk: one device
            first = counts.get(devices[0], 0)
            counts[devices[0]] = first + len(devices)
            return range(first, first + len(devices))
        places = []
        for device in devices:
            place = counts.get(device, 0)
            counts[device] = place + 1
            places.append(place)
        return places

    def add_freq(self, arr: np.ndarray, platform_of: dict[int, int]) -> None:
        for record in arr:
            device = int(record["device_id"])
            if platform_of.get(device, 1) not in FREQ_PLATFORMS:
                self.unused["AI Core frequency change records (msprof applies them on 910B-class chips only)"] += 1
                continue
            count = int(record["count"])
            times, mhz = self.freq.setdefault(device, ([], []))
            for at, value in zip(record["points_ns"][:count].tolist(), record["freq_mhz"][:count].tolist(),
                                 strict=True):
                if at <= self.freq_used_until.get(device, -1):
                    self.unused["AI Core frequency change that arrived after tasks it applies to"] += 1
                index = bisect.bisect_right(times, at)
                times.insert(index, at)
                mhz.insert(index, value)

    # -- per task ---------------------------------------------------------------------------
    def aicpu_ready(self, device: int, end: int) -> bool:
        """Every AI CPU record that may belong to a task ending at ``end`` has arrived (records come in
        run-end order), or none ever comes."""
        if device not in self.aicpu_seen:
            return ("aicpu", device) in self.gave_up
        return self.aicpu_seen[device] >= end

    def waited_in_vain(self, device: int, aicpu: bool, l2: bool) -> None:
        """A task's wait ran out: a stream that has sent nothing on this device is not waited for again."""
        if aicpu and device not in self.aicpu_seen:
            self.gave_up.add(("aicpu", device))
        if l2 and device not in self.l2_seen:
            self.gave_up.add(("l2", device))

    def take_aicpu(self, key: Key, start: int, end: int, op_name: str = "") -> list[float | None]:
        """The task's AI CPU times (µs), from the record whose run ends inside [start, end]."""
        waiting = self.aicpu.get(key)
        while waiting and int(waiting[0]["end_ns"]) < start:  # its task came and went without it
            self._aicpu_row(waiting.popleft(), "")
            self.unused["AI CPU records outside their task's device time"] += 1
        if not waiting or int(waiting[0]["end_ns"]) > end:
            if key in self.aicpu and not waiting:
                del self.aicpu[key]
            return [None] * len(AICPU_COLUMNS)
        record = waiting.popleft()
        if not waiting:
            del self.aicpu[key]
        times = self._aicpu_row(record, op_name)
        return [None if ns is None else ns / 1000 for ns in times]

    def _aicpu_row(self, record: Any, op_name: str) -> list[int | None]:
        times = [int(record[name]) if int(record[name]) >= 0 else None for name in _AICPU_FIELDS]
        self.rows["aicpu"].append([int(record["device_id"]), int(record["start_ns"]), op_name, *times,
                                   int(record["stream_id"]), int(record["task_id"])])
        return times

    def l2_ready(self, key: Key) -> bool:
        return bool(self.l2.get(key)) or key[0] not in self.l2_seen and ("l2", key[0]) in self.gave_up

    def take_l2(self, key: Key, facts: dict[str, Any], op_name: str = "") -> list[float | None]:
        """The task's hit and victim rates from its oldest waiting record (None where msprof shows N/A)."""
        waiting = self.l2.get(key)
        if not waiting:
            return [None, None]
        sequence, rates, used, chunk, row = waiting.popleft()
        if not waiting:
            del self.l2[key]
        if used is not facts:
            rates = l2_rates(chunk["events"][row].tolist(), facts)
        self.rows["l2_cache"].append([*key, *rates, op_name, sequence])
        return rates

    def l2_taken(self, taken: list[tuple[int, Key, Any, str]], facts_of: dict[int, dict[str, Any]]
                 ) -> list[list[float | None]]:
        """:meth:`take_l2` of entries already taken off their queues, in order: (anything, the task's key, the
        entry, the op's name) each."""
        rows = self.rows["l2_cache"]
        found: list[list[float | None]] = []
        for _, key, (sequence, rates, used, chunk, row), op_name in taken:
            facts = facts_of.get(key[0], {})
            if used is not facts:
                rates = l2_rates(chunk["events"][row].tolist(), facts)
            rows.append([*key, *rates, op_name, sequence])
            found.append(rates)
        return found

    def clock_mhz(self, device: int, platform: int, at: int) -> float | None:
        """The AI Core clock in effect at ``at`` where msprof follows frequency changes; None: info.json's."""
        if platform not in FREQ_PLATFORMS:
            return None
        self.freq_used_until[device] = max(self.freq_used_until.get(device, -1), at)
        times, mhz = self.freq.get(device, ([], []))
        if not times or 0 in mhz:  # msprof falls back to info.json when any sampled clock is 0
            return None
        index = bisect.bisect_right(times, at)
        return float(mhz[index - 1]) if index else None

    def leftovers(self, facts_of: dict[int, dict[str, Any]]) -> None:
        """At the end: records no task took still become rows of their tables, unnamed."""
        left = sum(len(q) for q in self.aicpu.values())
        if left:
            self.unused["AI CPU records without a matching AI_CPU task"] += left
        left = sum(len(q) for q in self.l2.values())
        if left:
            self.unused["L2 cache records without a matching AI Core task"] += left
        for queue in self.aicpu.values():
            for record in queue:
                self._aicpu_row(record, "")
        for key, l2_queue in self.l2.items():
            facts = facts_of.get(key[0], {})
            if l2_configured(facts):
                for sequence, rates, used, chunk, row in l2_queue:
                    found = rates if used is facts else l2_rates(chunk["events"][row].tolist(), facts)
                    self.rows["l2_cache"].append([*key, *found, "", sequence])
        self.aicpu.clear()
        self.l2.clear()


Terms = tuple[tuple[int, int], ...]  # (index of an event's count, +1 or -1)
_l2_plans: dict[int, tuple[dict[str, Any], int, tuple[Terms, Terms, Terms, bool] | None]] = {}


def _l2_plan(facts: dict[str, Any], width: int) -> tuple[Terms, Terms, Terms, bool] | None:
    """Where each of a device's request, hit and victim events sits among a record's ``width`` counts, worked out
    once per device facts (None: an event the device does not count; :func:`l2_rates` then fails as it did)."""
    cached = _l2_plans.get(id(facts))
    if cached is not None and cached[0] is facts and cached[1] == width:
        return cached[2]
    platform = int(facts.get("platform", 1))
    where = {event: i for i, event in enumerate((facts.get("l2_events") or [])[:width])}  # the last one counts
    plan: tuple[Terms, Terms, Terms, bool] | None
    try:
        request, hit, victim = (tuple((where[abs(e)], -1 if e < 0 else 1) for e in events)
                                for events in L2_EVENTS[platform])
        plan = (request, hit, victim, platform in raw.STARS_PLATFORMS)
    except KeyError:
        plan = None
    if len(_l2_plans) > 64:
        _l2_plans.clear()
    _l2_plans[id(facts)] = (facts, width, plan)
    return plan


def l2_rates(counts: list[int], facts: dict[str, Any]) -> list[float | None]:
    """Hit and victim rates of one L2 cache record's event counts with the device's event roles (hit None on
    STARS chips)."""
    plan = _l2_plan(facts, len(counts))
    if plan is None:
        return _l2_rates_by_event(counts, facts)
    request_terms, hit_terms, victim_terms, stars = plan
    request = _total(counts, request_terms)
    hit = _total(counts, hit_terms) / request if request else 0.0
    victim = _total(counts, victim_terms) / request if request else 0.0
    return [None if stars else hit, victim]


EXACT_COUNTS = 1 << 48  # counts below this: sums of a few of them are exact in float64, as are their ratios


def _chunk_rates(arr: np.ndarray, facts_of: dict[int, dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """The rates of a chunk's records (None where not worked out: facts unknown, or huge counts) and the facts each
    was worked out with, device by device."""
    n = len(arr)
    rates: list[Any] = [None] * n
    used: list[Any] = [None] * n
    devices = arr["device_id"]
    for device in np.unique(devices).tolist():
        facts = facts_of.get(device)
        at = np.flatnonzero(devices == device)
        found = None if facts is None else _rates_block(arr["events"][at], facts)
        if found is None:
            continue
        if len(at) == n:
            return found, [facts] * n
        for i, row in zip(at.tolist(), found, strict=True):
            rates[i], used[i] = row, facts
    return rates, used


def _rates_block(counts: np.ndarray, facts: dict[str, Any]) -> list[list[float | None]] | None:
    """:func:`l2_rates` of many records' counts (n × width) in numpy: the same floats, as every sum is exact and a
    ratio of exact doubles is correctly rounded, as Python's int division is. None: no plan, or counts too big."""
    plan = _l2_plan(facts, counts.shape[1])
    if plan is None or not len(counts) or counts.max() >= EXACT_COUNTS:
        return None
    request_terms, hit_terms, victim_terms, stars = plan
    signed = counts.astype(np.int64)

    def total(terms: Terms) -> np.ndarray:
        found = np.zeros(len(signed), np.int64)
        for i, sign in terms:
            found = found + signed[:, i] * sign
        return found

    request = total(request_terms)
    some = request != 0
    divisor = np.where(some, request, 1).astype(np.float64)
    victim = np.where(some, total(victim_terms) / divisor, 0.0).tolist()
    if stars:
        return [[None, v] for v in victim]
    hit = np.where(some, total(hit_terms) / divisor, 0.0).tolist()
    return [[h, v] for h, v in zip(hit, victim, strict=True)]


def _total(counts: list[int], terms: Terms) -> int:
    total = 0
    for i, sign in terms:
        total += counts[i] * sign
    return total


def _l2_rates_by_event(counts: list[int], facts: dict[str, Any]) -> list[float | None]:
    """Hit and victim rates of one L2 cache record's event counts with the device's event roles (hit None on
    STARS chips)."""
    platform = int(facts.get("platform", 1))
    request_events, hit_events, victim_events = L2_EVENTS[platform]
    by_event = dict(zip(facts.get("l2_events") or [], counts, strict=False))

    def total(events: tuple[int, ...]) -> int:
        return sum(by_event[abs(e)] * (-1 if e < 0 else 1) for e in events)

    request = total(request_events)
    hit = total(hit_events) / request if request else 0.0
    victim = total(victim_events) / request if request else 0.0
    return [None if platform in raw.STARS_PLATFORMS else hit, victim]
