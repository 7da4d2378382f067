"""The no-overlap rule of :mod:`._tracks` for a whole batch at once (numpy).

A batch's spans are checked together: the rows a track takes unchanged (almost all of them) are stored in one
step; only the rows that would be moved, cut or dropped, and on a device stream the rows right after a moved one,
go through the tracks' own per-span code (:meth:`SerialTrack.place`, :meth:`HostTrack.place`), in arrival order,
with the track's state as it would be at that row. The result, the tracks' state and their counts are those of
placing every row one at a time.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

import numpy as np

from stages.sinks._tracks import EXACT_BELOW_NS, HostTrack, NestedTrack, SerialTrack, viewer_ns

# Wall-clock ns where viewer_ns is integer arithmetic: ns / 1000 in [2^50, 2^51) (a double's step there is 1/4) and
# that double times 1000 in [2^60, 2^61) (step 256). Outside it (and below 2^50 ns, where it is ns) per value.
_BAND_LO = (1 << 60) + (1 << 12)
_BAND_HI = (1 << 51) * 1000 - (1 << 12)
MAX_PER_SPAN_ROWS = 8  # crossing rows of one track in one batch past which the rest go one at a time


def viewer_ns_array(ns: np.ndarray) -> np.ndarray:
    """:func:`._tracks.viewer_ns` of every value (int64), exact."""
    out = ns.astype(np.int64, copy=True)
    far = (ns < 0) | (ns >= EXACT_BELOW_NS)
    if not far.any():
        return out
    band = far & (ns >= _BAND_LO) & (ns < _BAND_HI)
    if band.any():
        # the double nearest ns / 1000 is k / 4 (ties to an even k); an integer gives k * 250 back, else k * 250 is
        # rounded to the doubles' step 256 (ties to an even multiple)
        q, r = np.divmod(ns[band], 250)
        k = q + ((r > 125) | ((r == 125) & ((q & 1) == 1)))
        exact = 250 * k
        high, low = exact >> 8, exact & 255
        rounded = (high + ((low > 128) | ((low == 128) & ((high & 1) == 1)))) << 8
        out[band] = np.where(k % 4 == 0, exact, rounded)
    rest = far & ~band
    if rest.any():
        out[rest] = [viewer_ns(int(value)) for value in ns[rest].tolist()]
    return out


def _viewer_durations(durations: np.ndarray) -> np.ndarray:
    if (durations < EXACT_BELOW_NS).all():
        return durations
    return viewer_ns_array(durations)


def place_serial(tracks: list[SerialTrack], group: np.ndarray, start: np.ndarray, end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """Rows placed on device streams as :meth:`SerialTrack.place` one at a time: ``group`` indexes ``tracks``
    (rows of a group in arrival order). Returns the placed starts and ends and how many rows went per span."""
    n = len(start)
    end = np.maximum(start, end)
    seen = viewer_ns_array(start)
    seen_end = seen + _viewer_durations(end - start)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(tracks) + 1))
    s, e, v, ve = start[order], end[order], seen[order], seen_end[order]
    prev_end, prev_seen_end = np.empty(n, np.int64), np.empty(n, np.int64)
    prev_end[1:], prev_seen_end[1:] = e[:-1], ve[:-1]
    for index, track in enumerate(tracks):
        if bounds[index] < bounds[index + 1]:
            prev_end[bounds[index]], prev_seen_end[bounds[index]] = track.last_end, track.viewer_end
    fits = (s >= prev_end) & (v >= prev_seen_end)  # taken unchanged after an unchanged predecessor
    placed_s, placed_e = s.copy(), e.copy()
    per_span = 0
    raw_end = end[order]
    for index, track in enumerate(tracks):
        lo, hi = int(bounds[index]), int(bounds[index + 1])
        if lo == hi:
            continue
        misfits = (np.flatnonzero(~fits[lo:hi]) + lo).tolist()
        last_placed = -1
        if misfits:
            at, row, moved = 0, misfits[0], False
            while row < hi:
                if not moved and fits[row]:  # on to the next misfit: the rows between are taken as they are
                    while at < len(misfits) and misfits[at] <= row:
                        at += 1
                    if at == len(misfits):
                        break
                    row = misfits[at]
                    continue
                if not moved and row > lo:  # the track as the rows before left it
                    track.last_end, track.viewer_end = int(e[row - 1]), int(ve[row - 1])
                want_s, want_e = int(s[row]), int(raw_end[row])
                got_s, got_e = track.place(want_s, want_e)
                per_span += 1
                moved = got_s != want_s or got_e != want_e
                placed_s[row], placed_e[row] = got_s, got_e
                last_placed = row
                row += 1
        if last_placed != hi - 1:
            track.last_end, track.viewer_end = int(e[hi - 1]), int(ve[hi - 1])
    out_s, out_e = np.empty(n, np.int64), np.empty(n, np.int64)
    out_s[order], out_e[order] = placed_s, placed_e
    return out_s, out_e, per_span


def laminar(start: np.ndarray, end: np.ndarray) -> bool:
    """Whether no two spans cross (``s1 < s2 < e1 < e2``); nesting, touching and equal ends or starts are fine.

    The spans' ends as one sorted walk (at one time closes first, inner closes before outer, outer opens before
    inner) nest like parentheses exactly when each close is matched, level by level, with its own open.
    """
    keep = end > start  # an empty span crosses nothing
    if not keep.all():
        start, end = start[keep], end[keep]
    n = len(start)
    if n < 2:
        return True
    ids = np.arange(n, dtype=np.int64)
    times = np.concatenate([start, end])
    opening = np.concatenate([np.ones(n, np.int64), np.zeros(n, np.int64)])
    tie = np.concatenate([-end, -start])
    tie2 = np.concatenate([ids, -ids])
    order = np.lexsort((tie2, tie, opening, times))
    step = np.where(opening[order] == 1, 1, -1)
    depth = np.cumsum(step)
    level = np.where(step == 1, depth, depth + 1)
    spans = np.concatenate([ids, ids])[order]
    pairs = spans[np.lexsort((np.arange(2 * n), level))].reshape(-1, 2)
    return bool((pairs[:, 0] == pairs[:, 1]).all())


def _chain(track: NestedTrack, k: int) -> list[int]:
    """The span before index ``k`` and its containers, innermost first."""
    chain, parents = [], track._parents
    span = k - 1
    while span >= 0:
        chain.append(span)
        span = parents[span]
    return chain


def _near(track: NestedTrack, point: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the stored spans that end after ``point`` (the only ones a span from there can cross)."""
    starts, ends = track._starts, track._ends
    k = bisect_left(starts, point)
    chain = [span for span in _chain(track, k) if ends[span] > point]
    return (np.concatenate((np.array([starts[span] for span in chain], np.int64), np.array(starts[k:], np.int64))),
            np.concatenate((np.array([ends[span] for span in chain], np.int64), np.array(ends[k:], np.int64))))


def _clean_prefix(track: NestedTrack, start: np.ndarray, end: np.ndarray) -> int:
    """How many leading rows (arrival order) the track takes unchanged, one after another."""
    n = len(start)
    below = np.flatnonzero(start < track._floor)
    if below.size:
        n = int(below[0])
    if n == 0:
        return 0
    near_s, near_e = _near(track, int(start[:n].min()))

    def fits(count: int) -> bool:
        return laminar(np.concatenate([near_s, start[:count]]), np.concatenate([near_e, end[:count]]))

    if fits(n):
        return n
    good, bad = 0, n  # fits(good), not fits(bad)
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


def _store(track: NestedTrack, start: np.ndarray, end: np.ndarray) -> None:
    """Spans the track takes unchanged (arrival order), stored as its own code stores them one at a time:
    sorted by (start, -end) after equal ones, each inside its innermost container, adopting what it holds."""
    starts, ends, parents = track._starts, track._ends, track._parents
    k = bisect_left(starts, int(start.min()))
    chain = _chain(track, k)
    tail_s = np.array(starts[k:], np.int64)
    tail_e = np.array(ends[k:], np.int64)
    if (end == start).any() or (tail_e == tail_s).any() or any(starts[span] == ends[span] for span in chain):
        # an empty span may hang under a span it only touches (NestedTrack._insert_at): its own code stores them
        for row_start, row_end in zip(start.tolist(), end.tolist(), strict=True):
            track.commit(row_start, row_end)
        return
    m, n = len(tail_s), len(start)
    count = m + n
    all_s, all_e = np.concatenate([tail_s, start]), np.concatenate([tail_e, end])
    source = np.concatenate([np.zeros(m, np.int64), np.ones(n, np.int64)])
    order = np.lexsort((np.arange(count), source, -all_e, all_s))  # merged position -> span (tail, then new)
    merged_at = np.empty(count, np.int64)
    merged_at[order] = np.arange(count)
    s, e, new = all_s[order], all_e[order], source[order] == 1
    # Laminar, no empty span: the spans before one in this order either hold it or end by its start, so its
    # depth here is its position less those that end by its start; its container, the last one a level up.
    depth = np.arange(count) - np.searchsorted(np.sort(e), s, side="right")
    key = depth * count + np.arange(count)
    by_key = np.sort(key)
    found = np.searchsorted(by_key, (depth - 1) * count + np.arange(count)) - 1
    candidate = by_key[np.maximum(found, 0)]
    inside = (depth > 0) & (found >= 0) & (candidate // count == depth - 1)
    container = np.where(inside, k + candidate % count, -1)
    # at the top here: the innermost span before k that holds it (ends from the outermost in, never growing)
    if chain:
        outer_first = np.array(chain[::-1], np.int64)
        outer_ends = np.array([ends[span] for span in outer_first.tolist()], np.int64)
        holding = np.searchsorted(-outer_ends, -e, side="right")
        top = np.where(holding > 0, outer_first[np.maximum(holding - 1, 0)], -1)
        container = np.where(inside, container, top)
    # a stored span keeps its container (renumbered) unless a new span adopts it, as _insert_at does
    old = np.array(parents[k:], np.int64)
    if m:
        old = np.where(old >= k, k + merged_at[np.maximum(old - k, 0)], old)
    kept_parent = np.empty(count, np.int64)
    kept_parent[merged_at[:m]] = old
    in_new = container >= k
    by_new = np.zeros(count, bool)
    by_new[in_new] = new[container[in_new] - k]
    by_new &= s < np.where(in_new, e[np.maximum(container - k, 0)], 0)
    parent = np.where(new | by_new, container, kept_parent)
    starts[k:] = array("q", s.astype(np.int64, copy=False).tobytes())
    ends[k:] = array("q", e.astype(np.int64, copy=False).tobytes())
    parents[k:] = array("q", parent.astype(np.int64, copy=False).tobytes())
    top_start = int(start.max())
    if top_start > track._max_start:
        track._max_start = top_start
    if len(starts) >= track._prune_at:
        track._prune()


def place_nested(track: HostTrack, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray, int]:
    """One host thread's rows (arrival order) placed as :meth:`HostTrack.place` one at a time: placed starts and
    ends, which rows are kept (not dropped), and how many rows went per span."""
    n = len(start)
    end = np.maximum(start, end)
    seen = viewer_ns_array(start)
    seen_end = seen + _viewer_durations(end - start)
    out_s, out_e, kept = start.copy(), end.copy(), np.ones(n, bool)
    exact, viewer = track.exact, track.viewer
    pos, per_span = 0, 0
    while pos < n:
        budget = max(1, min(exact._prune_at - len(exact), viewer._prune_at - len(viewer)))
        limit = min(n, pos + budget)
        take = _clean_prefix(exact, start[pos:limit], end[pos:limit])
        if take:
            take = _clean_prefix(viewer, seen[pos:pos + take], seen_end[pos:pos + take])
        if take:
            _store(exact, start[pos:pos + take], end[pos:pos + take])
            _store(viewer, seen[pos:pos + take], seen_end[pos:pos + take])
            pos += take
        if pos == limit:
            continue
        rest = range(pos, pos + 1) if per_span < MAX_PER_SPAN_ROWS else range(pos, n)
        for row in rest:
            placed = track.place(int(start[row]), int(end[row]))
            per_span += 1
            if placed is None:
                kept[row] = False
            else:
                out_s[row], out_e[row] = placed
        pos = rest.stop
    return out_s, out_e, kept, per_span
