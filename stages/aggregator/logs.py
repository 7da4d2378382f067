"""Device tasks from task start/end logs: each key's (device, stream, task) k-th end takes its k-th start, in
arrival order. A start waits in ``starts`` until its end comes; an end with no start waiting is unpaired.

A chunk's logs are paired in numpy, key by key: a key whose logs in the chunk go start, end, start, end … and
that has no start waiting from before pairs each end with the start just before it. Other keys (a start waiting
from an earlier chunk, two starts in a row, an end first) are paired one log at a time, as the rule says.
The tasks wait as chunks of columns (PendingDevice) until their batch ids can be known.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from stages.aggregator.queues import put
from stages.decoder import records

Key = tuple[int, int, int]  # device, stream, task
UNRESOLVED_STREAM = -1  # a chip-v6 task log names its task by a 32-bit id only: the host task_track has the stream
MANY_WAITING = 4096  # starts waiting under more keys than this: the whole chunk is paired one log at a time


@dataclass(frozen=True, eq=False)
class DeviceRows:
    """Device tasks as int64 columns, in the order of their end logs. A chunk's streams are all real or all
    UNRESOLVED_STREAM (chip-v6 logs: the host task_track names the stream)."""

    devices: np.ndarray
    streams: np.ndarray
    tasks: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.ends)

    def part(self, begin: int, end: int | None = None) -> DeviceRows:
        """Rows ``begin:end`` (views)."""
        return DeviceRows(self.devices[begin:end], self.streams[begin:end], self.tasks[begin:end],
                          self.starts[begin:end], self.ends[begin:end])

    @property
    def unresolved(self) -> bool:
        return bool(len(self) and self.streams[0] == UNRESOLVED_STREAM)


class PendingDevice:
    """Device tasks waiting for their batch ids, oldest first: chunks of columns, the first read from a cursor."""

    def __init__(self) -> None:
        self._chunks: deque[DeviceRows] = deque()
        self._cursor = 0  # rows of the first chunk already taken
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, rows: DeviceRows) -> None:
        if len(rows):
            self._chunks.append(rows)
            self._rows += len(rows)

    def head(self) -> DeviceRows:
        """The rows of the oldest chunk not taken yet."""
        return self._chunks[0].part(self._cursor)

    def pop(self, count: int) -> None:
        """Take the first ``count`` rows of the oldest chunk."""
        self._cursor += count
        self._rows -= count
        if self._cursor == len(self._chunks[0]):
            self._chunks.popleft()
            self._cursor = 0

    def oldest_starts(self) -> Iterator[int]:
        """The earliest start of each chunk's waiting rows."""
        for at, rows in enumerate(self._chunks):
            starts = rows.starts[self._cursor:] if at == 0 else rows.starts
            yield int(starts.min())


@dataclass
class Paired:
    """Device tasks of a chunk, in the order of their end logs."""

    rows: DeviceRows
    unpaired_ends: int  # end logs with no start waiting
    other_states: int  # logs neither start nor end
    one_by_one: int = 0  # logs paired one at a time


def pair_logs(devices: np.ndarray, streams: np.ndarray, tasks: np.ndarray, states: np.ndarray,
              times: np.ndarray, starts: dict[Key, deque[int]]) -> Paired:
    """Pair a chunk's logs (its columns) with each other and with the ``starts`` waiting (updated)."""
    logs = np.flatnonzero((states == records.STATE_START) | (states == records.STATE_END))
    other_states = len(states) - len(logs)
    if not len(logs):
        empty = np.empty(0, np.int64)
        return Paired(DeviceRows(empty, empty, empty, empty, empty), 0, other_states)
    codes = _codes(devices[logs], streams[logs], tasks[logs])
    order = np.argsort(codes, kind="stable")  # by key, each key's logs in arrival order
    where, code = logs[order], codes[order]
    is_start = states[where] == records.STATE_START
    first = np.ones(len(code), bool)
    first[1:] = code[1:] != code[:-1]
    group = np.cumsum(first) - 1
    heads = np.flatnonzero(first)
    offset = np.arange(len(code)) - heads[group]
    odd = np.zeros(len(heads), bool)  # keys the numpy rule does not pair
    odd[group[is_start != (offset % 2 == 0)]] = True
    waiting = _waiting_codes(starts, int(streams[0]) if len(streams) else 0)
    if waiting is None:
        odd[:] = True
    else:
        odd[np.isin(code[heads], waiting)] = True
    plain = ~odd[group]
    ends_at = np.flatnonzero(plain & ~is_start)
    end_positions = [where[ends_at]]
    start_times = [times[where[ends_at - 1]]]
    last = np.append(heads[1:], len(code)) - 1  # each key's last log: a start left waiting
    for at in np.flatnonzero(~odd & is_start[last]).tolist():
        position = int(where[last[at]])
        put(starts, _key(devices, streams, tasks, position), int(times[position]))
    unpaired = one_by_one = 0
    for at in np.flatnonzero(odd).tolist():
        one_by_one += int(last[at] - heads[at]) + 1
        found_ends, found_starts, missing = _pair_one_by_one(
            where[heads[at]:last[at] + 1], states, times, starts, _key(devices, streams, tasks, int(where[heads[at]])))
        end_positions.append(found_ends)
        start_times.append(found_starts)
        unpaired += missing
    ends = np.concatenate(end_positions)
    in_order = np.argsort(ends, kind="stable")
    ends, paired_starts = ends[in_order], np.concatenate(start_times)[in_order]
    rows = DeviceRows(devices[ends].astype(np.int64), streams[ends].astype(np.int64), tasks[ends].astype(np.int64),
                      paired_starts.astype(np.int64), times[ends].astype(np.int64))
    return Paired(rows, unpaired, other_states, one_by_one)


def _codes(devices: np.ndarray, streams: np.ndarray, tasks: np.ndarray) -> np.ndarray:
    """One integer per key of a chunk (its streams are all real or all unresolved: chip-v6 logs)."""
    return (devices.astype(np.uint64) << np.uint64(48)) | ((streams.astype(np.int64) & 0xFFFF).astype(np.uint64)
                                                            << np.uint64(32)) | tasks.astype(np.uint64)


def _waiting_codes(starts: dict[Key, deque[int]], stream: int) -> np.ndarray | None:
    """Codes of the keys with starts waiting, of the chunk's kind (``stream``: one of its streams, negative for
    chip-v6 logs); None when too many keys wait for a scan per chunk."""
    if len(starts) > MANY_WAITING:
        return None
    unresolved = stream < 0
    keys = [key for key in starts if (key[1] < 0) == unresolved]
    if not keys:
        return np.empty(0, np.uint64)
    found = np.array(keys, np.int64)
    return _codes(found[:, 0], found[:, 1], found[:, 2])


def _pair_one_by_one(positions: np.ndarray, states: np.ndarray, times: np.ndarray, starts: dict[Key, deque[int]],
                     key: Key) -> tuple[np.ndarray, np.ndarray, int]:
    """One key's logs (their positions in arrival order) against its waiting starts: (positions of the ends that
    took a start, those starts' times, ends that found none)."""
    ends, taken = [], []
    missing = 0
    for position, state, ts in zip(positions.tolist(), states[positions].tolist(), times[positions].tolist(),
                                   strict=True):
        if state == records.STATE_START:
            put(starts, key, ts)
            continue
        waiting = starts.get(key)
        if not waiting:
            missing += 1
            continue
        taken.append(waiting.popleft())
        if not waiting:
            del starts[key]
        ends.append(position)
    return np.array(ends, np.int64), np.array(taken, np.int64), missing


def _key(devices: np.ndarray, streams: np.ndarray, tasks: np.ndarray, position: int) -> Key:
    return int(devices[position]), int(streams[position]), int(tasks[position])
