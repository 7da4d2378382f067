"""Decoded record kinds (decoder → aggregator): numpy structured arrays, times in local ns."""

from __future__ import annotations

import numpy as np

from pipeline.stage import Batch
from stages.decoder import host_records

API = np.dtype([("thread_id", "<u4"), ("level", "<u2"), ("type", "<u4"), ("item_id", "<u8"),
                ("request_id", "<u4"), ("start_ns", "<i8"), ("end_ns", "<i8")])
EVENT = np.dtype([("thread_id", "<u4"), ("level", "<u2"), ("type", "<u4"), ("item_id", "<u8"),
                  ("request_id", "<u4"), ("ts_ns", "<i8")])
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
STEP = np.dtype([("device_id", "<u2"), ("ts_ns", "<i8"), ("index_id", "<u8"), ("model_id", "<u8"),
                 ("stream_id", "<u2"), ("task_id", "<u4"), ("tag_id", "<u2")])  # task id: 32 bits on chip v6
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


def to_batch(kind: str, array: np.ndarray, meta: dict) -> Batch:
    return Batch(kind, len(array), meta, array.tobytes())


def from_batch(batch: Batch) -> np.ndarray:
    return np.frombuffer(batch.body, dtype=DTYPES[batch.kind])
