"""Host ↔ device join state, bounded.

Host side: per thread, recent Node-level API intervals, node_basic_info, tensor_info,
context_id_info and ModelExecute windows; a task_track takes the innermost ones that contain or precede its
timestamp (as msprof's C++ association, tree_builder.cpp, does). Device side: start/end logs paired per
(device, stream, task) in arrival order, batch ids from task-id flips, PMU records queued
per (device, stream, task). Host and device tasks meet on (device, stream, task, batch); tasks of
static models are named through their load-time registrations instead (static.py).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

HARD_LIMIT = 1_000_000  # entries per thread and kind, whatever the low-water mark says


Columns = dict[str, np.ndarray]
# A log's entries (their times, their items) → numpy columns of what the columnar join reads ("time" among them)
Extract = Callable[[list[int], list[Any]], Columns]


@dataclass
class TimedLog:
    """Entries sorted by time (appended in order, as each host stream is). Bounded by
    :meth:`prune_before`, which the owner calls with the oldest time still needed, and by
    ``HARD_LIMIT`` (past it by a sixteenth, the oldest entries go). Lists, not deques: lookups bisect.

    :meth:`columns` gives the entries as numpy columns for lookups a window at a time; they are kept in step
    with the lists lazily: entries [0, ``_synced``) sit at ``_first`` on in ``_mirror``'s buffers, the newer ones
    are converted when next asked for (an entry changed in place is marked with :meth:`touched`)."""

    times: list[int] = field(default_factory=list)
    items: list[Any] = field(default_factory=list)
    _mirror: Columns | None = None
    _first: int = 0
    _synced: int = 0

    def prune_before(self, ts: int) -> None:
        """Forget entries older than ``ts`` except the newest of them (it may still contain ``ts``)."""
        drop = bisect.bisect_right(self.times, ts) - 1
        if drop > 0:
            del self.times[:drop]
            del self.items[:drop]
            self._dropped(drop)

    def _dropped(self, count: int) -> None:
        """The oldest ``count`` entries went."""
        if count <= self._synced:
            self._first += count
            self._synced -= count
        else:
            self._first = self._synced = 0

    def touched(self, position: int) -> None:
        """The entry at ``position`` changed in place: its columns are converted again."""
        self._synced = min(self._synced, position % len(self.times) if self.times else 0)

    def add(self, ts: int, item: Any) -> None:
        if self.times and ts < self.times[-1]:  # rare out-of-order record: keep sorted
            position = bisect.bisect_right(self.times, ts)
            self.times.insert(position, ts)
            self.items.insert(position, item)
            self._synced = min(self._synced, position)
        else:
            self.times.append(ts)
            self.items.append(item)
        if len(self.times) > HARD_LIMIT + HARD_LIMIT // 16:
            self._dropped(len(self.times) - HARD_LIMIT)
            del self.times[:-HARD_LIMIT]
            del self.items[:-HARD_LIMIT]

    def add_many(self, times: list[int], items: list[Any]) -> None:
        """:meth:`add` of each in turn; entries in order after the last are appended at once."""
        if not times:
            return
        if times == sorted(times) and (not self.times or times[0] >= self.times[-1]) and \
                len(self.times) + len(times) <= HARD_LIMIT:
            self.times += times
            self.items += items
        else:
            for ts, item in zip(times, items, strict=True):
                self.add(ts, item)

    def columns(self, extract: Extract) -> Columns:
        """The entries as numpy columns (``extract``: the same function for a log every time)."""
        count = len(self.times)
        mirror = self._mirror
        if mirror is None or self._synced < count:
            new = extract(self.times[self._synced:], self.items[self._synced:])
            if mirror is None or self._first + count > len(mirror["time"]):
                grown = {name: np.empty(max(2 * count, 64), column.dtype) for name, column in new.items()}
                if mirror is not None:
                    for name, column in grown.items():
                        column[:self._synced] = mirror[name][self._first:self._first + self._synced]
                mirror, self._mirror, self._first = grown, grown, 0
            for name, column in new.items():
                mirror[name][self._first + self._synced:self._first + count] = column
            self._synced = count
        return {name: column[self._first:self._first + count] for name, column in mirror.items()}

    def latest_at_or_before(self, ts: int) -> Any:
        position = bisect.bisect_right(self.times, ts)
        return self.items[position - 1] if position else None

    def latest_entry_at_or_before(self, ts: int) -> tuple[int, Any] | None:
        """(time, item) of the latest entry at or before ``ts``."""
        position = bisect.bisect_right(self.times, ts)
        return (self.times[position - 1], self.items[position - 1]) if position else None


@dataclass
class RecordLog:
    """A thread's records of one kind as numpy columns (``time`` among them), kept as TimedLog keeps its entries:
    sorted by time (a record older than the last goes after those of its time), pruned by :meth:`prune_before`,
    bounded by ``HARD_LIMIT``. The columns live in buffers, the entries at [``first``, ``first + count``)."""

    buffers: Columns = field(default_factory=dict)
    first: int = 0
    count: int = 0

    def __len__(self) -> int:
        return self.count

    def columns(self) -> Columns:
        end = self.first + self.count
        return {name: column[self.first:end] for name, column in self.buffers.items()}

    def column(self, name: str) -> np.ndarray:
        return self.buffers[name][self.first:self.first + self.count]

    def add(self, new: Columns) -> None:
        """TimedLog.add of each entry of ``new`` in turn (columns of equal length): entries in time order after the
        last are appended at once, the others placed by TimedLog's own rule."""
        times = new["time"]
        if not len(times):
            return
        in_order = bool((times[1:] >= times[:-1]).all()) and (not self.count or times[0] >= self.column("time")[-1])
        if in_order:
            self._append(new)
            self._keep_limit()
            return
        merged = {name: np.concatenate([self.column(name), column]) if self.buffers else column
                  for name, column in new.items()}
        order = TimedLog(self.column("time").tolist() if self.buffers else [], list(range(self.count)))
        for at, ts in enumerate(times.tolist(), self.count):
            order.add(ts, at)
        chosen = np.array(order.items, np.int64)
        self.buffers, self.first, self.count = {name: column[chosen] for name, column in merged.items()}, 0, len(chosen)

    def _keep_limit(self) -> None:
        """TimedLog.add's bound after entries appended one by one: past the limit by a sixteenth, the oldest go
        down to the limit (as many times as the entries came to pass it)."""
        limit, over = HARD_LIMIT, HARD_LIMIT + HARD_LIMIT // 16
        if self.count > over:
            kept = limit + (self.count - over - 1) % (over - limit + 1)
            self.first += self.count - kept
            self.count = kept

    def _append(self, new: Columns) -> None:
        size = len(new["time"])
        if not self.buffers or self.first + self.count + size > len(self.buffers["time"]):
            capacity = max(2 * (self.count + size), 64)
            grown = {name: np.empty((capacity, *column.shape[1:]), column.dtype) for name, column in new.items()}
            if self.buffers:
                for name, column in grown.items():
                    column[:self.count] = self.column(name)
            self.buffers, self.first = grown, 0
        end = self.first + self.count
        for name, column in new.items():
            self.buffers[name][end:end + size] = column
        self.count += size

    def prune_before(self, ts: int) -> None:
        """Forget entries older than ``ts`` except the newest of them (it may still contain ``ts``)."""
        if self.count:
            drop = int(np.searchsorted(self.column("time"), ts, "right")) - 1
            if drop > 0:
                self.first += drop
                self.count -= drop

    def latest(self, ts: int) -> int:
        """Position of the latest entry at or before ``ts`` (-1: none)."""
        return int(np.searchsorted(self.column("time"), ts, "right")) - 1 if self.count else -1

    def values(self, position: int) -> dict[str, Any]:
        """An entry's values (Python ints; a column of rows gives its numpy row)."""
        at = self.first + position
        return {name: column[at] if column.ndim > 1 else column[at].item() for name, column in self.buffers.items()}


def latest_positions(times: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Position of the latest entry at or before each of ``ts`` in sorted ``times`` (-1: none)."""
    return np.searchsorted(times, ts, "right") - 1


class Interval(NamedTuple):
    start: int
    end: int
    item_id: int
    connection_id: int


@dataclass
class HostIndex:
    node_apis: dict[int, RecordLog] = field(default_factory=dict)  # time (the start), end, item, connection
    node_basic: dict[int, RecordLog] = field(default_factory=dict)  # NODE_FIELDS
    # an op's tensor_info records of one time stamp make one entry: its op name, texts key id and last tensor_num
    tensors: dict[int, RecordLog] = field(default_factory=dict)
    contexts: dict[int, RecordLog] = field(default_factory=dict)  # context_id_info (FFTS+ context ids)
    model_runs: dict[int, TimedLog] = field(default_factory=dict)  # begin ts → [model_id, iteration, end]
    # (thread, model_id, iteration) → windows opened and not closed since (some may have been pruned): a begin
    # whose window has none open need not look through the log
    open_runs: dict[tuple[int, int, int], int] = field(default_factory=dict)
    # the texts keys of tensor entries → their id in tensor_columns (and back: tensor_key)
    tensor_ids: dict[tuple[Any, ...], int] = field(default_factory=dict)
    tensor_keys: list[tuple[Any, ...]] = field(default_factory=list)

    @staticmethod
    def _log(table: dict[int, TimedLog], thread: int) -> TimedLog:
        found = table.get(thread)
        if found is None:
            found = table[thread] = TimedLog()
        return found

    def add_node_apis(self, threads: np.ndarray, starts: np.ndarray, ends: np.ndarray, items: np.ndarray,
                      connections: np.ndarray) -> None:
        """Node-level API intervals (their start, end, item id and connection id), by their thread, at their
        start."""
        columns = {"time": starts.astype(np.int64), "end": ends.astype(np.int64), "item": items.astype(np.uint64),
                   "connection": connections.astype(np.int64)}
        for thread, chosen in _thread_groups(threads):
            _record_log(self.node_apis, thread).add({name: column[chosen] for name, column in columns.items()})

    def add_node_basics(self, arr: np.ndarray) -> None:
        """node_basic_info records (decoded rows), by their thread_id, at their ts_ns."""
        columns = {"time": arr["ts_ns"].astype(np.int64)}
        for name in NODE_FIELDS:
            columns[name] = arr[name].astype(np.uint64 if name in ("op_name", "op_type") else np.int64)
        for thread, chosen in _thread_groups(arr["thread_id"]):
            _record_log(self.node_basic, thread).add({name: column[chosen] for name, column in columns.items()})

    def add_tensors(self, arr: np.ndarray, codes: np.ndarray, texts_keys: list[tuple[int, bytes]]) -> None:
        """tensor_info records (decoded rows; ``texts_keys[codes[i]]``: what record i's texts depend on, its tensor
        count and slot bytes), by their thread_id. An op with more than five tensors reports them in several
        records of one time stamp: a record of the op and time stamp of its thread's last entry joins that entry
        (msprof joins tensor_info records on op name, time stamp and thread); the others make entries of their own,
        a run of one op and time stamp in time order after the last entry one entry."""
        ts, op_names, nums = arr["ts_ns"].astype(np.int64), arr["op_name"].astype(np.uint64), arr["tensor_num"]
        singles = np.array([self._key_id((key,)) for key in texts_keys], np.int64)  # a record alone: its key id
        for thread, chosen in _thread_groups(arr["thread_id"]):
            self._add_tensor_entries(_record_log(self.tensors, thread), ts[chosen], op_names[chosen],
                                     nums[chosen].astype(np.int64), codes[chosen], texts_keys, singles)

    def _add_tensor_entries(self, log: RecordLog, ts: np.ndarray, op_names: np.ndarray, nums: np.ndarray,
                            codes: np.ndarray, texts_keys: list[tuple[int, bytes]], singles: np.ndarray) -> None:
        """One thread's tensor_info records into its log (add_tensors)."""
        times = log.column("time") if log.count else None
        if len(ts) > 1 and (bool((ts[1:] < ts[:-1]).any()) or times is not None and ts[0] < times[-1]):
            for at in range(len(ts)):  # out of order: record by record
                one = slice(at, at + 1)
                self._add_tensor_entries(log, ts[one], op_names[one], nums[one], codes[one], texts_keys, singles)
            return
        starts = np.flatnonzero(np.concatenate([[True], (ts[1:] != ts[:-1]) | (op_names[1:] != op_names[:-1])]))
        ends = np.append(starts[1:], len(ts)) - 1
        keys = singles[codes[starts]]
        longer = np.flatnonzero(ends > starts)  # an op's records of one time stamp: one entry
        if len(longer):
            keys[longer] = self._run_ids(codes, starts[longer], ends[longer], texts_keys)
        if times is not None and ts[0] == times[-1] and op_names[0] == log.column("op_name")[-1]:
            last = log.count - 1
            run = tuple(texts_keys[code] for code in codes[starts[0]:ends[0] + 1].tolist())
            log.column("key")[last] = self._key_id(self.tensor_key(int(log.column("key")[last])) + run)
            log.column("num")[last] = nums[ends[0]]
            starts, ends, keys = starts[1:], ends[1:], keys[1:]
        log.add({"time": ts[starts], "op_name": op_names[starts], "key": keys, "num": nums[ends]})

    def _run_ids(self, codes: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 texts_keys: list[tuple[int, bytes]]) -> np.ndarray:
        """Key ids of runs of records [starts, ends] (each its records' texts keys in turn), once per distinct run."""
        lengths = ends - starts + 1
        width = int(lengths.max())
        table = np.full((len(starts), width), -1, np.int64)
        offsets = np.arange(width)
        inside = offsets < lengths[:, None]
        table[inside] = codes[(starts[:, None] + offsets)[inside]]
        distinct, inverse = np.unique(table, axis=0, return_inverse=True)
        ids = [self._key_id(tuple(texts_keys[code] for code in row if code >= 0)) for row in distinct.tolist()]
        return np.array(ids, np.int64)[inverse.reshape(-1)]

    def _key_id(self, key: tuple[Any, ...]) -> int:
        found = self.tensor_ids.get(key)
        if found is None:
            found = self.tensor_ids[key] = len(self.tensor_keys)
            self.tensor_keys.append(key)
        return found

    def add_contexts(self, arr: np.ndarray) -> None:
        """context_id_info records (decoded rows), by their thread_id, at their ts_ns."""
        columns = {"time": arr["ts_ns"].astype(np.int64), "op_name": arr["op_name"].astype(np.uint64),
                   "ctx_id_num": arr["ctx_id_num"].astype(np.int64), "ctx_ids": arr["ctx_ids"]}
        for thread, chosen in _thread_groups(arr["thread_id"]):
            _record_log(self.contexts, thread).add({name: column[chosen] for name, column in columns.items()})

    def add_model_event(self, thread: int, ts: int, model_id: int, iteration: int) -> None:
        log = self._log(self.model_runs, thread)
        key = (thread, model_id, iteration)
        if key in self.open_runs:
            # begin and end of one ModelExecute share (model, iteration): the second closes the window
            for position in range(len(log.items) - 1, -1, -1):
                window = log.items[position]
                if window[0] == model_id and window[1] == iteration and window[2] is None:
                    window[2] = ts
                    log.touched(position)
                    self._opened(key, -1)
                    return
            del self.open_runs[key]  # those windows were pruned
        log.add(ts, [model_id, iteration, None])
        self._opened(key, 1)

    def _opened(self, key: tuple[int, int, int], change: int) -> None:
        count = self.open_runs.get(key, 0) + change
        if count:
            self.open_runs[key] = count
        else:
            del self.open_runs[key]

    # Lookups of the latest entry at or before ``ts`` on a thread (bisect inline: these run several times a task).
    def node_api(self, thread: int, ts: int) -> Interval | None:
        log = self.node_apis.get(thread)
        at = log.latest(ts) if log is not None else -1
        if at < 0:
            return None
        found = log.values(at)  # type: ignore[union-attr]
        return Interval(found["time"], found["end"], found["item"], found["connection"]) if found["end"] >= ts \
            else None

    def node_info(self, thread: int, ts: int, since: int) -> dict[str, Any] | None:
        """The node_basic_info (NODE_FIELDS and ts_ns) reported at or before ``ts`` since ``since``."""
        log = self.node_basic.get(thread)
        at = log.latest(ts) if log is not None else -1
        if at < 0:
            return None
        record = log.values(at)  # type: ignore[union-attr]
        record["ts_ns"] = record.pop("time")
        return record if record["ts_ns"] >= since else None

    def tensor_info(self, thread: int, ts: int, op_name: int, since: int) -> list[dict[str, Any]] | None:
        """The tensor_info records (one or more: their texts_key and tensor_num) of the op reported at or before
        ``ts`` since ``since``."""
        log = self.tensors.get(thread)
        at = log.latest(ts) if log is not None else -1
        if at < 0:
            return None
        entry = log.values(at)  # type: ignore[union-attr]
        if entry["op_name"] != op_name or entry["time"] < since:
            return None
        return [{"texts_key": key, "tensor_num": key[0]} for key in self.tensor_key(entry["key"])]

    def context_info(self, thread: int, ts: int, op_name: int, since: int) -> dict[str, Any] | None:
        log = self.contexts.get(thread)
        at = log.latest(ts) if log is not None else -1
        if at < 0:
            return None
        record = self.context_record(thread, at)
        return record if record["op_name"] == op_name and record["ts_ns"] >= since else None

    def context_record(self, thread: int, position: int) -> dict[str, Any]:
        """The context_id_info at ``position`` of its thread's columns (op_name, ts_ns, ctx_id_num, ctx_ids)."""
        record = self.contexts[thread].values(position)
        record["ts_ns"] = record.pop("time")
        return record

    # Each kind's entries as numpy columns, for lookups a window of tasks at a time (empty: no entry on the thread).
    def api_columns(self, thread: int) -> Columns:
        return _record_columns(self.node_apis, thread)

    def node_columns(self, thread: int) -> Columns:
        return _record_columns(self.node_basic, thread)

    def tensor_columns(self, thread: int) -> Columns:
        return _record_columns(self.tensors, thread)

    def context_columns(self, thread: int) -> Columns:
        return _record_columns(self.contexts, thread)

    def model_columns(self, thread: int) -> Columns:
        return _columns(self.model_runs, thread, _model_columns)

    def tensor_key(self, key_id: int) -> tuple[Any, ...]:
        """The texts key (the tensor_info records' ``texts_key`` values) of a tensor entry's key id."""
        return self.tensor_keys[key_id]

    def forget_tensor_keys(self, limit: int) -> bool:
        """Past ``limit`` key ids, start them again from the entries kept (their ids renumbered); whether it did."""
        if len(self.tensor_ids) <= limit:
            return False
        keys = self.tensor_keys
        self.tensor_ids, self.tensor_keys = {}, []
        for log in self.tensors.values():
            if log.count:
                column = log.column("key")
                distinct, inverse = np.unique(column, return_inverse=True)
                renamed = np.array([self._key_id(keys[key]) for key in distinct.tolist()], np.int64)
                column[:] = renamed[inverse.reshape(-1)]
        return True

    def prune_before(self, ts: int) -> None:
        for table in (self.node_apis, self.node_basic, self.tensors, self.contexts, self.model_runs):
            for log in table.values():
                log.prune_before(ts)

    def model_run(self, thread: int, ts: int) -> tuple[int, int] | None:
        log = self.model_runs.get(thread)
        window = log.latest_at_or_before(ts) if log else None
        if window is None or (window[2] is not None and window[2] < ts):
            return None
        return window[0], window[1]


@dataclass
class FlipLog:
    """Task-id flips per (device, stream): the batch id of a device task is the number of the
    last flip at or before its start."""

    flips: dict[tuple[int, int], TimedLog] = field(default_factory=dict)

    def add(self, device: int, stream: int, ts: int, flip_num: int) -> None:
        self.flips.setdefault((device, stream), TimedLog()).add(ts, flip_num)

    def batch_of(self, device: int, stream: int, ts: int) -> int:
        log = self.flips.get((device, stream))
        if log is None:  # (bisect inline: twice a task)
            return 0
        at = bisect.bisect_right(log.times, ts)
        return int(log.items[at - 1]) if at else 0

    def latest_between(self, device: int, stream: int, since: int, ts: int) -> int | None:
        """Number of the last flip in [since, ts] on (device, stream), or None."""
        log = self.flips.get((device, stream))
        entry = log.latest_entry_at_or_before(ts) if log else None
        return int(entry[1]) if entry is not None and entry[0] >= since else None

    def prune_before(self, ts: int) -> None:
        for log in self.flips.values():
            log.prune_before(ts)


TASK_ID_HALF = 1 << 15  # a task id this far below the one before it on its stream: the 16-bit ids wrapped


@dataclass
class HostBatches:
    """Batch ids of host task_tracks, from the runtime's FLIP tasks (task_tracks of type FLIP_TASK, the flip
    number in their batchId) as msprof's FlipCalculator.compute_batch_id gives them: a runtime may write 0 in
    the batchId of the other task_tracks. A task takes the number of the latest flip of its (device, stream) at
    or before it (the flip's own time included), as the device's tasks do with tag-14 flips (FlipLog); a
    stream-destroy flip (number 65535) counts like the others on both sides. A flip that did not get task id 0
    (another thread took the first ids of the new batch) is stamped after tasks of the new batch: msprof moves
    the tasks stamped just before it with smaller ids into the new batch; here a task whose id falls more than
    half the id space below the previous task of its stream while no flip came between takes the next batch
    (the previous one + 1, the number that flip carries). Tasks are given in time order per stream (the order
    of the task_track stream)."""

    flips: FlipLog = field(default_factory=FlipLog)
    last: dict[tuple[int, int], tuple[int, int, int]] = field(default_factory=dict)  # → (flip, batch, task id)

    def add_flip(self, device: int, stream: int, ts: int, flip_num: int) -> None:
        self.flips.add(device, stream, ts, flip_num)

    def batch_of(self, device: int, stream: int, task: int, ts: int) -> int:
        flip = self.flips.batch_of(device, stream, ts)
        last = self.last.get((device, stream))
        batch = flip
        if last is not None and last[0] == flip:
            batch = last[1] + 1 if task + TASK_ID_HALF < last[2] else last[1]
        self.last[(device, stream)] = (flip, batch, task)
        return batch

    def stream_window(self, device: int, stream: int, ts: np.ndarray, tasks: np.ndarray, is_flip: np.ndarray,
                      numbers: np.ndarray) -> np.ndarray | None:
        """:meth:`add_flip` of the FLIP tasks and :meth:`batch_of` of the others, in turn, for a window of one
        (device, stream)'s task_tracks (``numbers``: their batchId) at once; the batch ids of the others, or None
        (nothing done) when the window's times go back or start before the stream's last flip."""
        log = self.flips.flips.get((device, stream))
        if len(ts) > 1 and bool((ts[1:] < ts[:-1]).any()) or log is not None and log.times and ts[0] < log.times[-1]:
            return None
        tasks = tasks[~is_flip]
        flips_before = np.cumsum(is_flip)[~is_flip]  # the window's flips before each task
        flip = np.zeros(len(tasks), np.int64)
        if log is not None and log.times:
            columns = log.columns(flip_columns)
            at = latest_positions(columns["time"], ts[~is_flip])
            flip = np.where(at >= 0, columns["flip"][np.maximum(at, 0)], 0)
        window_flips = numbers[is_flip].astype(np.int64)
        if len(window_flips):
            flip = np.where(flips_before > 0, window_flips[np.maximum(flips_before - 1, 0)], flip)
            self.flips.flips.setdefault((device, stream), TimedLog()).add_many(
                ts[is_flip].tolist(), window_flips.tolist())
        if not len(tasks):
            return np.zeros(0, np.int64)
        batches = _wrapped_batches(flip, tasks.astype(np.int64), self.last.get((device, stream)))
        self.last[(device, stream)] = (int(flip[-1]), int(batches[-1]), int(tasks[-1]))
        return batches

    def prune_before(self, ts: int) -> None:
        self.flips.prune_before(ts)


def _wrapped_batches(flip: np.ndarray, tasks: np.ndarray, last: tuple[int, int, int] | None) -> np.ndarray:
    """HostBatches.batch_of's rule over a stream's tasks in turn, given each one's flip number: within a run of
    one flip number, a task id more than TASK_ID_HALF below the one before it starts the next batch."""
    previous_flip = np.empty_like(flip)
    previous_task = np.empty_like(tasks)
    previous_flip[1:], previous_task[1:] = flip[:-1], tasks[:-1]
    if last is None:
        previous_flip[0], previous_task[0] = flip[0] - 1, 0  # the first task starts a run
    else:
        previous_flip[0], previous_task[0] = last[0], last[2]
    continued = flip == previous_flip
    wraps = np.cumsum(continued & (tasks + TASK_ID_HALF < previous_task))
    run_start = np.maximum.accumulate(np.where(continued, -1, np.arange(len(flip))))
    start = np.maximum(run_start, 0)
    first_run = last[1] + wraps if last is not None else wraps  # (a first run continuing ``last``)
    return np.where(run_start >= 0, flip[start] + wraps - wraps[start], first_run)


OPEN_END = np.iinfo(np.int64).max  # model_columns' end of a window still open


def _columns(table: dict[int, TimedLog], thread: int, extract: Extract) -> Columns:
    log = table.get(thread)
    if log is None:
        log = TimedLog()
    return log.columns(extract)


NODE_FIELDS = ("op_name", "op_type", "task_type", "block_num", "op_state", "op_flag")


def _model_columns(times: list[int], windows: list[list[Any]]) -> Columns:
    return {"time": np.array(times, np.int64), "model": np.array([w[0] for w in windows], np.uint64),
            "iteration": np.array([w[1] for w in windows], np.int64),
            "end": np.array([OPEN_END if w[2] is None else w[2] for w in windows], np.int64)}


def flip_columns(times: list[int], numbers: list[int]) -> Columns:
    return {"time": np.array(times, np.int64), "flip": np.array(numbers, np.int64)}


def _record_log(table: dict[int, RecordLog], thread: int) -> RecordLog:
    found = table.get(thread)
    if found is None:
        found = table[thread] = RecordLog()
    return found


NO_ENTRIES: Columns = {"time": np.zeros(0, np.int64)}  # a thread without entries (lookups read only its time)


def _record_columns(table: dict[int, RecordLog], thread: int) -> Columns:
    log = table.get(thread)
    return log.columns() if log is not None and log.count else NO_ENTRIES


def _thread_groups(threads: np.ndarray) -> list[tuple[int, slice | np.ndarray]]:
    """Each thread of a batch and its rows, in the batch's order (a slice when all are one thread's)."""
    if not len(threads):
        return []
    first = int(threads[0])
    if bool((threads == first).all()):
        return [(first, slice(None))]
    found, firsts, inverse = np.unique(threads, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [(int(found[at]), np.flatnonzero(inverse == at)) for at in np.argsort(firsts).tolist()]
