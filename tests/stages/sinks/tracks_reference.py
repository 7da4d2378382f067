"""_tracks.py as it was with a Python object per span (commit 13171c0): the reference that the index-based
tracks and the batch placement are compared with (test_track_columns.py)."""
# mypy: ignore-errors


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


class _Span:
    __slots__ = ("start", "end", "parent")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self.parent: _Span | None = None


class NestedTrack:
    """A laminar family of spans sorted by (start, -end); each span knows its innermost container.
    ``_starts`` mirrors ``_spans`` (their starts) so bisection runs in C."""

    __slots__ = ("window_ns", "adjusted", "dropped", "_spans", "_starts", "_floor", "_max_start", "_prune_at")

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self.adjusted = 0
        self.dropped = 0
        self._spans: list[_Span] = []
        self._starts: list[int] = []
        self._floor = -1  # latest end among forgotten spans
        self._max_start = -1
        self._prune_at = 4096

    def __len__(self) -> int:
        return len(self._spans)

    def __getstate__(self) -> dict[str, Any]:
        """Spans as flat integer arrays (a checkpoint pickles tens of thousands of them)."""
        spans = self._spans
        index = {id(span): i for i, span in enumerate(spans)}
        parents = [-1 if span.parent is None else index[id(span.parent)] for span in spans]
        return {"window_ns": self.window_ns, "adjusted": self.adjusted, "dropped": self.dropped,
                "floor": self._floor, "max_start": self._max_start, "prune_at": self._prune_at,
                "starts": array("q", [span.start for span in spans]), "ends": array("q", [span.end for span in spans]),
                "parents": array("q", parents)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.window_ns, self.adjusted, self.dropped = state["window_ns"], state["adjusted"], state["dropped"]
        self._floor, self._max_start, self._prune_at = state["floor"], state["max_start"], state["prune_at"]
        self._spans = [_Span(start, end) for start, end in zip(state["starts"], state["ends"], strict=True)]
        self._starts = list(state["starts"])
        for span, parent in zip(self._spans, state["parents"], strict=True):
            span.parent = None if parent < 0 else self._spans[parent]

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
        # a span that contains our start but ends before our end: end with it
        outer = self._container(start)
        if outer is not None and outer.end < end:
            end = outer.end
        # a span that contains our end but starts after our start: end where it starts
        while True:
            outer = self._container(end)
            if outer is None or outer.start <= start:
                break
            end = outer.start
        return start, end

    def commit(self, start: int, end: int) -> None:
        """Store a span that :meth:`propose` returned unchanged."""
        self._insert(_Span(start, end))

    def appends(self, start: int, end: int) -> bool:
        """Whether :meth:`propose` takes ``start <= end`` unchanged and it starts after every span here: the
        common case (host APIs end in order), checked without bisection. Then :meth:`append` stores it."""
        spans = self._spans
        if start < self._floor:
            return False
        if not spans:
            return True
        span: _Span | None = spans[-1]
        assert span is not None
        if span.start >= start:
            return False
        # every span starts before ours: only the innermost one holding our start can cut it (at its end)
        while span is not None and span.end <= start:
            span = span.parent
        return span is None or span.end >= end

    def append(self, start: int, end: int) -> None:
        """Store a span :meth:`appends` accepted: last, inside the innermost span that holds it, adopting none."""
        spans = self._spans
        new = _Span(start, end)
        parent = spans[-1] if spans else None
        while parent is not None and parent.end < end:  # every span here starts before ours
            parent = parent.parent
        new.parent = parent
        spans.append(new)
        self._starts.append(start)
        if start > self._max_start:
            self._max_start = start
        if len(spans) >= self._prune_at:
            self._prune()

    def encloses_tail(self, start: int, end: int) -> int:
        """Where :meth:`insert_at` puts ``start <= end`` when :meth:`propose` takes it unchanged and the few spans
        that start after it all end inside it (an outer host API, reported after the ones it holds); else -1."""
        spans = self._spans
        if start < self._floor or not spans:
            return -1
        pos = bisect_left(self._starts, start)
        count = len(spans)
        if pos == count or count - pos > TAIL_LIMIT or spans[pos].start == start:
            return -1
        for index in range(pos, count):
            if spans[index].end > end:
                return -1
        # nothing after reaches past our end; of what starts before, only the innermost holding our start cuts it
        outer = spans[pos - 1] if pos else None
        while outer is not None and outer.end <= start:
            outer = outer.parent
        return -1 if outer is not None and outer.end < end else pos

    def insert_at(self, pos: int, start: int, end: int) -> None:
        """Store a span :meth:`encloses_tail` placed at ``pos``."""
        self._insert_at(_Span(start, end), pos)

    def _container(self, point: int) -> _Span | None:
        """Innermost span with start < point < end."""
        spans = self._spans
        if not spans:
            return None
        if spans[-1].start < point:
            index = len(spans) - 1
        else:
            index = bisect_left(self._starts, point) - 1
            if index < 0:
                return None
        span: _Span | None = spans[index]
        while span is not None and span.end <= point:
            span = span.parent
        return span

    def _insert(self, new: _Span) -> None:
        spans, starts = self._spans, self._starts
        if not spans or starts[-1] < new.start or starts[-1] == new.start and spans[-1].end >= new.end:
            pos = len(spans)
        else:  # after every span that starts earlier, or as early and ends no earlier (outer before inner)
            pos = bisect_left(starts, new.start)
            while pos < len(spans) and spans[pos].start == new.start and spans[pos].end >= new.end:
                pos += 1
        self._insert_at(new, pos)

    def _insert_at(self, new: _Span, pos: int) -> None:
        spans, starts = self._spans, self._starts
        parent = spans[pos - 1] if pos else None
        while parent is not None and not (parent.start <= new.start and parent.end >= new.end):
            parent = parent.parent
        new.parent = parent
        # spans starting inside the new one are nested in it: adopt the top-level ones. An adopted span's own
        # descendants follow it and start before it ends: skipped by bisection (an outer API span arrives after
        # the hundreds of spans it holds, each of which was visited here before)
        index, count = pos, len(spans)
        while index < count:
            span = spans[index]
            if span.start >= new.end:
                break
            if span.parent is parent:
                span.parent = new
                if span.end > span.start:
                    index = bisect_left(starts, span.end, index + 1)
                    continue
            index += 1
        if pos == len(spans):
            spans.append(new)
            starts.append(new.start)
        else:
            spans.insert(pos, new)
            starts.insert(pos, new.start)
        if new.start > self._max_start:
            self._max_start = new.start
        if len(spans) >= self._prune_at:
            self._prune()

    def _prune(self) -> None:
        horizon = self._max_start - self.window_ns
        keep = [span.end > horizon for span in self._spans]
        for span, kept in zip(self._spans, keep, strict=True):
            if not kept and span.end > self._floor:
                self._floor = span.end
        self._spans = list(compress(self._spans, keep))
        self._starts = list(compress(self._starts, keep))
        self._prune_at = max(4096, 2 * len(self._spans))


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
