"""Track guards: no two complete events cross, as written (exact ns) and as Perfetto reads them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.sinks._tracks import (
    EXACT_BELOW_NS,
    HostTrack,
    SerialTrack,
    rounded_ns,
    start_seen_at,
    viewer_end,
    viewer_ns,
)

EPOCH_NS = 1_795_347_125_600_000_000  # wall clock in ns, where doubles of µs are 0.25 µs apart


def test_viewer_ns_matches_what_trace_processor_loaded() -> None:
    # Written ts → slice.ts reported by trace_processor_shell v56 for a simulated run (see
    # tests/test_perfetto.py): the µs string is read as a double, so ns are lost.
    assert viewer_ns(1_795_347_125_624_093_543) == 1_795_347_125_624_093_440
    assert viewer_ns(1_795_347_125_624_937_875) == 1_795_347_125_624_938_000  # integral double
    assert viewer_ns(1_795_347_125_662_686_036) == 1_795_347_125_662_686_000
    # durations (small numbers) come through exactly
    assert all(viewer_ns(d) == d for d in (0, 1, 999, 1_350, 33_842, 10**9 + 7))


@given(st.integers(EPOCH_NS, EPOCH_NS + 10**9), st.integers(-300, 300))
def test_start_seen_at_reaches_the_target(start: int, offset: int) -> None:
    target = viewer_ns(start) + offset
    moved = start_seen_at(start, target)
    assert moved >= start and viewer_ns(moved) >= target
    assert moved - start <= max(0, offset) + 512


def crossings(spans: list[tuple[int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Pairs that overlap without one containing the other (touching ends are fine)."""
    bad = []
    ordered = sorted(spans, key=lambda s: (s[0], -s[1]))
    for i, (s1, e1) in enumerate(ordered):
        for s2, e2 in ordered[i + 1:]:
            if s2 >= e1:
                break
            if e2 > e1:
                bad.append(((s1, e1), (s2, e2)))
    return bad


def seen(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(viewer_ns(s), viewer_end(s, e)) for s, e in spans]


spans_strategy = st.lists(
    st.tuples(st.integers(0, 200_000), st.sampled_from([0, 1, 120, 250, 256, 700, 5_000, 60_000])),
    min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(spans_strategy, st.randoms(use_true_random=False))
def test_host_track_nests_in_both_domains(raw: list[tuple[int, int]], rng: object) -> None:
    track = HostTrack(10**12)
    spans = [(EPOCH_NS + start, EPOCH_NS + start + length) for start, length in raw]
    rng.shuffle(spans)  # type: ignore[attr-defined]
    placed = []
    for start, end in spans:
        span = track.place(start, end)
        assert span is not None
        assert start <= span[0] <= span[1] <= max(end, span[0])  # only ever later starts, earlier ends
        placed.append(span)
    assert crossings(placed) == []
    assert crossings(seen(placed)) == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3_000), st.integers(0, 2_000)), min_size=1, max_size=80))
def test_serial_track_keeps_tasks_apart_in_both_domains(raw: list[tuple[int, int]]) -> None:
    track = SerialTrack()
    start = EPOCH_NS
    placed = []
    for gap, length in raw:
        start += gap
        placed.append(track.place(start - 500, start + length))  # every task may reach back 0.5 µs
    for (s1, e1), (s2, e2) in zip(placed, placed[1:], strict=False):
        assert e1 <= s2 <= e2
        assert viewer_end(s1, e1) <= viewer_ns(s2)


@settings(max_examples=300, deadline=None)
@given(spans_strategy, st.booleans(), st.randoms(use_true_random=False))
def test_host_track_shortcut_places_as_the_full_settling_does(raw: list[tuple[int, int]], in_end_order: bool,
                                                               rng: object) -> None:
    """``place`` takes a span that starts after everything, or holds the last few, without the full settling;
    it must place every span where ``place_settled`` (no shortcut) does, spans arriving in any order or as
    host APIs do (by their end), and leave the same spans behind for the next one."""
    spans = [(EPOCH_NS + start, EPOCH_NS + start + length) for start, length in raw]
    if in_end_order:
        spans.sort(key=lambda span: span[1])
    else:
        rng.shuffle(spans)  # type: ignore[attr-defined]
    quick, settled = HostTrack(10**12), HostTrack(10**12)
    assert [quick.place(*span) for span in spans] == [settled.place_settled(*span) for span in spans]
    for domain in ("exact", "viewer"):
        kept = [getattr(track, domain).__getstate__() for track in (quick, settled)]
        assert kept[0] == kept[1]
    assert (quick.adjusted, quick.dropped) == (settled.adjusted, settled.dropped)


def test_host_track_shortcut_is_taken_by_spans_that_end_in_order() -> None:
    """Host APIs end in order (inner before outer): each that starts after the others is appended, an outer one
    goes in before the spans it holds and adopts them; a span that would cross another takes the full path."""
    track = HostTrack(10**12)
    inner, outer, after = (EPOCH_NS + 100, EPOCH_NS + 200), (EPOCH_NS, EPOCH_NS + 300), (EPOCH_NS + 400,
                                                                                      EPOCH_NS + 500)
    assert track.exact.appends(*inner)
    assert track.place(*inner) == inner
    assert not track.exact.appends(*outer)  # starts before the inner one, and holds it
    assert track.exact.encloses_tail(*outer) == 0
    assert track.place(*outer) == outer
    assert track.exact.appends(*after)
    assert track.place(*after) == after
    state = track.exact.__getstate__()
    assert list(state["starts"]) == [outer[0], inner[0], after[0]]
    assert list(state["parents"]) == [-1, 0, -1]
    crossing = (EPOCH_NS + 450, EPOCH_NS + 600)  # starts last but would cross `after`: trimmed, not appended
    assert not track.exact.appends(*crossing) and track.exact.encloses_tail(*crossing) == -1
    assert track.place(*crossing) == (crossing[0], after[1])


@given(st.one_of(st.integers(0, EXACT_BELOW_NS - 1), st.integers(EXACT_BELOW_NS - 10**6, EXACT_BELOW_NS - 1),
                 st.integers(EXACT_BELOW_NS, 2**62)))
def test_viewer_ns_takes_small_values_as_they_are_where_the_importer_arithmetic_agrees(ns: int) -> None:
    assert viewer_ns(ns) == rounded_ns(ns)
    if ns < EXACT_BELOW_NS:
        assert viewer_ns(ns) == ns
