"""STARS-class device records (910B and later).

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
    result: np.ndarray = head & _FUNC_TYPE_BITS
    return result


def sqe_type(head: np.ndarray) -> np.ndarray:
    """Bits 10–15 of the first u16 (ACSQ logs): 0 AI Core, 1 AI CPU, 2 AI Vector Core …"""
    result: np.ndarray = head >> 10
    return result


def ids(stream: np.ndarray, task: np.ndarray, expand: bool = False,
        sqe: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(stream id, task id) of STARS records from their u16 stream and task fields (as msprof's
    parser_item/stars_common.h reads them).

    Default mode: bit 12 of the stream field set → stream = its low 11 bits, task = task low 13
    bits | stream bits 13–15; else bit 13 set → the low 12 bits of the two fields were swapped
    (stream = task low 12 bits mod 2048, task = stream low 12 bits | task bits 12–15); else stream
    = stream field mod 2048, task as written. Expand-stream mode (15-bit ids): bit 15 set →
    stream = task low 15 bits, task = task bit 15 | stream low 15 bits; else both as written (the
    stream's low 15 bits); placeholder and event-record SQEs always keep theirs.
    """
    stream, task = np.ascontiguousarray(stream, np.uint16), np.ascontiguousarray(task, np.uint16)
    if expand:
        swapped = ((stream & 0x8000) != 0) & ~_kept(stream, sqe)
        return (np.where(swapped, task & 0x7FFF, stream & 0x7FFF),
                np.where(swapped, (task & 0x8000) | (stream & 0x7FFF), task))
    form = stream >> _FORM_SHIFT
    form &= _FORM_BITS
    if not np.count_nonzero(form):
        return stream & _STREAM_ID_BITS, task
    # Bits taken from the other field: new = own ^ ((own ^ other) & bits from the other).
    differ = stream ^ task
    new_task = differ & _STREAM_BITS_IN_TASK[form]
    new_task ^= task
    new_stream = differ & _TASK_BITS_IN_STREAM[form]
    new_stream ^= stream
    new_stream &= _STREAM_ID_BITS
    return new_stream, new_task


# Default-mode rules by stream bits 12–13 ("form": 0 plain, 1 or 3 bit 12, 2 bit 13 alone): which bits of the
# task id come from the stream field, and which bits of the stream id from the task field (all of them when the
# low 12 bits were swapped; the 2048 wrap then keeps the task's low 11).
_STREAM_BITS_IN_TASK = np.array([0x0000, 0xE000, 0x0FFF, 0xE000], np.uint16)
_TASK_BITS_IN_STREAM = np.array([0x0000, 0x0000, 0xFFFF, 0x0000], np.uint16)
# 0-d uint16 operands: numpy takes them in faster than Python ints (same results on the uint16 fields)
_FORM_SHIFT, _FORM_BITS = np.array(12, np.uint16), np.array(3, np.uint16)
_STREAM_ID_BITS, _FUNC_TYPE_BITS = np.array(0x07FF, np.uint16), np.array(0x3F, np.uint16)


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

    def _acsq_logs(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The task start and end logs of a chip v6 stars_soc chunk, with their func types (the others rejected)."""
        funcs = func_type(arr["head"])
        keep = funcs <= _ACSQ_END  # ACSQ_START, ACSQ_END
        if np.count_nonzero(keep) < len(keep):
            self._other_func_types("stars_soc", arr, keep)
            arr, funcs = records.pick(arr, keep), funcs[keep]
        return arr, funcs

    def _acsq(self, arr: np.ndarray, device: int, clock: Clock) -> Output:
        funcs = func_type(arr["head"])
        task = funcs <= _ACSQ_END  # ACSQ_START, ACSQ_END
        outputs: Output = []
        if np.count_nonzero(task) < len(task):  # other logs among them
            subtask = (funcs == raw.FFTS_LOG_START) | (funcs == raw.FFTS_LOG_END)
            self._other_func_types("stars_soc", arr, task | subtask)
            if subtask.any():  # before the task logs: a task's contexts end before it does
                outputs.append(("subtask_log", _subtasks(records.pick(arr, subtask), device, clock)))
            arr, funcs = records.pick(arr, task), funcs[task]
        out = records.blank(records.TASK_LOG, len(arr), device)
        out["stream_id"], out["task_id"] = ids(arr["stream_id"], arr["task_id"])
        out["state"] = funcs + _ACSQ_TO_STATE
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return outputs + [("task_log", out)]

    def _acsq_v6(self, arr: np.ndarray, device: int, clock: Clock) -> Output:
        arr, funcs = self._acsq_logs(arr)
        out = records.blank(records.UNIQUE_TASK_LOG, len(arr), device)
        out["unique_task_id"] = np.ascontiguousarray(arr["task_id"])
        out["sqe_type"] = sqe_type(arr["head"])
        out["state"] = funcs + _ACSQ_TO_STATE
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return [("unique_task_log", out)]

    def _ffts_pmu(self, arr: np.ndarray, device: int, clock: Clock) -> Output:
        funcs = func_type(arr["head"])
        context = funcs == raw.CONTEXT_PMU
        if np.count_nonzero(context) == len(context):  # the usual case: no copy
            return [("context_pmu", _context(arr, device, clock))]
        block = funcs == raw.BLOCK_PMU
        self._other_func_types("ffts_profile", arr, context | block)
        return [("context_pmu", _context(records.pick(arr, context), device, clock)),
                ("block_pmu", _block(records.pick(arr, block), device, clock))]


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


def _pmu_common(arr: np.ndarray, dtype: np.dtype, device: int, clock: Clock) -> tuple[np.ndarray, np.ndarray]:
    """The output records with the fields ContextPmu and BlockPmu share, and the records' FFTS types."""
    out = records.blank(dtype, len(arr), device)
    out["stream_id"], out["task_id"] = ids(arr["stream_id"], arr["task_id"])
    out["ts_ns"] = clock.to_local_ns(arr["end_cnt"])  # msprof times a PMU record by its end count
    out["start_ns"] = clock.to_local_ns(arr["start_cnt"])
    records.copy_fields(out, arr, ("total_cycle", "pmu"))
    ffts_type = arr["ffts"] >> 5
    out["core"] = _CORE_BY_TYPES[(ffts_type.astype(np.intp) << 8) | (arr["subtask"] & 0xFF)]
    return out, ffts_type


def _context(arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
    out, ffts_type = _pmu_common(arr, records.CONTEXT_PMU, device, clock)
    out["context_id"] = np.where(ffts_type == raw.FFTS_TYPE_PLUS, arr["subtask_id"].astype(np.uint32),
                                 np.uint32(INVALID_CONTEXT_ID))
    out["overflow"] = (arr["subtask"] >> 10) & 1
    return out


def _block(arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
    out, _ = _pmu_common(arr, records.BLOCK_PMU, device, clock)
    out["context_id"] = arr["subtask_id"]
    core = np.ascontiguousarray(arr["core"])
    out["core_type"] = core & 1
    out["core_id"] = core >> 1
    records.copy_fields(out, arr, ("block_id", "sub_block_id"))
    return out


# core_kind of every (FFTS type, subtask type) pair a record can hold (3 and 8 bits), indexed type << 8 | subtask.
_CORE_BY_TYPES = core_kind(np.repeat(np.arange(8), 256), np.tile(np.arange(256), 8))
# ACSQ func type → task log state (start → STATE_START, end → STATE_END)
_ACSQ_TO_STATE, _ACSQ_END = np.array(records.STATE_START - raw.ACSQ_START, np.uint16), np.array(raw.ACSQ_END, np.uint16)
assert (raw.ACSQ_START, raw.ACSQ_END) == (0, 1) and records.STATE_END - records.STATE_START == 1
