#!/usr/bin/env python3
"""Writes the golden profile directories of tests/test_golden.py: tests/data/{mini,cloud,910b,legacy}/.

Every record is packed here with ``struct`` and msprof's own ``StructFmt`` format strings
(github Ascend/msprof); nothing is imported from the pipeline, so a layout mistake shared
by our decoder and our simulator cannot hide. All values are fixed: the same bytes come out on every run,
and tests/test_golden.py checks that they equal the committed ones.

    python tests/data/make_golden.py            # rewrite tests/data/<chip>/
    python tests/data/make_golden.py OUT_DIR    # write OUT_DIR/<chip>/ instead

Each chip runs the same three-op model twice (iterations 1 and 2 of model 3): a Conv2D and a Relu on the
AI Core stream 5 (the Relu on an AI Vector Core on the 910B) and a NonMaxSuppressionV3 on the AI CPU
stream 6. The raw values that the expected op_summary rows are worked from are the tables below
(``*_TASKS``: device ticks after dev_start.log's cntvct; ``*_PMU``: total cycles and the eight counters
in sample.json event order). tests/test_golden.py quotes them next to each expected value.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHIPS = ("mini", "cloud", "910b", "legacy")

# -- clocks -------------------------------------------------------------------------------------------
WALL0_US = 1_700_000_000_000_000  # start_info collectionTimeBegin, µs (2023-11-14 22:13:20 UTC)
MONO0_NS = 3_000_000_000_000  # start_info clockMonotonicRaw = host_start.log clock_monotonic_raw, ns
DEV_CNT0 = 200_000_000_000  # dev_start.log cntvct: the device tick at host MONO0_NS
DEV_MONO0_NS = 2_000_000_000_000  # dev_start.log clock_monotonic_raw (no formula uses it)
COLLECT_US = 5_000  # the collection lasts 5 ms (end_info)

PID, THREAD, MODEL_ID = 9876, 4321, 3
AICORE_STREAM, AICPU_STREAM = 5, 6
# PipeUtilization, counter slots: vec, mac (cube), scalar, mte1, mte2, mte3, icache requests, misses
PIPE_EVENTS = "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"

# -- names: hash_dic / type_info_dic ------------------------------------------------------------------
CONV, RELU, NMS = "conv1/Conv2D", "relu1/Relu", "nms/NonMaxSuppressionV3"
HASHES = {  # hash_dic keys: any u64; the Conv2D name's is above 2**63 on purpose
    CONV: 17_000_000_000_000_000_001, RELU: 5_000_000_000_000_000_002, NMS: 5_000_000_000_000_000_003,
    "Conv2D": 6_000_000_000_000_000_001, "Relu": 6_000_000_000_000_000_002,
    "NonMaxSuppressionV3": 6_000_000_000_000_000_003,
    "te_conv2d_1a2b": 7_000_000_000_000_000_001, "te_relu_3c4d": 7_000_000_000_000_000_002,
}
LEVEL_ACL, LEVEL_MODEL, LEVEL_NODE, LEVEL_RUNTIME = 20000, 15000, 10000, 5000
ACL_MDL_EXECUTE = (2 << 16) | 5  # ACL_MODEL class, this app's index 5
MODEL_EXECUTE = 1  # MSPROF_REPORT_MODEL_EXECUTE_TYPE
NODE_BASIC_INFO, NODE_TENSOR_INFO, NODE_LAUNCH = 0, 1, 5  # MSPROF_REPORT_NODE_*_TYPE
RT_KERNEL_LAUNCH, RT_CPU_KERNEL_LAUNCH = 1001, 1002  # runtime API types: 1000 + the runtime's API index
RT_TASK_TRACK = 802  # RT_PROFILE_TYPE_TASK_TRACK
TS_KERNEL_AICORE, TS_KERNEL_AICPU, TS_KERNEL_AIVEC = 0, 1, 66  # runtime task types (task_track taskType)
TYPE_INFO = [
    f"{LEVEL_ACL}_{ACL_MDL_EXECUTE}:aclmdlExecute", f"{LEVEL_MODEL}_{MODEL_EXECUTE}:ModelExecute",
    f"{LEVEL_NODE}_{NODE_BASIC_INFO}:node_basic_info", f"{LEVEL_NODE}_{NODE_TENSOR_INFO}:tensor_info",
    f"{LEVEL_NODE}_{NODE_LAUNCH}:launch", f"{LEVEL_RUNTIME}_{RT_KERNEL_LAUNCH}:KernelLaunch",
    f"{LEVEL_RUNTIME}_{RT_CPU_KERNEL_LAUNCH}:CpuKernelLaunch", f"{LEVEL_RUNTIME}_{RT_TASK_TRACK}:task_track",
    f"{LEVEL_RUNTIME}_{TS_KERNEL_AICORE}:KERNEL_AICORE", f"{LEVEL_RUNTIME}_{TS_KERNEL_AICPU}:KERNEL_AICPU",
    f"{LEVEL_RUNTIME}_{TS_KERNEL_AIVEC}:KERNEL_AIVEC",
]

# GE enums (msprof ge_enum_constant.py): formats and data types of tensor_info
NCHW, ND, NC1HWC0, FRACTAL_Z, FRACTAL_NZ = 0, 2, 3, 4, 29
FLOAT, FLOAT16, INT32, INT64, DT_BF16 = 0, 1, 3, 9, 27
GE_AI_CORE, GE_AI_CPU, GE_AI_VECTOR_CORE = 0, 1, 2
Tensor = tuple[int, int, int, tuple[int, ...]]  # (0 input / 1 output, format, data type, shape)


@dataclass(frozen=True)
class Op:
    name: str
    op_type: str
    ge_task_type: int  # node_basic_info taskType
    rt_task_type: int  # task_track taskType
    block: int
    op_state: int  # 0 static, 1 dynamic: node_basic_info's opState byte, and its file group (unaging / aging)
    stream: int
    tensors: tuple[Tensor, ...]
    kernel: str = ""  # kernel name (hash_dic), AI Core kernels only


@dataclass(frozen=True)
class Task:
    op: Op
    iteration: int
    task_id: int
    start: int  # device ticks after DEV_CNT0
    end: int


@dataclass(frozen=True)
class Chip:
    name: str
    platform: str
    hwts_mhz: str
    aic_mhz: str
    ai_cores: int
    aiv_cores: int
    host_mhz: str  # info.json CPU Frequency: "1000.000000" means host records already carry monotonic ns
    host_cnt0: int  # host_start.log cntvct (host counter ticks at MONO0_NS)
    cntvct_diff: int | None  # host_start.log(.0) cntvct_diff (host counter ticks), None: no such line
    tasks: tuple[Task, ...]
    pmu: dict[str, tuple[int, tuple[int, ...]]]  # op name → (total cycles, 8 counters)
    extra_sample: dict[str, str] = field(default_factory=dict)


def _ops(conv: tuple[Tensor, ...], relu: tuple[Tensor, ...], nms: tuple[Tensor, ...], conv_block: int,
         relu_block: int, relu_on_aiv: bool = False) -> tuple[Op, Op, Op]:
    relu_ge, relu_rt = (GE_AI_VECTOR_CORE, TS_KERNEL_AIVEC) if relu_on_aiv else (GE_AI_CORE, TS_KERNEL_AICORE)
    return (Op(CONV, "Conv2D", GE_AI_CORE, TS_KERNEL_AICORE, conv_block, 0, AICORE_STREAM, conv, "te_conv2d_1a2b"),
            Op(RELU, "Relu", relu_ge, relu_rt, relu_block, 0, AICORE_STREAM, relu, "te_relu_3c4d"),
            Op(NMS, "NonMaxSuppressionV3", GE_AI_CPU, TS_KERNEL_AICPU, 1, 1, AICPU_STREAM, nms))


def _tasks(ops: tuple[Op, Op, Op], spans: tuple[tuple[int, int], ...]) -> tuple[Task, ...]:
    """Six tasks from (start, end) ticks in the order conv, relu, nms of iteration 1, then of iteration 2.
    Task ids: 10/11 and 14/15 on the AI Core stream (9, 12, 13, 16 are the step-trace keypoints), 20/21 on
    the AI CPU stream."""
    ids = ((10, 11, 20), (14, 15, 21))
    return tuple(Task(op, iteration, ids[iteration - 1][i], *spans[(iteration - 1) * 3 + i])
                 for iteration in (1, 2) for i, op in enumerate(ops))


_NMS_TENSORS: tuple[Tensor, ...] = ((0, ND, FLOAT, (100, 4)), (0, ND, FLOAT, (100,)), (1, ND, INT32, (10,)))
_CONV_5HD: tuple[Tensor, ...] = ((0, NC1HWC0, FLOAT16, (1, 1, 28, 28, 16)), (0, FRACTAL_Z, FLOAT16, (9, 2, 16, 16)),
                                 (1, NC1HWC0, FLOAT16, (1, 2, 28, 28, 16)))
_RELU_5HD: tuple[Tensor, ...] = ((0, NC1HWC0, FLOAT16, (1, 2, 28, 28, 16)), (1, NC1HWC0, FLOAT16, (1, 2, 28, 28, 16)))

# Ascend 310: 2 AI Cores, so the Conv2D's 4 blocks run in two waves (ceil(4 / 2) = 2).
MINI_OPS = _ops(_CONV_5HD, _RELU_5HD, _NMS_TENSORS, conv_block=4, relu_block=2)
MINI_TASKS = _tasks(MINI_OPS, ((100_000, 112_500), (112_700, 114_700), (115_000, 125_000),
                               (200_000, 213_000), (213_000, 215_100), (215_100, 226_100)))
MINI_PMU = {CONV: (200_000, (25_000, 100_000, 10_000, 40_000, 120_000, 30_000, 2_000, 100)),
            RELU: (30_000, (15_000, 0, 3_000, 0, 9_000, 6_000, 500, 25))}

# Ascend 910: the Conv2D's weights in FRACTAL_Z with sub-format 2 (a grouped convolution: 4 | 2 << 8).
CLOUD_OPS = _ops(((0, NC1HWC0, FLOAT16, (1, 1, 28, 28, 16)), (0, FRACTAL_Z | 2 << 8, FLOAT16, (9, 2, 16, 16)),
                  (1, NC1HWC0, FLOAT16, (1, 2, 28, 28, 16))), _RELU_5HD, _NMS_TENSORS, conv_block=8, relu_block=1)
CLOUD_TASKS = _tasks(CLOUD_OPS, ((100_000, 102_000), (102_300, 103_800), (104_000, 109_000),
                                 (200_000, 202_500), (202_500, 204_100), (205_000, 210_500)))
CLOUD_PMU = {CONV: (123_456, (15_432, 61_728, 3_858, 46_296, 77_160, 15_432, 4_000, 500)),
             RELU: (10_000, (5_000, 0, 1_250, 0, 2_500, 3_750, 1_000, 0))}

# Ascend 910B: bf16 tensors, the Relu on the AI Vector Cores with its input in FRACTAL_NZ.
STARS_OPS = _ops(((0, NC1HWC0, DT_BF16, (1, 1, 28, 28, 16)), (0, FRACTAL_Z, DT_BF16, (9, 2, 16, 16)),
                  (1, NC1HWC0, DT_BF16, (1, 2, 28, 28, 16))),
                 ((0, FRACTAL_NZ, DT_BF16, (8, 4, 16, 16)), (1, ND, DT_BF16, (64, 128))),
                 ((0, ND, FLOAT, (100, 4)), (0, ND, FLOAT, (100,)), (1, ND, INT64, (10,))),
                 conv_block=8, relu_block=4, relu_on_aiv=True)
STARS_TASKS = _tasks(STARS_OPS, ((50_000, 56_000), (56_100, 56_500), (56_600, 59_100),
                                 (100_000, 106_500), (106_500, 106_950), (107_000, 109_750)))
STARS_PMU = {CONV: (1_440_000, (14_400, 720_000, 144_000, 288_000, 432_000, 72_000, 1_000, 40)),
             RELU: (36_000, (18_000, 0, 3_600, 0, 10_800, 7_200, 400, 10))}

# CANN 5 JOB folder on a 910: GE reports the Conv2D name as a hash_dic key, the other names inline.
LEGACY_OPS = _ops(((0, NCHW, FLOAT16, (1, 16, 28, 28)), (1, NCHW, FLOAT16, (1, 32, 28, 28))),
                  ((0, NCHW, FLOAT16, (1, 32, 28, 28)), (1, NCHW, FLOAT16, (1, 32, 28, 28))), (),
                  conv_block=16, relu_block=1)
LEGACY_TASKS = _tasks(LEGACY_OPS, ((100_000, 103_000), (103_000, 104_000), (104_500, 108_500),
                                   (200_000, 203_200), (203_400, 204_500), (204_500, 209_000)))
LEGACY_PMU = {CONV: (640_000, (64_000, 320_000, 32_000, 128_000, 192_000, 96_000, 5_000, 250)),
              RELU: (8_000, (4_000, 0, 800, 0, 2_400, 1_600, 100, 5))}

STARS_SAMPLE = {"aiv_profiling": "on", "aiv_metrics": "PipeUtilization", "aiv_profiling_events": PIPE_EVENTS,
                "aiv_profiling_mode": "task-based", "aiv_sampling_interval": "10"}
CHIP_TABLE = {
    "mini": Chip("mini", "0", "100", "1000", 2, 0, "100.000000", 50_000_000_000, 3, MINI_TASKS, MINI_PMU,
                 {"ts_timeline": "on", "hwts_log": "off"}),
    "cloud": Chip("cloud", "1", "100", "1000", 32, 0, "1000.000000", 2_999_999_000_000, 25, CLOUD_TASKS, CLOUD_PMU),
    "910b": Chip("910b", "5", "50", "1800", 24, 48, "100.000000", 70_000_000_000, 7, STARS_TASKS, STARS_PMU,
                 STARS_SAMPLE),
    "legacy": Chip("legacy", "1", "100", "1000", 32, 0, "1000.000000", MONO0_NS, None, LEGACY_TASKS, LEGACY_PMU),
}
PROF_NAME = "PROF_000001_20231114221320000_GOLDENABCDEFGHIJ"
JOB_NAME = "JOBGOLDENAAAAAAAAAAAAAAAAAAAAAAA"  # 32 characters, as the real JOBAIFGJEJFEDCBAEADIFJAAAAAAAAAA


# -- host clock ---------------------------------------------------------------------------------------
def host_ticks(chip: Chip, us: int) -> int:
    """Host counter value `us` µs after collection start: monotonic ns as they are when the CPU
    Frequency is the default 1000 MHz, else ticks of that counter from host_start.log's cntvct."""
    mhz = float(chip.host_mhz)
    if mhz == 1000:
        return MONO0_NS + us * 1000
    return chip.host_cnt0 + us * int(mhz)


# -- packing (msprof's format strings) ----------------------------------------------------------------
def pack(fmt: str, *values: int | bytes) -> bytes:
    return struct.pack("=" + fmt, *values)


def api(level: int, type_: int, begin: int, end: int, item: int) -> bytes:
    """MsprofApi, `=HHIIIQQQ`."""
    return pack("HHIIIQQQ", 0x5A5A, level, type_, THREAD, 0, begin, end, item)


def event(level: int, type_: int, request: int, ts: int, item: int) -> bytes:
    """MsprofEvent, `=HHIIIQQQ` with 0xFFFF_FFFF_FFFF_FFFF at bytes 24..32."""
    return pack("HHIIIQQQ", 0x5A5A, level, type_, THREAD, request, ts, 0xFFFF_FFFF_FFFF_FFFF, item)


def compact(level: int, type_: int, ts: int, payload: bytes) -> bytes:
    """MsprofCompactInfo: `=HHIIIQ` header + 40 payload bytes."""
    return pack("HHIIIQ", 0x5A5A, level, type_, THREAD, 40, ts) + payload.ljust(40, b"\0")


def node_basic_info(op: Op, ts: int) -> bytes:
    """Payload opName u64, taskType u32, opType u64, blockNum u32, opFlag u32, opState u8 (packed)."""
    return compact(LEVEL_NODE, NODE_BASIC_INFO, ts, pack("QIQIIB", HASHES[op.name], op.ge_task_type,
                                                         HASHES[op.op_type], op.block, 0, op.op_state))


def task_track(task: Task, ts: int) -> bytes:
    """Payload `HHHHQQ16B`: deviceId, streamId, taskId, batchId, taskType, kernelName, kernel ext (numBlocks,
    argsSize, …)."""
    kernel = HASHES.get(task.op.kernel, 0)
    ext = pack("HH", task.op.block, 64)
    return compact(LEVEL_RUNTIME, RT_TASK_TRACK, ts, pack("HHHHQQ", 0, task.op.stream, task.task_id, 0,
                                                          task.op.rt_task_type, kernel) + ext)


def tensor_slots(tensors: tuple[Tensor, ...]) -> list[int]:
    """The 55 u32 of 5 tensor slots {tensorType, format, dataType, shape[8]}, unused ones 0."""
    values = [v for kind, fmt, dtype, shape in tensors for v in (kind, fmt, dtype, *shape, *[0] * (8 - len(shape)))]
    return values + [0] * (55 - len(values))


def tensor_info(op: Op, ts: int) -> bytes:
    """MsprofAdditionalInfo (`=HHIIIQ` + 232 bytes) holding `QI55I`: opName, tensorNum, 5 × {tensorType,
    format, dataType, shape[8]}."""
    payload = pack("QI55I", HASHES[op.name], len(op.tensors), *tensor_slots(op.tensors))
    return pack("HHIIIQ", 0x5A5A, LEVEL_NODE, NODE_TENSOR_INFO, THREAD, 232, ts) + payload.ljust(232, b"\0")


def step_trace(ticks: int, iteration: int, task_id: int, tag: int) -> bytes:
    """ts_track step trace (tag 10), `=BBHLQQQHHHH`: mode, tag, bufSize, reserved, timestamp, indexId, modelId,
    streamId, taskId, tagId (0 model start, 1 model end), reserved."""
    return pack("BBHLQQQHHHH", 1, 10, 40, 0, DEV_CNT0 + ticks, iteration, MODEL_ID, AICORE_STREAM, task_id, tag, 0)


def keypoints(tasks: Iterable[Task]) -> list[tuple[int, bytes]]:
    """(ticks, record): a model start keypoint 1000 ticks before each iteration's first task (task id 9 / 13),
    a model end keypoint 1000 ticks after its last (12 / 16)."""
    out = []
    for iteration, (start_id, end_id) in ((1, (9, 12)), (2, (13, 16))):
        spans = [t for t in tasks if t.iteration == iteration]
        first, last = min(t.start for t in spans) - 1000, max(t.end for t in spans) + 1000
        out += [(first, step_trace(first, iteration, start_id, 0)), (last, step_trace(last, iteration, end_id, 1))]
    return out


def hwts(log_type: int, cnt: int, task: Task, ticks: int) -> bytes:
    """hwts.data, `=BBHHHQ12I`: type | cnt << 4, reserved, 0x6BD3, blockId, taskId, syscnt, streamId + 11 × 0."""
    return pack("BBHHHQ12I", log_type | (cnt % 16) << 4, 0, 0x6BD3, 0, task.task_id, DEV_CNT0 + ticks,
                task.op.stream, *([0] * 11))


def aic_pmu(cnt: int, task: Task, total: int, counters: tuple[int, ...]) -> bytes:
    """aicore.data task PMU, `=BBHHHII10Q8I`: cnt << 4, 0, 0x6BD3, 0, taskId, 0, 0, totalCycle, ovCycle, pmu[8],
    streamId + 7 × 0."""
    return pack("BBHHHII10Q8I", (cnt % 16) << 4, 0, 0x6BD3, 0, task.task_id, 0, 0, total, 0, *counters,
                task.op.stream, *([0] * 7))


def mini_timeline(task: Task, state: int, ticks: int) -> bytes:
    """310 TLV tag 3 TimeLine, `=BBHLHHHHQLL`: mode, tag, bufSize, reserved, taskType (0 AI Core, 1 AI CPU),
    taskState (2 running, 3 complete, 7/8 AI Core start/done), streamId, taskId, timestamp, thread, deviceId."""
    task_type = 1 if task.op.ge_task_type == GE_AI_CPU else 0
    return pack("BBHLHHHHQLL", 1, 3, 32, 0, task_type, state, task.op.stream, task.task_id, DEV_CNT0 + ticks, 0, 0)


def mini_event_count(task: Task, total: int, counters: tuple[int, ...]) -> bytes:
    """310 TLV tag 4 EventCount, `=BBHLHHHHQ8QQQH3H`: mode, tag, bufSize, reserved, taskType, streamId, taskId,
    overflow, overflowCycle, counters[8], taskCycles, timestamp, block, 3 × reserved."""
    return pack("BBHLHHHHQ8QQQH3H", 1, 4, 112, 0, 0, task.op.stream, task.task_id, 0, 0, *counters, total,
                DEV_CNT0 + task.end, task.op.block, 0, 0, 0)


SQE_TYPES = {GE_AI_CORE: 0, GE_AI_CPU: 1, GE_AI_VECTOR_CORE: 2}  # ACSQ head bits 10–15


def acsq(func: int, cnt: int, task: Task, ticks: int) -> bytes:
    """stars_soc.data ACSQ log, `=4HQHH11L`: head (funcType 0 start / 1 end | cnt << 6 | sqe type << 10),
    0x6BD3, streamId, taskId, timestamp, 2 × u16, 11 × u32."""
    head = func | (cnt % 16) << 6 | SQE_TYPES[task.op.ge_task_type] << 10
    return pack("4HQHH11L", head, 0x6BD3, task.op.stream, task.task_id, DEV_CNT0 + ticks, 0, 0, *([0] * 11))


def context_pmu(cnt: int, task: Task, total: int, counters: tuple[int, ...]) -> bytes:
    """ffts_profile.data ContextPmu, `=4HQ4HQ12Q`: head (funcType 0b101000 | cnt << 6), 0x6BD3, streamId, taskId,
    reserved; subTaskType | ovFlag << 10, subTaskId, fftsType << 13, threadId; reserved; totalCycle, ovCycle,
    pmu[8], startCnt, endCnt. fftsType 0 is a plain AI Core task; msprof reads any type but 0, 4 and 5 as a
    plain AI Vector Core task (ffts_pmu.py), so the vector task writes 2."""
    ffts_type = 2 if task.op.ge_task_type == GE_AI_VECTOR_CORE else 0
    return pack("4HQ4HQ12Q", 0b101000 | (cnt % 16) << 6, 0x6BD3, task.op.stream, task.task_id, 0, 0, 0,
                ffts_type << 13, 0, 0, total, 0, *counters, DEV_CNT0 + task.start, DEV_CNT0 + task.end)


# -- legacy host records ------------------------------------------------------------------------------
def legacy_acl(begin: int, end: int) -> bytes:
    """AclModule MsprofAclProfData, `=HHIQQII64s4Q`: magic, dataTag 0, apiType (2 MODEL), begin, end, pid, tid,
    apiName."""
    return pack("HHIQQII64s4Q", 0x5A5A, 0, 2, begin, end, PID, THREAD, b"aclmdlExecute", 0, 0, 0, 0)


def legacy_step(iteration: int, tag: int, ts: int) -> bytes:
    """Framework.step_info, `=HHIIHHQQIB27B`: magic, dataTag 25, modelId, streamId, taskId, batchId, timeStamp,
    curIterNum, threadId, tag (0 begin, 1 end)."""
    return pack("HHIIHHQQIB27B", 0x5A5A, 25, MODEL_ID, AICORE_STREAM, 0, 0, ts, iteration, THREAD, tag, *([0] * 27))


def legacy_ge_task(task: Task, ts: int) -> bytes:
    """Framework.task_desc_info (MsprofGeProfTaskData, 256 B) as msprof 2022 reads it (GeTaskBean.FMT_MAP):
    an inline name `=HHI8B120s8B56sQQ4IHHII12B`, a hashed one `=HHI8BQ112B8B56sQQ4IHHII12B` (first of the
    8B: 1 text, 0 hash). Fields after the names: curIterNum, timeStamp, shapeType, blockDims, modelId,
    streamId, taskId, batchId, threadId, contextId."""
    op = task.op
    tail = (task.iteration, ts, op.op_state, op.block, MODEL_ID, op.stream, task.task_id, 0, THREAD, 0xFFFFFFFF,
            *([0] * 12))
    type_part = (1, *([0] * 7), op.op_type.encode())
    if op.name == CONV:
        return pack("HHI8BQ112B8B56sQQ4IHHII12B", 0x5A5A, 23, op.ge_task_type, 0, *([0] * 7), HASHES[op.name],
                    *([0] * 112), *type_part, *tail)
    return pack("HHI8B120s8B56sQQ4IHHII12B", 0x5A5A, 23, op.ge_task_type, 1, *([0] * 7), op.name.encode(),
                *type_part, *tail)


def legacy_ge_tensor(task: Task) -> bytes:
    """Framework.tensor_data_info, `=HHIQIHHI55IQ`: magic, dataTag 24, modelId, curIterNum, streamId, taskId,
    batchId, tensorNum, 5 × {tensorType, format, dataType, shape[8]}, reserved."""
    return pack("HHIQIHHI55IQ", 0x5A5A, 24, MODEL_ID, task.iteration, task.op.stream, task.task_id, 0,
                len(task.op.tensors), *tensor_slots(task.op.tensors), 0)


def legacy_rt_track(task: Task, ts: int) -> bytes:
    """Runtime.task_track (MsprofRuntimeProfTrackData), `=HHIQ32sHHHHQ`: magic, dataTag 41, threadId, timestamp,
    taskType text, taskId, batchId, streamId, reserved."""
    text = {TS_KERNEL_AICORE: b"KERNEL_AICORE", TS_KERNEL_AICPU: b"KERNEL_AICPU"}[task.op.rt_task_type]
    return pack("HHIQ32sHHHHQ", 0x5A5A, 41, THREAD, ts, text, task.task_id, 0, task.op.stream, 0, 0)


# -- control files (the keys msprof's parser requires) ------------------------------------------------
def dump(data: dict) -> str:
    return json.dumps(data, separators=(",", ":"))


def info_json(chip: Chip, device: bool) -> str:
    device_info = [{
        "id": 0, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 1, "ctrl_cpu_endian_little": 1,
        "ts_cpu_core_num": 1, "ai_cpu_core_num": 4, "ai_core_num": chip.ai_cores, "ai_cpu_core_id": 1,
        "ai_core_id": 0, "aicpu_occupy_bitmap": 30, "ctrl_cpu": "0", "ai_cpu": "1,2,3,4", "aiv_num": chip.aiv_cores,
        "hwts_frequency": chip.hwts_mhz, "aic_frequency": chip.aic_mhz, "aiv_frequency": chip.aic_mhz}]
    return dump({
        "jobInfo": "NA", "version": "1.0", "mac": "00-00-00-00-00-01", "OS": "Linux-golden", "cpuCores": 4,
        "hostname": "golden-host", "hwtype": "x86_64", "devices": "0" if device else "64", "platform": "",
        "CPU": [{"Id": 0, "Name": "GenuineIntel", "Frequency": chip.host_mhz, "Logical_CPU_Count": "4",
                 "Type": "golden"}],
        "DeviceInfo": device_info if device else [], "platform_version": chip.platform, "pid": str(PID),
        "pid_name": "python3", "memoryTotal": 16_000_000, "cpuNums": 4, "sysClockFreq": 100, "upTime": "3000.00",
        "netCardNums": 0, "netCard": [], "rank_id": -1, "drvVersion": 467732, "cannVersion": "8.0.0"})


def sample_json(chip: Chip, device: bool) -> str:
    sample = {"ai_core_profiling": "on", "ai_core_metrics": "PipeUtilization", "ai_core_profiling_events": PIPE_EVENTS,
              "ai_core_profiling_mode": "task-based", "aicore_sampling_interval": "10", "aiv_profiling": "off",
              "aiv_metrics": "", "aiv_profiling_events": "", "aiv_profiling_mode": "task-based",
              "aiv_sampling_interval": "10", "aicpuTrace": "off", "l2CacheTaskProfiling": "off",
              "l2CacheTaskProfilingEvents": "", "hwts_log": "on", "ts_timeline": "off", "ts_keypoint": "on",
              "llc_profiling": "read", "msproftx": "off", "acl": "on", "modelExecution": "on", "runtimeApi": "on",
              "devices": "0" if device else "64", "app": "python3", "result_dir": "/home/golden/out"}
    sample.update(chip.extra_sample)
    return dump(sample)


def start_info() -> str:
    return dump({"collectionDateBegin": "2023-11-14 22:13:20.000000", "collectionTimeBegin": str(WALL0_US),
                 "clockMonotonicRaw": str(MONO0_NS)})


def end_info() -> str:
    return dump({"collectionDateEnd": "2023-11-14 22:13:20.005000", "collectionTimeEnd": str(WALL0_US + COLLECT_US),
                 "clockMonotonicRaw": str(MONO0_NS + COLLECT_US * 1000)})


def host_start_log(chip: Chip, section: str) -> str:
    lines = [f"[{section}]", f"clock_monotonic_raw: {MONO0_NS}", f"cntvct: {chip.host_cnt0}"]
    if chip.cntvct_diff is not None:
        lines.append(f"cntvct_diff: {chip.cntvct_diff}")
    return "\n".join(lines) + "\n"


def dev_start_log() -> str:
    return f"clock_monotonic_raw: {DEV_MONO0_NS}\ncntvct: {DEV_CNT0}\n"


# -- the host side of a run: when each record is reported (µs after collection start) ------------------
@dataclass(frozen=True)
class Launch:
    """Host times (µs after start) of one task's launch: Node launch API [node, node + 40] ⊃ node_basic_info
    (+5) and tensor_info (+6) ⊃ runtime launch API [+10, +30], whose task_track carries the API's entry time."""

    task: Task
    node: int


LAUNCH_ORDER = (CONV, RELU, NMS)


def launches(chip: Chip) -> list[Launch]:
    """Iteration r's aclmdlExecute spans [b + 490, b + 700] µs, its ModelExecute event pair b + 495 … b + 695,
    with b = 1000 (r − 1); op i (conv, relu, nms) launches at b + 500 + 50 i."""
    return [Launch(t, 1000 * (t.iteration - 1) + 500 + 50 * LAUNCH_ORDER.index(t.op.name)) for t in chip.tasks]


def host_streams(chip: Chip) -> dict[str, bytes]:
    def at(us: int) -> int:
        return host_ticks(chip, us)

    apis: list[tuple[int, bytes]] = []  # (report time µs, record)
    for iteration in (1, 2):
        b = 1000 * (iteration - 1)
        apis += [(b + 495, event(LEVEL_MODEL, MODEL_EXECUTE, iteration, at(b + 495), MODEL_ID)),
                 (b + 695, event(LEVEL_MODEL, MODEL_EXECUTE, iteration, at(b + 695), MODEL_ID)),
                 (b + 700, api(LEVEL_ACL, ACL_MDL_EXECUTE, at(b + 490), at(b + 700), 0))]
    basic: dict[str, list[bytes]] = {"unaging": [], "aging": []}
    tensor: dict[str, list[bytes]] = {"unaging": [], "aging": []}
    track = []
    for launch in launches(chip):
        op, t = launch.task.op, launch.node
        rt_api = RT_CPU_KERNEL_LAUNCH if op.ge_task_type == GE_AI_CPU else RT_KERNEL_LAUNCH
        apis += [(t + 30, api(LEVEL_RUNTIME, rt_api, at(t + 10), at(t + 30), 0)),
                 (t + 40, api(LEVEL_NODE, NODE_LAUNCH, at(t), at(t + 40), HASHES[op.name]))]
        group = "aging" if op.op_state else "unaging"  # a dynamic op's reports are non-persistent
        basic[group].append(node_basic_info(op, at(t + 5)))
        tensor[group].append(tensor_info(op, at(t + 6)))
        track.append(task_track(launch.task, at(t + 10)))
    apis.sort(key=lambda item: item[0])
    hash_lines = "".join(f"{HASHES[name]}:{name}\n" for name in (CONV, RELU, NMS, "Conv2D", "Relu",
                                                                 "NonMaxSuppressionV3", "te_conv2d_1a2b",
                                                                 "te_relu_3c4d"))
    return {"unaging.api_event.data": b"".join(record for _, record in apis),
            **{f"{group}.compact.node_basic_info": b"".join(records) for group, records in basic.items()},
            "unaging.compact.task_track": b"".join(track),
            **{f"{group}.additional.tensor_info": b"".join(records) for group, records in tensor.items()},
            "unaging.additional.hash_dic": hash_lines.encode(),
            "unaging.additional.type_info_dic": "".join(f"{line}\n" for line in TYPE_INFO).encode()}


# -- the device side -----------------------------------------------------------------------------------
def _pmu_tasks(chip: Chip) -> list[Task]:
    return [t for t in chip.tasks if t.op.name in chip.pmu]


def hwts_device(chip: Chip) -> tuple[bytes, bytes, bytes]:
    """hwts.data (a start and an end log per task, in time order), aicore.data (one PMU record per AI Core
    task, written at its end), ts_track.data (step-trace keypoints)."""
    logs = sorted([(t.start, 0, t) for t in chip.tasks] + [(t.end, 1, t) for t in chip.tasks], key=lambda x: x[:2])
    hwts_bytes = b"".join(hwts(kind, cnt, task, ticks) for cnt, (ticks, kind, task) in enumerate(logs))
    pmu = b"".join(aic_pmu(cnt, t, *chip.pmu[t.op.name]) for cnt, t in enumerate(_pmu_tasks(chip)))
    return hwts_bytes, pmu, b"".join(record for _, record in sorted(keypoints(chip.tasks), key=lambda x: x[0]))


def mini_device(chip: Chip) -> tuple[bytes, bytes]:
    """ts_track.data: TimeLine records (AI Core tasks: running, AI Core start 100 ticks later, AI Core done 100
    ticks before the end, complete; AI CPU tasks: running, complete) and step-trace keypoints, in time order;
    aicore.data: one EventCount per AI Core task."""
    records: list[tuple[int, bytes]] = list(keypoints(chip.tasks))
    for t in chip.tasks:
        records += [(t.start, mini_timeline(t, 2, t.start)), (t.end, mini_timeline(t, 3, t.end))]
        if t.op.ge_task_type != GE_AI_CPU:
            records += [(t.start + 100, mini_timeline(t, 7, t.start + 100)),
                        (t.end - 100, mini_timeline(t, 8, t.end - 100))]
    records.sort(key=lambda x: x[0])
    pmu = b"".join(mini_event_count(t, *chip.pmu[t.op.name]) for t in _pmu_tasks(chip))
    return b"".join(record for _, record in records), pmu


def stars_device(chip: Chip) -> tuple[bytes, bytes, bytes]:
    """stars_soc.data (ACSQ start/end per task), ffts_profile.data (a ContextPmu per AI Core / AI Vector Core
    task), ts_track.data (keypoints)."""
    logs = sorted([(t.start, 0, t) for t in chip.tasks] + [(t.end, 1, t) for t in chip.tasks], key=lambda x: x[:2])
    soc = b"".join(acsq(func, cnt, task, ticks) for cnt, (ticks, func, task) in enumerate(logs))
    pmu = b"".join(context_pmu(cnt, t, *chip.pmu[t.op.name]) for cnt, t in enumerate(_pmu_tasks(chip)))
    return soc, pmu, b"".join(record for _, record in sorted(keypoints(chip.tasks), key=lambda x: x[0]))


# -- directories -----------------------------------------------------------------------------------------
def write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def device_controls(chip: Chip, folder: Path) -> None:
    write(folder / "info.json.0", info_json(chip, device=True))
    write(folder / "sample.json", sample_json(chip, device=True))
    write(folder / "start_info.0", start_info())
    write(folder / "end_info.0", end_info())
    write(folder / "host_start.log.0", host_start_log(chip, "Device0"))
    write(folder / "dev_start.log.0", dev_start_log())


def current_layout(chip: Chip, root: Path) -> None:
    """PROF_…/host (host reporter streams, CANN ≥ 6.3) and PROF_…/device_0."""
    prof = root / PROF_NAME
    host = prof / "host"
    write(host / "info.json", info_json(chip, device=False))
    write(host / "sample.json", sample_json(chip, device=False))
    write(host / "start_info", start_info())
    write(host / "end_info", end_info())
    write(host / "host_start.log", host_start_log(chip, "Host"))
    for base, data in host_streams(chip).items():
        write(host / "data" / f"{base}.slice_0", data)
    device = prof / "device_0"
    device_controls(chip, device)
    streams: dict[str, bytes]
    if chip.name == "mini":
        timeline, pmu = mini_device(chip)
        streams = {"ts_track.data.0": timeline, "aicore.data.0": pmu}
    elif chip.name == "910b":
        soc, pmu, track = stars_device(chip)
        streams = {"stars_soc.data.0": soc, "ffts_profile.data.0": pmu, "ts_track.data.0": track}
    else:
        logs, pmu, track = hwts_device(chip)
        streams = {"hwts.data.0": logs, "aicore.data.0": pmu, "ts_track.data.0": track}
    for base, data in streams.items():
        write(device / "data" / f"{base}.slice_0", data)


def legacy_layout(chip: Chip, root: Path) -> None:
    """A CANN 5 `JOB…` folder: control files and data/ side by side, the host components' own files
    (AclModule, Framework, Runtime) next to the device data, whose files carry the "training" names
    (msprof's legacy file names). Host times are CLOCK_MONOTONIC_RAW ns."""
    job = root / JOB_NAME
    device_controls(chip, job)

    def ns(us: int) -> int:
        return MONO0_NS + us * 1000

    acl, steps = [], []
    for iteration in (1, 2):
        b = 1000 * (iteration - 1)
        acl.append(legacy_acl(ns(b + 490), ns(b + 700)))
        steps += [legacy_step(iteration, 0, ns(b + 495)), legacy_step(iteration, 1, ns(b + 695))]
    tracks, descs, tensors = [], [], []
    for launch in launches(chip):
        tracks.append(legacy_rt_track(launch.task, ns(launch.node + 10)))
        descs.append(legacy_ge_task(launch.task, ns(launch.node + 11)))  # GE reports just after the launch
        if launch.task.op.tensors:
            tensors.append(legacy_ge_tensor(launch.task))
    logs, pmu, track = hwts_device(chip)
    files = {"AclModule.acl_model.0": b"".join(acl), "Framework.step_info.0": b"".join(steps),
             "Framework.task_desc_info.0": b"".join(descs), "Framework.tensor_data_info.0": b"".join(tensors),
             "Framework.hash_dic.0": f"{HASHES[CONV]}:{CONV}\n".encode(),
             "Runtime.task_track.0": b"".join(tracks),
             "hwts.log.data.45.dev.profiler_default_tag.0": logs,
             "aicore.data.43.dev.profiler_default_tag.0": pmu,
             "ts_track.data.46.dev.profiler_default_tag.0": track}
    for base, data in files.items():
        write(job / "data" / f"{base}.slice_0", data)


WRITERS: dict[str, Callable[[Chip, Path], None]] = {"mini": current_layout, "cloud": current_layout,
                                                    "910b": current_layout, "legacy": legacy_layout}


def make(out: Path, chips: Iterable[str] = CHIPS) -> None:
    """Write out/<chip>/ for each chip. Files are overwritten, never deleted: remove out/<chip>/ first when a
    change renames one."""
    for name in chips:
        WRITERS[name](CHIP_TABLE[name], out / name)


if __name__ == "__main__":
    make(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
