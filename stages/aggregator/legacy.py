"""The join of legacy host records (CANN ≤ 6), bounded.

There the runtime's task track names a task by (device, stream, task, batch) and GE describes it
under the same ids in Framework.task_desc_info (op name and type, block dims, model, iteration), with
its shapes in Framework.tensor_data_info; no API interval ties them (msprof's parser of that era
joined GE's TaskInfo table to the device tasks on stream, task and batch). A key is reused when task
ids wrap, so a track takes the description at its key nearest to it in time: GE reports an op just
after the runtime launched it (or once at model load). That choice is final once GE's stream has
moved past the track by more than the distance found, since GE's records arrive in time order; a track
with no description at its key is taken as one GE does not describe once GE's stream has passed it by
``desc_lag`` (data time). Its tensor records are waited for until GE's tensor stream has reached a later
iteration of its model (GE writes them iteration by iteration; a model or device that has sent none yet
may still send them, so it waits: the end of the job settles it). Every wait ends early only when the
aggregator gives up (the end of the job, or its bound on waiting tracks).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from stages import schema
from stages.formats import legacy

Key = tuple[int, int, int, int]  # device, stream, task, batch
MAX_KEYS = 200_000  # keys waiting for their track, per table; the oldest are forgotten first
MAX_PER_KEY = 16  # records kept per key (one per reuse of the task id)


@dataclass
class LegacyIndex:
    tasks: OrderedDict[Key, list[Any]] = field(default_factory=OrderedDict)
    tensors: OrderedDict[Key, list[Any]] = field(default_factory=OrderedDict)
    task_marks: dict[int, int] = field(default_factory=dict)  # device → newest GE task time seen
    tensor_iterations: dict[tuple[int, int], int] = field(default_factory=dict)  # (device, model) → newest iteration
    forgotten: dict[str, int] = field(default_factory=lambda: {"tasks": 0, "tensors": 0})

    @staticmethod
    def key(record: Any) -> Key:
        return (int(record["device_id"]), int(record["stream_id"]), int(record["task_id"]), int(record["batch_id"]))

    def _add(self, table: OrderedDict[Key, list[Any]], name: str, record: Any) -> None:
        key = self.key(record)
        entries = table.get(key)
        if entries is None:
            entries = table[key] = []
            if len(table) > MAX_KEYS:
                self.forgotten[name] += len(table.popitem(last=False)[1])
        else:
            table.move_to_end(key)
        entries.append(record)
        if len(entries) > MAX_PER_KEY:
            entries.pop(0)
            self.forgotten[name] += 1

    def add_tasks(self, arr: Any) -> None:
        for record in arr:
            self._add(self.tasks, "tasks", record)
            device = int(record["device_id"])
            self.task_marks[device] = max(self.task_marks.get(device, 0), int(record["ts_ns"]))

    def add_tensors(self, arr: Any) -> None:
        for record in arr:
            self._add(self.tensors, "tensors", record)
            model = (int(record["device_id"]), int(record["model_id"]))
            self.tensor_iterations[model] = max(self.tensor_iterations.get(model, 0), int(record["iteration"]))

    def context(self, track: Any, hashes: dict[int, str], give_up: bool,
                desc_lag: int) -> tuple[Any, Any, bool] | None:
        """(GE description or None, tensor record or None, whether a wait was cut short by ``give_up``) of a legacy
        track; None while more may come. What it returns is taken: a reused key starts afresh."""
        key, ts = self.key(track), int(track["ts_ns"])
        ge_mark = self.task_marks.get(key[0], -1)
        entries = self.tasks.get(key, [])
        best = min(range(len(entries)), key=lambda i: abs(int(entries[i]["ts_ns"]) - ts), default=None)
        if best is None:
            if ge_mark >= ts + desc_lag:
                return None, None, False  # not an op GE describes
            return (None, None, True) if give_up else None  # not reported yet
        desc = entries[best]
        waiting = ge_mark < ts + abs(int(desc["ts_ns"]) - ts)  # a nearer description may still come
        # names come from hash_dic, which may be flushed later
        waiting = waiting or not (desc["name_inline"] or int(desc["op_name"]) in hashes) or \
            not (desc["type_inline"] or int(desc["op_type"]) in hashes)
        if waiting and not give_up:
            return None
        tensor = self._take_tensor(key, desc)
        newest = self.tensor_iterations.get((key[0], int(desc["model_id"])))
        if tensor is None and (newest is None or newest <= int(desc["iteration"])):
            if not give_up:
                return None  # GE writes tensor records iteration by iteration: this op's may still come
            waiting = True
        _take(self.tasks, key, best)
        return desc, tensor, waiting

    def _take_tensor(self, key: Key, desc: Any) -> list[Any] | None:
        """The tensor records of the same model and iteration at this key, in order: more than five tensors take
        several (and forget the older ones)."""
        entries = self.tensors.get(key, [])

        def same_run(record: Any) -> bool:
            return int(record["model_id"]) == int(desc["model_id"]) and \
                int(record["iteration"]) == int(desc["iteration"])

        for last in range(len(entries) - 1, -1, -1):
            if same_run(entries[last]):
                first = last
                while first > 0 and same_run(entries[first - 1]):
                    first -= 1
                records = entries[first:last + 1]
                _take(self.tensors, key, last)
                return records
        return None

    def unused(self) -> dict[str, int]:
        """Records no track took (GE ops without a runtime track), by reason."""
        tasks = sum(len(e) for e in self.tasks.values()) + self.forgotten["tasks"]
        tensors = sum(len(e) for e in self.tensors.values()) + self.forgotten["tensors"]
        return {reason: n for reason, n in (("legacy GE task descriptions no runtime task track took", tasks),
                                            ("legacy GE tensor records no task took", tensors)) if n}


def _take(table: OrderedDict[Key, list[Any]], key: Key, index: int) -> None:
    """Entry ``index`` at ``key`` is used: it and the older ones (earlier reuses of the key) go."""
    del table[key][:index + 1]
    if not table[key]:
        del table[key]


def _text(value: Any) -> str:
    return bytes(value).split(b"\0", 1)[0].decode("utf-8", errors="replace")


def describe(track: Any, desc: Any, hashes: dict[int, str]) -> dict[str, Any] | None:
    """Task information of a legacy track (None for a flip: bookkeeping, no device work)."""
    type_name = _text(track["task_type"]) or "N/A"
    if type_name == "FLIP_TASK":
        return None
    thread = int(track["thread_id"])
    if desc is None:
        return {"op_name": type_name, "op_type": type_name, "task_type": type_name, "op_state": "N/A",
                "block_dim": 0, "mix_block_dim": 0, "connection_id": 0, "thread_id": thread,
                "model_id": schema.MODEL_ID_NONE, "iteration": 0}
    names = []
    for side in ("name", "type"):
        hashed = int(desc[f"op_{side}"])
        names.append(_text(desc[f"op_{side}_text"]) if desc[f"{side}_inline"] else hashes.get(hashed, str(hashed)))
    task_type = int(desc["task_type"])
    block = int(desc["block_num"])
    return {"op_name": names[0], "op_type": names[1],
            "task_type": legacy.GE_TASK_TYPES[task_type] if task_type < len(legacy.GE_TASK_TYPES) else "INVALID",
            "op_state": {0: "static", 1: "dynamic"}.get(int(desc["shape_type"]), "N/A"),
            "block_dim": block & 0xFFFF, "mix_block_dim": (block & 0xFFFF) * (block >> 16), "connection_id": 0,
            "thread_id": thread, "model_id": int(desc["model_id"]), "iteration": int(desc["iteration"])}
