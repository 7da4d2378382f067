"""Device tasks resolved a chunk of columns at a time (AggregatorStage._resolve_device) as the per-task rule
resolves them: each waits for its device's flips, takes its batch id from them, and meets its host task (or its
static model's registration), in order."""

from __future__ import annotations

import tempfile
from collections import deque
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from chain import make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

import stages.aggregator as aggregator
from stages.aggregator import AggregatorStage, DeviceTask, HostTask
from stages.aggregator.logs import DeviceRows
from stages.decoder import records

DEVICE = st.integers(0, 1)
STREAM = st.integers(0, 2)
TASK = st.integers(0, 3)
TIME = st.integers(0, 60)
ROW = st.tuples(DEVICE, STREAM, TASK, TIME, st.integers(0, 5))  # device, stream, task, start, length
KEY = st.tuples(DEVICE, STREAM, TASK, st.integers(0, 2))  # device, stream, task, batch
FLIP = st.tuples(DEVICE, STREAM, TIME, st.integers(1, 2))  # device, stream, ts, flip number
MARK = st.one_of(st.none(), st.integers(-1, 70))


def _host(label: int) -> HostTask:
    return HostTask({"label": label}, {"contexts": [], "model_id": 7, "iteration": 0})


def _stage(platforms: tuple[int, int], marks: tuple[int | None, int | None], finishing: bool) -> AggregatorStage:
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", Path(tempfile.mkdtemp(prefix="meet-"))))
    for device, (platform, mark) in enumerate(zip(platforms, marks, strict=True)):
        agg.devices[device] = {"platform": platform}
        if mark is not None:
            agg.watermarks[f"ts_track.data.{device}"] = mark
    agg.finishing = finishing
    return agg


def _setup(agg: AggregatorStage, hosts: list[tuple[int, int, int, int]], devices: list[tuple[int, int, int, int]],
           bindings: list[tuple[int, int, int, int]]) -> None:
    """Host tasks and device tasks already waiting (the keys the hosts' left out), static registrations."""
    for label, key in enumerate(hosts):
        aggregator.put(agg.host_ready, key, _host(label))
    for key in devices:
        if key not in agg.host_ready:
            aggregator.put(agg.device_ready, key, DeviceTask(*key, -1, -1))
    for label, (device, stream, task, ts) in enumerate(bindings):
        agg.static.register(device, 9, stream, task, 0, ts, _host(100 + label))


def _state(agg: AggregatorStage) -> dict[str, Any]:
    def fields(task: DeviceTask) -> tuple[int, ...]:
        return task.device, task.stream, task.task, task.batch, task.start, task.end

    return {"joined": [(host.record["label"], host.resolved["model_id"] if host.resolved else None, fields(task),
                        context) for host, task, context in agg.awaiting_pmu],
            "device_ready": [(key, [fields(task) for task in queue]) for key, queue in agg.device_ready.items()],
            "host_ready": [(key, [host.record["label"] for host in queue]) for key, queue in agg.host_ready.items()],
            "static_waiting": [(key, [(fields(task), it) for task, it in queue])
                               for key, queue in agg.static.waiting.items()],
            "gave_up": dict(agg.gave_up)}


def _rule(agg: AggregatorStage, pending: deque[DeviceTask]) -> None:
    """The per-task rule: each device task in order, until one waits for its flips."""
    while pending:
        task = pending[0]
        if agg.devices.get(task.device, {}).get("platform", 1) != 0:
            if agg.watermarks.get(f"ts_track.data.{task.device}", -1) < task.start:
                if not agg._give_up(len(pending)):
                    return
                agg._gave_up("device task waiting for the flips before it (ts_track)")
            task.batch = agg.flips.batch_of(task.device, task.stream, task.start)
        pending.popleft()
        agg._meet_device(task)


def _rows(chunk: list[tuple[int, int, int, int, int]]) -> DeviceRows:
    columns = [np.array([row[i] for row in chunk], np.int64) for i in range(4)]
    ends = columns[3] + np.array([row[4] for row in chunk], np.int64)
    return DeviceRows(columns[0], columns[1], columns[2], columns[3], ends)


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.lists(ROW, min_size=1, max_size=12), min_size=1, max_size=4),
       flips=st.lists(FLIP, max_size=6), hosts=st.lists(KEY, max_size=10), devices=st.lists(KEY, max_size=4),
       bindings=st.lists(st.tuples(DEVICE, STREAM, TASK, TIME), max_size=3),
       platforms=st.tuples(st.just(1), st.sampled_from([0, 1])), marks=st.tuples(MARK, MARK),
       later_marks=st.tuples(MARK, MARK), finishing=st.booleans(), max_pending=st.sampled_from([3, 200_000]))
def test_device_tasks_by_columns_equal_the_per_task_rule(
        chunks: list[list[tuple[int, int, int, int, int]]], flips: list[tuple[int, int, int, int]],
        hosts: list[tuple[int, int, int, int]], devices: list[tuple[int, int, int, int]],
        bindings: list[tuple[int, int, int, int]], platforms: tuple[int, int], marks: tuple[int | None, int | None],
        later_marks: tuple[int | None, int | None], finishing: bool, max_pending: int) -> None:
    columns, rule = _stage(platforms, marks, finishing), _stage(platforms, marks, finishing)
    for agg in (columns, rule):
        _setup(agg, hosts, devices, bindings)
    flip_records = np.zeros(len(flips), records.DTYPES["flip"])
    for at, (device, stream, ts, number) in enumerate(flips):
        for name, value in (("device_id", device), ("stream_id", stream), ("ts_ns", ts), ("flip_num", number)):
            flip_records[name][at] = value
        rule.flips.add(device, stream, ts, number)
    columns._add_flips(flip_records)
    pending: deque[DeviceTask] = deque()
    with mock.patch.object(aggregator, "MAX_PENDING", max_pending):
        for chunk in chunks:
            columns.pending_device.add(_rows(chunk))
            pending.extend(DeviceTask(device, stream, task, 0, start, start + length)
                           for device, stream, task, start, length in chunk)
            columns._resolve_device()
            _rule(rule, pending)
            assert _state(columns) == _state(rule)
            assert len(columns.pending_device) == len(pending)
        for agg in (columns, rule):
            for device, mark in enumerate(later_marks):
                if mark is not None:
                    agg.watermarks[f"ts_track.data.{device}"] = mark
        columns._resolve_device()
        _rule(rule, pending)
    assert _state(columns) == _state(rule)
    assert len(columns.pending_device) == len(pending)
    assert {k: list(log.times) for k, log in columns.flips.flips.items()} == \
        {k: list(log.times) for k, log in rule.flips.flips.items()}


def _v6_rule(agg: AggregatorStage, tasks: list[DeviceTask]) -> None:
    """The per-task rule of chip-v6 tasks: each takes its stream from the host task_track that named its id, or is
    parked by it."""
    for task in tasks:
        key = (task.device, task.task)
        parked = agg.parked.get(key)
        stream = None if parked else agg._unique_stream(task.device, task.task)
        if stream is None:
            if parked is None:
                agg.parked[key] = deque((task,))
                agg._resolve_parked((key,))
            else:
                parked.append(task)
            continue
        task.stream = stream
        agg._meet_device(task)


@settings(max_examples=150, deadline=None)
@given(chunk=st.lists(st.tuples(DEVICE, TASK, TIME, st.integers(0, 5)), min_size=1, max_size=12),
       launched=st.dictionaries(st.tuples(DEVICE, TASK), STREAM, max_size=6),
       registered=st.dictionaries(st.tuples(DEVICE, TASK), STREAM, max_size=3),
       hosts=st.lists(KEY.map(lambda key: (*key[:3], 0)), max_size=8), devices=st.lists(KEY, max_size=3),
       bindings=st.lists(st.tuples(DEVICE, STREAM, TASK, TIME), max_size=2), finishing=st.booleans())
def test_chip_v6_device_tasks_together_equal_the_per_task_rule(
        chunk: list[tuple[int, int, int, int]], launched: dict[tuple[int, int], int],
        registered: dict[tuple[int, int], int], hosts: list[tuple[int, int, int, int]],
        devices: list[tuple[int, int, int, int]], bindings: list[tuple[int, int, int, int]], finishing: bool) -> None:
    columns, rule = _stage((1, 1), (None, None), finishing), _stage((1, 1), (None, None), finishing)
    for agg in (columns, rule):
        _setup(agg, hosts, devices, bindings)
        agg.launched_streams.update(launched)
        agg.registered_streams.update(registered)
    unresolved = [(device, aggregator.UNRESOLVED_STREAM, task, start, length) for device, task, start, length in chunk]
    columns.pending_device.add(_rows(unresolved))
    columns._resolve_device()
    _v6_rule(rule, [DeviceTask(device, stream, task, 0, start, start + length)
                    for device, stream, task, start, length in unresolved])
    assert _state(columns) == _state(rule)
    assert not columns.pending_device
    assert {key: [(t.start, t.end) for t in queue] for key, queue in columns.parked.items()} == \
        {key: [(t.start, t.end) for t in queue] for key, queue in rule.parked.items()}
    assert columns.launched_streams == rule.launched_streams
