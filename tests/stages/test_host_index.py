"""The join's host-side indexes: bulk intake and counted window searches give what one record at a time and a
full search give (stages/aggregator/join.py, static.py)."""

from __future__ import annotations

import bisect
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.join import HostIndex
from stages.aggregator.static import ExecutionWindows


def scan_toggle(items: list[list[Any]], times: list[int], ts: int, iteration: int) -> None:
    """The rule, by a search of every window: an open window of ``iteration`` is closed, else one opens."""
    for window in reversed(items):
        if window[0] == iteration and window[1] is None:
            window[1] = ts
            return
    times.append(ts)
    items.append([iteration, None])


EVENT = st.tuples(st.integers(0, 3), st.booleans())  # iteration, prune before this event


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENT, max_size=40))
def test_execution_windows_toggle_as_a_full_search_does(events: list[tuple[int, bool]]) -> None:
    """Windows pruned while open are no longer closed; the count of open windows never skips one still kept."""
    windows = ExecutionWindows()
    times: list[int] = []
    items: list[list[Any]] = []
    for ts, (iteration, prune) in enumerate(events):
        if prune:
            windows.prune_before(ts)
            drop = bisect.bisect_right(times, ts) - 1
            if drop > 0:
                del times[:drop], items[:drop]
        windows.toggle(7, ts, iteration)
        scan_toggle(items, times, ts, iteration)
        log = windows.logs[7]
        assert (log.times, log.items) == (times, items)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(EVENT, max_size=40))
def test_model_events_pair_as_a_full_search_does(events: list[tuple[int, bool]]) -> None:
    index = HostIndex()
    times: list[int] = []
    items: list[list[Any]] = []
    for ts, (iteration, prune) in enumerate(events):
        if prune:
            index.prune_before(ts)
            drop = bisect.bisect_right(times, ts) - 1
            if drop > 0:
                del times[:drop], items[:drop]
        index.add_model_event(3, ts, 5, iteration)
        scan_toggle(items, times, ts, iteration)
        log = index.model_runs[3]
        assert (log.times, [[iteration, end] for _, iteration, end in log.items]) == (times, items)
