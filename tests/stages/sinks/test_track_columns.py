"""The batch placement of _track_columns: the same spans, state and counts as the tracks' per-span code."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import tracks_reference as reference

from stages.sinks._track_columns import laminar, place_nested, place_serial, viewer_ns_array
from stages.sinks._tracks import HostTrack, SerialTrack, viewer_ns

WALL = 1_704_161_511_422_904_204


def test_viewer_ns_array_is_viewer_ns() -> None:
    rng = random.Random(5)
    values = [0, 1, 999, 1 << 50, (1 << 50) - 1, (1 << 60) + 4096, 2_251_799_813_685_247_000, -5, -WALL]
    values += [WALL + rng.randrange(10**12) for _ in range(20_000)]
    values += [base * 250 + off for base in range(WALL // 250, WALL // 250 + 4000) for off in (124, 125, 126)]
    values += [rng.randrange(1 << 62) for _ in range(2_000)]
    got = viewer_ns_array(np.array(values, np.int64)).tolist()
    assert got == [viewer_ns(v) for v in values]


def _crossing(spans: list[tuple[int, int]]) -> bool:
    return any(s1 < s2 < e1 < e2 or s2 < s1 < e2 < e1 for s1, e1 in spans for s2, e2 in spans)


def test_laminar_is_no_crossing_pair() -> None:
    rng = random.Random(2)
    for _ in range(3_000):
        spans = [(s, s + rng.choice([0, 1, 2, 5, 10])) for s in (rng.randrange(20) for _ in range(rng.randrange(1, 7)))]
        starts = np.array([s for s, _ in spans], np.int64)
        ends = np.array([e for _, e in spans], np.int64)
        assert laminar(starts, ends) == (not _crossing(spans)), spans


def _state(track: Any) -> dict[str, Any]:
    return track.__getstate__()  # type: ignore[no-any-return]


def _host_batches(rng: random.Random, base: int, rounds: int, crossing: float) -> list[list[tuple[int, int]]]:
    """Host APIs as they arrive: in end order, each outer one after what it holds; a few crossing ones."""
    batches, at = [], base
    for _ in range(rounds):
        rows: list[tuple[int, int]] = []
        for _ in range(rng.randrange(1, 60)):
            outer_start = at
            inner = []
            for _ in range(rng.randrange(0, 12)):
                at += rng.randrange(0, 300)
                span = (at, at + rng.choice([0, 1, 40, 700]))
                inner.append(span)
                at = span[1]
            at += rng.randrange(0, 50)
            rows += inner
            rows.append((outer_start, at))
            if rng.random() < crossing:
                start = at - rng.randrange(0, 3_000)
                rows.append((start, start + rng.randrange(0, 6_000)))
            if rng.random() < 0.02:
                rows.append((at - 10**7, at - 10**7 + 5))  # far behind: under the floor once pruned
        batches.append(rows)
    return batches


@pytest.mark.parametrize(("base", "crossing", "window"), [(0, 0.0, 10**9), (WALL, 0.0, 10**9), (WALL, 0.2, 10**9),
                                                        (1_000, 0.3, 20_000), (WALL, 0.05, 50_000)])
def test_place_nested_is_place_one_at_a_time(base: int, crossing: float, window: int) -> None:
    rng = random.Random(base + int(crossing * 100) + window)
    one, batch, now = reference.HostTrack(window), HostTrack(window), HostTrack(window)
    for rows in _host_batches(rng, base, 25, crossing):
        expected = [one.place(s, e) for s, e in rows]
        assert [now.place(s, e) for s, e in rows] == expected  # the index-based track, one at a time
        assert _state(now.exact) == _state(one.exact) and _state(now.viewer) == _state(one.viewer)
        starts, ends = np.array([s for s, _ in rows], np.int64), np.array([e for _, e in rows], np.int64)
        got_s, got_e, kept, _per_span = place_nested(batch, starts, ends)
        got = [(s, e) if k else None for s, e, k in zip(got_s.tolist(), got_e.tolist(), kept.tolist(), strict=True)]
        assert got == expected
        assert (batch.adjusted, batch.dropped) == (one.adjusted, one.dropped)
        assert _state(batch.exact) == _state(one.exact)
        assert _state(batch.viewer) == _state(one.viewer)


@pytest.mark.parametrize("base", [0, WALL])
def test_place_serial_is_place_one_at_a_time(base: int) -> None:
    rng = random.Random(base % 1000)
    one = [SerialTrack() for _ in range(3)]
    batch = [SerialTrack() for _ in range(3)]
    at = [base] * 3
    for _ in range(80):
        groups, starts, ends = [], [], []
        for _ in range(rng.randrange(1, 40)):
            g = rng.randrange(3)
            at[g] += rng.choice([-500, -3, 0, 0, 1, 100, 2_000])
            groups.append(g)
            starts.append(at[g])
            ends.append(at[g] + rng.choice([-1, 0, 1, 255, 256, 700]))
            at[g] = max(at[g], ends[-1])
        expected = [one[g].place(s, e) for g, s, e in zip(groups, starts, ends, strict=True)]
        got_s, got_e, _per_span = place_serial(batch, np.array(groups), np.array(starts, np.int64),
                                               np.array(ends, np.int64))
        assert list(zip(got_s.tolist(), got_e.tolist(), strict=True)) == expected
        assert [(t.last_end, t.viewer_end, t.adjusted) for t in batch] == [
            (t.last_end, t.viewer_end, t.adjusted) for t in one]
