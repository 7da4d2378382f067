"""Keep complete (``X``) events on one timeline track from overlapping.

Perfetto drops slices that partially overlap on one track. Two policies:

* :class:`SerialTrack` (device streams): tasks run one after another; a task that would start
  before the previous one ended is shifted to start at that end.
* :class:`HostTrack` (host threads): spans may nest but never cross. Spans may arrive in
  any order (host APIs are reported when they *end*, so outer spans come after inner ones).
  A crossing span is trimmed at its end so that it nests or follows. Memory is bounded by
  forgetting spans that ended more than ``window_ns`` before the latest start; a span that
  starts before what was forgotten is clipped to start after it. :class:`NestedTrack` is
  that laminar family in one time domain.

Both hold in two time domains: the exact one written to the file (``ts`` a µs string with three
decimals, exact from ns) and the one a viewer that reads ``ts`` as a double sees
(:func:`viewer_ns`). Near 2^60 ns (wall clock in ns) doubles are 256 ns apart, so two tasks
that touch exactly may cross after rounding; Perfetto then drops one. Spans are only ever moved
later at their start or cut at their end until they fit in both domains.

Both return the span to write (possibly adjusted), or ``None`` when nothing of it can be
placed, and count what they changed.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from itertools import compress
from typing import Any

TAIL_LIMIT = 8  # spans a new one may hold and still be placed without the full settling (HostTrack.place)
EXACT_BELOW_NS = 1 << 50  # ns / 1000 and back: two roundings, each off by < 2^-53 of it, stay within 0.5


def viewer_ns(ns: int) -> int:
    """Where Perfetto's JSON importer puts a time written as ``us(ns)``.

    The importer (trace processor v5x) parses the µs number as a double, then takes integral
    values times 1000 and otherwise rounds ``value * 1000.0`` half away from zero. ``ns / 1000``
    is the correctly rounded double of the written decimal. Below 2^50 ns (13 days: every duration)
    that gives ``ns`` back.
    """
    if 0 <= ns < EXACT_BELOW_NS:
        return ns
    return rounded_ns(ns)


def rounded_ns(ns: int) -> int:
    """:func:`viewer_ns` by the importer's arithmetic, for any ``ns``."""
    value = ns / 1000
    if value.is_integer():
        return int(value) * 1000
    scaled = value * 1000.0
    whole = math.floor(scaled)
    return whole + 1 if scaled - whole >= 0.5 else whole


def viewer_end(start: int, end: int) -> int:
    """A viewer's end of the span written as ``ts=us(start)``, ``dur=us(end - start)``."""
    return viewer_ns(start) + viewer_ns(end - start)


def start_seen_at(start: int, target: int) -> int:
    """A start no earlier than ``start`` that a viewer places at or after ``target``."""
    seen = viewer_ns(start)
    while seen < target:
        start += target - seen
        seen = viewer_ns(start)
    return start


class SerialTrack:
    __slots__ = ("last_end", "viewer_end", "adjusted")

    def __init__(self) -> None:
        self.last_end = -1
        self.viewer_end = -1
        self.adjusted = 0

    def place(self, start: int, end: int) -> tuple[int, int]:
        if end < start:
            end = start
        moved = start < self.last_end
        if moved:
            start = self.last_end
        seen = viewer_ns(start)
        if seen < self.viewer_end:
            moved = True
            start = start_seen_at(start, self.viewer_end)
            seen = viewer_ns(start)
        if moved:
            self.adjusted += 1
            end = max(end, start)
        self.last_end = end
        duration = end - start
        self.viewer_end = seen + (duration if duration < EXACT_BELOW_NS else viewer_ns(duration))  # viewer_end()
        return start, end


class NestedTrack:
    """A laminar family of spans sorted by (start, -end); each span knows its innermost container. Spans are three
    parallel arrays of int64 (starts, ends, the index of each one's container or -1): a batch of them is stored
    with slice operations (:mod:`._track_columns`), bisection runs in C, and a span costs 24 bytes (a track
    holds every span of the last ``window_ns``: hundreds of thousands on a busy host)."""

    __slots__ = ("window_ns", "adjusted", "dropped", "_starts", "_ends", "_parents", "_floor", "_max_start",
                 "_prune_at")

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.adjusted = 0
        self.dropped = 0
        self._starts = array("q")
        self._ends = array("q")
        self._parents = array("q")  # index of the container, always before the span; -1: none
        self._floor = -1  # latest end among forgotten spans
        self._max_start = -1
        self._prune_at = 4096

    def __len__(self) -> int:
        return len(self._starts)

    def __getstate__(self) -> dict[str, Any]:
        """Spans as flat integer arrays (a checkpoint pickles tens of thousands of them)."""
        return {"window_ns": self.window_ns, "adjusted": self.adjusted, "dropped": self.dropped,
                "floor": self._floor, "max_start": self._max_start, "prune_at": self._prune_at,
                "starts": array("q", self._starts), "ends": array("q", self._ends),
                "parents": array("q", self._parents)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.window_ns, self.adjusted, self.dropped = state["window_ns"], state["adjusted"], state["dropped"]
        self._floor, self._max_start, self._prune_at = state["floor"], state["max_start"], state["prune_at"]
        self._starts, self._ends = array("q", state["starts"]), array("q", state["ends"])
        self._parents = array("q", state["parents"])

    def place(self, start: int, end: int) -> tuple[int, int] | None:
        if end < start:
            end = start
        placed = self.propose(start, end)
        if placed is None:
            self.dropped += 1
            return None
        if placed != (start, end):
            self.adjusted += 1
        self.commit(*placed)
        return placed

    def propose(self, start: int, end: int) -> tuple[int, int] | None:
        """The span trimmed to nest or follow what is here (None: nothing left); nothing stored."""
        if end < start:
            end = start
        if start < self._floor:
            if end < self._floor:
                return None
            start = self._floor
        ends = self._ends
        # a span that contains our start but ends before our end: end with it
        outer = self._container(start)
        if outer >= 0 and ends[outer] < end:
            end = ends[outer]
        # a span that contains our end but starts after our start: end where it starts
        while True:
            outer = self._container(end)
            if outer < 0 or self._starts[outer] <= start:
                break
            end = self._starts[outer]
        return start, end

    def commit(self, start: int, end: int) -> None:
        """Store a span that :meth:`propose` returned unchanged."""
        self._insert(start, end)

    def appends(self, start: int, end: int) -> bool:
        """Whether :meth:`propose` takes ``start <= end`` unchanged and it starts after every span here: the
        common case (host APIs end in order), checked without bisection. Then :meth:`append` stores it."""
        starts = self._starts
        if start < self._floor:
            return False
        if not starts:
            return True
        span = len(starts) - 1
        if starts[span] >= start:
            return False
        # every span starts before ours: only the innermost one holding our start can cut it (at its end)
        ends, parents = self._ends, self._parents
        while span >= 0 and ends[span] <= start:
            span = parents[span]
        return span < 0 or ends[span] >= end

    def append(self, start: int, end: int) -> None:
        """Store a span :meth:`appends` accepted: last, inside the innermost span that holds it, adopting none."""
        ends, parents = self._ends, self._parents
        parent = len(ends) - 1
        while parent >= 0 and ends[parent] < end:  # every span here starts before ours
            parent = parents[parent]
        self._starts.append(start)
        ends.append(end)
        parents.append(parent)
        if start > self._max_start:
            self._max_start = start
        if len(ends) >= self._prune_at:
            self._prune()

    def encloses_tail(self, start: int, end: int) -> int:
        """Where :meth:`insert_at` puts ``start <= end`` when :meth:`propose` takes it unchanged and the few spans
        that start after it all end inside it (an outer host API, reported after the ones it holds); else -1."""
        starts, ends = self._starts, self._ends
        if start < self._floor or not starts:
            return -1
        pos = bisect_left(starts, start)
        count = len(starts)
        if pos == count or count - pos > TAIL_LIMIT or starts[pos] == start:
            return -1
        for index in range(pos, count):
            if ends[index] > end:
                return -1
        # nothing after reaches past our end; of what starts before, only the innermost holding our start cuts it
        outer = pos - 1
        parents = self._parents
        while outer >= 0 and ends[outer] <= start:
            outer = parents[outer]
        return -1 if outer >= 0 and ends[outer] < end else pos

    def insert_at(self, pos: int, start: int, end: int) -> None:
        """Store a span :meth:`encloses_tail` placed at ``pos``."""
        self._insert_at(pos, start, end)

    def _container(self, point: int) -> int:
        """Index of the innermost span with start < point < end, -1 if none."""
        starts = self._starts
        if not starts:
            return -1
        if starts[-1] < point:
            span = len(starts) - 1
        else:
            span = bisect_left(starts, point) - 1
            if span < 0:
                return -1
        ends, parents = self._ends, self._parents
        while span >= 0 and ends[span] <= point:
            span = parents[span]
        return span

    def _insert(self, start: int, end: int) -> None:
        starts, ends = self._starts, self._ends
        if not starts or starts[-1] < start or starts[-1] == start and ends[-1] >= end:
            pos = len(starts)
        else:  # after every span that starts earlier, or as early and ends no earlier (outer before inner)
            pos = bisect_left(starts, start)
            while pos < len(starts) and starts[pos] == start and ends[pos] >= end:
                pos += 1
        self._insert_at(pos, start, end)

    def _insert_at(self, pos: int, start: int, end: int) -> None:
        starts, ends, parents = self._starts, self._ends, self._parents
        parent = pos - 1
        while parent >= 0 and not (starts[parent] <= start and ends[parent] >= end):
            parent = parents[parent]
        # spans starting inside the new one are nested in it: adopt the top-level ones. An adopted span's own
        # descendants follow it and start before it ends: skipped by bisection (an outer API span arrives after
        # the hundreds of spans it holds, each of which was visited here before)
        index, count = pos, len(starts)
        adopted: list[int] = []
        while index < count:
            if starts[index] >= end:
                break
            if parents[index] == parent:
                adopted.append(index)
                if ends[index] > starts[index]:
                    index = bisect_left(starts, ends[index], index + 1)
                    continue
            index += 1
        if pos < count:  # the spans from pos move one on, and so do the containers among them
            for index in range(pos, count):
                if parents[index] >= pos:
                    parents[index] += 1
        for index in adopted:
            parents[index] = pos
        starts.insert(pos, start)
        ends.insert(pos, end)
        parents.insert(pos, parent)
        if start > self._max_start:
            self._max_start = start
        if len(starts) >= self._prune_at:
            self._prune()

    def _prune(self) -> None:
        horizon = self._max_start - self.window_ns
        ends = self._ends
        keep = [span_end > horizon for span_end in ends]
        for span_end, kept in zip(ends, keep, strict=True):
            if not kept and span_end > self._floor:
                self._floor = span_end
        # a container ends no earlier than what it holds: kept with it
        renumber, kept_count = [], 0
        for kept in keep:
            renumber.append(kept_count)
            kept_count += kept
        self._parents = array("q", [-1 if parent < 0 else renumber[parent] for parent in compress(self._parents, keep)])
        self._starts = array("q", compress(self._starts, keep))
        self._ends = array("q", compress(ends, keep))
        self._prune_at = max(4096, 2 * len(self._starts))


class HostTrack:
    """Nested host spans, laminar both as written and as a viewer reads them."""

    __slots__ = ("exact", "viewer", "adjusted", "dropped")

    MAX_ROUNDS = 64  # each round moves the start later or the end earlier; a few suffice

    def __init__(self, window_ns: int) -> None:
        self.exact = NestedTrack(window_ns)
        self.viewer = NestedTrack(window_ns)
        self.adjusted = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self.exact)

    def place(self, start: int, end: int) -> tuple[int, int] | None:
        if end < start:
            end = start
        # the two ways host APIs, which end in order, usually arrive, placed as _settle would, sooner: after
        # everything, or around the last few spans; in both domains
        exact, viewer = self.exact, self.viewer
        seen_start = viewer_ns(start)
        duration = end - start
        seen_end = seen_start + (duration if duration < EXACT_BELOW_NS else viewer_ns(duration))
        if exact.appends(start, end) and viewer.appends(seen_start, seen_end):
            exact.append(start, end)
            viewer.append(seen_start, seen_end)
            return start, end
        pos = exact.encloses_tail(start, end)
        if pos >= 0:
            seen_pos = viewer.encloses_tail(seen_start, seen_end)
            if seen_pos >= 0:
                exact.insert_at(pos, start, end)
                viewer.insert_at(seen_pos, seen_start, seen_end)
                return start, end
        return self.place_settled(start, end)

    def place_settled(self, start: int, end: int) -> tuple[int, int] | None:
        """:meth:`place` without its shortcuts (the tests compare the two)."""
        if end < start:
            end = start
        settled = self._settle(start, end)
        if settled is None:
            self.dropped += 1
            return None
        span = settled[0], settled[1]
        if span != (start, end):
            self.adjusted += 1
        self.exact.commit(*span)
        self.viewer.commit(settled[2], settled[3])
        return span

    def _settle(self, start: int, end: int) -> tuple[int, int, int, int] | None:
        """Trim until both domains accept the span unchanged: (start, end) and where a viewer sees them."""
        for _ in range(self.MAX_ROUNDS):
            placed = self.exact.propose(start, end)
            if placed is None:
                return None
            start, end = placed
            seen_start = viewer_ns(start)
            seen_end = seen_start + viewer_ns(end - start)  # viewer_end(start, end)
            seen = self.viewer.propose(seen_start, seen_end)
            if seen is None:
                return None
            if seen == (seen_start, seen_end):
                return start, end, seen_start, seen_end
            if seen[0] > seen_start:
                start = start_seen_at(start, seen[0])
                if start > end:
                    return None
            else:
                end = max(start, end - (seen_end - seen[1]))
                while end > start and viewer_end(start, end) > seen[1]:
                    end -= 1
        return None
