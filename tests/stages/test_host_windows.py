"""HostBatches.stream_window (a stream's window of task_tracks at once) against its per-task rule."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.join import HostBatches

STEP = st.tuples(st.integers(0, 3), st.booleans(), st.integers(0, 65535), st.integers(0, 3))  # gap, flip, id, number


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(STEP, max_size=30), max_size=4))
def test_a_window_gives_the_batches_of_the_per_task_rule(windows: list[list[tuple[int, bool, int, int]]]) -> None:
    at_once, in_turn = HostBatches(), HostBatches()
    ts = 0
    for window in windows:
        times, flips, tasks, numbers = [], [], [], []
        for gap, flip, task, number in window:
            ts += gap
            times.append(ts)
            flips.append(flip)
            tasks.append(task)
            numbers.append(number)
        expected = []
        for time, flip, task, number in zip(times, flips, tasks, numbers, strict=True):
            if flip:
                in_turn.add_flip(0, 1, time, number)
            else:
                expected.append(in_turn.batch_of(0, 1, task, time))
        if not window:
            continue
        found = at_once.stream_window(0, 1, np.array(times, np.int64), np.array(tasks, np.int64),
                                      np.array(flips, bool), np.array(numbers, np.int64))
        assert found is not None and found.tolist() == expected
        assert at_once.last == in_turn.last
