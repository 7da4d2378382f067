"""Keep complete (``X``) events on one timeline track from overlapping (design §7.3).

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

from array import array
from bisect import bisect_left
from itertools import compress
from math import floor
from typing import Any


def viewer_ns(ns: int) -> int:
    """Where Perfetto's JSON importer puts a time written as ``us(ns)``.

    The importer (trace processor v5x) parses the µs number as a double, then takes integral
    values times 1000 and otherwise rounds ``value * 1000.0`` half away from zero. ``ns / 1000``
    is the correctly rounded double of the written decimal.
    """
    value = ns / 1000
    if value.is_integer():
        return int(value) * 1000
    scaled = value * 1000.0
    whole = floor(scaled)
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
        if viewer_ns(start) < self.viewer_end:
            moved = True
            start = start_seen_at(start, self.viewer_end)
        if moved:
            self.adjusted += 1
            end = max(end, start)
        self.last_end = end
        self.viewer_end = viewer_end(start, end)
        return start, end


class NestedTrack:
    """A laminar family of spans sorted by (start, -end); each span knows its innermost container.

    A span is an integer serial number: ``_ids`` in sort order, ``_starts`` mirroring their starts (so
    bisection runs in C), start, end and parent (-1: none) by serial in dicts. Plain integers give the
    garbage collector nothing to trace; span objects made it walk hundreds of thousands of them."""

    __slots__ = ("window_ns", "adjusted", "dropped", "_ids", "_starts", "_start", "_end", "_parent", "_next",
                 "_floor", "_max_start", "_prune_at")

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.adjusted = 0
        self.dropped = 0
        self._ids: list[int] = []
        self._starts: list[int] = []
        self._start: dict[int, int] = {}
        self._end: dict[int, int] = {}
        self._parent: dict[int, int] = {}
        self._next = 0  # the next span's serial
        self._floor = -1  # latest end among forgotten spans
        self._max_start = -1
        self._prune_at = 4096

    def __len__(self) -> int:
        return len(self._ids)

    def __getstate__(self) -> dict[str, Any]:
        """Spans as flat integer arrays in sort order, parents as positions (as checkpoints have them)."""
        ids = self._ids
        index = {span: i for i, span in enumerate(ids)}
        parents = [-1 if self._parent[span] < 0 else index[self._parent[span]] for span in ids]
        return {"window_ns": self.window_ns, "adjusted": self.adjusted, "dropped": self.dropped,
                "floor": self._floor, "max_start": self._max_start, "prune_at": self._prune_at,
                "starts": array("q", self._starts), "ends": array("q", [self._end[span] for span in ids]),
                "parents": array("q", parents)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.window_ns, self.adjusted, self.dropped = state["window_ns"], state["adjusted"], state["dropped"]
        self._floor, self._max_start, self._prune_at = state["floor"], state["max_start"], state["prune_at"]
        self._starts = list(state["starts"])
        self._ids = list(range(len(self._starts)))
        self._start = dict(enumerate(self._starts))
        self._end = dict(enumerate(state["ends"]))
        self._parent = dict(enumerate(state["parents"]))
        self._next = len(self._ids)

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
        if not self._ids:
            return start, end
        # a span that contains our start but ends before our end: end with it
        outer = self._container(start)
        if outer >= 0 and self._end[outer] < end:
            end = self._end[outer]
        # a span that contains our end but starts after our start: end where it starts
        while True:
            outer = self._container(end)
            if outer < 0 or self._start[outer] <= start:
                break
            end = self._start[outer]
        return start, end

    def commit(self, start: int, end: int) -> None:
        """Store a span that :meth:`propose` returned unchanged."""
        ids, starts, ends, parents = self._ids, self._starts, self._end, self._parent
        count = len(ids)
        if not count or starts[-1] < start or starts[-1] == start and ends[ids[-1]] >= end:
            pos = count
        else:  # after every span that starts earlier, or as early and ends no earlier (outer before inner)
            pos = bisect_left(starts, start)
            while pos < count and starts[pos] == start and ends[ids[pos]] >= end:
                pos += 1
        parent = ids[pos - 1] if pos else -1
        while parent >= 0 and not (self._start[parent] <= start and ends[parent] >= end):
            parent = parents[parent]
        new = self._next
        self._next += 1
        self._start[new], ends[new], parents[new] = start, end, parent
        # spans starting inside the new one are nested in it: adopt the top-level ones
        index = pos
        while index < count and starts[index] < end:
            if parents[ids[index]] == parent:
                parents[ids[index]] = new
            index += 1
        if pos == count:
            ids.append(new)
            starts.append(start)
        else:
            ids.insert(pos, new)
            starts.insert(pos, start)
        if start > self._max_start:
            self._max_start = start
        if count + 1 >= self._prune_at:
            self._prune()

    def _container(self, point: int) -> int:
        """Innermost span with start < point < end (-1: none)."""
        starts = self._starts
        if not starts:
            return -1
        if starts[-1] < point:
            index = len(starts) - 1
        else:
            index = bisect_left(starts, point) - 1
            if index < 0:
                return -1
        span = self._ids[index]
        ends, parents = self._end, self._parent
        while span >= 0 and ends[span] <= point:
            span = parents[span]
        return span

    def _prune(self) -> None:
        """Forget spans that ended before the window; none of them contains a span kept (it would end later)."""
        horizon = self._max_start - self.window_ns
        ends = self._end
        keep = [ends[span] > horizon for span in self._ids]
        for span, kept in zip(self._ids, keep, strict=True):
            if not kept:
                if ends[span] > self._floor:
                    self._floor = ends[span]
                del self._start[span], ends[span], self._parent[span]
        self._ids = list(compress(self._ids, keep))
        self._starts = list(compress(self._starts, keep))
        self._prune_at = max(4096, 2 * len(self._ids))


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
        """Trim until both domains accept the span unchanged, then store it in both."""
        if end < start:
            end = start
        wanted = start, end
        exact, viewer = self.exact, self.viewer
        for _ in range(self.MAX_ROUNDS):
            placed = exact.propose(start, end)
            if placed is None:
                break
            start, end = placed
            seen_start = viewer_ns(start)
            seen_end = seen_start + viewer_ns(end - start)
            seen = viewer.propose(seen_start, seen_end)
            if seen is None:
                break
            if seen[0] == seen_start and seen[1] == seen_end:
                if placed != wanted:
                    self.adjusted += 1
                exact.commit(start, end)
                viewer.commit(seen_start, seen_end)
                return placed
            if seen[0] > seen_start:
                start = start_seen_at(start, seen[0])
                if start > end:
                    break
            else:
                end = max(start, end - (seen_end - seen[1]))
                while end > start and viewer_end(start, end) > seen[1]:
                    end -= 1
        self.dropped += 1
        return None
