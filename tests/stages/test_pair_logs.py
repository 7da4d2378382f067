"""Task start/end logs paired in numpy (stages/aggregator/logs.py) as the one-log-at-a-time rule pairs them."""

from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.logs import Key, pair_logs
from stages.decoder import records

LOG = st.tuples(st.integers(0, 1), st.integers(0, 2), st.integers(0, 3),
                st.sampled_from([records.STATE_START, records.STATE_END, records.STATE_START, records.STATE_END, 1]))


def one_by_one(logs: list[tuple[int, int, int, int, int]], starts: dict[Key, deque[int]]
               ) -> tuple[list[tuple[int, int, int, int, int]], int, int]:
    """The rule, log by log: (device, stream, task, start, end) of each end that found a start, ends without one,
    logs neither start nor end."""
    tasks, unpaired, other = [], 0, 0
    for device, stream, task, state, ts in logs:
        key = (device, stream, task)
        if state == records.STATE_START:
            starts.setdefault(key, deque()).append(ts)
        elif state != records.STATE_END:
            other += 1
        elif starts.get(key):
            tasks.append((*key, starts[key].popleft(), ts))
            if not starts[key]:
                del starts[key]
        else:
            unpaired += 1
    return tasks, unpaired, other


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.lists(LOG, max_size=30), min_size=1, max_size=4), unresolved=st.booleans())
def test_numpy_pairing_equals_the_rule_chunk_after_chunk(chunks: list[list[tuple[int, int, int, int]]],
                                                        unresolved: bool) -> None:
    expected_starts: dict[Key, deque[int]] = {}
    starts: dict[Key, deque[int]] = {}
    ts = 0
    for chunk in chunks:
        logs = []
        for device, stream, task, state in chunk:
            ts += 10
            logs.append((device, -1 if unresolved else stream, task, state, ts))
        want = one_by_one(logs, expected_starts)
        devices, streams, tasks, states, times = (np.array([log[i] for log in logs], np.int64) for i in range(5))
        got = pair_logs(devices, streams, tasks, states, times, starts)
        rows = got.rows
        assert (list(zip(rows.devices.tolist(), rows.streams.tolist(), rows.tasks.tolist(), rows.starts.tolist(),
                         rows.ends.tolist(), strict=True)),
                got.unpaired_ends, got.other_states) == want
        assert {key: list(q) for key, q in starts.items()} == {key: list(q) for key, q in expected_starts.items()}
