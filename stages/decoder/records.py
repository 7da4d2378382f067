"""Decoded record kinds (decoder → aggregator): numpy structured arrays, times in local ns."""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.stage import Batch
from stages.decoder import host_records

# API calls and events: laid out over the raw 40-byte api_event record (every field at its raw offset, aligned),
# so that decoding a chunk is one copy of it and two time conversions in place (stages/decoder/host.py). An
# event is an API row without its end: the same bytes read with EVENT.
_API_NAMES = ["thread_id", "level", "type", "item_id", "request_id"]
_API_FORMATS = ["<u4", "<u2", "<u4", "<u8", "<u4"]
_API_OFFSETS = [8, 2, 4, 32, 12]
API = np.dtype({"names": [*_API_NAMES, "start_ns", "end_ns"], "formats": [*_API_FORMATS, "<i8", "<i8"],
                "offsets": [*_API_OFFSETS, 16, 24], "itemsize": 40})
EVENT = np.dtype({"names": [*_API_NAMES, "ts_ns"], "formats": [*_API_FORMATS, "<i8"],
                  "offsets": [*_API_OFFSETS, 16], "itemsize": 40})
NODE_BASIC = np.dtype([("thread_id", "<u4"), ("ts_ns", "<i8"), ("op_name", "<u8"), ("op_type", "<u8"),
                       ("task_type", "<u4"), ("block_num", "<u4"), ("op_state", "u1"), ("op_flag", "<u4")])
TENSOR = np.dtype([("thread_id", "<u4"), ("ts_ns", "<i8"), ("op_name", "<u8"), ("tensor_num", "<u4"),
                   ("tensors", "<u4", (5, 11))])
TASK_TRACK = np.dtype([("thread_id", "<u4"), ("ts_ns", "<i8"), ("device_id", "<u2"), ("stream_id", "<u2"),
                       ("task_id", "<u2"), ("batch_id", "<u2"), ("task_type", "<u8"), ("kernel_name", "<u8"),
                       ("num_blocks", "<u2")])
TX = np.dtype([("thread_id", "<u4"), ("ts_ns", "<i8"), ("process_id", "<u4"), ("tx_thread_id", "<u4"),
               ("category", "<u4"), ("event_type", "<u4"), ("payload_type", "<i4"), ("payload", "<u8"),
               ("start_ns", "<i8"), ("end_ns", "<i8"), ("mark_id", "<u8"), ("domain", "<u8"),
               ("message_type", "<i4"), ("message", "S156")])
# Device task start/end: state 2 = start, 3 = end (HWTS types 0/1 mapped; 310 TS states kept).
TASK_LOG = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("state", "u1"),
                     ("ts_ns", "<i8")])
PMU = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("ts_ns", "<i8"),
                ("total_cycle", "<u8"), ("pmu", "<u8", (8,)), ("block", "<u2")])
# Step trace: laid out over the raw 40-byte record (time, index and model id at their raw offsets, aligned), so
# that decoding a chunk starts from one copy of it (stages/decoder/ts_track.py). Task id: 32 bits on chip v6.
STEP = np.dtype({"names": ["device_id", "ts_ns", "index_id", "model_id", "stream_id", "task_id", "tag_id"],
                 "formats": ["<u2", "<i8", "<u8", "<u8", "<u2", "<u4", "<u2"],
                 "offsets": [0, 8, 16, 24, 32, 36, 34], "itemsize": 40})
FLIP = np.dtype([("device_id", "<u2"), ("ts_ns", "<i8"), ("stream_id", "<u2"), ("flip_num", "<u2"),
                 ("task_id", "<u2")])
# STARS chips (stages/decoder/stars.py). core: CORE_AIC / CORE_AIV / CORE_MIX_AIC / CORE_MIX_AIV, from the
# record's FFTS and subtask types; context_id 0xFFFFFFFF when not an FFTS+ context; ts_ns = the end count.
CONTEXT_PMU = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("context_id", "<u4"),
                        ("ts_ns", "<i8"), ("start_ns", "<i8"), ("total_cycle", "<u8"), ("pmu", "<u8", (8,)),
                        ("core", "u1"), ("overflow", "u1")])
BLOCK_PMU = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("context_id", "<u4"),
                      ("ts_ns", "<i8"), ("start_ns", "<i8"), ("total_cycle", "<u8"), ("pmu", "<u8", (8,)),
                      ("core", "u1"), ("core_type", "u1"), ("core_id", "u1"), ("block_id", "<u2"),
                      ("sub_block_id", "<u2")])
# Chip v6 ACSQ logs carry one 32-bit unique task id instead of a stream/task pair.
UNIQUE_TASK_LOG = np.dtype([("device_id", "<u2"), ("unique_task_id", "<u4"), ("sqe_type", "u1"), ("state", "u1"),
                            ("ts_ns", "<i8")])
# FFTS+ subtask (context) start/end logs of stars_soc.data: state STATE_START / STATE_END.
SUBTASK_LOG = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("context_id", "<u4"),
                        ("subtask_type", "u1"), ("ffts_type", "u1"), ("thread_id", "<u2"), ("state", "u1"),
                        ("ts_ns", "<i8")])
CORE_AIC, CORE_AIV, CORE_MIX_AIC, CORE_MIX_AIV = 0, 1, 2, 3
# ts_track tags 11 (TS memcpy), 12 (task type) and 15 (block num); tag 13 (old-format flip) decodes as FLIP.
TS_MEMCPY = np.dtype([("device_id", "<u2"), ("ts_ns", "<i8"), ("stream_id", "<u2"), ("task_id", "<u2"),
                      ("task_state", "u1")])
TS_TASK_TYPE = np.dtype([("device_id", "<u2"), ("ts_ns", "<i8"), ("stream_id", "<u2"), ("task_id", "<u2"),
                         ("task_type", "<u2"), ("task_state", "u1")])
TS_BLOCK_NUM = np.dtype([("device_id", "<u2"), ("ts_ns", "<i8"), ("stream_id", "<u2"), ("task_id", "<u2"),
                         ("block_num", "<u4")])

# AI CPU kernel times (aicpu.data / DATA_PREPROCESS.AICPU). ``form``: AICPU_BINARY records carry every
# field; the old text form gives a node line (name, run and phase times) and a thread line (dispatch and
# total time) as separate records without stream/task ids. Durations in ns, -1 where the form has none.
AICPU = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("form", "u1"), ("ts_ns", "<i8"),
                  ("start_ns", "<i8"), ("end_ns", "<i8"), ("compute_ns", "<i8"), ("memcpy_ns", "<i8"),
                  ("task_ns", "<i8"), ("dispatch_ns", "<i8"), ("total_ns", "<i8"), ("thread_id", "<u4"),
                  ("node", "S64")])
AICPU_BINARY, AICPU_TEXT_NODE, AICPU_TEXT_THREAD = 0, 1, 2
L2_CACHE = np.dtype([("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("task_type", "<u2"),
                     ("events", "<u8", (8,))])
# AI Core frequency change points of one lpmFreqConv record; ts_ns is its last point (or 0 when empty).
FREQ = np.dtype([("device_id", "<u2"), ("ts_ns", "<i8"), ("count", "<u2"), ("points_ns", "<i8", (55,)),
                 ("freq_mhz", "<u4", (55,))])

DTYPES = {"api": API, "event": EVENT, "node_basic": NODE_BASIC, "tensor": TENSOR, "task_track": TASK_TRACK,
          "tx": TX, "task_log": TASK_LOG, "pmu": PMU, "step": STEP, "flip": FLIP, "aicpu": AICPU,
          "l2_cache": L2_CACHE, "freq": FREQ,
          "context_pmu": CONTEXT_PMU, "block_pmu": BLOCK_PMU, "unique_task_log": UNIQUE_TASK_LOG,
          "subtask_log": SUBTASK_LOG}
DTYPES.update({"ts_memcpy": TS_MEMCPY, "ts_task_type": TS_TASK_TYPE, "ts_block_num": TS_BLOCK_NUM,
               "ts_flip_old": FLIP})
DTYPES.update(host_records.DTYPES)  # legacy host records and the compact/additional kinds not joined yet
STATE_START, STATE_END = 2, 3


# Output arrays are packed, so their fields are unaligned: numpy writes into them fast from contiguous
# memory but slowly from another strided field or a broadcast constant. Hence blank() and copy_fields().
_DEVICE_COLUMNS: dict[int, np.ndarray] = {}


def blank(dtype: np.dtype, n: int, device: int | None = None) -> np.ndarray:
    """``n`` zeroed records, ``device_id`` set when given (from a cached contiguous column)."""
    out = np.zeros(n, dtype)
    if device is not None:
        column = _DEVICE_COLUMNS.get(device)
        if column is None or len(column) < n:
            column = _DEVICE_COLUMNS[device] = np.full(max(n, 1024), device, np.uint16)
        out["device_id"] = column[:n]
    return out


def copy_fields(out: np.ndarray, arr: np.ndarray, names: tuple[str, ...]) -> None:
    """``out[name] = arr[name]`` for each name. Runs of several fields of one type that sit next to each other
    in both layouts are copied together as opaque bytes; the others through a contiguous copy of the source."""
    if not len(out):
        return
    key = (arr.dtype, out.dtype, names)
    plan = _COPY_PLANS.get(key)
    if plan is None:
        plan = _COPY_PLANS[key] = _copy_plan(arr.dtype, out.dtype, names)
    contiguous = arr.flags.c_contiguous
    for step in plan:
        if isinstance(step, str) or not contiguous:
            for name in (step,) if isinstance(step, str) else step[3]:
                out[name] = np.ascontiguousarray(arr[name])
            continue
        src_offset, dst_offset, block, _ = step
        dst = np.ndarray(out.shape, block, buffer=out, offset=dst_offset, strides=out.strides)
        dst[...] = np.ndarray(arr.shape, block, buffer=arr, offset=src_offset, strides=arr.strides)


# A block copy costs about as much as two or three typed field copies of small fields, far less for array fields.
_BLOCK_MIN_FIELDS, _BLOCK_MIN_BYTES = 3, 32
CopyStep = str | tuple[int, int, np.dtype, tuple[str, ...]]  # one field, or (src offset, dst offset, block, fields)
_COPY_PLANS: dict[tuple[np.dtype, np.dtype, tuple[str, ...]], list[CopyStep]] = {}


def _copy_plan(src: np.dtype, dst: np.dtype, names: tuple[str, ...]) -> list[CopyStep]:
    """Runs of fields adjacent in both layouts, in output order, with the same type on both sides."""
    src_fields: Any = src.fields or {}
    dst_fields: Any = dst.fields or {}
    runs: list[list[str]] = []
    for name in sorted(names, key=lambda n: dst_fields[n][1]):
        if runs:
            last = runs[-1][-1]
            same = src_fields[name][0] == dst_fields[name][0] and src_fields[last][0] == dst_fields[last][0]
            follows = all(fields[name][1] == fields[last][1] + fields[last][0].itemsize
                          for fields in (src_fields, dst_fields))
            if same and follows:
                runs[-1].append(name)
                continue
        runs.append([name])
    plan: list[CopyStep] = []
    for run in runs:
        first, last = run[0], run[-1]
        size = dst_fields[last][1] + dst_fields[last][0].itemsize - dst_fields[first][1]
        if len(run) < _BLOCK_MIN_FIELDS and size < _BLOCK_MIN_BYTES:
            plan.extend(run)
            continue
        plan.append((src_fields[first][1], dst_fields[first][1], np.dtype((np.void, size)), tuple(run)))
    return plan


def pick(arr: np.ndarray, which: np.ndarray) -> np.ndarray:
    """``arr[which]`` for a contiguous record array, copying whole records as opaque bytes (numpy would
    copy a structured record field by field)."""
    size = arr.dtype.itemsize
    void = _VOIDS.get(size)
    if void is None:
        void = _VOIDS[size] = np.dtype((np.void, size))
    return np.frombuffer(arr.view(void)[which], arr.dtype)


_VOIDS: dict[int, np.dtype] = {}


def to_batch(kind: str, array: np.ndarray, meta: dict) -> Batch:
    return Batch(kind, len(array), meta, array.tobytes())


def from_batch(batch: Batch) -> np.ndarray:
    return np.frombuffer(batch.body, dtype=DTYPES[batch.kind])
