"""STARS-class device records (910B and later, spec §1.7, §6 D11).

stars_soc.data holds the ACSQ task start/end logs that replace hwts.data (64 B; 32 B with one
32-bit unique task id on chip v6) and, on 64-byte chips, the FFTS+ subtask (context) start/end
logs of FFTS+ tasks, mixed with other STARS logs this release does not decode (rejected per func
type, with its name; msprof's chip-v6 func types include no FFTS+ subtask logs). ffts_profile.data
holds ContextPmu records (one per task or FFTS+ context, the PMU that replaces aicore.data) and
BlockPmu records (per block, the slave core of MIX ops). Every record becomes one output record or
one rejection.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.stage import Batch
from stages.decoder import records
from stages.decoder.timebase import Clock, TimeBase
from stages.formats import raw

Reject = Callable[[str, int, bytes], None]
Output = list[tuple[str, "np.ndarray | Batch"]]
STARS_KINDS = frozenset({"stars_soc", "stars_soc_v6", "ffts_profile"})
INVALID_CONTEXT_ID = 0xFFFFFFFF
PLACE_HOLDER_SQE, EVENT_RECORD_SQE = 3, 4  # keep their ids as written in expand-stream mode

# Names of the STARS func types msprof knows (msprof stars_config.py), for the rejections of those this release
# does not decode (FFTS+ subtask logs on chip v6 among them).
FUNC_TYPE_NAMES = {
    raw.FFTS_LOG_START: "FFTS+ subtask start log", raw.FFTS_LOG_END: "FFTS+ subtask end log",
    0b100100: "block start log", 0b100101: "block end log", 0b011010: "ACC PMU", 0b011001: "SIO",
    0b011011: "chip trans", 0b011100: "inter-SoC", 0b011101: "low power", 0b011000: "QoS",
    0b010110: "fusion task", 0b010111: "fusion task",
}


def func_type(head: np.ndarray) -> np.ndarray:
    """Bits 0–5 of the first u16."""
    result: np.ndarray = head & 0x3F
    return result


def sqe_type(head: np.ndarray) -> np.ndarray:
    """Bits 10–15 of the first u16 (ACSQ logs): 0 AI Core, 1 AI CPU, 2 AI Vector Core …"""
    result: np.ndarray = head >> 10
    return result


def ids(stream: np.ndarray, task: np.ndarray, expand: bool = False,
        sqe: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(stream id, task id) of STARS records from their u16 stream and task fields (spec §1.7;
    msprof parser_item/stars_common.h).

    Default mode: bit 12 of the stream field set → stream = its low 11 bits, task = task low 13
    bits | stream bits 13–15; else bit 13 set → the low 12 bits of the two fields were swapped
    (stream = task low 12 bits mod 2048, task = stream low 12 bits | task bits 12–15); else stream
    = stream field mod 2048, task as written. Expand-stream mode (15-bit ids): bit 15 set →
    stream = task low 15 bits, task = task bit 15 | stream low 15 bits; else both as written (the
    stream's low 15 bits); placeholder and event-record SQEs always keep theirs.
    """
    stream, task = np.asarray(stream, np.uint16), np.asarray(task, np.uint16)
    if expand:
        swapped = ((stream & 0x8000) != 0) & ~_kept(stream, sqe)
        return (np.where(swapped, task & 0x7FFF, stream & 0x7FFF),
                np.where(swapped, (task & 0x8000) | (stream & 0x7FFF), task))
    bit12 = (stream & 0x1000) != 0
    bit13 = ((stream & 0x2000) != 0) & ~bit12
    if not (bit12.any() or bit13.any()):
        return stream & 0x07FF, task
    new_stream = np.where(bit13, task & 0x0FFF, stream) & 0x07FF
    new_task = np.where(bit12, (task & 0x1FFF) | (stream & 0xE000), np.where(bit13, (stream & 0x0FFF) | (task & 0xF000),
                                                                             task))
    return new_stream, new_task


def stream_ids(stream: np.ndarray, task: np.ndarray, expand: bool = False,
               sqe: np.ndarray | None = None) -> np.ndarray:
    """The stream ids of :func:`ids`."""
    return ids(stream, task, expand, sqe)[0]


def task_ids(stream: np.ndarray, task: np.ndarray, expand: bool = False,
             sqe: np.ndarray | None = None) -> np.ndarray:
    """The task ids of :func:`ids`."""
    return ids(stream, task, expand, sqe)[1]


def _kept(stream: np.ndarray, sqe: np.ndarray | None) -> np.ndarray:
    if sqe is None:
        return np.zeros(len(stream), bool)
    kept: np.ndarray = np.isin(sqe, (PLACE_HOLDER_SQE, EVENT_RECORD_SQE))
    return kept


def core_kind(ffts_type: np.ndarray, subtask_type: np.ndarray) -> np.ndarray:
    """records.CORE_* of a PMU record, as msprof tells AI Core from AI Vector Core (pmu_accelerator_utils.cpp)."""
    plus = ffts_type == raw.FFTS_TYPE_PLUS
    core = np.full(len(ffts_type), records.CORE_AIV, np.uint8)
    core[(ffts_type == raw.FFTS_TYPE_AIC) | (plus & (subtask_type == raw.SUBTASK_AIC))] = records.CORE_AIC
    core[(ffts_type == raw.FFTS_TYPE_MIX_AIC) | (plus & (subtask_type == raw.SUBTASK_MIX_AIC))] = records.CORE_MIX_AIC
    core[plus & (subtask_type == raw.SUBTASK_MIX_AIV)] = records.CORE_MIX_AIV
    return core


class StarsDecoder:
    """Decodes the STARS kinds. Stream ids are read in the default (not expand-stream) mode: the host's
    expand_stream_spec record that switches a run to 15-bit ids is not collected by this release."""

    def __init__(self, timebase: TimeBase, reject: Reject) -> None:
        self.timebase = timebase
        self.reject = reject

    def decode(self, kind: str, batch: Batch) -> Output:
        device = int(batch.meta["device"])
        clock = self.timebase.device_clock(device)
        assert clock is not None
        if kind == "stars_soc":
            return self._acsq(np.frombuffer(batch.body, dtype=raw.ACSQ_LOG), device, clock)
        if kind == "stars_soc_v6":
            return self._acsq_v6(np.frombuffer(batch.body, dtype=raw.ACSQ_LOG_V6), device, clock)
        if kind == "ffts_profile":
            return self._ffts_pmu(np.frombuffer(batch.body, dtype=raw.FFTS_PMU), device, clock)
        raise ValueError(f"no STARS decoder for {kind}")

    def _other_func_types(self, kind: str, arr: np.ndarray, keep: np.ndarray) -> None:
        """Reject every record not kept, counted per func type with its name."""
        if keep.all():
            return
        funcs = func_type(arr["head"])
        for value in np.unique(funcs[~keep]).tolist():
            rows = arr[~keep & (funcs == value)]
            name = FUNC_TYPE_NAMES.get(value, "unknown func type")
            self.reject(f"{kind}: func type {value:06b} ({name}) not decoded", len(rows), rows.tobytes())

    def _acsq(self, arr: np.ndarray, device: int, clock: Clock) -> Output:
        funcs = func_type(arr["head"])
        task = (funcs == raw.ACSQ_START) | (funcs == raw.ACSQ_END)
        subtask = (funcs == raw.FFTS_LOG_START) | (funcs == raw.FFTS_LOG_END)
        self._other_func_types("stars_soc", arr, task | subtask)
        outputs: Output = []
        if subtask.any():  # before the task logs: a task's contexts end before it does
            outputs.append(("subtask_log", _subtasks(arr[subtask], device, clock)))
        if not task.all():
            arr, funcs = arr[task], funcs[task]
        out = np.zeros(len(arr), records.TASK_LOG)
        out["device_id"] = device
        out["stream_id"], out["task_id"] = ids(arr["stream_id"], arr["task_id"])
        out["state"] = np.where(funcs == raw.ACSQ_START, records.STATE_START, records.STATE_END)
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return outputs + [("task_log", out)]

    def _acsq_v6(self, arr: np.ndarray, device: int, clock: Clock) -> Output:
        funcs = func_type(arr["head"])
        keep = (funcs == raw.ACSQ_START) | (funcs == raw.ACSQ_END)
        self._other_func_types("stars_soc", arr, keep)
        if not keep.all():
            arr, funcs = arr[keep], funcs[keep]
        out = np.zeros(len(arr), records.UNIQUE_TASK_LOG)
        out["device_id"] = device
        out["unique_task_id"] = arr["task_id"]
        out["sqe_type"] = sqe_type(arr["head"])
        out["state"] = np.where(funcs == raw.ACSQ_START, records.STATE_START, records.STATE_END)
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return [("unique_task_log", out)]

    def _ffts_pmu(self, arr: np.ndarray, device: int, clock: Clock) -> Output:
        funcs = func_type(arr["head"])
        context, block = funcs == raw.CONTEXT_PMU, funcs == raw.BLOCK_PMU
        self._other_func_types("ffts_profile", arr, context | block)
        if context.all():  # the usual case: no copy
            return [("context_pmu", _context(arr, device, clock))]
        return [("context_pmu", _context(arr[context], device, clock)),
                ("block_pmu", _block(arr[block], device, clock))]


def _subtasks(arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
    """FFTS+ subtask start/end logs (64-byte stars_soc records read with the FFTS_PLUS_LOG layout)."""
    logs = arr.view(raw.FFTS_PLUS_LOG)
    out = np.zeros(len(logs), records.SUBTASK_LOG)
    out["device_id"] = device
    out["stream_id"], out["task_id"] = ids(logs["stream_id"], logs["task_id"])
    out["context_id"] = logs["subtask_id"]
    out["subtask_type"] = logs["subtask_type"]
    out["ffts_type"] = logs["ffts"] >> 13
    out["thread_id"] = logs["thread_id"]
    out["state"] = np.where(func_type(logs["head"]) == raw.FFTS_LOG_START, records.STATE_START, records.STATE_END)
    out["ts_ns"] = clock.to_local_ns(logs["timestamp"])
    return out


def _pmu_common(arr: np.ndarray, dtype: np.dtype, device: int, clock: Clock) -> np.ndarray:
    out = np.zeros(len(arr), dtype)
    out["device_id"] = device
    out["stream_id"], out["task_id"] = ids(arr["stream_id"], arr["task_id"])
    out["ts_ns"] = clock.to_local_ns(arr["end_cnt"])  # msprof times a PMU record by its end count
    out["start_ns"] = clock.to_local_ns(arr["start_cnt"])
    out["total_cycle"] = arr["total_cycle"]
    out["pmu"] = arr["pmu"]
    out["core"] = core_kind(arr["ffts"] >> 5, arr["subtask"] & 0xFF)
    return out


def _context(arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
    out = _pmu_common(arr, records.CONTEXT_PMU, device, clock)
    plus = (arr["ffts"] >> 5) == raw.FFTS_TYPE_PLUS
    out["context_id"] = np.where(plus, arr["subtask_id"].astype(np.uint32), np.uint32(INVALID_CONTEXT_ID))
    out["overflow"] = (arr["subtask"] >> 10) & 1
    return out


def _block(arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
    out = _pmu_common(arr, records.BLOCK_PMU, device, clock)
    out["context_id"] = arr["subtask_id"]
    out["core_type"] = arr["core"] & 1
    out["core_id"] = arr["core"] >> 1
    out["block_id"] = arr["block_id"]
    out["sub_block_id"] = arr["sub_block_id"]
    return out
