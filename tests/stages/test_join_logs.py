"""The aggregator's host-side logs (stages/aggregator/join.py): a batch added at once is as added one by one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator import join
from stages.aggregator.join import HostIndex, Interval, TimedLog
from stages.decoder.records import NODE_BASIC


def _one_by_one(log: TimedLog, times: list[int], items: list[int]) -> None:
    for ts, item in zip(times, items, strict=True):
        log.add(ts, item)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=20), st.lists(st.lists(st.integers(0, 60), max_size=12), max_size=5))
def test_add_many_keeps_what_adding_each_in_turn_keeps(first: list[int], batches: list[list[int]]) -> None:
    at_once, in_turn = TimedLog(), TimedLog()
    _one_by_one(at_once, first, first)
    _one_by_one(in_turn, first, first)
    for times in batches:  # in order or not, before or after what is there
        items = [ts * 100 + i for i, ts in enumerate(times)]
        at_once.add_many(times, items)
        _one_by_one(in_turn, times, items)
        assert (at_once.times, at_once.items) == (in_turn.times, in_turn.items)
        assert at_once.times == sorted(at_once.times)


def test_add_many_still_keeps_to_the_hard_limit(monkeypatch: object) -> None:
    monkeypatch.setattr(join, "HARD_LIMIT", 16)  # type: ignore[attr-defined]
    at_once, in_turn = TimedLog(), TimedLog()
    for times in (list(range(10)), list(range(10, 30))):
        at_once.add_many(times, times)
        _one_by_one(in_turn, times, times)
    assert (at_once.times, at_once.items) == (in_turn.times, in_turn.items)
    assert len(at_once.times) <= 16 + 1 and at_once.times[-1] == 29  # the newest kept, the oldest gone


def test_host_index_takes_a_batch_of_several_threads_by_thread_in_order() -> None:
    index = HostIndex()
    intervals = [Interval(10, 20, 1, 1), Interval(12, 15, 2, 2), Interval(30, 40, 3, 3)]
    index.add_node_apis(np.array([7, 8, 7]), *(np.array(column) for column in zip(*intervals, strict=True)))
    assert index.api_columns(7)["time"].tolist() == [10, 30] and index.api_columns(8)["end"].tolist() == [15]
    assert index.node_api(7, 35) == intervals[2] and index.node_api(7, 25) is None
    assert index.node_api(8, 12) == intervals[1] and index.node_api(9, 12) is None
    records = np.zeros(3, NODE_BASIC)
    records["thread_id"], records["ts_ns"], records["op_name"] = [7, 8, 7], [11, 12, 31], [1, 2, 3]
    index.add_node_basics(records)
    found = index.node_info(7, 32, since=30)
    assert found is not None and (found["ts_ns"], found["op_name"]) == (31, 3)
    found = index.node_info(7, 25, since=10)
    assert found is not None and (found["ts_ns"], found["op_name"]) == (11, 1)
    assert index.node_info(7, 25, since=12) is None and index.node_info(9, 25, since=0) is None
