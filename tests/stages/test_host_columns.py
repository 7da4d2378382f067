"""HostIndex's node_basic_info, tensor_info and context_id_info logs, built as numpy columns a decoded batch at a
time, hold what the per-record rule (TimedLog.add of each record in turn; a tensor record joining its thread's
last entry of the same op and time stamp) holds, out-of-order records, pruning and the hard limit included; host
tasks meet their device tasks a window at a time (AggregatorStage._meet_hosts) as one at a time."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from chain import make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator import AggregatorStage, DeviceTask, HostTask, _distinct_tensor_records, _tensor_keys, join, put
from stages.aggregator.join import HostIndex, TimedLog
from stages.decoder.host_records import CONTEXT_ID
from stages.decoder.records import NODE_BASIC, TENSOR

RECORD = st.tuples(st.integers(1, 2), st.integers(0, 6), st.integers(7, 8), st.integers(1, 7), st.integers(0, 2))
CHUNKS = st.lists(st.tuples(st.lists(RECORD, max_size=12), st.booleans()), max_size=5)  # (records, prune after)


def _times(chunk: list[tuple[int, int, int, int, int]], clock: int, drift: bool) -> tuple[list[int], int]:
    """Record times: drifting forward (mostly in order), or jumping back and forth."""
    times = []
    for _, step, *_ in chunk:
        clock += step if drift else 0
        times.append(clock + step if drift else step)
    return times, clock


def _node_rows(chunk: list[tuple[int, int, int, int, int]], times: list[int]) -> np.ndarray:
    rows = np.zeros(len(chunk), NODE_BASIC)
    for row, (thread, _, op, num, variant), ts in zip(rows, chunk, times, strict=True):
        row["thread_id"], row["ts_ns"], row["op_name"], row["block_num"], row["op_flag"] = thread, ts, op, num, variant
    return rows


@settings(max_examples=300, deadline=None)
@given(chunks=CHUNKS, drift=st.booleans(), limit=st.sampled_from([4, 16, 1000]))
def test_node_and_api_columns_hold_what_each_record_added_in_turn_holds(
        chunks: list[tuple[list[tuple[int, int, int, int, int]], bool]], drift: bool, limit: int) -> None:
    index = HostIndex()
    expected: dict[int, TimedLog] = {}
    clock = 0
    with mock.patch.object(join, "HARD_LIMIT", limit):
        for chunk, prune in chunks:
            times, clock = _times(chunk, clock, drift)
            rows = _node_rows(chunk, times)
            index.add_node_basics(rows)
            index.add_node_apis(rows["thread_id"], rows["ts_ns"], rows["ts_ns"] + 1, rows["op_name"], rows["block_num"])
            for (thread, _, op, num, variant), ts in zip(chunk, times, strict=True):
                expected.setdefault(thread, TimedLog()).add(ts, (op, num, variant))
            if prune:
                index.prune_before(clock)
                for log in expected.values():
                    log.prune_before(clock)
    for thread, log in expected.items():
        columns = index.node_columns(thread) if log.times else {"time": np.zeros(0)}
        assert columns["time"].tolist() == log.times
        if log.times:
            found = list(zip(columns["op_name"].tolist(), columns["block_num"].tolist(),
                             columns["op_flag"].tolist(), strict=True))
            assert found == log.items
            apis = index.api_columns(thread)
            assert apis["time"].tolist() == log.times
            assert apis["connection"].tolist() == [num for _, num, _ in log.items]
            record = index.node_info(thread, log.times[-1], since=log.times[-1])
            assert record is not None and (record["op_name"], record["ts_ns"]) == (log.items[-1][0], log.times[-1])


def _tensor_rows(chunk: list[tuple[int, int, int, int, int]], times: list[int]) -> np.ndarray:
    rows = np.zeros(len(chunk), TENSOR)
    for row, (thread, _, op, num, variant), ts in zip(rows, chunk, times, strict=True):
        row["thread_id"], row["ts_ns"], row["op_name"], row["tensor_num"] = thread, ts, op, num
        row["tensors"][0, 3] = variant  # a first tensor's first dimension: records of one count may differ
    return rows


def _add_tensor_in_turn(log: TimedLog, ts: int, op: int, key: Any) -> None:
    """The per-record rule: a record of the last entry's op and time stamp joins it, any other makes an entry."""
    if log.times and log.times[-1] == ts and log.items[-1][0] == op:
        log.items[-1][1].append(key)
    else:
        log.add(ts, [op, [key]])


@settings(max_examples=300, deadline=None)
@given(chunks=CHUNKS, drift=st.booleans(), forget=st.booleans())
def test_tensor_entries_are_what_each_record_added_in_turn_makes(
        chunks: list[tuple[list[tuple[int, int, int, int, int]], bool]], drift: bool, forget: bool) -> None:
    """Records of one op and time stamp make one entry (its texts keys in order, its last tensor count)."""
    index = HostIndex()
    expected: dict[int, TimedLog] = {}
    clock = 0
    for chunk, prune in chunks:
        times, clock = _times(chunk, clock, drift)
        rows = _tensor_rows(chunk, times)
        if len(rows):
            codes, firsts = _distinct_tensor_records(rows)
            index.add_tensors(rows, codes, _tensor_keys(rows[firsts]))
        for (thread, _, op, _, _), ts, key in zip(chunk, times, _tensor_keys(rows) if len(rows) else [], strict=True):
            _add_tensor_in_turn(expected.setdefault(thread, TimedLog()), ts, op, key)
        if prune:
            index.prune_before(clock)
            for log in expected.values():
                log.prune_before(clock)
        if forget:
            index.forget_tensor_keys(0)
    for thread, log in expected.items():
        if not log.times:
            continue
        columns = index.tensor_columns(thread)
        assert columns["time"].tolist() == log.times
        assert columns["op_name"].tolist() == [op for op, _ in log.items]
        assert [index.tensor_key(key) for key in columns["key"].tolist()] == [tuple(keys) for _, keys in log.items]
        assert columns["num"].tolist() == [keys[-1][0] for _, keys in log.items]
        found = index.tensor_info(thread, log.times[-1], log.items[-1][0], since=0)
        assert found is not None and [record["texts_key"] for record in found] == log.items[-1][1]


@settings(max_examples=200, deadline=None)
@given(chunks=CHUNKS, drift=st.booleans())
def test_context_columns_hold_what_each_record_added_in_turn_holds(
        chunks: list[tuple[list[tuple[int, int, int, int, int]], bool]], drift: bool) -> None:
    index = HostIndex()
    expected: dict[int, TimedLog] = {}
    clock = 0
    for chunk, _ in chunks:
        times, clock = _times(chunk, clock, drift)
        rows = np.zeros(len(chunk), CONTEXT_ID)
        for row, (thread, _, op, num, variant), ts in zip(rows, chunk, times, strict=True):
            row["thread_id"], row["ts_ns"], row["op_name"], row["ctx_id_num"] = thread, ts, op, num
            row["ctx_ids"][:num] = np.arange(num) + variant
        index.add_contexts(rows)
        for (thread, _, op, num, variant), ts in zip(chunk, times, strict=True):
            expected.setdefault(thread, TimedLog()).add(ts, (op, list(range(variant, variant + num))))
    for thread, log in expected.items():
        assert index.context_columns(thread)["time"].tolist() == log.times
        found = [index.context_record(thread, at) for at in range(len(log.times))]
        assert [(record["op_name"], [int(c) for c in record["ctx_ids"][:record["ctx_id_num"]]])
                for record in found] == log.items


KEY = st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 3), st.just(0))  # device, stream, task, batch


def _meet_stage() -> AggregatorStage:
    return AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", Path(tempfile.mkdtemp(prefix="hosts-"))))


def _meet_state(agg: AggregatorStage) -> tuple[Any, ...]:
    def queues(table: dict[Any, Any]) -> list[tuple[Any, list[int]]]:
        return [(key, [id(item) for item in queue]) for key, queue in table.items()]
    return (queues(agg.host_ready), queues(agg.device_ready),
            [(id(host), id(device), context) for host, device, context in agg.awaiting_pmu])


@settings(max_examples=200, deadline=None)
@given(hosts=st.lists(st.tuples(KEY, st.booleans()), max_size=12), ready=st.lists(KEY, max_size=12),
       waiting=st.lists(KEY, max_size=4))
def test_host_tasks_meet_at_once_as_in_turn(hosts: list[tuple[tuple[int, int, int, int], bool]],
                                            ready: list[tuple[int, int, int, int]],
                                            waiting: list[tuple[int, int, int, int]]) -> None:
    """_meet_hosts gives the per-task _meet's device_ready, host_ready and awaiting_pmu (the same objects, in the
    same order), keys repeated or not, FFTS+ contexts or not, host tasks of a key already waiting or not."""
    at_once, in_turn = _meet_stage(), _meet_stage()
    devices = [DeviceTask(*key, 0, 1) for key in ready]
    early = [HostTask(None, {"contexts": []}) for _ in waiting]
    tasks = [HostTask(None, {"contexts": [5] if contexts else ()}) for _, contexts in hosts]
    for agg in (at_once, in_turn):
        for key, device in zip(ready, devices, strict=True):
            put(agg.device_ready, key, device)
        for key, host in zip(waiting, early, strict=True):
            if key not in agg.device_ready:
                put(agg.host_ready, key, host)
    keys = [key for key, _ in hosts]
    at_once._meet_hosts(keys, tasks, any(contexts for _, contexts in hosts))
    for key, host in zip(keys, tasks, strict=True):
        in_turn._meet(key, host=host)
    assert _meet_state(at_once) == _meet_state(in_turn)
