"""Legacy host records and file names (CANN ≤ 6).

Before the api_event/compact/additional reporter, each component wrote its own 0x5A5A-headed
struct into per-device files (`AclModule.acl_model.0.slice_0`, `Framework.task_desc_info.0.slice_0`,
`Runtime.task_track.0.slice_0` …) next to the device data in `device_N/data/` (or directly in
`JOB…/data/`). Layouts: the structs of CANN's `prof_common.h` (MsprofAclProfData,
MsprofGeProfTaskData, MsprofGeProfTensorData, MsprofGeProfStepData, MsprofGeProfIdMapData,
MsprofRuntimeProfApiData, MsprofRuntimeProfTrackData) as msprof's format strings read them
(`StructFmt` ACL_FMT, GE_*, RTS_TRACK_FMT, RUNTIME_API_FMT). Where the header says `uint32_t taskId`,
msprof reads its high half as the batch id; so do we.

Older names (msprof's file_name_manager.py) are recognised too: the "training" form
(`hwts.log.data.45.dev.profiler_default_tag.0.slice_0`) and the "infer" form whose slice index
follows a plain dot (`AclModule.acl_model.0.3`, `hwts.log.data.45.0.3`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline_board import kinds as board_kinds
from stages.formats.files import StreamKind

# dataTag of each struct (MsprofDataTag)
ACL_TAG, GE_TASK_TAG, GE_TENSOR_TAG, GE_STEP_TAG, GE_ID_MAP_TAG = 0, 23, 24, 25, 26
GE_MODEL_LOAD_TAG, GE_FUSION_TAG, GE_MODEL_TIME_TAG, GE_HOST_SCHED_TAG = 20, 21, 22, 27
RT_API_TAG, RT_TRACK_TAG = 40, 41
MIX_HASH, MIX_STRING = 0, 1  # MsprofMixData.type: the name is a hash_dic key, or inline text
GE_STEP_BEGIN, GE_STEP_END = 0, 1
# MsprofGeTaskType of the legacy header (the current node_basic_info list adds FUSION before INVALID)
GE_TASK_TYPES = ("AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "WRITE_BACK", "MIX_AIC", "MIX_AIV", "FFTS_PLUS", "DSA_SQE",
                 "DVPP", "HCCL", "INVALID")


def _layout(fields: list[tuple[str, Any, int]], size: int) -> np.dtype:
    """A packed dtype from (name, format, offset); fields may overlap (a C union)."""
    spec: Any = {"names": [f[0] for f in fields], "formats": [f[1] for f in fields],
                 "offsets": [f[2] for f in fields], "itemsize": size}
    return np.dtype(spec)


# MsprofAclProfData, 128 B (`=HHIQQII64s4Q`); apiType 1 OP, 2 MODEL, 3 RUNTIME, 4 OTHERS.
ACL = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("api_type", "<u4", 4), ("begin", "<u8", 8),
               ("end", "<u8", 16), ("process_id", "<u4", 24), ("thread_id", "<u4", 28), ("api_name", "S64", 32),
               ("reserve", "u1", 96)], 128)

# MsprofGeProfTaskData, 256 B: opName is MsprofMixData (type u8, 7 pad, u64 hash | char[120]),
# opType MsprofGeOpType (type u8, 7 pad, u64 hash | char[56]).
GE_TASK = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("task_type", "<u4", 4),
                   ("op_name_kind", "u1", 8), ("op_name_hash", "<u8", 16), ("op_name", "S120", 16),
                   ("op_type_kind", "u1", 136), ("op_type_hash", "<u8", 144), ("op_type", "S56", 144),
                   ("cur_iter", "<u8", 200), ("timestamp", "<u8", 208), ("shape_type", "<u4", 216),
                   ("block_dims", "<u4", 220), ("model_id", "<u4", 224), ("stream_id", "<u4", 228),
                   ("task_id", "<u2", 232), ("batch_id", "<u2", 234), ("thread_id", "<u4", 236),
                   ("context_id", "<u4", 240)], 256)

# MsprofGeProfTensorData, 256 B (`=HHIQIHHI55IQ`): no timestamp of its own.
GE_TENSOR = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("model_id", "<u4", 4), ("cur_iter", "<u8", 8),
                     ("stream_id", "<u4", 16), ("task_id", "<u2", 20), ("batch_id", "<u2", 22),
                     ("tensor_num", "<u4", 24), ("tensors", ("<u4", (5, 11)), 28)], 256)

# MsprofGeProfStepData, 64 B (`=HHIIHHQQIB27B`): tag 0 = model execution begins, 1 = ends.
GE_STEP = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("model_id", "<u4", 4), ("stream_id", "<u4", 8),
                   ("task_id", "<u2", 12), ("batch_id", "<u2", 14), ("timestamp", "<u8", 16),
                   ("cur_iter", "<u8", 24), ("thread_id", "<u4", 32), ("tag", "u1", 36)], 64)

# MsprofGeProfIdMapData, 32 B (`=HHIIIQH6B`).
GE_ID_MAP = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("graph_id", "<u4", 4), ("model_id", "<u4", 8),
                     ("session_id", "<u4", 12), ("timestamp", "<u8", 16), ("mode", "<u2", 24)], 32)

# MsprofGeProfModelLoadData, 256 B: modelName is MsprofMixData.
GE_MODEL_LOAD = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("model_id", "<u4", 4),
                         ("name_kind", "u1", 8), ("name_hash", "<u8", 16), ("name", "S120", 16),
                         ("start", "<u8", 136), ("end", "<u8", 144)], 256)

# MsprofGeProfFusionData, 256 B: a fused op, its memory and the ops fused into it.
GE_FUSION = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("model_id", "<u4", 4), ("name_kind", "u1", 8),
                     ("name_hash", "<u8", 16), ("name", "S120", 16), ("input_mem", "<u8", 136),
                     ("output_mem", "<u8", 144), ("weight_mem", "<u8", 152), ("workspace_mem", "<u8", 160),
                     ("total_mem", "<u8", 168), ("fusion_op_num", "<u8", 176), ("fusion_ops", ("<u8", (8,)), 184)],
                    256)

# MsprofGeProfInferData (`Framework.model_time_info_*`), 256 B: one inference's input, run and output times.
GE_MODEL_TIME = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("model_id", "<u4", 4),
                         ("name_kind", "u1", 8), ("name_hash", "<u8", 16), ("name", "S120", 16),
                         ("request_id", "<u4", 136), ("thread_id", "<u4", 140), ("times", ("<u8", (6,)), 144)], 256)

# MsprofGeProfHostSchData (`Framework.dynamic_op_execute`), 64 B (`=HHL4Q3Q`).
GE_HOST_SCHED = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("thread_id", "<u4", 4), ("element", "<u8", 8),
                         ("event", "<u8", 16), ("start", "<u8", 24), ("end", "<u8", 32)], 64)

# MsprofRuntimeProfTrackData, 64 B (`=HHIQ32sHHHHQ`): task type as text.
RT_TRACK = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("thread_id", "<u4", 4), ("timestamp", "<u8", 8),
                    ("task_type", "S32", 16), ("task_id", "<u2", 48), ("batch_id", "<u2", 50),
                    ("stream_id", "<u2", 52)], 64)

# MsprofRuntimeProfApiData, 256 B (`=2HI3Q64s3I20HH106B`).
RT_API_TASK_IDS = 10
RT_API = _layout([("magic", "<u2", 0), ("data_tag", "<u2", 2), ("thread_id", "<u4", 4), ("entry", "<u8", 8),
                  ("exit", "<u8", 16), ("data_size", "<u8", 24), ("api_name", "S64", 32), ("ret_code", "<u4", 96),
                  ("stream_id", "<u4", 100), ("task_num", "<u4", 104), ("task_ids", ("<u4", (RT_API_TASK_IDS,)), 108),
                  ("memcpy_direction", "<u2", 148)], 256)

_MAGIC = b"\x5a\x5a"
LEGACY_ACL = StreamKind("legacy_acl", "fixed", ACL.itemsize, _MAGIC)
LEGACY_GE_TASK = StreamKind("legacy_ge_task", "fixed", GE_TASK.itemsize, _MAGIC)
LEGACY_GE_TENSOR = StreamKind("legacy_ge_tensor", "fixed", GE_TENSOR.itemsize, _MAGIC)
LEGACY_GE_STEP = StreamKind("legacy_ge_step", "fixed", GE_STEP.itemsize, _MAGIC)
LEGACY_GE_ID_MAP = StreamKind("legacy_ge_id_map", "fixed", GE_ID_MAP.itemsize, _MAGIC)
LEGACY_RT_TRACK = StreamKind("legacy_rt_track", "fixed", RT_TRACK.itemsize, _MAGIC)
LEGACY_RT_API = StreamKind("legacy_rt_api", "fixed", RT_API.itemsize, _MAGIC)
LEGACY_GE_MODEL_LOAD = StreamKind("legacy_ge_model_load", "fixed", GE_MODEL_LOAD.itemsize, _MAGIC)
LEGACY_GE_FUSION = StreamKind("legacy_ge_fusion", "fixed", GE_FUSION.itemsize, _MAGIC)
LEGACY_GE_MODEL_TIME = StreamKind("legacy_ge_model_time", "fixed", GE_MODEL_TIME.itemsize, _MAGIC)
LEGACY_GE_HOST_SCHED = StreamKind("legacy_ge_host_sched", "fixed", GE_HOST_SCHED.itemsize, _MAGIC)
HOST_KINDS = (LEGACY_ACL, LEGACY_GE_TASK, LEGACY_GE_TENSOR, LEGACY_GE_STEP, LEGACY_GE_ID_MAP, LEGACY_RT_TRACK,
              LEGACY_RT_API, LEGACY_GE_MODEL_LOAD, LEGACY_GE_FUSION, LEGACY_GE_MODEL_TIME, LEGACY_GE_HOST_SCHED)
DATA_TAGS = {LEGACY_ACL.name: ACL_TAG, LEGACY_GE_TASK.name: GE_TASK_TAG, LEGACY_GE_TENSOR.name: GE_TENSOR_TAG,
             LEGACY_GE_STEP.name: GE_STEP_TAG, LEGACY_GE_ID_MAP.name: GE_ID_MAP_TAG, LEGACY_RT_TRACK.name: RT_TRACK_TAG,
             LEGACY_RT_API.name: RT_API_TAG, LEGACY_GE_MODEL_LOAD.name: GE_MODEL_LOAD_TAG,
             LEGACY_GE_FUSION.name: GE_FUSION_TAG, LEGACY_GE_MODEL_TIME.name: GE_MODEL_TIME_TAG,
             LEGACY_GE_HOST_SCHED.name: GE_HOST_SCHED_TAG}

# Step trace of MindSpore training jobs of 2020 (`training_trace.46.dev.profiler_default_tag.N.slice_K`), 20 B
# (`<QHHQ`): tag u64, task id u16, stream id u16, syscnt u64 (device ticks). Tags (MindSpore's step-trace parser
# of that time): 0 or above 255 starts a step (the value is the job id), 1 FP start, 2 BP end, 255 iteration
# end; the others pair per stream as all-reduce start (odd) and end (that tag + 1). A training_trace file holds
# these or the 40-byte ts_track records; its first bytes tell which (pipeline_board.kinds.settle).
STEP_TRACE_20 = _layout([("tag", "<u8", 0), ("task_id", "<u2", 8), ("stream_id", "<u2", 10), ("syscnt", "<u8", 12)],
                        20)
STEP_FP_START, STEP_BP_END, STEP_ITERATION_END = 1, 2, 255
LEGACY_STEP_TRACE = StreamKind("legacy_step_trace", "fixed", STEP_TRACE_20.itemsize)
# Their tags as decoded (the step-trace tag ids stages/aggregator/steps.py reads): a job id and an FP start get
# ids of their own (a step of this layout starts at the previous step's end; the first one at its FP start),
# the BP end and iteration end the current ones, all-reduce tag t → BOOK_REDUCE + t − 3 (start even, end odd).
BOOK_STEP_START, BOOK_FP, BOOK_BP, BOOK_ITERATION_END, BOOK_REDUCE = 50000, 50001, 3, 4, 10000

# The slice names and which kind each holds are the board agent's rules (``pipeline_board.kinds``):
# the collector maps the kind it names to the one here, which carries the layout's record size.
SLICE_SEP, INFER_SEP = board_kinds.SLICE_SEP, board_kinds.INFER_SEP
split_slice_name = board_kinds.split_slice_name
