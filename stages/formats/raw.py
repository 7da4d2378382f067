"""Raw CANN profile record layouts, as numpy structured dtypes (the format strings of msprof's parser).

Every layout is little-endian and packed, exactly the bytes the CANN runtime writes. The
simulator writes with these dtypes and the decoder reads with them, so one table serves both;
msprof's own parser (github Ascend/msprof) is the independent check.
"""

from __future__ import annotations

import numpy as np

HOST_MAGIC = 0x5A5A  # compact / additional / api_event headers
HWTS_MARKER = 0x6BD3  # "data from HWTS" at bytes 2..3 of hwts.data / aicore.data records
EVENT_FLAG = 0xFFFF_FFFF_FFFF_FFFF  # api_event bytes 24..32 of an MsprofEvent

# Report levels (CANN's prof_common.h).
LEVEL_MSPROFTX = 20500
LEVEL_ACL = 20000
LEVEL_MODEL = 15000
LEVEL_NODE = 10000
LEVEL_HCCL = 5500
LEVEL_RUNTIME = 5000
LEVEL_NAMES = {
    LEVEL_ACL: "acl",
    LEVEL_MODEL: "model",
    LEVEL_NODE: "node",
    LEVEL_HCCL: "communication",
    LEVEL_RUNTIME: "runtime",
}
# Timeline layer prefix of a CANN API event name.
LEVEL_TRACE_PREFIX = {
    LEVEL_ACL: "AscendCL",
    LEVEL_MODEL: "Model",
    LEVEL_NODE: "Node",
    LEVEL_HCCL: "Communication",
    LEVEL_RUNTIME: "Runtime",
}
ACL_API_CLASS = {1: "ACL_OP", 2: "ACL_MODEL", 3: "ACL_RTS", 4: "ACL_OTHERS", 5: "ACL_NN", 6: "ACL_ASCENDC",
                 7: "HOST_HCCL", 9: "ACL_DVPP", 10: "ACL_GRAPH", 11: "ACL_ATB"}
MODEL_EXECUTE_TYPE = 1  # level 15000 event type of the ModelExecute begin/end pair (msprof pairs them for iterations)
MODEL_LOAD_TYPE = 2  # level 15000 event type of the ModelLoad pair; its request id 0 marks a static graph

# GE task types of node_basic_info.
GE_TASK_TYPES = ("AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "WRITE_BACK", "MIX_AIC", "MIX_AIV", "FFTS_PLUS",
                 "DSA_SQE", "DVPP", "HCCL", "FUSION", "INVALID")


def _packed(fields: list, size: int) -> np.dtype:
    dtype = np.dtype(fields)
    assert dtype.itemsize == size, (fields, dtype.itemsize, size)
    return dtype


_HOST_HEADER: list = [("magic", "<u2"), ("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"),
                      ("data_len", "<u4"), ("timestamp", "<u8")]

# api_event: MsprofApi and MsprofEvent share one 40-byte shape; bytes 24..32 tell them apart.
API_EVENT = _packed([("magic", "<u2"), ("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"),
                     ("reserve", "<u4"), ("begin", "<u8"), ("end", "<u8"), ("item_id", "<u8")], 40)

TASK_TRACK = _packed(_HOST_HEADER + [("device_id", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"),
                                     ("batch_id", "<u2"), ("task_type", "<u8"), ("kernel_name", "<u8"),
                                     ("num_blocks", "<u2"), ("args_size", "<u2"), ("ext", "u1", (12,))], 64)

NODE_BASIC_INFO = _packed(_HOST_HEADER + [("op_name", "<u8"), ("task_type", "<u4"), ("op_type", "<u8"),
                                          ("block_num", "<u4"), ("op_flag", "<u4"), ("op_state", "u1"),
                                          ("pad", "u1", (11,))], 64)

TENSOR_SLOTS = 5
TENSOR_INFO = _packed(_HOST_HEADER + [("op_name", "<u8"), ("tensor_num", "<u4"),
                                      ("tensors", "<u4", (TENSOR_SLOTS, 11))], 256)

MSPROFTX = _packed(_HOST_HEADER + [("info_type", "<u2"), ("res0", "<u2"), ("res1", "<u4"),
                                   ("stamp_magic", "<u2"), ("data_tag", "<u2"), ("process_id", "<u4"),
                                   ("tx_thread_id", "<u4"), ("category", "<u4"), ("event_type", "<u4"),
                                   ("payload_type", "<i4"), ("payload", "<u8"), ("start_time", "<u8"),
                                   ("end_time", "<u8"), ("mark_id", "<u8"), ("domain", "<u8"),
                                   ("message_type", "<i4"), ("message", "S156")], 256)

# Device, HWTS class (910): task start/end log and task-based AI Core PMU.
HWTS_LOG = _packed([("head", "u1"), ("task_type", "u1"), ("marker", "<u2"), ("block_id", "<u2"),
                    ("task_id", "<u2"), ("syscnt", "<u8"), ("stream_id", "<u4"), ("reserved", "u1", (44,))], 64)
HWTS_TASK_START, HWTS_TASK_END = 0, 1
HWTS_CNT_SHIFT, HWTS_CNT_MODULO = 4, 16  # byte 0 bits 4–7 of hwts.data / aicore.data: 4-bit rolling counter

AICORE_PMU = _packed([("head", "u1"), ("byte1", "u1"), ("marker", "<u2"), ("rsv", "<u2"), ("task_id", "<u2"),
                      ("rsv2", "<u4"), ("rsv3", "<u4"), ("total_cycle", "<u8"), ("ov_cycle", "<u8"),
                      ("pmu", "<u8", (8,)), ("stream_id", "<u4"), ("reserved", "<u4", (7,))], 128)

# ts_track.data on HWTS chips: fixed 40-byte records, tag in byte 1.
TS_STEP_TRACE = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                         ("timestamp", "<u8"), ("index_id", "<u8"), ("model_id", "<u8"), ("stream_id", "<u2"),
                         ("task_id", "<u2"), ("tag_id", "<u2"), ("rsv", "<u2")], 40)
TS_TASK_FLIP = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                        ("timestamp", "<u8"), ("stream_id", "<u2"), ("flip_num", "<u2"), ("rsv", "<u2"),
                        ("task_id", "<u2"), ("pad", "u1", (16,))], 40)
TS_MEMCPY = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                     ("timestamp", "<u8"), ("stream_id", "<u2"), ("task_id", "<u2"), ("task_state", "u1"),
                     ("rsv", "u1"), ("rsv2", "<u2"), ("rsv3", "<u8", (2,))], 40)
TS_TASK_TYPE = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                        ("timestamp", "<u8"), ("stream_id", "<u2"), ("task_id", "<u2"), ("task_type", "<u2"),
                        ("task_state", "u1"), ("rsv", "u1"), ("rsv2", "<u8", (2,))], 40)
TS_BLOCK_NUM = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                        ("timestamp", "<u8"), ("stream_id", "<u2"), ("task_id", "<u2"), ("block_num", "<u4"),
                        ("pad", "u1", (16,))], 40)
# Tag 13 is the older firmware's flip record (same layout as 14); msprof reads neither tag 13 nor anything
# but 14 for batch ids (msparser/step_trace/ts_track_parser.py TS_TASK_FLIP_OLD has no reader).
TS_TAG_STEP_TRACE, TS_TAG_TS_MEMCPY, TS_TAG_TASK_TYPE, TS_TAG_TASK_FLIP_OLD, TS_TAG_TASK_FLIP, TS_TAG_BLOCK_NUM = \
    10, 11, 12, 13, 14, 15
TS_TRACK_SIZE = 40
# Chip v6 step trace (msprof STEP_TRACE_V6_FMT `BBHLQQQHHI`): the tag id comes first and the task id is 32 bits.
TS_STEP_TRACE_V6 = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                            ("timestamp", "<u8"), ("index_id", "<u8"), ("model_id", "<u8"), ("tag_id", "<u2"),
                            ("stream_id", "<u2"), ("task_id", "<u4")], 40)
STEP_TAG_MODEL_START, STEP_TAG_MODEL_END = 0, 1  # step-trace tag ids

# Ascend 310 ("mini", platform 0): ts_track.data / aicore.data are TLV streams; a real 310 writes no hwts.data.
MINI_TIMELINE = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                         ("task_type", "<u2"), ("task_state", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"),
                         ("timestamp", "<u8"), ("thread", "<u4"), ("device_id", "<u4")], 32)
MINI_EVENT_COUNT = _packed([("mode", "u1"), ("tag", "u1"), ("buf_size", "<u2"), ("reserved", "<u4"),
                            ("task_type", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("overflow", "<u2"),
                            ("overflow_cycle", "<u8"), ("pmu", "<u8", (8,)), ("task_cycles", "<u8"),
                            ("timestamp", "<u8"), ("block", "<u2"), ("rsv", "<u2", (3,))], 112)
MINI_TAG_TIMELINE, MINI_TAG_EVENT_COUNT, MINI_TAG_STEP_TRACE = 3, 4, 10
MINI_STATE_RUNNING, MINI_STATE_COMPLETE = 2, 3
MINI_TLV_TAG_SIZES = {MINI_TAG_TIMELINE: 32, MINI_TAG_EVENT_COUNT: 112, MINI_TAG_STEP_TRACE: 40}

# AI Core PMU event sets per metric group (CANN's platform_interface.h), in counter-slot order.
PMU_EVENT_SETS = {
    "PipeUtilization": (0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55),
    "ArithmeticUtilization": (0x49, 0x4A, 0x4B, 0x4C, 0x4D, 0x4E, 0x4F),
    "Memory": (0x15, 0x16, 0x31, 0x32, 0xF, 0x10, 0x12, 0x13),
    "ResourceConflictRatio": (0x64, 0x65, 0x66),
    "PipeUtilizationExct": (0x416, 0x417, 0x9, 0x302, 0xC, 0x303, 0x54, 0x55),
    "PipelineExecuteUtilization": (0x12C, 0x49, 0x4A, 0x9, 0x302, 0xC, 0xD, 0x303),
    "MemoryL0": (0x1B, 0x1C, 0x21, 0x22, 0x27, 0x28, 0x29, 0x2A),
    "MemoryUB": (0x10, 0x13, 0x37, 0x38, 0x3D, 0x3E, 0x43, 0x44),
    "L2Cache": (0x500, 0x502, 0x504, 0x506, 0x508, 0x50A),
    "MemoryAccess": (0x32, 0x3D, 0x3E, 0x206, 0x20C, 0x50C, 0x50D, 0x50E),
}

# AI CPU kernel times. The device's aicpu.data wraps them in a 256-byte MsprofAdditionalInfo
# (level 6000, type 0 = AICPU_NODE, MsprofAicpuNodeAdditionalData); the older DATA_PREPROCESS.AICPU files
# hold the bare 128-byte MsprofAicpuProfData (magic 0x5A5A, data tag 60), or text lines.
LEVEL_AICPU = 6000
AICPU_NODE_TYPE = 0
AICPU_DATA_TAG = 60
_AICPU_TIMES: list = [("run_start_us", "<u8"), ("run_start_tick", "<u8"), ("compute_start_us", "<u8"),
                      ("memcpy_start_us", "<u8"), ("memcpy_end_us", "<u8"), ("run_end_us", "<u8"),
                      ("run_end_tick", "<u8"), ("node_thread_id", "<u4"), ("device_id", "<u4"),
                      ("submit_tick", "<u8"), ("schedule_tick", "<u8"), ("tick_before_run", "<u8"),
                      ("tick_after_run", "<u8"), ("kernel_type", "<u4"), ("dispatch_us", "<u4"), ("total_us", "<u4"),
                      ("ffts_thread_id", "<u2"), ("version", "u1")]
AICPU_PROF = _packed([("magic", "<u2"), ("data_tag", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"),
                      *_AICPU_TIMES, ("rsv", "u1", (9,))], 128)
AICPU_NODE = _packed(_HOST_HEADER + [("stream_id", "<u2"), ("task_id", "<u2"), ("rev", "<u4"), *_AICPU_TIMES,
                                     ("rsv", "u1", (113,))], 256)
AICPU_PROF_HEAD = bytes([0x5A, 0x5A, AICPU_DATA_TAG, 0])  # magic + data tag: how a bare binary record begins

# L2 cache task profiling (l2_cache.data): 8 counters in sample.json l2CacheTaskProfilingEvents order.
L2_CACHE = _packed([("task_type", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("rsv", "<u2"),
                    ("events", "<u8", (8,))], 72)

# AI Core frequency change points (lpmFreqConv.data): up to 55 (syscnt, MHz) pairs per record.
LPM_FREQ_POINTS = 55
LPM_FREQ = _packed([("count", "<u4"), ("rsv", "<u4"),
                    ("points", [("syscnt", "<u8"), ("freq_mhz", "<u4"), ("rsv", "<u4")], (LPM_FREQ_POINTS,))],
                   8 + 16 * LPM_FREQ_POINTS)

# Device, STARS class (910B and later). First u16 of every record: bits 0–5 funcType,
# bits 6–9 rolling counter, bits 10–15 sqe type (ACSQ logs); u16 @2 = 0x6BD3 as on HWTS chips.
STARS_MARKER = HWTS_MARKER
# Chip model per platform_version, as msprof's exporter names them (NPU_INFO; db_constant.h CHIP_TABLE).
CHIP_NAMES = {0: "Ascend310", 1: "Ascend910A", 4: "Ascend310P", 5: "Ascend910B", 7: "Ascend310B", 15: "Ascend950"}
STARS_PLATFORMS = frozenset({5, 7, 8, 11, 15, 16})  # chip v4 (910B), v1.1.x, v6 (msprof's chip_model.py)
STARS_V6_PLATFORMS = frozenset({15, 16})  # 32-byte stars_soc records
ACSQ_START, ACSQ_END = 0b000000, 0b000001
FFTS_LOG_START, FFTS_LOG_END = 0b100010, 0b100011  # FFTS+ subtask (context) start / end
CONTEXT_PMU, BLOCK_PMU = 0b101000, 0b101001
SQE_AI_CORE, SQE_AI_CPU, SQE_AI_VECTOR_CORE = 0, 1, 2
SQE_V6_AI_CORE, SQE_V6_AI_VECTOR_CORE, SQE_V6_AI_CPU = 0, 1, 5  # chip v6 renumbers them (AIV 1, AICPU_D 5)
# FFTS types: 0 plain AI Core task, 4 FFTS+, 5 MIX AIC; msprof reads any other value as a plain AI Vector
# Core task (the value itself is not named in public code; the simulator writes 1).
FFTS_TYPE_AIC, FFTS_TYPE_AIV, FFTS_TYPE_PLUS, FFTS_TYPE_MIX_AIC = 0, 1, 4, 5
SUBTASK_AIC, SUBTASK_MIX_AIC, SUBTASK_MIX_AIV = 0, 6, 7

ACSQ_LOG = _packed([("head", "<u2"), ("marker", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"),
                    ("timestamp", "<u8"), ("rsv4", "<u2"), ("acc_acsq", "<u2"), ("reserved", "<u4", (11,))], 64)
# FFTS+ subtask log: byte 16 subtask type, u16 @18 subtask (context) id, bits 13–15 of u16 @20 the FFTS type.
FFTS_PLUS_LOG = _packed([("head", "<u2"), ("marker", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"),
                         ("timestamp", "<u8"), ("subtask_type", "u1"), ("rsv3", "u1"), ("subtask_id", "<u2"),
                         ("ffts", "<u2"), ("thread_id", "<u2"), ("reserved", "<u4", (10,))], 64)
ACSQ_LOG_V6 = _packed([("head", "<u2"), ("marker", "<u2"), ("task_id", "<u4"), ("timestamp", "<u8"),
                       ("rsv4", "<u2"), ("acc_acsq", "<u2"), ("reserved", "<u4", (3,))], 32)
# ffts_profile.data: ContextPmu and BlockPmu share one shape. Byte 20 is BlockPmu's coreType (bit 0) and
# coreId (bits 1–7); the FFTS type is bits 5–7 of byte 21 in both (ContextPmu: bits 13–15 of the u16 @20).
FFTS_PMU = _packed([("head", "<u2"), ("marker", "<u2"), ("stream_id", "<u2"), ("task_id", "<u2"), ("rsv", "<u8"),
                    ("subtask", "<u2"), ("subtask_id", "<u2"), ("core", "u1"), ("ffts", "u1"),
                    ("thread_id", "<u2"), ("rsv2", "<u4"), ("sub_block_id", "<u2"), ("block_id", "<u2"),
                    ("total_cycle", "<u8"), ("ov_cycle", "<u8"), ("pmu", "<u8", (8,)), ("start_cnt", "<u8"),
                    ("end_cnt", "<u8")], 128)
