"""Static models: tasks registered once at model load, replayed by every execution
(request id 0: every iteration, as msprof reads it), across task-id flips.

An offline model (.om, aclmdlExecute) reports its ops at load, inside a Model-level window whose
request id is 0 ("static graph: every iteration", D4). Each of those task_tracks registers
(device, model, stream, task, batch) → op, and binds its (device, stream) to the model: a model's
streams are its own while it is loaded (rtModelBindStream). Every execution replays the same ids
on the device, so a device task on a bound stream is named by

- model: the stream's binding (the load context);
- iteration and execution start: the device's step-trace window of that model (model start …
  model end, index id) that contains the task's start, else the host ModelExecute window of the
  model that contains it;
- batch: the number of the last task-id flip on the stream since that execution started, else the
  batch the stream had when the model was loaded. When a load crosses a 16-bit wrap, the runtime's
  FLIP task sits in the model's stream and runs on every execution, repeating the same flip number
  (D10): flips of earlier executions must not count, which msprof's flip counter does.

With no execution window at all, the registrations decide: a (stream, task) registered under one
batch is that task. A binding holds for device tasks that start from its first registration until
another model registers on the stream or a task is launched there (the model was unloaded and the
stream id reused); earlier bindings are kept while device tasks older than their end may still come.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stages.aggregator.join import FlipLog, TimedLog
from stages.formats import raw

StaticKey = tuple[int, int, int, int, int | None]  # device, model, stream, task, batch (None: not known)


@dataclass
class Binding:
    """A loaded static model's tasks on one (device, stream)."""

    model: int
    load_batch: int  # batch of the model's first registered task on this stream
    since: int  # time of that first registration (local ns)
    until: int | None = None  # another model or a launched task took the stream over at this time
    tasks: dict[tuple[int, int], Any] = field(default_factory=dict)  # (task, batch) → registered host task
    batches: dict[int, list[int]] = field(default_factory=dict)  # task → batches registered under it
    legacy: bool = False  # registered by legacy runtime tracks (CANN 5/6 layout)
    last: int = 0  # time of the latest registration (local ns)

    def holds_at(self, ts: int) -> bool:
        return self.since <= ts and (self.until is None or ts < self.until)

    def find(self, task: int, batch: int | None) -> tuple[int, Any] | None:
        """(batch, registered host task) for a device task, or None while it is not (uniquely) registered."""
        if batch is None:
            known = self.batches.get(task, [])
            if len(known) != 1:
                return None
            batch = known[0]
        host = self.tasks.get((task, batch))
        return (batch, host) if host is not None else None


@dataclass
class ExecutionWindows:
    """Runs of a model, by key: start time → [iteration, end time or None while open]."""

    logs: dict[Any, TimedLog] = field(default_factory=dict)
    # (key, iteration) → windows opened and not closed since (some may have been pruned): a close with none open
    # need not look through the log
    open_count: dict[tuple[Any, int], int] = field(default_factory=dict)

    def open(self, key: Any, ts: int, iteration: int) -> None:
        self.logs.setdefault(key, TimedLog()).add(ts, [iteration, None])
        self.open_count[(key, iteration)] = self.open_count.get((key, iteration), 0) + 1

    def close(self, key: Any, ts: int, iteration: int) -> bool:
        count = self.open_count.pop((key, iteration), 0)
        if not count:
            return False
        log = self.logs.get(key)
        for window in reversed(log.items if log else ()):
            if window[0] == iteration and window[1] is None:
                window[1] = ts
                if count > 1:
                    self.open_count[(key, iteration)] = count - 1
                return True
        return False  # those windows were pruned

    def toggle(self, key: Any, ts: int, iteration: int) -> None:
        """Begin/end pairs that look alike (host events): the second of a pair closes the first."""
        if not self.close(key, ts, iteration):
            self.open(key, ts, iteration)

    def containing(self, key: Any, ts: int) -> tuple[int, int] | None:
        """(start, iteration) of the window that contains ``ts``."""
        log = self.logs.get(key)
        entry = log.latest_entry_at_or_before(ts) if log else None
        if entry is None or (entry[1][1] is not None and entry[1][1] < ts):
            return None
        return entry[0], entry[1][0]

    def prune_before(self, ts: int) -> None:
        for log in self.logs.values():
            log.prune_before(ts)


@dataclass
class StaticModels:
    bindings: dict[tuple[int, int], list[Binding]] = field(default_factory=dict)  # (device, stream) → in time order
    device_runs: ExecutionWindows = field(default_factory=ExecutionWindows)  # key (device, model)
    host_runs: ExecutionWindows = field(default_factory=ExecutionWindows)  # key model
    waiting: dict[StaticKey, deque[tuple[Any, int]]] = field(default_factory=dict)  # (device task, iteration)

    def add_step_trace(self, arr: Any) -> None:
        """Model start / end keypoints (step-trace tag ids 0 / 1) open and close the device's execution windows."""
        for record in arr[arr["tag_id"] <= raw.STEP_TAG_MODEL_END]:
            key = (int(record["device_id"]), int(record["model_id"]))
            ts, index = int(record["ts_ns"]), int(record["index_id"])
            if int(record["tag_id"]) == raw.STEP_TAG_MODEL_START:
                self.device_runs.open(key, ts, index)
            else:
                self.device_runs.close(key, ts, index)

    def register(self, device: int, model: int, stream: int, task: int, batch: int, ts: int,
                 host: Any) -> Binding | None:
        """Record a load-time task reported at ``ts``; the binding when this starts a new one."""
        history = self.bindings.setdefault((device, stream), [])
        current = history[-1] if history else None
        fresh = current is None or current.model != model or current.until is not None
        if fresh:
            if current is not None and current.until is None:
                current.until = ts
            current = Binding(model, batch, ts)
            history.append(current)
        assert current is not None
        current.tasks[(task, batch)] = host
        current.last = max(current.last, ts)
        current.legacy = current.legacy or bool(getattr(host, "legacy", False))
        known = current.batches.setdefault(task, [])
        if batch not in known:
            known.append(batch)
        return current if fresh else None

    def launched(self, device: int, stream: int, ts: int) -> None:
        """A task launched on (device, stream) at ``ts``: no loaded model owns the stream from then on."""
        history = self.bindings.get((device, stream))
        if history and history[-1].until is None and ts > history[-1].since:
            history[-1].until = ts

    def launched_many(self, device: int, stream: int, ts: np.ndarray) -> None:
        """:meth:`launched` of each of ``ts`` in turn (only the first later than the binding's start counts)."""
        history = self.bindings.get((device, stream))
        if history and history[-1].until is None:
            later = np.flatnonzero(ts > history[-1].since)
            if len(later):
                history[-1].until = int(ts[later[0]])

    def binding_at(self, device: int, stream: int, ts: int) -> Binding | None:
        """The model that owned (device, stream) at ``ts``."""
        for binding in reversed(self.bindings.get((device, stream), ())):
            if binding.holds_at(ts):
                return binding
        return None

    def name(self, device: int, stream: int, start: int, binding: Binding, flips: FlipLog) -> tuple[int | None, int]:
        """(batch or None, iteration) of a device task on a bound stream, from device facts."""
        run = self.device_runs.containing((device, binding.model), start) or \
            self.host_runs.containing(binding.model, start)
        if run is None:
            return None, 0
        since, iteration = run
        flip = flips.latest_between(device, stream, since, start)
        return (binding.load_batch if flip is None else flip), iteration

    def wait(self, key: StaticKey, device_task: Any, iteration: int) -> None:
        self.waiting.setdefault(key, deque()).append((device_task, iteration))

    def released(self, device: int, model: int, stream: int, task: int, batch: int) -> list[tuple[Any, int]]:
        """Device tasks that waited for this registration."""
        out: list[tuple[Any, int]] = []
        for key in ((device, model, stream, task, batch), (device, model, stream, task, None)):
            out.extend(self.waiting.pop(key, ()))
        return out

    def waiting_count(self) -> int:
        return sum(len(q) for q in self.waiting.values())

    def launched_unregistered(self) -> int:
        """Waiting device tasks that are launch-mode tasks of the legacy layout: their stream's binding is made of
        legacy runtime tracks (GE describes launched ops with iteration 0 there), still registering after the task
        started (a loaded model registers everything before it runs). Each such task lacks its own runtime track,
        not a load-time registration."""
        count = 0
        for (device, _, stream, _, _), queue in self.waiting.items():
            for task, _ in queue:
                binding = self.binding_at(device, stream, task.start)
                if binding is not None and binding.legacy and binding.last > task.start:
                    count += 1
        return count

    def prune_before(self, ts: int) -> None:
        self.device_runs.prune_before(ts)
        self.host_runs.prune_before(ts)
        for history in self.bindings.values():  # bindings over before every device task still to come
            while history and history[0].until is not None and history[0].until <= ts:
                history.pop(0)
