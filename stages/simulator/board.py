"""One device of the simulated board: an app thread running the detector, and the device running its tasks.

A board of N devices is one app process with N such loops (run.py drives a `Board` per device): device N's
loop is thread APP_TID + N, starts N × 2.7 ms after device 0's, draws its durations from random streams
of its own, and only device 0's loop reports the type and name dictionaries (the process registers them
once; the legacy layout keeps them per device folder). Each device numbers its own streams and tasks.

`Board` advances a simulated host clock image by image and returns, per raw stream, the records
the CANN runtime and the device would report, ordered by the time they are reported. Host
timeline per image, all on one thread (intervals nest, never partially overlap):

    msproftx marker "frame N", range "preprocess"
    aclmdlCreateDataset / aclCreateDataBuffer / aclmdlAddDatasetBuffer (input, output)
    aclrtMemcpy (H2D) ⊃ runtime MemCopySync
    aclmdlExecute ⊃ ModelExecute event begin … end (requestId = N, itemId = model id)
        per op: node "launch" (itemId = op-name hash) ⊃ node_basic_info, tensor_info,
                runtime KernelLaunch / CpuKernelLaunch ⊃ task_track
        runtime StreamSynchronize (returns after the last device task ends)
    aclrtMemcpy (D2H) ⊃ MemCopySync, aclmdlDestroyDataset / aclDestroyDataBuffer
    msproftx range "postprocess"

Device tasks run in launch order: each starts after its launch (+ submit latency) and after the
previous task ends, so tasks never overlap on a stream. Device streams per chip: the 310's TS
timeline TLV streams, the 910's HWTS log and AI Core PMU, the 910B's STARS ACSQ log and FFTS
context PMU; ts_track step trace and task-id flips on the 910 and 910B. Model load
reports graph_id_map, each aclrtMemcpy a memcpy_info inside its MemCopySync.

On the 910B the MIX_AIC ops run as FFTS+ tasks (runtime task type FFTS_PLUS): their node launch
also reports a context_id_info (context ids 0 … k−1), and the device splits the task's run into k
consecutive contexts, each with FFTS+ subtask start/end logs in stars_soc.data and its own
ContextPmu (FFTS type FFTS+, subtask type MIX_AIC, subtask id = context id).

Chip v6 ("v6", platform 15): 32-byte ACSQ logs that name a task by one 32-bit id, which the host
task_track splits into taskId (low 16 bits) and batchId (high 16 bits); ids do not wrap, so there are
no flips; chip-v6 SQE type numbers; the v6 step-trace layout; no ffts_profile (its v6 PMU layout is
not simulated) and no FFTS+ subtasks.

That is "launch" mode (single-op / dynamic execution: op information at every launch). In "static"
mode the app runs an offline model (.om): GE and the runtime report every op and task once, at model
load, and each aclmdlExecute replays the same stream / task / batch ids on the device
(msprof reads request id 0 as "every iteration"):

    aclmdlLoadFromFile ⊃ ModelLoad event begin … end (requestId 0 = static graph, itemId = model id)
        runtime ModelBindStream per model stream
        per op: node "launch" ⊃ node_basic_info, tensor_info, runtime KernelLaunch ⊃ task_track
    aclmdlExecute ⊃ ModelExecute event pair ⊃ runtime ModelExecute, StreamSynchronize (no task_track)

When the load crosses a 16-bit task-id wrap, the runtime's FLIP task lands in the model's stream
(hicann/runtime engine.cc sends it after the task with the last id, sink streams included), so the
device writes the same task-flip record, with the same flip number, on every execution.

The FLIP task_track carries the flip number in its batchId; the other task_tracks carry batchId 0, as a real
runtime may write them (msprof takes the batch from the FLIP tasks), unless ``batch_ids`` asks for their real
batch ids. The legacy layout's runtime tracks carry their real batch ids.

The case-study variants of the model (workload.py: ``face_mask_ssd_mish``, ``face_mask_ssd_fused``), and
any run with ``sleep_ms``, wrap the model load in an msproftx range named CreateMultipleStreamsFromFile
as the app of msprof's face-mask SSD case study does; ``sleep_ms`` is the app's sleep inside that range after the
load (the case study's sleep(5)).

Layout "legacy" writes the same launch-mode run as CANN 5/6 did (stages/simulator/legacy.py): no host/
folder, AclModule / Framework / Runtime files beside the device data, no msproftx. Static mode is not
simulated in that layout (run.py refuses the combination).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from stages.formats import raw
from stages.simulator import devextra, legacy, names
from stages.simulator import records as rec
from stages.simulator.timebase import TimeBase
from stages.simulator.truth import Truth
from stages.simulator.workload import (
    AI_CORE_NUM,
    AIV_NUM,
    MODEL_ID,
    STARS_CHIPS,
    Chip,
    Model,
    OpTable,
    aic_mhz,
    hash_name,
    sample_durations_us,
)

US = 1000  # ns
Mode = Literal["launch", "static"]
MODES = ("launch", "static")
TASK_ID_LIMIT = 0x10000
V6_TASK_ID_LIMIT = 1 << 32
APP_PID, APP_TID = 14250, 14263  # the app, and the thread of device 0's inference loop (device N: APP_TID + N)
DEVICE_START_STAGGER_NS = 2_700_000  # device N's inference loop starts N × this later than device 0's
PMU_CYCLES_PER_ICACHE_REQ = 40

# Stream keys = slice base names (host streams have no device suffix).
API_EVENT = "unaging.api_event.data"
NODE_BASIC_INFO = "unaging.compact.node_basic_info"
TASK_TRACK = "unaging.compact.task_track"
TENSOR_INFO = "unaging.additional.tensor_info"
MSPROFTX = "unaging.additional.msproftx"
HASH_DIC = "unaging.additional.hash_dic"
TYPE_INFO_DIC = "unaging.additional.type_info_dic"
GRAPH_ID_MAP = "unaging.additional.graph_id_map"
MEMCPY_INFO = "aging.compact.memcpy_info"  # an aging group, which readers take like the unaging ones
CONTEXT_ID_INFO = "unaging.additional.context_id_info"
HOST_STREAMS = (API_EVENT, NODE_BASIC_INFO, TASK_TRACK, TENSOR_INFO, MSPROFTX, HASH_DIC, TYPE_INFO_DIC, GRAPH_ID_MAP,
                MEMCPY_INFO, CONTEXT_ID_INFO)
Layout = Literal["current", "legacy"]
LAYOUTS = ("current", "legacy")
GRAPH_ID = 1
DEFAULT_MODEL: Model = "face_mask_ssd"
LOAD_RANGE = "CreateMultipleStreamsFromFile"  # the case study's msproftx range around stream and model creation
MEMCPY_H2D, MEMCPY_D2H = 1, 2
INPUT_BYTES, OUTPUT_BYTES = 260 * 260 * 3, 5972 * 6 * 4  # one uint8 NHWC image; boxes and scores per anchor


CLOUD_EXTRA_STREAMS = ("aicpu.data", "l2_cache.data", "lpmFreqConv.data")
FREQ_DIP_EVERY = 50  # images between two AI Core frequency dips (cloud), during the idle gap after an image
FREQ_DIP_MHZ = 900


def device_streams(chip: str, device_id: int) -> tuple[str, ...]:
    bases = {"cloud": ("hwts.data", "aicore.data", "ts_track.data", *CLOUD_EXTRA_STREAMS),
             "mini": ("ts_track.data", "aicore.data"),
             "910b": ("stars_soc.data", "ffts_profile.data", "ts_track.data"),
             "v6": ("stars_soc.data", "ts_track.data")}[chip]
    return tuple(f"{base}.{device_id}" for base in bases)


def host_streams(layout: str, device_id: int) -> tuple[str, ...]:
    """Host-reported streams: in host/data (current), or beside the device data (legacy)."""
    return HOST_STREAMS if layout == "current" else tuple(legacy.streams(device_id).values())


def _rng(seed: int, device_id: int, purpose: int) -> np.random.Generator:
    """A random stream of one purpose (0: the run, 1 …: side draws); each device draws from streams of its own."""
    if device_id:
        return np.random.default_rng([seed, purpose, device_id])
    return np.random.default_rng([seed, purpose] if purpose else seed)


@dataclass
class TaskIds:
    """Per-stream task ids (16 bits; 32 on chip v6). On flip chips a FLIP task takes id 0 of each new batch
    (as msprof's flip calculator expects)."""

    flips: bool
    next_id: int = 0
    batch: int = 0
    limit: int = TASK_ID_LIMIT

    def allocate(self, n: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Ids and batch ids of the next `n` tasks, and the positions a flip task precedes."""
        ids, batches, flip_at = np.empty(n, np.int64), np.empty(n, np.int64), []
        i = 0
        while i < n:
            if self.next_id >= self.limit:
                self.next_id = 0
                if self.flips:
                    self.batch += 1
                    flip_at.append(i)
                    self.next_id = 1
            take = min(self.limit - self.next_id, n - i)
            ids[i:i + take] = self.next_id + np.arange(take)
            batches[i:i + take] = self.batch
            self.next_id += take
            i += take
        return ids, batches, flip_at


@dataclass
class _HostApis:
    """Few-per-image API intervals and events, gathered as rows."""

    tid: int = APP_TID
    level: list[int] = field(default_factory=list)
    type_: list[int] = field(default_factory=list)
    begin: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    reserve: list[int] = field(default_factory=list)

    def add(self, level: int, type_: int, begin: int, end: int, reserve: int = 0) -> None:
        self.level.append(level)
        self.type_.append(type_)
        self.begin.append(begin)
        self.end.append(end)
        self.reserve.append(reserve)

    def records(self) -> Part:
        end = np.array(self.end, np.int64)
        return end, rec.apis(len(end), np.array(self.level), np.array(self.type_), self.tid,
                             np.array(self.begin, np.int64), end, 0, np.array(self.reserve))


Emission = dict[str, rec.Chunk]
Part = tuple[np.ndarray, np.ndarray]  # (emit times, records)


@dataclass(frozen=True)
class Contexts:
    """The contexts of one execution's FFTS+ tasks, one row each."""

    op: np.ndarray  # op index
    context: np.ndarray  # context id (0 … k−1)
    start: np.ndarray  # device ticks
    end: np.ndarray
    total: np.ndarray  # cycles
    pmu: np.ndarray  # (n, 8) counters


@dataclass
class Launches:
    """The host side of launching every op once, in op order."""

    node_e: np.ndarray  # Node API ends
    track_ts: np.ndarray  # task_track timestamps (host ns)
    ids: np.ndarray  # task ids
    batches: np.ndarray  # batch ids
    flips: list[tuple[int, int]]  # (op index a FLIP task precedes, its new batch)
    api_parts: list[Part]  # Node and runtime launch APIs
    records: Emission  # node_basic_info, tensor_info, task_track


class Board:
    def __init__(self, chip: Chip, seed: int, timebase: TimeBase, *, device_id: int = 0,
                 first_task_id: int = 0, mode: Mode = "launch", metrics: str = "PipeUtilization",
                 layout: Layout = "current", model: Model = DEFAULT_MODEL, sleep_ms: int = 0,
                 batch_ids: bool = False, reports_names: bool = True) -> None:
        self.chip = chip
        self.tid = APP_TID + device_id  # each device's inference loop is a thread of its own
        # the process registers its type and name dictionaries once: a second device's loop finds them reported
        self.reports_names = reports_names
        # kernel task_tracks carry their real batch id (True) or 0, as a real runtime may write (msprof takes the
        # batch from the FLIP tasks); FLIP tasks carry their flip number either way
        self.batch_ids = batch_ids
        self.model_name = model
        self.sleep_ns = sleep_ms * 1_000_000
        self.load_range = model != DEFAULT_MODEL or sleep_ms > 0
        self.mode = mode
        self.legacy = layout == "legacy"
        self.loaded: Launches | None = None  # static mode: the tasks registered at model load
        self.metrics = metrics
        self.events = raw.PMU_EVENT_SETS[metrics]
        self.tb = timebase
        self.device_id = device_id
        self.table = OpTable.build(chip, model)
        self.truth = Truth(self.table.ops, device_id, timebase.ns_per_tick)
        self.truth.mode = mode
        self.truth.metrics = metrics
        self.rng = _rng(seed, device_id, 0)
        self.group_rng = _rng(seed, device_id, 1)  # counters of metric groups other than PipeUtilization
        self.extra_rng = _rng(seed, device_id, 2)  # AI CPU and L2 cache records
        self.ffts_rng = _rng(seed, device_id, 3)  # how FFTS+ tasks split into contexts
        self.now = timebase.host_mono0 + 1500 * US + device_id * DEVICE_START_STAGGER_NS  # host time of the next action
        self.device_free = int(timebase.ticks_at(self.now))
        streams = sorted(set(self.table.stream_id.tolist()))
        if chip == "v6":  # one 32-bit id space for the whole device: a task id alone names a task
            shared = TaskIds(False, first_task_id % V6_TASK_ID_LIMIT, limit=V6_TASK_ID_LIMIT)
            self.task_ids = {s: shared for s in streams}
        else:
            self.task_ids = {s: TaskIds(chip != "mini", first_task_id % TASK_ID_LIMIT) for s in streams}
        self.hwts_cnt = self.aic_cnt = 0
        self._precompute()

    def _precompute(self) -> None:
        ops, t = self.table.ops, self.table
        self.op_hash = np.array([hash_name(op.name) for op in ops], np.uint64)
        self.type_hash = np.array([hash_name(op.op_type) for op in ops], np.uint64)
        self.kernel_hash = np.array([hash_name(op.kernel_name) for op in ops], np.uint64)
        self.ffts_plus = t.contexts > 0
        # GE: AI_CORE 0, AI_CPU 1, AI_VECTOR_CORE 2, MIX_AIC 4
        self.ge_task_type = np.select([t.is_aicpu, t.is_aiv, self.ffts_plus], [1, 2, 4], 0)
        self.rt_task_type = np.select([t.is_aicpu, t.is_aiv, self.ffts_plus],
                                      [names.TASK_KERNEL_AICPU, names.TASK_KERNEL_AIVEC, names.TASK_FFTS_PLUS],
                                      names.TASK_KERNEL_AICORE)
        self.rt_api_type = np.where(t.is_aicpu, names.RUNTIME_APIS["CpuKernelLaunch"],
                                    names.RUNTIME_APIS["KernelLaunch"])
        rows, row_op, row_num = [], [], []
        for i, op in enumerate(ops):
            tensors = [(0, x) for x in op.inputs] + [(1, x) for x in op.outputs]
            for k in range(0, len(tensors), raw.TENSOR_SLOTS):
                block = np.zeros((raw.TENSOR_SLOTS, 11), np.uint32)
                for slot, (kind, x) in enumerate(tensors[k:k + raw.TENSOR_SLOTS]):
                    block[slot, :3] = (kind, x.fmt, x.dtype)
                    block[slot, 3:3 + len(x.shape)] = x.shape
                rows.append(block)
                row_op.append(i)
                row_num.append(min(raw.TENSOR_SLOTS, len(tensors) - k))
        self.tensor_rows = np.stack(rows)
        self.tensor_row_op = np.array(row_op)
        self.tensor_row_num = np.array(row_num)
        self.args_size = np.array([64 + 8 * (len(op.inputs) + len(op.outputs)) for op in ops])
        self.aicore = ~t.is_aicpu
        cores = np.where(t.is_aiv, AIV_NUM[self.chip], AI_CORE_NUM[self.chip])
        self.busy_cores = np.minimum(t.block_dim, cores)  # cores a task keeps busy

    # ---- run phases -----------------------------------------------------------------------------

    def start(self) -> Emission:
        """Type registrations, reported when the app initialises profiling."""
        if not self.reports_names:
            return {}
        return self._layout({TYPE_INFO_DIC: rec.text_chunk(self.tb.host_mono0 + 200 * US, names.type_info_lines())})

    def _layout(self, emission: Emission) -> Emission:
        """The emission as this layout writes it."""
        if not self.legacy:
            return emission
        return legacy.to_legacy(emission, self.device_id, APP_PID, int(self.table.stream_id[0]))

    def load_model(self) -> Emission:
        """aclmdlLoadFromFile (≈ 40 ms): streams, device memory; GE registers its name hashes."""
        host = _HostApis(self.tid)
        begin = self.now
        cursor = begin + 300 * US
        for api in ("StreamCreate", "StreamCreate", "DevMalloc", "DevMalloc", "DevMalloc"):
            cursor = self._runtime(host, api, cursor, self._draw_us(30, 6), 0) + self._draw_us(800, 100)
        emission: Emission = {}
        api_parts: list[Part] = []
        if self.mode == "static":
            cursor, api_parts, emission = self._register_model(host, cursor)
        end = cursor + self._draw_us(36_000, 2_000)
        self._acl(host, "aclmdlLoadFromFile", begin, end)
        self.now = end + 500 * US
        if self.load_range:
            self.now += self.sleep_ns
            if not self.legacy:
                emission[MSPROFTX] = rec.merge([self._msproftx(2, begin - 200 * US, self.now, LOAD_RANGE)])
            self.now += 100 * US
        ops = self.table.ops
        strings = sorted({op.name for op in ops} | {op.op_type for op in ops} | {op.kernel_name for op in ops}
                         | {self.model_name})
        emission[API_EVENT] = rec.merge([host.records(), *api_parts])
        if self.reports_names:
            emission[HASH_DIC] = rec.text_chunk(end, [f"{hash_name(s)}:{s}" for s in strings])
        if self.chip == "cloud":  # the AI Core clock as the load finds it
            emission.update(self._freq_points(begin, [(begin, aic_mhz(self.chip))]))
        emission[GRAPH_ID_MAP] = rec.merge([(np.array([end - 100 * US]), rec.graph_id_maps(
            self.tid, end - 100 * US, hash_name(self.model_name), GRAPH_ID, MODEL_ID))])
        return self._layout(emission)

    def _freq_points(self, emit_ns: int, points: list[tuple[int, int]]) -> Emission:
        """An lpmFreqConv record of (host ns, MHz) change points."""
        ticks = [int(self.tb.ticks_at(ns)) for ns, _ in points]
        record = devextra.freq_record(ticks, [mhz for _, mhz in points])
        self.truth.freq_points += len(points)
        return {f"lpmFreqConv.data.{self.device_id}": rec.merge([(np.array([emit_ns]), record)])}

    def _register_model(self, host: _HostApis, begin: int) -> tuple[int, list[Part], Emission]:
        """Static mode, inside aclmdlLoadFromFile: every op's task is created and reported once."""
        load_begin = begin
        cursor = begin + self._draw_us(40, 8)
        for _ in sorted(set(self.table.stream_id.tolist())):
            cursor = self._runtime(host, "ModelBindStream", cursor, self._draw_us(20, 4), 0) + self._draw_us(6, 1)
        self.loaded = self._launch_ops(cursor, 0)
        load_end = int(self.loaded.node_e[-1]) + self._draw_us(300, 50)
        self.truth.add_api("model", "ModelLoad", 1, load_end - load_begin)
        ts = np.array([load_begin, load_end])
        load_event = (ts, rec.events(2, raw.LEVEL_MODEL, raw.MODEL_LOAD_TYPE, self.tid, 0, ts, MODEL_ID))
        return load_end + self._draw_us(200, 30), [load_event, *self.loaded.api_parts], dict(self.loaded.records)

    def unload_model(self) -> Emission:
        host = _HostApis(self.tid)
        begin = self.now
        cursor = begin + 40 * US
        for api in ("DevFree", "DevFree", "DevFree", "StreamDestroy", "StreamDestroy"):
            cursor = self._runtime(host, api, cursor, self._draw_us(25, 5), 0) + self._draw_us(60, 10)
        end = cursor + self._draw_us(900, 80)
        self._acl(host, "aclmdlUnload", begin, end)
        self.now = end + 200 * US
        return self._layout({API_EVENT: rec.merge([host.records()])})

    def run_image(self, iteration: int) -> Emission:
        """Pre-process, run the model once, post-process; returns every record of this image."""
        host, tx = _HostApis(self.tid), []
        t0 = self.now
        tx.append(self._msproftx(0, t0, t0, f"frame {iteration}"))
        pre_end = t0 + US + self._draw_us(2_600, 250)
        tx.append(self._msproftx(2, t0 + US, pre_end, "preprocess"))
        cursor = pre_end + self._draw_us(20, 4)
        for api in ("aclmdlCreateDataset", "aclCreateDataBuffer", "aclmdlAddDatasetBuffer") * 2:
            cursor = self._acl(host, api, cursor, cursor + self._draw_us(3, 1)) + self._draw_us(1, 0.3)
        memcpys: list[Part] = []
        cursor = self._memcpy(host, cursor, self._draw_us(95, 8), INPUT_BYTES, MEMCPY_H2D, memcpys)
        cursor, api_parts, emission = self._execute(host, iteration, cursor + self._draw_us(4, 1))
        cursor = self._memcpy(host, cursor + self._draw_us(3, 0.5), self._draw_us(35, 4), OUTPUT_BYTES, MEMCPY_D2H,
                              memcpys) + self._draw_us(2, 0.5)
        for api in ("aclmdlDestroyDataset", "aclDestroyDataBuffer") * 2:
            cursor = self._acl(host, api, cursor, cursor + self._draw_us(2, 0.5)) + self._draw_us(1, 0.3)
        post_end = cursor + self._draw_us(1_400, 150)
        tx.append(self._msproftx(2, cursor, post_end, "postprocess"))
        self.now = post_end + self._draw_us(600, 100)
        if self.chip == "cloud" and iteration % FREQ_DIP_EVERY == 0:  # a short dip while the device is idle
            dip = max(post_end, int(self.tb.mono_at(np.array(self.device_free)))) + 50 * US
            back = (dip + 80 * US, aic_mhz(self.chip))
            emission.update(self._freq_points(dip + 100 * US, [(dip, FREQ_DIP_MHZ), back]))
        self.truth.iterations = iteration
        emission[API_EVENT] = rec.merge([host.records(), *api_parts])
        emission[MEMCPY_INFO] = rec.merge(memcpys)
        if not self.legacy:
            emission[MSPROFTX] = rec.merge(tx)
        return self._layout(emission)

    # ---- host helpers ---------------------------------------------------------------------------

    def _draw_us(self, mean_us: float, sd_us: float) -> int:
        """A positive duration in ns (normal, floored at half the mean)."""
        return int(max(mean_us / 2, self.rng.normal(mean_us, sd_us)) * US)

    def _acl(self, host: _HostApis, name: str, begin: int, end: int) -> int:
        host.add(raw.LEVEL_ACL, names.ACL_APIS[name], begin, end)
        self.truth.add_api("acl", name, 1, end - begin)
        return end

    def _runtime(self, host: _HostApis, name: str, begin: int, duration: int, reserve: int) -> int:
        host.add(raw.LEVEL_RUNTIME, names.RUNTIME_APIS[name], begin, begin + duration, reserve)
        self.truth.add_api("runtime", name, 1, duration)
        return begin + duration

    def _memcpy(self, host: _HostApis, begin: int, duration: int, size: int, direction: int,
                memcpys: list[Part]) -> int:
        """aclrtMemcpy ⊃ runtime MemCopySync ⊃ memcpy_info."""
        self._runtime(host, "MemCopySync", begin + 2 * US, duration - 4 * US, 0)
        at = begin + 3 * US
        memcpys.append((np.array([at]), rec.memcpy_infos(self.tid, at, size, direction, self.device_id)))
        return self._acl(host, "aclrtMemcpy", begin, begin + duration)

    def _msproftx(self, event_type: int, start: int, end: int, message: str) -> Part:
        if event_type == 2 and not self.legacy:  # the legacy layout writes no msproftx
            self.truth.add_msproftx(message, end - start)
        return np.array([end], np.int64), rec.msproftx(APP_PID, self.tid, event_type, start, end, message)

    # ---- one model execution --------------------------------------------------------------------

    def _execute(self, host: _HostApis, iteration: int, begin: int) -> tuple[int, list[Part], Emission]:
        """aclmdlExecute at `begin`: its end, its api_event parts, and every other stream's records."""
        if self.mode == "static":
            return self._execute_static(host, iteration, begin)
        ev_begin = begin + self._draw_us(4, 0.5)
        ops = self._launch_ops(ev_begin, iteration)
        start, end = self._schedule(self.tb.ticks_at(ops.track_ts))
        # Host: wait for the device, close the model execution.
        sync_b = int(ops.node_e[-1]) + self._draw_us(1.5, 0.3)
        acl_end, api_parts = self._finish_execute(host, iteration, begin, ev_begin, sync_b, end)
        self.truth.flips += len(ops.flips)
        out = dict(ops.records)
        out.update(self._device_records(iteration, ops.ids, start, end, ops.flips))
        return acl_end, api_parts + ops.api_parts, out

    def _execute_static(self, host: _HostApis, iteration: int, begin: int) -> tuple[int, list[Part], Emission]:
        """The loaded model runs again: one runtime ModelExecute, the device replays the registered tasks."""
        assert self.loaded is not None, "static mode: load_model() first"
        ev_begin = begin + self._draw_us(4, 0.5)
        rt_b = ev_begin + self._draw_us(5, 1)
        rt_end = self._runtime(host, "ModelExecute", rt_b, self._draw_us(16, 2), iteration)
        start, end = self._schedule(np.full(len(self.table), self.tb.ticks_at(rt_end), np.int64))
        sync_b = rt_end + self._draw_us(1.5, 0.3)
        acl_end, api_parts = self._finish_execute(host, iteration, begin, ev_begin, sync_b, end)
        self.truth.flips += len(self.loaded.flips)  # the model's own FLIP tasks run every time
        return acl_end, api_parts, self._device_records(iteration, self.loaded.ids, start, end, self.loaded.flips)

    def _launch_ops(self, after: int, reserve: int) -> Launches:
        """Launch every op once from `after`: Node API ⊃ node_basic_info, tensor_info, runtime API ⊃ task_track."""
        rng, t, n = self.rng, self.table, len(self.table)
        # Host launches: node API [s, s + L] ⊃ runtime API [rt_b, rt_e] ⊃ task_track.
        launch = np.where(t.is_aicpu, rng.normal(28, 4, n), rng.normal(17, 2.5, n))
        length = (np.maximum(launch, 9.0) * US).astype(np.int64)
        gap = rng.integers(400, 1500, n)
        node_b = after + self._draw_us(5, 1) + np.concatenate(([0], np.cumsum(length[:-1] + gap[:-1])))
        node_e = node_b + length
        rt_b = node_b + 2000 + rng.integers(0, 300, n)
        rt_e = node_e - 1200
        track_ts = rt_b + 1
        ids, batches = np.empty(n, np.int64), np.empty(n, np.int64)
        flips: list[tuple[int, int]] = []  # (op index, new batch)
        for stream, alloc in self.task_ids.items():
            idx = np.flatnonzero(t.stream_id == stream)
            ids[idx], batches[idx], flip_at = alloc.allocate(len(idx))
            flips += [(int(idx[k]), int(batches[idx[k]])) for k in flip_at]
        flip_ops = np.array([op for op, _ in flips], np.int64)
        track_ts[flip_ops] += 1  # the flip task's track comes first, at rt_b + 1
        if not self.legacy:  # no node-level API before the current reporter
            self.truth.add_api("node", "launch", n, int(length.sum()))
        for core, api in ((False, "KernelLaunch"), (True, "CpuKernelLaunch")):
            sel = t.is_aicpu == core
            self.truth.add_api("runtime", api, int(sel.sum()), int((rt_e - rt_b)[sel].sum()))
        api_parts = [
            (node_e, rec.apis(n, raw.LEVEL_NODE, names.NODE_LAUNCH_TYPE, self.tid, node_b, node_e, self.op_hash,
                              reserve)),
            (rt_e, rec.apis(n, raw.LEVEL_RUNTIME, self.rt_api_type, self.tid, rt_b, rt_e, 0, reserve)),
        ]
        if self.legacy:
            records = legacy.tasks(legacy.streams(self.device_id), self.tid, track_ts, t.stream_id, ids, batches,
                                   self.rt_task_type, self.ge_task_type, [op.name for op in t.ops], self.op_hash,
                                   [op.op_type for op in t.ops], t.block_dim, MODEL_ID, reserve, self.tensor_rows,
                                   self.tensor_row_op, self.tensor_row_num)
        else:
            records = {
                NODE_BASIC_INFO: rec.merge([(node_b + 600, rec.node_basic_infos(
                    n, self.tid, node_b + 600, self.op_hash, self.ge_task_type, self.type_hash, t.block_dim))]),
                TENSOR_INFO: rec.merge([(node_b[self.tensor_row_op] + 1100, rec.tensor_infos(
                    self.tid, node_b[self.tensor_row_op] + 1100, self.op_hash[self.tensor_row_op],
                    self.tensor_row_num, self.tensor_rows))]),
                TASK_TRACK: self._task_tracks(track_ts, t.stream_id, ids, batches, flips, rt_b),
            }
            if self.ffts_plus.any():
                at = node_b[self.ffts_plus] + 900
                records[CONTEXT_ID_INFO] = rec.merge([(at, rec.context_id_infos(
                    self.tid, at, self.op_hash[self.ffts_plus], t.contexts[self.ffts_plus]))])
        return Launches(node_e, track_ts, ids, batches, flips, api_parts, records)

    def _schedule(self, submitted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Device start/end ticks: each task after its submission (+ latency) and after the previous task."""
        rng, t, n = self.rng, self.table, len(self.table)
        dur = np.maximum(1, np.rint(sample_durations_us(t, rng) * self.tb.hwts_mhz)).astype(np.int64)
        latency = np.where(t.is_aicpu, rng.integers(1500, 4000, n), rng.integers(150, 400, n))
        dev_gap = rng.integers(20, 120, n)
        ready = submitted + latency
        ready[0] = max(ready[0], self.device_free + dev_gap[0])
        offset = np.concatenate(([0], np.cumsum(dur[:-1] + dev_gap[1:])))
        start = np.maximum.accumulate(ready - offset) + offset
        end = start + dur
        self.device_free = int(end[-1])
        self.truth.add_tasks(dur * self.tb.ns_per_tick, counted=~self.ffts_plus)  # FFTS+ tasks count per context
        return start, end

    def _finish_execute(self, host: _HostApis, iteration: int, begin: int, ev_begin: int, sync_b: int,
                        end: np.ndarray) -> tuple[int, list[Part]]:
        """StreamSynchronize until the device is done, the ModelExecute event pair and aclmdlExecute."""
        sync_e = max(sync_b + 3 * US, int(self.tb.mono_at(end[-1])) + self._draw_us(10, 3))
        self._runtime(host, "StreamSynchronize", sync_b, sync_e - sync_b, iteration)
        ev_end = sync_e + self._draw_us(2, 0.3)
        acl_end = self._acl(host, "aclmdlExecute", begin, ev_end + self._draw_us(4, 0.5))
        self.truth.add_api("model", "ModelExecute", 1, ev_end - ev_begin)
        ev_ts = np.array([ev_begin, ev_end])
        return acl_end, [(ev_ts, rec.events(2, raw.LEVEL_MODEL, raw.MODEL_EXECUTE_TYPE, self.tid, iteration, ev_ts,
                                            MODEL_ID))]

    def _task_tracks(self, track_ts: np.ndarray, stream: np.ndarray, ids: np.ndarray, batches: np.ndarray,
                     flips: list[tuple[int, int]], rt_b: np.ndarray) -> rec.Chunk:
        n = len(ids)
        if self.chip == "v6":  # a 32-bit task id: low 16 bits in taskId, high 16 in batchId
            ids, batches = ids & 0xFFFF, ids >> 16
        elif not self.batch_ids:
            batches = np.zeros_like(batches)
        parts = [(track_ts, rec.task_tracks(n, self.tid, track_ts, self.device_id, stream, ids, batches,
                                            self.rt_task_type, self.kernel_hash, self.table.block_dim,
                                            self.args_size))]
        if flips:
            at = np.array([op for op, _ in flips])
            ts = rt_b[at] + 1
            parts.append((ts, rec.task_tracks(len(at), self.tid, ts, self.device_id, stream[at], 0,
                                              np.array([b for _, b in flips]), names.TASK_FLIP, 0, 0, 0)))
        return rec.merge(parts)

    # ---- device records -------------------------------------------------------------------------

    def _pmu(self, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Total cycles and the 8 counters of the metric group of the AI Core tasks (op order)."""
        rng, sel = self.rng, self.aicore
        m = int(sel.sum())
        cycles_per_tick = aic_mhz(self.chip) // self.tb.hwts_mhz
        total = (dur[sel] * cycles_per_tick * self.busy_cores[sel] * rng.uniform(0.86, 0.96, m)).astype(np.int64)
        pipes = self.table.pipe[sel] * rng.uniform(0.95, 1.05, (m, 6))
        if self.chip in STARS_CHIPS:
            pipes[~self.table.is_aiv[sel], 0] = 0.0  # a 910B AI Core (cube core) has no vector pipe
        pmu = np.zeros((m, 8), np.uint64)
        pmu[:, :6] = np.minimum(total[:, None], (pipes * total[:, None]).astype(np.int64))
        req = (total / PMU_CYCLES_PER_ICACHE_REQ * rng.uniform(0.9, 1.1, m)).astype(np.int64)
        pmu[:, 6] = req
        pmu[:, 7] = (req * rng.uniform(0.01, 0.05, m)).astype(np.int64)
        if self.metrics != "PipeUtilization":  # the draws above still happen: the rest of the run is unchanged
            pmu = devextra.group_counters(self.events, total, self.table.pipe[sel], self.group_rng)
        plain = ~self.ffts_plus[sel]  # FFTS+ tasks write one ContextPmu per context (_contexts)
        self.truth.add_pmu(np.flatnonzero(sel)[plain], total[plain], pmu[plain])
        return total, pmu

    def _device_records(self, iteration: int, ids: np.ndarray, start: np.ndarray, end: np.ndarray,
                        flips: list[tuple[int, int]]) -> Emission:
        t, dev = self.table, self.device_id
        mono = self.tb.mono_at
        keypoints = rec.step_traces(2, np.array([start[0] - 1, end[-1] + 1]), iteration, MODEL_ID,
                                    t.stream_id[[0, -1]], ids[[0, -1]], np.array([0, 1]), chip_v6=self.chip == "v6")
        steps = (mono(keypoints["timestamp"].astype(np.int64)), keypoints)
        self.truth.add_iteration(int(end[-1] - start[0] + 2) * self.tb.ns_per_tick)
        if self.chip == "v6":
            return self._v6_records(ids, start, end, steps)
        total, pmu = self._pmu(end - start)
        sel = self.aicore
        task_type = np.where(t.is_aicpu, 1, 0)
        if self.chip == "910b":
            return self._stars_records(ids, start, end, flips, steps, total, pmu)
        if self.chip == "mini":
            return {
                f"ts_track.data.{dev}": rec.merge([
                    steps,
                    (mono(start), rec.mini_timelines(len(ids), task_type, raw.MINI_STATE_RUNNING, t.stream_id, ids,
                                                     start, dev)),
                    (mono(end), rec.mini_timelines(len(ids), task_type, raw.MINI_STATE_COMPLETE, t.stream_id, ids,
                                                   end, dev)),
                ]),
                f"aicore.data.{dev}": rec.merge([(mono(end[sel]), rec.mini_event_counts(
                    t.stream_id[sel], ids[sel], pmu, total, end[sel], t.block_dim[sel]))]),
            }
        # HWTS chips: start/end log, AI Core PMU, ts_track step trace + flips; rolling counters in file order.
        ticks = np.concatenate((start, end))
        order = np.argsort(ticks, kind="stable")
        kind = np.repeat([raw.HWTS_TASK_START, raw.HWTS_TASK_END], len(ids))[order]
        both = np.concatenate((np.arange(len(ids)), np.arange(len(ids))))[order]
        hwts = rec.hwts_logs(kind, task_type[both], t.stream_id[both], ids[both], ticks[order],
                             rec.rolling_cnt(self.hwts_cnt, len(order)))
        self.hwts_cnt = (self.hwts_cnt + len(order)) % 16
        m = int(sel.sum())
        aic = rec.aicore_pmus(t.stream_id[sel], ids[sel], total, pmu, rec.rolling_cnt(self.aic_cnt, m))
        self.aic_cnt = (self.aic_cnt + m) % 16
        track = [steps]
        if flips:
            at = np.array([op for op, _ in flips])
            flip_ticks = start[at] - 1
            track.append((mono(flip_ticks), rec.task_flips(len(at), flip_ticks, t.stream_id[at],
                                                           np.array([b for _, b in flips]))))
        cpu = t.is_aicpu
        aicpu = devextra.aicpu_records(t.stream_id[cpu], ids[cpu], start[cpu], end[cpu], dev, self.extra_rng)
        self.truth.add_aicpu(np.flatnonzero(cpu), devextra.aicpu_truth_ns(aicpu, self.tb.ns_per_tick))
        l2 = devextra.l2_cache_records(t.stream_id[sel], ids[sel], total, self.table.pipe[sel], self.extra_rng)
        self.truth.add_l2(np.flatnonzero(sel), l2["events"][:, :3])
        return {
            f"hwts.data.{dev}": rec.merge([(mono(ticks[order]), hwts)]),
            f"aicore.data.{dev}": rec.merge([(mono(end[sel]), aic)]),
            f"ts_track.data.{dev}": rec.merge(track),
            f"aicpu.data.{dev}": rec.merge([(mono(aicpu["run_end_tick"].astype(np.int64)), aicpu)]),
            f"l2_cache.data.{dev}": rec.merge([(mono(end[sel]), l2)]),
        }

    def _ts_track(self, steps: Part, start: np.ndarray, flips: list[tuple[int, int]]) -> rec.Chunk:
        """ts_track.data of the 910B: step trace keypoints and a tag-14 flip before each wrapped task."""
        track = [steps]
        if flips:
            at = np.array([op for op, _ in flips])
            flip_ticks = start[at] - 1
            track.append((self.tb.mono_at(flip_ticks), rec.task_flips(len(at), flip_ticks, self.table.stream_id[at],
                                                                      np.array([b for _, b in flips]))))
        return rec.merge(track)

    def _stars_records(self, ids: np.ndarray, start: np.ndarray, end: np.ndarray, flips: list[tuple[int, int]],
                       steps: Part, total: np.ndarray, pmu: np.ndarray) -> Emission:
        """910B: ACSQ start/end logs, a ContextPmu per AI Core / AI Vector Core task or per context of an FFTS+
        task (whose subtask logs fall between its ACSQ logs), ts_track steps and flips. Rolling counters go in
        file order."""
        t, dev, mono = self.table, self.device_id, self.tb.mono_at
        n = len(ids)
        sqe = np.select([t.is_aicpu, t.is_aiv], [raw.SQE_AI_CPU, raw.SQE_AI_VECTOR_CORE], raw.SQE_AI_CORE)
        both = np.concatenate((np.arange(n), np.arange(n)))
        ticks = np.concatenate((start, end))
        func = np.repeat([raw.ACSQ_START, raw.ACSQ_END], n)
        soc = [(mono(ticks), rec.acsq_logs(func, sqe[both], t.stream_id[both], ids[both], ticks,
                                           np.zeros(2 * n, np.uint16)))]
        plain = self.aicore & ~self.ffts_plus
        rows = ~self.ffts_plus[self.aicore]  # the plain tasks' rows of `total` / `pmu` (AI Core and Vector ops)
        ffts_type = np.where(t.is_aiv[plain], raw.FFTS_TYPE_AIV, raw.FFTS_TYPE_AIC)
        pmus = [(mono(end[plain]), rec.context_pmus(ffts_type, t.stream_id[plain], ids[plain], total[rows], pmu[rows],
                                                    start[plain], end[plain], np.zeros(int(plain.sum()), np.uint16)))]
        if self.ffts_plus.any():
            ctx = self._contexts(start, end, total, pmu)
            stream, task, m = t.stream_id[ctx.op], ids[ctx.op], len(ctx.op)
            for func_type, at in ((raw.FFTS_LOG_START, ctx.start), (raw.FFTS_LOG_END, ctx.end)):
                soc.append((mono(at), rec.ffts_plus_logs(func_type, stream, task, raw.SUBTASK_MIX_AIC, ctx.context, at,
                                                         np.zeros(m, np.uint16))))
            pmus.append((mono(ctx.end), rec.context_pmus(raw.FFTS_TYPE_PLUS, stream, task, ctx.total, ctx.pmu,
                                                         ctx.start, ctx.end, np.zeros(m, np.uint16),
                                                         raw.SUBTASK_MIX_AIC, ctx.context)))
        stars_soc, ffts_profile = rec.merge(soc), rec.merge(pmus)
        stars_soc = rec.with_stars_cnt(stars_soc, self.hwts_cnt, raw.ACSQ_LOG.itemsize)
        ffts_profile = rec.with_stars_cnt(ffts_profile, self.aic_cnt, raw.FFTS_PMU.itemsize)
        self.hwts_cnt = (self.hwts_cnt + stars_soc.count) % 16
        self.aic_cnt = (self.aic_cnt + ffts_profile.count) % 16
        return {
            f"stars_soc.data.{dev}": stars_soc,
            f"ffts_profile.data.{dev}": ffts_profile,
            f"ts_track.data.{dev}": self._ts_track(steps, start, flips),
        }

    def _contexts(self, start: np.ndarray, end: np.ndarray, total: np.ndarray, pmu: np.ndarray) -> Contexts:
        """Split each FFTS+ task's run into its contexts: consecutive, 1 tick apart, inside the task's ACSQ
        span, lengths drawn around equal shares; the task's cycles and counters are shared by length, so its
        contexts sum to it exactly."""
        ops = np.flatnonzero(self.ffts_plus)
        counts = self.table.contexts[ops]
        op = np.repeat(ops, counts)
        context = np.concatenate([np.arange(k) for k in counts])
        first = np.cumsum(counts) - counts  # flat index of each op's first context

        def share_so_far(values: np.ndarray) -> np.ndarray:
            """Σ values up to and including each context, over the op's Σ values."""
            running = np.cumsum(values, dtype=np.float64)
            before = np.repeat(running[first] - values[first], counts)
            return (running - before) / np.repeat(np.add.reduceat(values, first), counts)

        def previous(values: np.ndarray) -> np.ndarray:
            """The previous context's value (0 for an op's first context)."""
            shifted = np.concatenate((np.zeros((1, *values.shape[1:]), values.dtype), values[:-1]))
            return np.where((context == 0).reshape(-1, *([1] * (values.ndim - 1))), 0, shifted)

        upper = share_so_far(self.ffts_rng.uniform(0.7, 1.3, len(op)))
        upper[context == np.repeat(counts - 1, counts)] = 1.0
        inner, length = start[op] + 1, end[op] - start[op] - 2
        c_end = inner + np.floor(upper * length).astype(np.int64)
        c_start = np.where(context == 0, inner, previous(c_end) + 1)
        assert (c_end > c_start).all(), "an FFTS+ task too short for its contexts"
        duration = c_end - c_start
        fraction = share_so_far(duration)
        row = (np.cumsum(self.aicore) - 1)[op]  # the op's row of `total` / `pmu`
        cycles_so_far = np.floor(total[row] * fraction).astype(np.int64)
        counters_so_far = np.floor(pmu[row].astype(np.float64) * fraction[:, None]).astype(np.int64)
        c_total, c_pmu = cycles_so_far - previous(cycles_so_far), counters_so_far - previous(counters_so_far)
        self.truth.add_contexts(op, duration * self.tb.ns_per_tick)
        self.truth.add_pmu(op, c_total, c_pmu)
        return Contexts(op, context, c_start, c_end, c_total, c_pmu.astype(np.uint64))

    def _v6_records(self, ids: np.ndarray, start: np.ndarray, end: np.ndarray, steps: Part) -> Emission:
        """Chip v6: 32-byte ACSQ start/end logs naming each task by its 32-bit id, and ts_track step traces."""
        t, dev, mono = self.table, self.device_id, self.tb.mono_at
        n = len(ids)
        sqe = np.select([t.is_aicpu, t.is_aiv], [raw.SQE_V6_AI_CPU, raw.SQE_V6_AI_VECTOR_CORE], raw.SQE_V6_AI_CORE)
        both = np.concatenate((np.arange(n), np.arange(n)))
        ticks = np.concatenate((start, end))
        order = np.argsort(ticks, kind="stable")
        func = np.repeat([raw.ACSQ_START, raw.ACSQ_END], n)[order]
        acsq = rec.acsq_logs_v6(func, sqe[both[order]], ids[both[order]], ticks[order],
                                rec.stars_cnt(self.hwts_cnt, len(order)))
        self.hwts_cnt = (self.hwts_cnt + len(order)) % 16
        return {f"stars_soc.data.{dev}": rec.merge([(mono(ticks[order]), acsq)]),
                f"ts_track.data.{dev}": rec.merge([steps])}
