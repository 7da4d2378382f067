"""The aggregator: joins host and device records into enriched tasks, keeps live statistics.

Out ``tasks``: run_info, api, tx, task, step_trace, aicpu and l2_cache rows (stages/schema.py). Out
``stats``: full op_statistic / api_statistic snapshots every ``snapshot_every_s`` and a final one.
"""

from __future__ import annotations

import gc
import operator
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np
from pydantic import Field

from pipeline.stage import Batch, StageConfig, Transform
from stages import schema
from stages.aggregator import legacy
from stages.aggregator.apis import ApiChunk, ApiResolver, StatKey
from stages.aggregator.columns import ColumnRows
from stages.aggregator.contexts import (
    CONTEXT_TASK_TYPES,
    FFTS_LAUNCH_TYPES,
    INVALID_CONTEXT,
    ContextSpans,
    context_ids,
)
from stages.aggregator.extras import (
    AICPU_COLUMNS,
    FREQ_PLATFORMS,
    L2_COLUMNS,
    DeviceExtras,
    extra_columns,
    l2_configured,
)
from stages.aggregator.join import FlipLog, HostBatches, HostIndex, Interval, TimedLog
from stages.aggregator.logs import UNRESOLVED_STREAM, DeviceRows, PendingDevice, pair_logs
from stages.aggregator.metrics import pmu_columns
from stages.aggregator.partition import PartitionRole
from stages.aggregator.pmu_batch import pmu_batch
from stages.aggregator.queues import put, take
from stages.aggregator.stars import StarsPmu, is_stars
from stages.aggregator.static import Binding, StaticModels
from stages.aggregator.stats import StatsBook
from stages.aggregator.steps import StepTraceBook
from stages.aggregator.subscribed import SubscribedOps
from stages.aggregator.task_rows import (
    PmuRef,
    PmuWork,
    TaskBlock,
    TaskRowStore,
    fill_blocks,
    record_counts,
    record_rows,
)
from stages.aggregator.tracks import HostQueue, TrackChunk, TrackLookups, look_up
from stages.decoder import records
from stages.formats import ge_enums, raw
from stages.schema import pack_rows, unpack_rows
from stages.subscription import records as subscribed_records
from stages.tables import SCHEMAS, pack_columns, pack_table, table_of_rows

# Waits (see _give_up): a record waiting for a join partner is given up only when the stream that would carry the
# partner has moved past it (its watermark, or its order), at the end of the job, or when more than MAX_PENDING
# records wait in its queue (counted in accounting()["joins_given_up"]); never after some wall time alone, so a live
# run on a starved machine gives the outputs of an import of its directory.
MAX_PENDING = 200_000
# Allocations between young collections in the aggregator's process (every stage gets pipeline.heap's 50 000): most
# of a joined task's containers die within this many, so fewer of them are ever scanned (a 1 M-record import:
# collector CPU 0.18 → 0.05 s).
YOUNG_COLLECTION_EVERY = 200_000
LEGACY_DESC_LAG_NS = 1_000_000_000  # data time: how far GE's task stream passes a legacy track before "no desc"
# data time: how far the host's task_track stream passes a task before a describing kind (tensor_info …) none of whose
# streams has arrived counts as absent (see _low_mark)
UNSEEN_STREAM_LAG_NS = 1_000_000_000
PMU_LOOKAHEAD = 4096  # joined tasks looked at for a later one whose PMU / L2 record is in (see _pmu_passed)
API_MARK_LEVELS = (raw.LEVEL_NODE, raw.LEVEL_MODEL, raw.LEVEL_ACL)  # levels that end after a Node API they hold
PRUNE_EVERY_S = 0.5
TAKEN_PER_BLOCK = 16_384  # joined tasks taken before their rows become a block (else: at the next flush)
TEXT_IDS_LIMIT = 65_536  # distinct text combinations of task rows remembered with their symbol ids
# Decoded kinds this release keeps out of its outputs: counted (AggregatorStage.accounting) with the reason the
# report gives, never rejected.
UNUSED_KINDS = {
    "ts_memcpy": "ts_track TS memcpy records (tag 11, not in this release's outputs)",
    "ts_task_type": "ts_track task type records (tag 12, not in this release's outputs)",
    "ts_block_num": "ts_track block num records (tag 15, not in this release's outputs)",
    "ts_flip_old": "ts_track old-format task flips (tag 13; batch ids come from tag 14, as in msprof)",
    "block_pmu": "STARS block PMU records (MIX ops' slave core; not in this release's outputs)",
    "node_attr": "node_attr_info records (op attributes)",
    "memcpy": "memcpy_info records (memcpy sizes and directions)",
    "hccl_op": "hccl_op_info records (communication ops)",
    "capture_stream": "capture_stream_info records (stream capture)",
    "graph_id_map": "graph_id_map records (graph ↔ model ids)",
    "fusion_op": "fusion_op_info records (fused ops)",
    "hccl_info": "hccl_info records (communication tasks)",
    "multi_thread": "Multi_Thread records (op threads)",
    "ge_id_map": "legacy Framework.id_map_info records (graph ↔ model ids)",
    "ge_model_load": "legacy Framework.model_load_info records (model loads)",
    "ge_fusion": "legacy Framework.fusion_op_info records (fused ops)",
    "ge_model_time": "legacy Framework.model_time_info records (inference phases)",
    "ge_host_sched": "legacy Framework.dynamic_op_execute records (host scheduling)",
}
MODEL_WINDOW_TYPES = (raw.MODEL_EXECUTE_TYPE, raw.MODEL_LOAD_TYPE)
PMU_TASK_TYPES = frozenset({"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"})
ROW_KINDS = ("api", "tx", "task", "step_trace", "aicpu", "l2_cache", "aicore_freq")  # batches of ``tasks``, in order
LIST_ROW_KINDS = ROW_KINDS[1:]  # held as row lists (API rows: as columns)
FFTS_TASK_SPAN = "FFTS+ task spans (their contexts make the rows, as in msprof)"
PMU_AT = schema.TASK_COLUMNS.index("pmu")
CONTEXT_AT = schema.TASK_COLUMNS.index("context_id")
TEXT_AT = tuple(schema.TASK_COLUMNS.index(name) for name in (  # a row's texts (_row_texts), where they go
    "op_name", "op_type", "task_type", "op_state", "input_shapes", "input_dtypes", "input_formats", "output_shapes",
    "output_dtypes", "output_formats", "kernel_name", "runtime_task_type", "hf32_eligible"))
DEVICE_FIELDS = ("device", "stream", "task", "batch", "start", "end")  # a row's device task …
TIMED_AT = tuple(schema.TASK_COLUMNS.index(name) for name in (
    "device_id", "stream_id", "task_id", "batch_id", "start_ns", "end_ns"))
INFO_FIELDS = ("model_id", "iteration", "block_dim", "mix_block_dim", "connection_id", "thread_id")
DESCRIBED_AT = tuple(schema.TASK_COLUMNS.index(name) for name in (  # … and its description's numbers
    "model_id", "iteration", "block_dim", "mix_block_dim", "connection_id", "thread_id"))
OP_STATES = {0: "static", 1: "dynamic"}  # node_basic_info op_state
NO_FLIPS_MARK = np.iinfo(np.int64).max  # the flip watermark of a device that writes no flips (the 310)
STREAM_BITS = 0xFFFFFFFF  # a (device, stream) code's stream part (_stream_codes)


@dataclass(slots=True)
class DeviceTask:
    device: int
    stream: int
    task: int
    batch: int
    start: int
    end: int


@dataclass(frozen=True)
class DeviceFlags:
    v6: bool  # chip v6: 32-bit task ids
    pmu: bool  # AI Core / AI Vector PMU events collected (sample.json): PMU records to join
    l2: bool  # L2 cache task counters to join
    aicpu: bool  # AI CPU kernel times to join


class PmuJobs:
    """Task rows whose AI Core PMU values are still to be computed, a batch at a time (pmu_batch.py), as columns:
    each row's device, PMU record (its chunk and row there), block dim (used where the record's block is 0),
    duration, clock (NaN: info.json's), AI CPU / L2 cache values, and the row itself."""

    def __init__(self) -> None:
        self.devices: list[int] = []
        self.records: list[tuple[np.ndarray, int]] = []
        self.block_dims: list[int] = []
        self.durations: list[int] = []
        self.clocks: list[float] = []
        self.extras: list[list[float | None]] = []
        self.rows: list[list[Any]] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, device: int, record: tuple[np.ndarray, int], block_dim: int, duration: int, clock: float | None,
            extra: list[float | None], row: list[Any]) -> None:
        self.devices.append(device)
        self.records.append(record)
        self.block_dims.append(block_dim)
        self.durations.append(duration)
        self.clocks.append(np.nan if clock is None else clock)
        self.extras.append(extra)
        self.rows.append(row)

    def by_device(self) -> Iterator[tuple[int, PmuJobs]]:
        """The jobs of each device, in order."""
        if self.devices.count(self.devices[0]) == len(self.devices):
            yield self.devices[0], self
            return
        positions: dict[int, list[int]] = {}
        for at, device in enumerate(self.devices):
            positions.setdefault(device, []).append(at)
        for device, chosen in positions.items():
            part = PmuJobs()
            for name, values in vars(self).items():
                setattr(part, name, [values[at] for at in chosen])
            yield device, part


@dataclass
class TakenTasks:
    """Joined tasks taken off awaiting_pmu with their records, whose rows go into the next block
    (AggregatorStage._build_block): each task's PMU record, L2 cache and AI CPU values (None: none taken), its
    texts' symbol ids (a window's at a time), and the devices' facts they were taken under."""

    tasks: list[tuple[HostTask, DeviceTask, int | None]] = field(default_factory=list)
    records: list[PmuRef | None] = field(default_factory=list)
    l2_values: list[list[float | None] | None] = field(default_factory=list)
    aicpu_values: list[list[float | None] | None] = field(default_factory=list)
    symbols: list[np.ndarray] = field(default_factory=list)
    clocks: dict[int, float | None] = field(default_factory=dict)  # place → clock of a task with STARS PMU values
    layouts: dict[int, tuple[DeviceFlags, PmuLayout]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(frozen=True)
class PmuLayout:
    """A device's PMU facts as task rows use them (AggregatorStage._pmu_layout)."""

    events: list[int]
    platform: int
    stars: StarsPmu | None  # the aic_/aiv_ layout of a STARS chip
    width: int  # PMU values of a row without a PMU record (non-STARS chips)


@dataclass(slots=True)
class HostTask:
    # a task_track as a dict (see _dicts), or a legacy RT_TRACK record; None: a launched task's (never read)
    record: Any
    resolved: dict[str, Any] | None = None
    legacy: bool = False


class AggregatorStage(Transform):
    outputs = ("tasks", "stats")
    snapshot_in_child = True  # its state is all in memory: checkpoints are pickled by a forked child
    partitionable = partition_fan_in = True  # host-only outputs come from partition 0 (partition.py)

    class Config(StageConfig):
        snapshot_every_s: float = Field(1.0, gt=0, description="seconds between statistics snapshots")
        max_batch_rows: int | None = Field(None, ge=1, description="rows per message (default: run.batch)")

    def __init__(self, config: Any, ctx: Any) -> None:
        super().__init__(config, ctx)
        _collect_young_rarely()  # the join holds many small containers
        self.part = PartitionRole(ctx)  # its devices' tasks; host-only rows from partition 0 (partition.py)
        self.symbols = self.part.symbol_table()
        self.hashes: dict[int, str] = {}
        self.types: dict[tuple[int, int], str] = {}
        self.devices: dict[int, dict[str, Any]] = {}
        self.session: dict[str, Any] = {}  # the decoder's session_info facts (pid, host, start/end)
        self.host = HostIndex()
        self.legacy = legacy.LegacyIndex()
        self.flips = FlipLog()  # the devices' tag-14 flips
        self.host_batches = HostBatches()  # the host's FLIP_TASK task_tracks
        self.static = StaticModels()
        self.log_streams: set[str] = set()  # streams that carry task start/end logs
        self.watermarks: dict[str, int] = {}
        self.api_marks: dict[int, int] = {}  # thread → latest end of its API records at API_MARK_LEVELS
        self.connection_ids = 0
        self.pending_apis: deque[ApiChunk] = deque()
        self.pending_api_records = 0
        self.gave_up: Counter[str] = Counter()  # waits given up before their partner's stream passed them, by reason
        # rows the join handled one at a time (the exact per-task code), by why: the rest go a window at a time
        self.slow_path: Counter[str] = Counter()
        self.pending_host = HostQueue()
        self.text_rows: dict[bytes, tuple[str, ...]] = {}  # a task description's inputs (_window_texts) → its texts
        self.text_rows_of = (-1, -1)  # (hash_dic, type_info) sizes text_rows holds for
        self.pending_device = PendingDevice()  # device tasks waiting for their flips, as columns
        self.starts: dict[tuple[int, int, int], deque[int]] = {}
        self.pmu: dict[tuple[int, int, int, int], deque[Any]] = {}  # (device, stream, task, context)
        self.host_ready: dict[tuple[int, int, int, int], deque[HostTask]] = {}
        self.device_ready: dict[tuple[int, int, int, int], deque[DeviceTask]] = {}
        # a joined task (or one FFTS+ context of it) and its context id (None: an FFTS+ task whose contexts left
        # no logs; it stands for them, without PMU), waiting for its PMU / AI CPU / L2 records
        self.awaiting_pmu: deque[tuple[HostTask, DeviceTask, int | None]] = deque()
        self.contexts = ContextSpans()
        # chip v6: the stream of a 32-bit task id, from host task_tracks (launched: used once; registered: kept)
        self.launched_streams: dict[tuple[int, int], int] = {}
        self.parked: dict[tuple[int, int], deque[DeviceTask]] = {}  # chip v6: (device, task id) → tasks, no stream
        self.devices_held = 0  # device tasks waiting for a host task, as of the last _prune
        self.parked_named: set[tuple[int, int]] = set()  # parked ids a host task has named since
        self.not_passed: tuple[int, int, bool, int, int] | None = None  # the last _passed that found nothing
        self.registered_streams: dict[tuple[int, int], int] = {}
        self.rows: dict[str, list[list[Any]]] = {kind: [] for kind in LIST_ROW_KINDS if kind != "task"}
        self.task_rows = TaskRowStore()
        self.taken = TakenTasks()  # joined tasks whose rows go into the next block
        self.api_rows = ColumnRows(len(schema.API_COLUMNS))
        self.pmu_jobs = PmuJobs()  # task rows whose PMU values are still to be computed
        self.stats = StatsBook()
        self.last_snapshot = 0.0
        self.last_prune = float("-inf")
        self.records_at_prune = -1
        self.records_in = 0
        self.tasks_out = 0
        self.finishing = False
        self.unused: Counter[str] = Counter()  # decoded records this release does not turn into output
        self.extras = DeviceExtras(self.unused)
        self.stars_pmu: dict[int, StarsPmu] = {}
        self.flags: dict[int, DeviceFlags] = {}  # device → what its facts switch on (until its next device_info)
        self.steps = StepTraceBook()
        self.subscribed = SubscribedOps()  # operator records of a subscription source
        self.pmu_layouts: dict[int, PmuLayout] = {}
        # a task row's texts → their place in text_symbols (their symbol ids) and in text_array (the same, as rows)
        self.text_ids: dict[tuple[str, ...], int] = {}
        self.text_symbols: list[tuple[int, ...]] = []
        self.text_array = np.zeros((0, len(TEXT_AT)), np.int64)
        self.text_name_codes: list[int] = []  # the statistics' code of their op type and core type (name_code)
        self.text_names = np.zeros(0, np.int64)
        self.texts_forgotten = False
        self.api_names = ApiResolver(self.symbols.intern)

    # -- intake ---------------------------------------------------------------------------
    def process(self, batch: Batch) -> Iterable[Batch]:
        self.records_in += batch.count
        now = self.clock()  # stands still while the pipeline is held up or down: a pause expires no join
        kind = batch.kind
        if kind == "device_info":
            facts = batch.meta["facts"]
            device = int(facts["device"])
            self.devices[device] = facts
            self.flags.pop(device, None)  # worked out again from the new facts
            self.pmu_layouts.pop(device, None)
            return [self._run_info()]
        if kind == "session_info":
            self.session = dict(batch.meta["facts"])
            return [self._run_info()]
        if kind == "hash":
            self.hashes.update((int(h), text) for h, text in unpack_rows(batch))
        elif kind == "type_info":
            self.types.update(((int(level), int(t)), name) for level, t, name in unpack_rows(batch))
        elif kind == subscribed_records.KIND:
            self.subscribed.add(batch, self.stats, self.part.own_subscribed)
        elif kind in records.DTYPES:
            self._ingest(kind, records.from_batch(batch), str(batch.meta.get("stream")), batch.meta.get("device"))
        else:
            self.ctx.reject(f"unexpected record kind '{kind}'", batch.count)
        if not batch.meta.get("chunk_end", True):
            return ()  # the rest of this raw chunk follows: resolve once it is all in
        return list(self._advance(now))

    def _ingest(self, kind: str, arr: np.ndarray, stream: str, device: Any = None) -> None:
        """``device``: the batch's (None: the host's, which every partition gets; see PartitionRole.sends_host_rows)."""
        if len(arr) and "ts_ns" in (arr.dtype.names or ()):
            self.watermarks[stream] = max(self.watermarks.get(stream, 0), int(arr["ts_ns"].max()))
        if kind in ("api", "named_api"):  # named_api: a legacy API record, name inline
            chunk = ApiChunk.of(arr, self.connection_ids + 1)
            self.connection_ids += len(arr)
            nodes = np.flatnonzero(arr["level"] == raw.LEVEL_NODE)
            self.host.add_node_apis(chunk.threads[nodes], chunk.starts[nodes], chunk.ends[nodes], chunk.items[nodes],
                                    nodes + chunk.first_connection)
            if len(arr):  # marks in every partition: a host task without a Node API waits for them
                outer = np.isin(arr["level"], API_MARK_LEVELS)
                _raise_marks(self.api_marks, arr["thread_id"][outer], arr["end_ns"][outer])
            if len(arr) and self.part.sends_host_rows(kind, len(arr), device):
                self.pending_apis.append(chunk)
                self.pending_api_records += len(arr)
        elif kind == "event":
            for record in arr[(arr["level"] == raw.LEVEL_MODEL) & np.isin(arr["type"], MODEL_WINDOW_TYPES)]:
                model, request, ts = int(record["item_id"]), int(record["request_id"]), int(record["ts_ns"])
                self.host.add_model_event(int(record["thread_id"]), ts, model, request)
                if int(record["type"]) == raw.MODEL_EXECUTE_TYPE:
                    self.static.host_runs.toggle(model, ts, request)
        elif kind == "node_basic":
            self.host.add_node_basics(arr)
        elif kind == "tensor" and len(arr):
            codes, firsts = _distinct_tensor_records(arr)
            self.host.add_tensors(arr, codes, _tensor_keys(arr[firsts]))
        elif kind == "context_id":
            self.host.add_contexts(arr)
        elif kind == "task_track":
            self.pending_host.add(self.part.own_devices(arr))
        elif kind == "rt_track":
            self.pending_host.add(self.part.own_devices(arr), legacy=True)
        elif kind == "ge_task":
            self.legacy.add_tasks(arr)
        elif kind == "ge_tensor":
            self.legacy.add_tensors(arr)
        elif kind == "tx" and self.part.sends_host_rows(kind, len(arr), device):
            self._tx_rows(arr)
        elif kind in ("task_log", "unique_task_log"):
            self.log_streams.add(stream)
            self._pair_logs(arr)
        elif kind == "subtask_log":
            self.contexts.add(arr)
        elif kind in ("pmu", "context_pmu"):
            self._queue_pmu(arr)
        elif kind == "step":
            self.static.add_step_trace(arr)
            self.rows["step_trace"].extend(self.steps.add(arr))
        elif kind in UNUSED_KINDS:
            self.unused[UNUSED_KINDS[kind]] += len(arr)
        elif kind == "aicpu":
            self.extras.add_aicpu(arr)
        elif kind == "l2_cache":
            self.extras.add_l2(arr, self.devices)
        elif kind == "freq":
            self.extras.add_freq(arr, {d: int(f.get("platform", 1)) for d, f in self.devices.items()})
            self._freq_rows(arr)
        elif kind == "flip":
            self._add_flips(arr)

    def _add_flips(self, arr: np.ndarray) -> None:
        """Tag-14 flips into the FlipLog, a (device, stream) at a time, each in arrival order."""
        if not len(arr):
            return
        codes = _stream_codes(arr["device_id"], arr["stream_id"])
        order = np.argsort(codes, kind="stable")
        found, firsts, counts = np.unique(codes[order], return_index=True, return_counts=True)
        times, numbers = arr["ts_ns"][order].tolist(), arr["flip_num"][order].tolist()
        for code, first, count in sorted(zip(found.tolist(), firsts.tolist(), counts.tolist(), strict=True),
                                         key=lambda group: int(order[group[1]])):  # in order of their first flip
            log = self.flips.flips.setdefault((code >> 32, code & STREAM_BITS), TimedLog())
            log.add_many(times[first:first + count], numbers[first:first + count])

    def _queue_pmu(self, arr: np.ndarray) -> None:
        """PMU records queued by (device, stream, task, context) as references into their chunk: the values stay in
        its columns until a batch of task rows takes them (_fill_pmu)."""
        pmu = self.pmu
        contexts = arr["context_id"].tolist() if "context_id" in (arr.dtype.names or ()) \
            else [INVALID_CONTEXT] * len(arr)
        keys = zip(arr["device_id"].tolist(), arr["stream_id"].tolist(), arr["task_id"].tolist(), contexts,
                   strict=True)
        for key, index in zip(keys, range(len(arr)), strict=True):
            found = pmu.get(key)
            if found is None:
                pmu[key] = deque(((arr, index),))
            else:
                found.append((arr, index))

    def _pair_logs(self, arr: np.ndarray) -> None:
        """Start/end logs → device tasks (logs.py); chip-v6 logs (unique task ids) get their stream at join time."""
        if "unique_task_id" in (arr.dtype.names or ()):
            streams, tasks = np.full(len(arr), UNRESOLVED_STREAM, np.int64), arr["unique_task_id"]
        else:
            streams, tasks = arr["stream_id"], arr["task_id"]
        paired = pair_logs(arr["device_id"], streams, tasks, arr["state"], arr["ts_ns"], self.starts)
        self.pending_device.add(paired.rows)
        if paired.one_by_one:
            self.slow_path["task logs paired one at a time (a start from an earlier chunk, or out of turn)"] += \
                paired.one_by_one
        if paired.unpaired_ends:
            self.ctx.reject("task end log without a start", paired.unpaired_ends)
        if paired.other_states:
            self.unused["task log states other than start/end (310 AI Core start/done, waiting)"] += \
                paired.other_states

    def _tx_rows(self, arr: np.ndarray) -> None:
        """msproftx rows; the message goes as text, not a symbol: messages often number what they mark ("frame
        27355"), and every stage would keep each such symbol for the rest of the run."""
        for r in arr:
            message = bytes(r["message"]).split(b"\0", 1)[0].decode("utf-8", errors="replace")
            self.rows["tx"].append([int(r["start_ns"]), int(r["end_ns"]), int(r["process_id"]),
                                    int(r["tx_thread_id"]), int(r["category"]), int(r["event_type"]),
                                    int(r["payload_type"]), int(r["payload"]), int(r["message_type"]),
                                    message, int(r["domain"]), int(r["mark_id"])])

    def _freq_rows(self, arr: np.ndarray) -> None:
        """AI Core frequency change points for the sinks (msprof's AICORE_FREQ), where msprof exports them."""
        for record in arr:
            device = int(record["device_id"])
            if int(self.devices.get(device, {}).get("platform", -1)) in schema.AICORE_FREQ_PLATFORMS:
                count = int(record["count"])
                for at, mhz in zip(record["points_ns"][:count].tolist(), record["freq_mhz"][:count].tolist(),
                                   strict=True):
                    self.rows["aicore_freq"].append([device, int(at), int(mhz)])

    # -- resolution -------------------------------------------------------------------------
    def _give_up(self, waiting: int) -> bool:
        """Whether the oldest record of a queue stops waiting for a partner whose stream has not passed it: at the end
        of the job, or when more than MAX_PENDING records wait in that queue (see _gave_up)."""
        return self.finishing or waiting > MAX_PENDING

    def _gave_up(self, queue: str) -> None:
        """A record went on without a partner whose stream had not passed it: counted, unless the job ended."""
        if not self.finishing:
            self.gave_up[f"{queue} given up: more than {MAX_PENDING:,} records waiting"] += 1

    def _advance(self, now: float) -> Iterator[Batch]:
        self._resolve_apis()
        self._resolve_host()
        self._resolve_device()
        self._resolve_pmu()
        self._take_extra_rows()
        yield from self._flush_rows(force=False)
        yield from self._snapshot_due(now)

    def _snapshot_due(self, now: float) -> Iterator[Batch]:
        """A statistics snapshot right after the rows it counts, every ``snapshot_every_s`` at most: once one is due,
        the rows waiting for the next flush go at once, then the snapshot (it does not wait for the flush timer)."""
        if self.stats.changed and now - self.last_snapshot >= self.config.snapshot_every_s:
            self.last_snapshot = now
            yield from self._flush_rows(force=True)
            yield from self._snapshot(final=False)

    def _take_extra_rows(self) -> None:
        """The aicpu and l2_cache rows the joins produced, names interned (schema.AICPU_COLUMNS, L2_CACHE_COLUMNS)."""
        aicpu, l2 = self.extras.rows["aicpu"], self.extras.rows["l2_cache"]
        for row in aicpu:
            row[2] = self.symbols.intern(row[2])
        for row in l2:
            row[5] = self.symbols.intern(row[5])
        self.rows["aicpu"].extend(aicpu)
        self.rows["l2_cache"].extend(l2)
        aicpu.clear()
        l2.clear()

    def _resolve_apis(self) -> None:
        """API rows in arrival order, each once its name is known (or its wait ran out); statistics per batch."""
        durations: dict[StatKey, list[int]] = {}
        while self.pending_apis:
            chunk = self.pending_apis[0]
            before = chunk.cursor
            columns, unnamed = self.api_names.resolve(chunk, self.types, self.hashes, durations,
                                                      expired=self._give_up(self.pending_api_records))
            self.api_rows.add(columns)
            for _ in range(unnamed):
                self._gave_up("API record waiting for its name")
            self.pending_api_records -= chunk.cursor - before
            if chunk.cursor < len(chunk):
                break
            self.pending_apis.popleft()
        for (level_name, name), spans in durations.items():
            self.stats.add_apis(level_name, name, spans)

    def _resolve_host(self) -> None:
        """Host task_tracks in order, each once everything that describes it is in (_host_context_complete) or
        the wait is given up; a window of a chunk at a time (_resolve_tracks), legacy tracks one at a time."""
        unseen = self._low_mark("compact.task_track") - UNSEEN_STREAM_LAG_NS
        lows = (self._low_mark("tensor_info", unseen), self._low_mark("context_id_info", unseen),
                self._low_mark("node_basic_info", unseen))
        queue = self.pending_host
        while queue.chunks:
            chunk = queue.chunks[0]
            if not (self._resolve_legacy(chunk) if chunk.legacy else self._resolve_tracks(chunk, *lows)):
                return

    def _resolve_legacy(self, chunk: TrackChunk) -> bool:
        """Legacy runtime tracks, one at a time (GE describes each by its ids); False: the first waits."""
        while chunk.at < len(chunk.rows):
            record = chunk.rows[chunk.at]
            context = self.legacy.context(record, self.hashes, self.finishing, LEGACY_DESC_LAG_NS)
            if context is None:
                if not self._give_up(self._host_held()):
                    return False
                context = self.legacy.context(record, self.hashes, True, LEGACY_DESC_LAG_NS)
                assert context is not None
            if context[2]:
                self._gave_up("legacy task track waiting for its GE description or tensors")
            task = HostTask(record, legacy.describe(record, context[0], self.hashes), legacy=True)
            if task.resolved is not None:
                task.resolved.update(_tensor_texts(context[1]))
            self.slow_path["legacy layout"] += 1
            self.pending_host.advance(chunk, 1)
            self._hand_off(task)
        return True

    def _resolve_tracks(self, chunk: TrackChunk, tensor_low: float, context_low: float, node_low: float) -> bool:
        """The rest of a chunk of task_tracks: each run of complete ones described a column at a time
        (_describe_window); a task not complete waits (False) unless the wait is given up, then it is described
        alone (_resolve_one)."""
        if not self._first_complete(chunk, tensor_low, context_low, node_low) and \
                not self._give_up(self._host_held()):
            return False  # (the usual wait: found without working out the window)
        rows = chunk.rows[chunk.at:]
        ts = rows["ts_ns"].astype(np.int64)
        threads = rows["thread_id"].astype(np.int64)
        found = look_up(self.host, threads, ts)
        type_names = self._type_names(rows["task_type"])
        complete = self._window_complete(rows, ts, threads, found, type_names, tensor_low, context_low, node_low)
        begin = 0
        while begin < len(rows):
            stop = begin + int(np.argmin(complete[begin:])) if not complete[begin:].all() else len(rows)
            if stop > begin:
                self._describe_window(rows, begin, stop, ts, found, type_names)
            if stop == len(rows):
                return True
            if not self._give_up(self._host_held()):
                return False
            self._gave_up("host task waiting for its context")
            self.slow_path["host task given up waiting for its context"] += 1
            record = _dicts(rows[stop:stop + 1])[0]
            self.pending_host.advance(chunk, 1)
            self._resolve_one(record)
            begin = stop + 1
        return True

    def _first_complete(self, chunk: TrackChunk, tensor_low: float, context_low: float, node_low: float) -> bool:
        """Whether the first task_track of a chunk is complete (_host_context_complete, its device known)."""
        record = _dicts(chunk.rows[chunk.at:chunk.at + 1])[0]
        thread, ts = record["thread_id"], record["ts_ns"]
        node_api = self.host.node_api(thread, ts)
        type_name = self.types.get((raw.LEVEL_RUNTIME, record["task_type"]))
        node = self.host.node_info(thread, ts, node_api.start if node_api else 0)
        return record["device_id"] in self.devices and self._host_context_complete(
            thread, ts, node_api, node, type_name, record["kernel_name"], tensor_low, context_low, node_low)

    def _resolve_one(self, record: dict[str, Any]) -> None:
        """A task_track described alone, as it stands (its context complete or not)."""
        thread, ts = record["thread_id"], record["ts_ns"]
        node_api = self.host.node_api(thread, ts)
        type_name = self.types.get((raw.LEVEL_RUNTIME, record["task_type"]))
        node = self.host.node_info(thread, ts, node_api.start if node_api else 0)
        self._hand_off(HostTask(record, self._describe(record, thread, ts, node_api, node, type_name)))

    def _hand_off(self, task: HostTask) -> None:
        """A described host task to the join: a FLIP task's flip to HostBatches, a static model's task to its
        registrations, the others to the device tasks they meet."""
        record = task.record
        if task.resolved is None:  # bookkeeping task (a task-id flip): no device work of its own
            if not task.legacy and not self._chip_v6(int(record["device_id"])):
                self.host_batches.add_flip(int(record["device_id"]), int(record["stream_id"]),
                                           int(record["ts_ns"]), int(record["batch_id"]))
            return
        key = self._host_key(record, flipped=not task.legacy)
        self._hand_off_keyed(task, key, int(record["ts_ns"]))

    def _hand_off_keyed(self, task: HostTask, key: tuple[int, int, int, int], ts: int) -> None:
        assert task.resolved is not None
        static = task.resolved["model_id"] != schema.MODEL_ID_NONE and task.resolved["iteration"] == 0
        if self._chip_v6(key[0]):
            (self.registered_streams if static else self.launched_streams)[(key[0], key[2])] = key[1]
            if (key[0], key[2]) in self.parked:
                self.parked_named.add((key[0], key[2]))
        if static:
            self.slow_path["static model registration"] += 1
            self._register_static(key, task)  # reported in a static graph's load (request id 0: every iteration)
        else:
            self.static.launched(key[0], key[1], ts)
            self._meet(key, host=task)

    def _type_names(self, task_types: np.ndarray) -> np.ndarray:
        """The runtime task type names (None: not in type_info yet) of a window's tasks, as an object column."""
        distinct, inverse = np.unique(task_types, return_inverse=True)
        names = np.array([None] + [self.types.get((raw.LEVEL_RUNTIME, t)) for t in distinct.tolist()], object)
        return names[1:][inverse.reshape(-1)]

    def _in_hashes(self, values: np.ndarray) -> np.ndarray:
        distinct, inverse = np.unique(values, return_inverse=True)
        hashes = self.hashes
        return np.array([value in hashes for value in distinct.tolist()], bool)[inverse.reshape(-1)]

    def _window_complete(self, rows: np.ndarray, ts: np.ndarray, threads: np.ndarray, found: TrackLookups,
                         type_names: np.ndarray, tensor_low: float, context_low: float,
                         node_low: float) -> np.ndarray:
        """_host_context_complete of each task of a window (and its device known), as a mask."""
        devices = np.array(list(self.devices), np.int64)
        known_device = np.isin(rows["device_id"], devices)
        flip = type_names == "FLIP_TASK"
        kernels = rows["kernel_name"]
        named = (type_names != None) & ((kernels == 0) | self._in_hashes(kernels))  # noqa: E711
        distinct_threads, at = np.unique(threads, return_inverse=True)
        marks = np.array([self.api_marks.get(t, -1) for t in distinct_threads.tolist()], np.int64)
        without_api = marks[at.reshape(-1)] >= ts
        node = found.node
        node_ok = self._in_hashes(found.node_fields["op_name"]) & self._in_hashes(found.node_fields["op_type"])
        tensor_mark = _as_mark(tensor_low)
        node_ok &= tensor_mark >= ts
        level = np.flatnonzero(node & node_ok & (tensor_mark == ts))
        for i in level.tolist():  # the op's own tensor records at the tensor streams' mark: per task
            node_ok[i] = self._tensors_complete(int(threads[i]), int(ts[i]), int(found.op_hash[i]),
                                                int(found.api_start[i]), tensor_low)
        launch = _named_in(type_names, FFTS_LAUNCH_TYPES)
        node_ok &= ~launch | found.context | (_as_mark(context_low) >= ts)
        described = np.where(found.api, np.where(node, node_ok, _as_mark(node_low) >= ts), without_api)
        return known_device & (flip | named & described)

    def _describe_window(self, rows: np.ndarray, begin: int, stop: int, ts: np.ndarray, found: TrackLookups,
                         type_names: np.ndarray) -> None:
        """_describe and _hand_off of the window's tasks [begin, stop), a column at a time."""
        part = slice(begin, stop)
        window = rows[part]
        flip = type_names[part] == "FLIP_TASK"
        keys = self._window_keys(window, ts[part], flip)
        chunk = self.pending_host.chunks[0]
        if keys is None:  # times out of order on a stream: the exact rule, one task at a time
            self.slow_path["task_track times out of order"] += stop - begin
            for record in _dicts(window):
                self.pending_host.advance(chunk, 1)
                self._resolve_one(record)
            return
        tasks = ~flip
        texts = self._window_texts(window, part, found, type_names)
        node = found.node[part]
        blocks = np.where(node, found.node_fields["block_num"][part], window["num_blocks"]).astype(np.int64)
        block_dims = blocks & 0xFFFF
        model = found.model[part]
        model_ids = np.where(model, found.model_id[part], np.uint64(schema.MODEL_ID_NONE))[tasks]
        iterations = np.where(model, found.iteration[part], 0)[tasks]
        columns = [texts, self._window_contexts(window, part, found, type_names),
                   block_dims[tasks].tolist(), (block_dims * (blocks >> 16))[tasks].tolist(),
                   np.where(found.api[part], found.api_connection[part], 0)[tasks].tolist(),
                   window["thread_id"][tasks].tolist(), model_ids.tolist(), iterations.tolist()]
        resolved = list(map(_resolved, *columns))
        self.pending_host.advance(chunk, stop - begin)
        static = (model_ids != np.uint64(schema.MODEL_ID_NONE)) & (iterations == 0)
        self._hand_off_window(window[tasks], keys, resolved, ts[part][tasks], static, any(columns[1]))

    def _hand_off_window(self, rows: np.ndarray, keys: list[tuple[int, int, int, int]],
                         resolved: list[dict[str, Any]], ts: np.ndarray, static: np.ndarray, contexts: bool) -> None:
        """_hand_off_keyed of a window's described tasks (FLIP tasks left out) in turn: a static model's
        registration alone, with its record; the runs of launched tasks between them at once (_launch_run).
        ``contexts``: whether a task has FFTS+ contexts."""
        begin = 0
        for at in np.flatnonzero(static).tolist():
            self._launch_run(rows, keys, resolved, ts, begin, at, contexts)
            self._hand_off_keyed(HostTask(_dicts(rows[at:at + 1])[0], resolved[at]), keys[at], int(ts[at]))
            begin = at + 1
        self._launch_run(rows, keys, resolved, ts, begin, len(keys), contexts)

    def _launch_run(self, rows: np.ndarray, keys: list[tuple[int, int, int, int]], resolved: list[dict[str, Any]],
                    ts: np.ndarray, begin: int, stop: int, contexts: bool) -> None:
        """_hand_off_keyed of launched tasks [begin, stop) of a window: chip v6 streams named, streams no
        longer a loaded model's ended (StaticModels.launched_many, per stream), each task met (_meet_hosts). Their
        HostTasks carry no record (only static models' registrations read it)."""
        if stop <= begin:
            return
        part = slice(begin, stop)
        devices = rows["device_id"][part]
        if self.static.bindings:
            for (device, stream), chosen in _stream_groups(devices, rows["stream_id"][part]):
                self.static.launched_many(device, stream, ts[part][chosen])
        v6 = _by_device(devices, self._chip_v6) != 0
        if v6.any():
            self._name_launched_streams([keys[begin + i] for i in np.flatnonzero(v6).tolist()])
        self._meet_hosts(keys[part], list(map(HostTask, repeat(None, stop - begin), resolved[part])), contexts)

    def _name_launched_streams(self, keys: list[tuple[int, int, int, int]]) -> None:
        """Chip v6: the streams of launched tasks' 32-bit task ids (the newest of an id kept), for device tasks
        that come without one; parked ones so named noted."""
        named = {(key[0], key[2]): key[1] for key in keys}
        self.launched_streams.update(named)
        if self.parked:
            self.parked_named.update(pair for pair in named if pair in self.parked)

    def _window_keys(self, window: np.ndarray, ts: np.ndarray,
                     flip: np.ndarray) -> list[tuple[int, int, int, int]] | None:
        """_host_key (flipped) of each task that is not a FLIP task, in turn, the FLIP tasks' flips added to
        HostBatches between them (HostBatches.stream_window), per (device, stream); None (nothing done) where a
        stream's times go back."""
        devices, streams = window["device_id"].astype(np.int64), window["stream_id"].astype(np.int64)
        tasks, batches = window["task_id"].astype(np.int64), window["batch_id"].astype(np.int64)
        out_tasks, out_batches = tasks.copy(), batches.copy()
        pairs, inverse = np.unique(devices << 16 | streams, return_inverse=True)
        inverse = inverse.reshape(-1)
        groups = [np.flatnonzero(inverse == i) for i in range(len(pairs))] if len(pairs) > 1 else [
            np.arange(len(window))]
        plans = []
        for chosen in groups:
            device, stream = int(devices[chosen[0]]), int(streams[chosen[0]])
            v6 = self._chip_v6(device)
            if v6:
                out_tasks[chosen] = batches[chosen] << 16 | tasks[chosen]
                out_batches[chosen] = 0
                continue
            log = self.host_batches.flips.flips.get((device, stream))
            group_ts = ts[chosen]
            if len(chosen) > 1 and bool((group_ts[1:] < group_ts[:-1]).any()) or \
                    log is not None and log.times and int(group_ts[0]) < log.times[-1]:
                return None
            plans.append((chosen, device, stream, self.devices.get(device, {}).get("platform", 1) != 0))
        for chosen, device, stream, flipped in plans:
            found = self.host_batches.stream_window(device, stream, ts[chosen], tasks[chosen], flip[chosen],
                                                    batches[chosen])
            assert found is not None
            if flipped:
                out_batches[chosen[~flip[chosen]]] = found
        tasks_only = ~flip
        return list(zip(devices[tasks_only].tolist(), streams[tasks_only].tolist(), out_tasks[tasks_only].tolist(),
                        out_batches[tasks_only].tolist(), strict=True))

    def _window_texts(self, window: np.ndarray, part: slice, found: TrackLookups,
                      type_names: np.ndarray) -> list[tuple[str, ...]]:
        """The ``texts`` of _describe for each task of a window that is not a FLIP task, worked out once per
        distinct description (the inputs of _texts, its runtime task type by its type_info code) and remembered
        across windows (until hash_dic or type_info grows)."""
        if self.text_rows_of != (len(self.hashes), len(self.types)) or self.host.forget_tensor_keys(TEXT_IDS_LIMIT):
            self.text_rows.clear()
            self.text_rows_of = (len(self.hashes), len(self.types))
        tasks = type_names[part] != "FLIP_TASK"
        node = found.node[part][tasks]
        fields = {name: column[part][tasks] for name, column in found.node_fields.items()}
        inputs = np.stack([
            found.op_hash[part][tasks].view(np.int64), node.astype(np.int64), fields["op_type"].view(np.int64),
            fields["task_type"], fields["op_state"], fields["op_flag"], found.tensor_key[part][tasks],
            window["kernel_name"][tasks].astype(np.uint64).view(np.int64),
            window["task_type"][tasks].astype(np.uint64).view(np.int64)], axis=1)
        if len(self.text_rows) >= TEXT_IDS_LIMIT:
            self.text_rows.clear()
        keys = np.ascontiguousarray(inputs).view(np.dtype((np.void, inputs.shape[1] * 8))).reshape(-1)
        distinct, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        texts = np.empty(len(distinct), object)
        for i, (key, at) in enumerate(zip(distinct.tolist(), first.tolist(), strict=True)):
            known = self.text_rows.get(key)
            if known is None:
                row = inputs[at].tolist()
                name = type_names[part][tasks][at]
                known = self.text_rows[key] = self._texts(row, name)
            texts[i] = known
        return texts[inverse.reshape(-1)].tolist()

    def _texts(self, inputs: list[int], type_name: str | None) -> tuple[str, ...]:
        """_describe's texts of a task from its _window_texts inputs."""
        op_hash, node, op_type_hash, ge_type, state, flag, tensor_key, kernel, _ = inputs
        hashes = self.hashes
        op_hash &= (1 << 64) - 1
        op_name = hashes.get(op_hash)
        if op_name is None:
            op_name = str(op_hash) if op_hash else (type_name or "N/A")
        if node:
            op_type_hash &= (1 << 64) - 1
            op_type = hashes.get(op_type_hash)
            if op_type is None:
                op_type = str(op_type_hash)
            core = raw.GE_TASK_TYPES[ge_type] if ge_type < len(raw.GE_TASK_TYPES) else "INVALID"
            op_state = OP_STATES.get(state, "N/A")
            hf32 = "YES" if flag else "NO"
        else:
            op_type, core, op_state, hf32 = type_name or "N/A", type_name or "N/A", "N/A", "N/A"
        tensor = None
        if tensor_key >= 0:
            tensor = [{"texts_key": key, "tensor_num": key[0]} for key in self.host.tensor_key(tensor_key)]
        tensors = _tensor_texts(tensor)
        kernel &= (1 << 64) - 1
        kernel_name = hashes.get(kernel, "N/A") if kernel else "N/A"
        return (op_name, op_type, core, op_state, tensors["input_shapes"], tensors["input_dtypes"],
                tensors["input_formats"], tensors["output_shapes"], tensors["output_dtypes"],
                tensors["output_formats"], kernel_name, type_name or core, hf32)

    def _window_contexts(self, window: np.ndarray, part: slice, found: TrackLookups,
                         type_names: np.ndarray) -> list[Sequence[int]]:
        """_describe's ``contexts`` of each task of a window that is not a FLIP task."""
        names = type_names[part]
        tasks = names != "FLIP_TASK"
        count = int(tasks.sum())
        wanted = found.node[part] & _named_in(names, CONTEXT_TASK_TYPES)
        if not wanted.any():
            return [()] * count
        v6 = _by_device(window["device_id"], self._chip_v6) != 0
        out: list[Sequence[int]] = [()] * len(window)
        threads = window["thread_id"].tolist()
        chosen = wanted & ~v6
        for i in np.flatnonzero(chosen & ~found.context[part]).tolist():
            out[i] = []
        positions = found.context_at[part]
        for i in np.flatnonzero(chosen & found.context[part]).tolist():
            out[i] = context_ids(self.host.context_record(threads[i], int(positions[i])))
        return [contexts for contexts, task in zip(out, tasks.tolist(), strict=True) if task]

    def _host_held(self) -> int:
        """Records the oldest waiting host task holds back: the host tasks from it on, and the device tasks
        waiting for a host task (a static model's executions wait for its load's registrations; counted when
        pruning, as they take a scan)."""
        return len(self.pending_host) + self.devices_held

    def _chip_v6(self, device: int) -> bool:
        return self._flags(device).v6

    def _flags(self, device: int) -> DeviceFlags:
        """What a device's facts switch on, worked out once per device_info."""
        flags = self.flags.get(device)
        if flags is None:
            known = self.devices.get(device) or {}
            flags = self.flags[device] = DeviceFlags(
                int(known.get("platform", 1)) in raw.STARS_V6_PLATFORMS,
                bool(known.get("pmu_events") or known.get("aiv_pmu_events")), l2_configured(known),
                bool(known.get("aicpu_trace")))
        return flags

    def _host_key(self, record: Any, flipped: bool = False) -> tuple[int, int, int, int]:
        """(device, stream, task, batch) of a task_track; on chip v6 the task id is batchId << 16 | taskId, batch 0
        (msprof TaskTrackChip6Bean). ``flipped``: the batch comes from the host's FLIP tasks before it (join.py
        HostBatches; a runtime may write 0 in batchId), on the chips whose devices write flips (not the 310, whose
        batchId is taken as written, as msprof does); once per task, in the task_track stream's order."""
        device, stream = int(record["device_id"]), int(record["stream_id"])
        task, batch = int(record["task_id"]), int(record["batch_id"])
        if self._chip_v6(device):
            return device, stream, (batch << 16) | task, 0
        if flipped and self.devices.get(device, {}).get("platform", 1) != 0:
            batch = self.host_batches.batch_of(device, stream, task, int(record["ts_ns"]))
        return device, stream, task, batch

    def _low_mark(self, stream_kind: str, unseen: float = float("inf")) -> float:
        """The oldest watermark of the streams of a kind (tensor_info …); ``unseen`` while none has arrived. A host
        task's describing kinds take the task_track mark less UNSEEN_STREAM_LAG_NS there: live, a kind's first slice
        may turn up after the task tracks it describes (the runtime creates each file when it first writes to it,
        the collector lists the folder meanwhile), where an import reads it first; taken as absent at once, the
        tasks before it would go on without their context ids or tensors. A kind the job never writes holds the
        host tasks that much data time (MAX_PENDING still bounds them), or to the end of the job."""
        return min((mark for stream, mark in self.watermarks.items() if stream_kind in stream), default=unseen)

    def _host_context_complete(self, thread: int, ts: int, node_api: Interval | None, node: Any,
                               type_name: str | None, kernel: int, tensor_low: float, context_low: float,
                               node_low: float) -> bool:
        """Everything that describes a task at ``ts`` has arrived, or the stream that would carry it has moved
        past ``ts`` (``*_low``: the oldest watermark of a kind's streams; see _low_mark for a kind not seen yet):
        its task type in type_info and names (the kernel's, the node's op name and type) in hash_dic (these carry no
        times: waited for until they come); its Node API, or else an API of its thread at API_MARK_LEVELS ending at
        or after ``ts`` (written after the Node API holding ``ts``: there is none); its node_basic_info, or else
        that stream's records up to ``ts``; the tensor_info records up to ``ts`` and, for an
        FFTS+ or MIX launch, its context_id_info or else that stream's records up to ``ts`` (other launches take
        the context ids already in: waiting for a sparse stream would hold every task back)."""
        if type_name == "FLIP_TASK":
            return True
        if type_name is None or kernel and kernel not in self.hashes:
            return False
        if node_api is None:
            return self.api_marks.get(thread, -1) >= ts
        if node is None:
            return node_low >= ts
        op_name = node["op_name"]
        if op_name not in self.hashes or node["op_type"] not in self.hashes:
            return False  # names come from hash_dic, which the runtime may flush later than the records
        if not self._tensors_complete(thread, ts, op_name, node_api.start, tensor_low):
            return False
        if type_name not in FFTS_LAUNCH_TYPES or self.host.context_info(thread, ts, op_name,
                                                                        node_api.start) is not None:
            return True
        return context_low >= ts

    def _tensors_complete(self, thread: int, ts: int, op_name: int, since: int, tensor_low: float) -> bool:
        """Every tensor record up to ``ts`` is in (``tensor_low``: the oldest tensor_info watermark); of the op's
        own, stamped ``ts``, once one holds fewer than five tensors (more than five come in several records)."""
        if tensor_low < ts:
            return False
        if tensor_low > ts:
            return True
        tensors = self.host.tensor_info(thread, ts, op_name, since)
        return tensors is None or int(tensors[-1]["tensor_num"]) < raw.TENSOR_SLOTS

    def _describe(self, record: dict[str, Any], thread: int, ts: int, node_api: Interval | None, node: Any,
                  type_name: str | None) -> dict[str, Any] | None:
        """``record``: a task_track (a dict of Python ints, as are ``node``'s values), at ``ts`` on ``thread``;
        ``node``: its node_basic_info (HostIndex.node_info since its Node API's start), or None."""
        if type_name == "FLIP_TASK":
            return None
        since = node_api.start if node_api else 0
        op_hash = node["op_name"] if node is not None else (node_api.item_id if node_api else 0)
        hashes = self.hashes
        op_name = hashes.get(op_hash)
        if op_name is None:  # (hash_dic texts are never None)
            op_name = str(op_hash) if op_hash else (type_name or "N/A")
        if node is not None:
            op_type = hashes.get(node["op_type"])
            if op_type is None:
                op_type = str(node["op_type"])
            ge_type = node["task_type"]
            core = raw.GE_TASK_TYPES[ge_type] if ge_type < len(raw.GE_TASK_TYPES) else "INVALID"
            block = node["block_num"]
            op_state = OP_STATES.get(node["op_state"], "N/A")
            hf32 = "YES" if node["op_flag"] else "NO"  # GE's op flag: the op may compute in HF32
        else:
            op_type, core, block, op_state = type_name or "N/A", type_name or "N/A", record["num_blocks"], "N/A"
            hf32 = "N/A"
        tensor = self.host.tensor_info(thread, ts, op_hash, since) if node is not None else None
        contexts: Sequence[int] = ()
        if node is not None and type_name in CONTEXT_TASK_TYPES and not self._chip_v6(record["device_id"]):
            found = self.host.context_info(thread, ts, op_hash, since)
            contexts = context_ids(found) if found is not None else []
        model = self.host.model_run(thread, ts)
        kernel = record["kernel_name"]
        kernel_name = self.hashes.get(kernel, "N/A") if kernel else "N/A"
        tensors = _tensor_texts(tensor)
        texts = (op_name, op_type, core, op_state, tensors["input_shapes"], tensors["input_dtypes"],
                 tensors["input_formats"], tensors["output_shapes"], tensors["output_dtypes"],
                 tensors["output_formats"], kernel_name, type_name or core, hf32)
        return {"op_name": op_name, "op_type": op_type, "task_type": core, "texts": texts, "contexts": contexts,
                "block_dim": block & 0xFFFF, "mix_block_dim": (block & 0xFFFF) * (block >> 16),
                "connection_id": node_api.connection_id if node_api else 0, "thread_id": thread,
                "model_id": model[0] if model else schema.MODEL_ID_NONE, "iteration": model[1] if model else 0}

    def _resolve_device(self) -> None:
        """Device tasks in order, a chunk of columns at a time; each waits for its flips (its batch id) until its
        device's ts_track stream has passed its start (the 310 writes no flips). Chip-v6 tasks go one at a time
        (_resolve_v6)."""
        self._resolve_parked()
        pending = self.pending_device
        while pending:
            rows = pending.head()
            if rows.unresolved:
                pending.pop(len(rows))
                self._resolve_v6(rows)
                continue
            ready = self._flips_in(rows, len(pending))
            if ready:
                pending.pop(ready)
                self._resolve_rows(rows.part(0, ready))
            if ready < len(rows):
                return

    def _flips_in(self, rows: DeviceRows, waiting: int) -> int:
        """How many of ``rows`` (the oldest of ``waiting`` device tasks) go on, up to the first that waits for its
        flips: a task waits until its device's ts_track stream has passed its start, unless it gives up (counted;
        see _give_up, the queue shrinking by one per task that goes on)."""
        marks = _by_device(rows.devices, self._flip_mark)
        late = marks < rows.starts
        if not late.any() or self.finishing:
            return len(rows)
        gives_up = waiting - np.arange(len(rows)) > MAX_PENDING
        waits = np.flatnonzero(late & ~gives_up)
        ready = int(waits[0]) if len(waits) else len(rows)
        for _ in range(int(np.count_nonzero(late[:ready]))):
            self._gave_up("device task waiting for the flips before it (ts_track)")
        return ready

    def _flip_mark(self, device: int) -> int:
        """How far a device's flips are in: its ts_track stream's watermark (the 310's TS stream has no flips:
        msprof's 310 reader has no tag 14)."""
        if not self._writes_flips(device):
            return NO_FLIPS_MARK
        return self.watermarks.get(f"ts_track.data.{device}", -1)

    def _writes_flips(self, device: int) -> bool:
        return bool(self.devices.get(device, {}).get("platform", 1) != 0)

    def _resolve_rows(self, rows: DeviceRows) -> None:
        """Device tasks whose flips are in, in order: batch ids from the flips, a (device, stream) at a time; then
        each meets its host task, or its static model's registration on a bound stream."""
        batches = np.zeros(len(rows), np.int64)
        bound: dict[int, Binding] = {}
        if self.flips.flips or self.static.bindings:
            for (device, stream), chosen in _stream_groups(rows.devices, rows.streams):
                self._flip_batches(device, stream, rows.starts, chosen, batches)
                self._bind_rows(device, stream, rows.starts, chosen, bound)
        devices, streams, tasks = rows.devices.tolist(), rows.streams.tolist(), rows.tasks.tolist()
        batch_ids = batches.tolist()
        found = list(map(DeviceTask, devices, streams, tasks, batch_ids, rows.starts.tolist(), rows.ends.tolist()))
        self._meet_devices(list(zip(devices, streams, tasks, batch_ids, strict=True)), found, bound)

    def _flip_batches(self, device: int, stream: int, starts: np.ndarray, chosen: slice | np.ndarray,
                      batches: np.ndarray) -> None:
        """Batch ids of the ``chosen`` rows of (device, stream): the number of the last flip at or before each
        start (FlipLog.batch_of), 0 before the first."""
        log = self.flips.flips.get((device, stream))
        if log is None or not log.times or not self._writes_flips(device):
            return
        at = np.searchsorted(np.array(log.times, np.int64), starts[chosen], side="right")
        numbers = np.array(log.items, np.int64)
        batches[chosen] = np.where(at > 0, numbers[at - 1], 0)

    def _bind_rows(self, device: int, stream: int, starts: np.ndarray, chosen: slice | np.ndarray,
                   bound: dict[int, Binding]) -> None:
        """The static model that owned (device, stream) at each ``chosen`` row's start, into ``bound`` (row → its
        binding); one task at a time, on a stream that a static model has owned."""
        if not self.static.bindings.get((device, stream)):
            return
        rows = np.arange(len(starts))[chosen]
        self.slow_path["static model"] += len(rows)
        for row, start in zip(rows.tolist(), starts[rows].tolist(), strict=True):
            binding = self.static.binding_at(device, stream, start)
            if binding is not None:
                bound[row] = binding

    def _meet_devices(self, keys: list[tuple[int, int, int, int]], tasks: list[DeviceTask],
                      bound: dict[int, Binding]) -> None:
        """_meet of each device task in turn (``bound``: rows on a static model's stream, _meet_static instead).
        The tasks no host task waits for go into device_ready first, in order: they change nothing the others
        read. Tasks of a key with host tasks waiting that comes twice in the window: one at a time, in order."""
        waiting = self.host_ready
        meeting = set(bound)
        if waiting and not waiting.keys().isdisjoint(keys):
            hits = [row for row, key in enumerate(keys) if key in waiting]
            if len(set(keys)) < len(keys) and _repeated(keys, hits):
                self.slow_path["device task key repeated while its host tasks wait"] += len(keys)
                for row, (key, task) in enumerate(zip(keys, tasks, strict=True)):
                    binding = bound.get(row)
                    if binding is not None:
                        self._meet_static(task, binding)
                    else:
                        self._meet(key, device=task)
                return
            meeting.update(hits)
        self._wait_for_hosts(keys, tasks, meeting)
        for row in sorted(meeting):
            binding = bound.get(row)
            if binding is not None:
                self._meet_static(tasks[row], binding)
            else:
                self._matched(take(waiting, keys[row]), tasks[row])

    def _wait_for_hosts(self, keys: list[tuple[int, int, int, int]], tasks: list[DeviceTask],
                        leave: set[int]) -> None:
        """Device tasks, except the rows in ``leave``, into device_ready in order: all at once where their keys are
        new and distinct."""
        ready = self.device_ready
        if leave:
            keys = [key for row, key in enumerate(keys) if row not in leave]
            tasks = [task for row, task in enumerate(tasks) if row not in leave]
        if len(set(keys)) == len(keys) and ready.keys().isdisjoint(keys):
            ready.update(zip(keys, map(deque, zip(tasks)), strict=True))
            return
        for key, task in zip(keys, tasks, strict=True):
            put(ready, key, task)

    def _resolve_v6(self, rows: DeviceRows) -> None:
        """Chip-v6 device tasks in order: each takes its stream from the host task_track that named its 32-bit id,
        then they meet their host tasks together (_meet_devices); one whose id no resolved host task_track has named
        yet is parked by it (_resolve_parked: one at a time)."""
        named: list[DeviceTask] = []
        parked_tasks = self.parked
        track_low = self._track_low()
        for device, task_id, start, end in zip(rows.devices.tolist(), rows.tasks.tolist(), rows.starts.tolist(),
                                               rows.ends.tolist(), strict=True):
            task = DeviceTask(device, UNRESOLVED_STREAM, task_id, 0, start, end)
            key = (device, task_id)
            parked = parked_tasks.get(key)
            stream = None if parked else self._unique_stream(device, task_id)
            if stream is not None:
                task.stream = stream
                named.append(task)
                continue
            self.slow_path["chip v6 task id no host task has named yet"] += 1
            if parked is None:
                parked_tasks[key] = deque((task,))
                self._resolve_parked((key,), track_low)
            else:
                parked.append(task)  # behind the earlier ones of its id
        bound: dict[int, Binding] = {}
        bindings = self.static.bindings
        for row, task in enumerate(named):
            if bindings.get((task.device, task.stream)):
                self.slow_path["static model"] += 1
                binding = self.static.binding_at(task.device, task.stream, task.start)
                if binding is not None:
                    bound[row] = binding
        self._meet_devices([(task.device, task.stream, task.task, 0) for task in named], named, bound)

    def _meet_device(self, task: DeviceTask) -> None:
        """One device task meets its host task, or its static model's registration on a bound stream."""
        binding = self.static.binding_at(task.device, task.stream, task.start)
        if binding is not None:
            self._meet_static(task, binding)
        else:
            self._meet((task.device, task.stream, task.task, task.batch), device=task)

    def _resolve_parked(self, keys: Iterable[tuple[int, int]] | None = None, track_low: int | None = None) -> None:
        """Parked chip-v6 tasks, oldest first per task id: each takes its stream once a resolved host task_track
        names it; with none, it is rejected once no host task_track up to its start can still name it (the host
        launches a task before the device starts it), or when the aggregator gives up. ``keys``: those to look
        at (default: the ids a host task has named since, and the oldest parked ids the task_track streams have
        passed); ``track_low``: _track_low, when the caller has it."""
        if not self.parked:
            self.parked_named.clear()
            return
        if track_low is None:
            track_low = self._track_low()
        if keys is None:
            named, self.parked_named = self.parked_named, set()
            every = self._give_up(self._host_held())
            passed = []
            for key, queue in self.parked.items():  # in the order they were parked: oldest first
                if queue[0].start > track_low and not every:
                    break
                passed.append(key)
            keys = passed + [key for key in named - set(passed) if key in self.parked]
        pending: dict[tuple[int, int], int] | None = None  # v6 ids of host tasks still being described → first ts
        for key in keys:
            queue = self.parked[key]
            while queue:
                task = queue[0]
                stream = self._unique_stream(*key)
                if stream is None:
                    if track_low >= task.start and pending is None:
                        pending = self._pending_v6_ids()
                    if track_low < task.start or pending is not None and pending.get(key, task.start + 1) <= task.start:
                        if not self._give_up(self._host_held()):
                            break
                        self._gave_up("chip-v6 device task waiting for its host task_track")
                    queue.popleft()
                    self.ctx.reject("chip-v6 device task whose task id no host task_track names", 1)
                    continue
                queue.popleft()
                task.stream = stream
                self._meet_device(task)
            if not queue:
                del self.parked[key]

    def _track_low(self) -> int:
        """The oldest watermark of the host's task_track streams (-1 while none has arrived)."""
        return min((mark for stream, mark in self.watermarks.items() if "task_track" in stream), default=-1)

    def _pending_v6_ids(self) -> dict[tuple[int, int], int]:
        """(device, 32-bit task id) of the host task_tracks still being described → the time of the first."""
        found: dict[tuple[int, int], int] = {}
        for chunk in self.pending_host.chunks:
            if chunk.legacy:
                continue
            rows = chunk.rows[chunk.at:]
            for device, task, batch, ts in zip(rows["device_id"].tolist(), rows["task_id"].tolist(),
                                               rows["batch_id"].tolist(), rows["ts_ns"].tolist(), strict=True):
                found.setdefault((device, (batch << 16) | task if self._chip_v6(device) else task), ts)
        return found

    def _unique_stream(self, device: int, task: int) -> int | None:
        """The stream of a chip-v6 task id, as the host task_track that launched or registered it says."""
        found = self.launched_streams.pop((device, task), None)
        return found if found is not None else self.registered_streams.get((device, task))

    # -- static models: registered at load, replayed by every execution (static.py) ---------
    def _register_static(self, key: tuple[int, int, int, int], host: HostTask) -> None:
        device, stream, task_id, batch = key
        assert host.resolved is not None
        model = int(host.resolved["model_id"])
        fresh = self.static.register(device, model, stream, task_id, batch, int(host.record["ts_ns"]), host)
        if fresh is not None:
            # device tasks that came first were taken for launched ones: name them again
            for parked_key in [k for k in self.device_ready if k[0] == device and k[1] == stream]:
                parked = self.device_ready.pop(parked_key)
                for device_task in parked:
                    if fresh.holds_at(device_task.start):
                        self._meet_static(device_task, fresh)
                    else:
                        self.device_ready.setdefault(parked_key, deque()).append(device_task)
        for device_task, iteration in self.static.released(device, model, stream, task_id, batch):
            device_task.batch = batch
            self._matched(_replay(host, model, iteration), device_task)

    def _meet_static(self, task: DeviceTask, binding: Binding) -> None:
        batch, iteration = self.static.name(task.device, task.stream, task.start, binding, self.flips)
        found = binding.find(task.task, batch)
        if found is None:
            self.static.wait((task.device, binding.model, task.stream, task.task, batch), task, iteration)
            return
        task.batch, host = found
        self._matched(_replay(host, binding.model, iteration), task)

    def _meet(self, key: tuple[int, int, int, int], host: HostTask | None = None,
              device: DeviceTask | None = None) -> None:
        """A host or a device task meets the oldest partner waiting under its key, or waits there itself."""
        if host is not None:
            partner = self.device_ready.get(key)
            if partner:
                found = partner.popleft()
                if not partner:
                    del self.device_ready[key]
                self._matched(host, found)
            else:
                put(self.host_ready, key, host)
        elif device is not None:
            waiting_host = take(self.host_ready, key)
            if waiting_host is not None:
                self._matched(waiting_host, device)
            else:
                put(self.device_ready, key, device)

    def _meet_hosts(self, keys: list[tuple[int, int, int, int]], tasks: list[HostTask],
                    contexts: bool = True) -> None:
        """_meet of each host task in turn (``keys``: theirs, in the same order; ``contexts``: whether one has FFTS+
        contexts). Keys that differ meet at once: the tasks with a device task ready take it, the others wait."""
        if len(set(keys)) < len(keys):
            self.slow_path["host tasks sharing a key in a window"] += len(keys)
            self._meet_hosts_in_turn(keys, tasks)
            return
        ready = self.device_ready
        partners = list(map(ready.get, keys))
        met = list(map(bool, partners))
        if any(met):
            found = cast("list[deque[DeviceTask]]", list(compress(partners, met)))  # (the truthy ones)
            devices = list(map(deque.popleft, found))
            for key in compress(compress(keys, met), map(operator.not_, found)):
                del ready[key]
            hosts = list(compress(tasks, met))
            if contexts:
                for host, device in zip(hosts, devices, strict=True):
                    self._matched(host, device)
            else:
                self.awaiting_pmu.extend(zip(hosts, devices, repeat(INVALID_CONTEXT)))
        if not all(met):
            idle = list(map(operator.not_, met))
            self._hosts_wait(list(compress(keys, idle)), list(compress(tasks, idle)))

    def _hosts_wait(self, keys: list[tuple[int, int, int, int]], tasks: list[HostTask]) -> None:
        """Host tasks (keys that differ) wait for their device tasks, each after those of its key waiting."""
        waiting = self.host_ready
        known = list(map(waiting.__contains__, keys))
        if any(known):
            for key, host in zip(compress(keys, known), compress(tasks, known), strict=True):
                waiting[key].append(host)
            fresh = list(map(operator.not_, known))
            keys, tasks = list(compress(keys, fresh)), list(compress(tasks, fresh))
        waiting.update(zip(keys, map(deque, zip(tasks)), strict=True))

    def _meet_hosts_in_turn(self, keys: list[tuple[int, int, int, int]], tasks: list[HostTask]) -> None:
        """_meet of each host task in turn, _matched inline for a task without FFTS+ contexts."""
        ready, waiting, awaiting = self.device_ready, self.host_ready, self.awaiting_pmu
        for key, host in zip(keys, tasks, strict=True):
            partner = ready.get(key)
            if partner:
                device = partner.popleft()
                if not partner:
                    del ready[key]
                assert host.resolved is not None
                if host.resolved["contexts"]:
                    self._matched(host, device)
                else:
                    awaiting.append((host, device, INVALID_CONTEXT))
            else:
                put(waiting, key, host)

    def _matched(self, host: HostTask, device: DeviceTask) -> None:
        """A joined task waits for its PMU; an FFTS+ task is split into its contexts first (contexts.py)."""
        assert host.resolved is not None
        contexts = host.resolved.get("contexts") or []
        if not contexts:
            self.awaiting_pmu.append((host, device, INVALID_CONTEXT))
            return
        self.slow_path["FFTS+ contexts"] += 1
        found = 0
        for context in contexts:
            span = self.contexts.take((device.device, device.stream, device.task, context), device.start, device.end)
            if span is None:
                continue
            found += 1
            part = DeviceTask(device.device, device.stream, device.task, device.batch, span.start, span.end)
            self.awaiting_pmu.append((host, part, context))
        if not found:
            self.awaiting_pmu.append((host, device, None))
            self.unused["FFTS+ tasks whose contexts left no subtask logs (one row for the task)"] += 1
            return
        self.unused[FFTS_TASK_SPAN] += 1
        if found < len(contexts):
            self.ctx.reject("FFTS+ context without subtask start/end logs", len(contexts) - found)

    def _passed(self, device: int, end: int, l2: bool) -> bool:
        """Whether the device's PMU (``l2``: L2 cache) stream has passed a task ending at ``end``: a joined task
        ending later already has its record (their records carry no usable time, but come in the order tasks
        end). Looks at the first PMU_LOOKAHEAD joined tasks, again only once more records or tasks came in."""
        stamp = (device, end, l2, self.records_in, len(self.awaiting_pmu))
        if stamp == self.not_passed:
            return False
        for index, (host, other, context) in enumerate(self.awaiting_pmu):
            if index >= PMU_LOOKAHEAD:
                break
            if other.device != device or other.end <= end:
                continue
            assert host.resolved is not None
            wants_pmu, wants_l2, _ = _wants(host.resolved["task_type"], context, self._flags(other.device))
            task_key = (other.device, other.stream, other.task)
            if l2 and wants_l2 and self.extras.l2.get(task_key) or not l2 and wants_pmu and self.pmu.get(
                    (*task_key, INVALID_CONTEXT if context is None else context)):
                return True
        self.not_passed = stamp
        return False

    def _resolve_pmu(self) -> None:
        """Joined tasks in order, each once its PMU, L2 cache and AI CPU records are in or their streams have passed
        it: AI CPU records by their run end (aicpu_ready), PMU and L2 records by their order (_passed). The tasks
        whose records are in go a window at a time (_take_ready); the one that stops a window, the per-task code."""
        while self.awaiting_pmu:
            self._take_ready()
            if self.awaiting_pmu and not self._resolve_head():
                return

    def _resolve_head(self) -> bool:
        """The oldest joined task by the per-task code, once its records are in or their streams have passed it
        (or its wait is given up); False: it waits."""
        awaiting, pmu_records = self.awaiting_pmu, self.pmu
        host, device, context = awaiting[0]
        assert host.resolved is not None
        task_key = (device.device, device.stream, device.task)
        pmu_key = (*task_key, INVALID_CONTEXT if context is None else context)
        flags = self._flags(device.device)
        wants_pmu, wants_l2, wants_aicpu = _wants(host.resolved["task_type"], context, flags)
        missing = (wants_pmu and flags.pmu and not pmu_records.get(pmu_key)
                   and not self._passed(device.device, device.end, False)
                   or wants_l2 and not self.extras.l2_ready(task_key)
                   and not self._passed(device.device, device.end, True)
                   or wants_aicpu and not self.extras.aicpu_ready(device.device, device.end))
        if missing:
            if not self._give_up(len(awaiting)):
                return False
            self._gave_up("joined task waiting for its PMU, L2 cache or AI CPU record")
            if not self.finishing:
                self.extras.waited_in_vain(device.device, wants_aicpu, wants_l2)
        awaiting.popleft()
        pmu_record = take(pmu_records, pmu_key) if wants_pmu else None
        extra: list[float | None] = []
        op_name = host.resolved["op_name"]
        if flags.aicpu:
            extra += self.extras.take_aicpu(task_key, device.start, device.end, op_name) if wants_aicpu \
                else [None] * len(AICPU_COLUMNS)
        if flags.l2:
            extra += self.extras.take_l2(task_key, self.devices.get(device.device, {}), op_name) if wants_l2 \
                else [None] * len(L2_COLUMNS)
        self.slow_path["task whose PMU, L2 cache or AI CPU record did not come in time"] += 1
        self._emit_task(host.resolved, device, pmu_record, extra, pmu_key[3])
        return True

    def _take_ready(self) -> None:
        """The joined tasks at the head of awaiting_pmu whose PMU, L2 cache and AI CPU records are in (each takes the
        oldest of its key, as the FIFO gives them), taken into self.taken; up to the first whose records are not all
        in (_resolve_head decides whether it waits)."""
        awaiting, pmu, extras, taken = self.awaiting_pmu, self.pmu, self.extras, self.taken
        if not self._taken_layouts_hold():
            self._build_block()
        layouts, first = taken.layouts, len(taken.tasks)
        tasks, records, l2_values, aicpu_values = taken.tasks, taken.records, taken.l2_values, taken.aicpu_values
        l2_queues, popleft = extras.l2, awaiting.popleft
        l2_taken: list[tuple[int, tuple[int, int, int], Any, str]] = []  # (place in taken, key, L2 entry, op name)
        while awaiting:
            task = awaiting[0]
            host, device, context = task
            info = host.resolved
            assert info is not None
            known = layouts.get(device.device)
            if known is None:
                known = layouts[device.device] = (self._flags(device.device), self._pmu_layout(device.device))
            flags, layout = known
            task_type = info["task_type"]
            record = aicpu = None
            if task_type in PMU_TASK_TYPES and context is not None and not flags.v6:  # _wants: PMU, and L2 if on
                key = (device.device, device.stream, device.task, context)
                waiting = pmu.get(key)
                if not waiting and flags.pmu:
                    break
                if flags.l2:
                    task_key = (device.device, device.stream, device.task)
                    l2_waiting = l2_queues.get(task_key)
                    if not l2_waiting and not extras.l2_ready(task_key):
                        break
                    if l2_waiting:
                        l2_taken.append((len(tasks), task_key, l2_waiting.popleft(), info["op_name"]))
                        if not l2_waiting:
                            del l2_queues[task_key]
                popleft()
                if waiting:
                    record = waiting.popleft()
                    if not waiting:
                        del pmu[key]
            elif task_type == "AI_CPU" and flags.aicpu:
                if not extras.aicpu_ready(device.device, device.end):
                    break
                popleft()
                aicpu = extras.take_aicpu((device.device, device.stream, device.task), device.start, device.end,
                                          info["op_name"])
            else:
                popleft()
            if layout.stars is not None:  # the clock of its values (and its end counts as a time clocks were used)
                clock = extras.clock_mhz(device.device, layout.platform, device.end)
                if record is not None:
                    taken.clocks[len(tasks)] = clock
            tasks.append(task)
            records.append(record)
            l2_values.append(None)
            aicpu_values.append(aicpu)
        for (at, _, _, _), rates in zip(l2_taken, extras.l2_taken(l2_taken, self.devices), strict=True):
            l2_values[at] = rates
        if len(taken.tasks) > first:
            self._take_texts(taken.tasks[first:])
            if len(taken.tasks) >= TAKEN_PER_BLOCK:
                self._build_block()

    def _taken_layouts_hold(self) -> bool:
        """Whether the devices of the tasks taken still have the facts they were taken under."""
        return all(self._flags(device) is flags and self._pmu_layout(device) is layout
                   for device, (flags, layout) in self.taken.layouts.items())

    def _take_texts(self, tasks: list[tuple[HostTask, DeviceTask, int | None]]) -> None:
        """Symbol ids of taken tasks' texts (interned in their order), and their statistics."""
        infos: list[Any] = [host.resolved for host, _, _ in tasks]
        places = self._text_places([info.get("texts") or _row_texts(info) for info in infos])
        self.taken.symbols.append(self.text_array[places])
        self.stats.queue_ops([device.device for _, device, _ in tasks], self.text_names[places].tolist(),
                             [device.end - device.start for _, device, _ in tasks])
        self.tasks_out += len(tasks)

    def _build_block(self) -> None:
        """The rows of the taken tasks as one block of columns."""
        taken, self.taken = self.taken, TakenTasks()
        n = len(taken.tasks)
        if not n:
            return
        hosts, devices, contexts = zip(*taken.tasks, strict=True)
        infos = [host.resolved for host in hosts]
        timed = [np.fromiter(map(attrgetter(name), devices), np.int64, n) for name in DEVICE_FIELDS]
        described = [np.fromiter(map(itemgetter(name), infos), np.int64, n) for name in INFO_FIELDS]
        symbols = np.concatenate(taken.symbols).T
        context_column = np.array([INVALID_CONTEXT if c is None else c for c in contexts], np.int64)
        placed: dict[int, np.ndarray] = dict(zip(TIMED_AT + DESCRIBED_AT + TEXT_AT, [*timed, *described, *symbols],
                                                 strict=True))
        placed[CONTEXT_AT] = context_column
        columns = [placed[at] for at in range(len(schema.TASK_COLUMNS)) if at != PMU_AT]
        offsets, values, work = self._block_pmu(timed[0], described[2], timed[5] - timed[4], taken)
        self.task_rows.add_block(TaskBlock(columns, offsets, values, work))

    def _block_pmu(self, devices: np.ndarray, block_dims: np.ndarray, durations: np.ndarray,
                   taken: TakenTasks) -> tuple[np.ndarray, np.ndarray, PmuWork | None]:
        """A block's ``pmu`` offsets and values (NaN: none yet, or none), and the rows whose AI Core PMU values are
        still to be worked out (a record and the device's PMU events): [PMU values, AI CPU, L2 cache, hidden]."""
        n = len(devices)
        found, inverse = np.unique(devices, return_inverse=True)
        shapes = [self._row_shape(*taken.layouts[device]) for device in found.tolist()]
        widths = np.array([sum(shape) for shape in shapes], np.int64)[inverse]
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(widths, out=offsets[1:])
        values = np.full(int(offsets[-1]), np.nan)
        for found_values, skip in ((taken.aicpu_values, 0), (taken.l2_values, 1)):
            rows = [at for at, row_values in enumerate(found_values) if row_values is not None]
            if rows:
                width = len(found_values[rows[0]])  # type: ignore[arg-type]
                flat = list(chain.from_iterable(found_values[at] for at in rows))  # type: ignore[misc]
                table = np.array(flat, np.float64).reshape(-1, width)  # None → NaN
                at_row = offsets[rows] + np.array([sum(shape[:skip + 1]) for shape in shapes], np.int64)[inverse[rows]]
                values[at_row[:, None] + np.arange(table.shape[1])] = table
        if taken.clocks:
            self._stars_values(values, offsets, devices, block_dims, durations, taken)
        events = np.array([bool(taken.layouts[device][1].events and taken.layouts[device][1].stars is None)
                           for device in found.tolist()])[inverse]
        jobs = [at for at, record in enumerate(taken.records) if record is not None and events[at]]
        if not jobs:
            return offsets, values, None
        chosen: list[PmuRef] = [taken.records[at] for at in jobs]  # type: ignore[misc]
        return offsets, values, PmuWork(offsets[jobs], devices[jobs], chosen, block_dims[jobs], durations[jobs])

    def _stars_values(self, values: np.ndarray, offsets: np.ndarray, devices: np.ndarray, block_dims: np.ndarray,
                      durations: np.ndarray, taken: TakenTasks) -> None:
        """The PMU values of the taken tasks with a STARS PMU record, into their rows' ``pmu`` values: a batch per
        device (StarsPmu.batch_values); a record whose counts are too big for it, by the per-record code. A record
        with overflow, or an HWTS-class one, has none."""
        places = np.fromiter(taken.clocks, np.int64, len(taken.clocks))
        clocks = np.array(list(taken.clocks.values()), np.float64)  # None → NaN
        for device in np.unique(devices[places]).tolist():
            flags, layout = taken.layouts[device]
            stars = layout.stars
            assert stars is not None
            mine = devices[places] == device
            chosen, chosen_clocks = places[mine], clocks[mine]
            kept = [at for at, place in enumerate(chosen.tolist())
                    if "overflow" in (taken.records[place][0].dtype.names or ())]  # type: ignore[index]
            chosen, chosen_clocks = chosen[kept], chosen_clocks[kept]
            if not len(chosen):
                continue
            found = record_rows([taken.records[place] for place in chosen.tolist()])  # type: ignore[misc]
            fine = found["overflow"] == 0
            chosen, chosen_clocks, found = chosen[fine], chosen_clocks[fine], found[fine]
            shown, hidden, inexact = stars.batch_values(
                found["total_cycle"], found["pmu"].reshape(len(found), -1), found["core"],
                block_dims[chosen], durations[chosen], chosen_clocks)
            for at in np.flatnonzero(inexact).tolist():
                clock = float(chosen_clocks[at])
                exact = stars.split_values(found[at], int(block_dims[chosen[at]]), int(durations[chosen[at]]),
                                           None if clock != clock else clock)
                shown[at], hidden[at] = (np.array(part, np.float64) for part in exact)
            main, aicpu, l2, _ = self._row_shape(flags, layout)
            starts = offsets[chosen]
            values[starts[:, None] + np.arange(shown.shape[1])] = shown
            values[(starts + main + aicpu + l2)[:, None] + np.arange(hidden.shape[1])] = hidden

    @staticmethod
    def _row_shape(flags: DeviceFlags, layout: PmuLayout) -> tuple[int, int, int, int]:
        """How many PMU, AI CPU, L2 cache and hidden PMU values a device's rows have (rows without a STARS PMU
        record)."""
        aicpu, l2 = len(AICPU_COLUMNS) * flags.aicpu, len(L2_COLUMNS) * flags.l2
        if layout.stars is not None:
            return len(layout.stars.columns), aicpu, l2, len(layout.stars.hidden_columns)
        return layout.width, aicpu, l2, 0

    def _text_places(self, texts: list[tuple[str, ...]]) -> np.ndarray:
        """Places of row texts in text_array, interned (in the rows' order, each in column order) where new."""
        places = list(map(self.text_ids.get, texts))
        if None in places:
            new = [t for t, place in zip(texts, places, strict=True) if place is None]
            if len(self.text_ids) + len(new) > TEXT_IDS_LIMIT:
                self._forget_texts()
                new = texts
            for text in new:
                self._text_place(text)
            places = list(map(self.text_ids.get, texts))
        if len(self.text_array) != len(self.text_symbols) or self.texts_forgotten:
            self.text_array = np.array(self.text_symbols, np.int64).reshape(-1, len(TEXT_AT))
            self.text_names = np.array(self.text_name_codes, np.int64)
            self.texts_forgotten = False
        return np.array(places, np.int64)

    def _forget_texts(self) -> None:
        """The remembered row texts dropped (TEXT_IDS_LIMIT): their symbols stay in the symbol table."""
        self.text_ids.clear()
        self.text_symbols.clear()
        self.text_name_codes.clear()
        self.texts_forgotten = True  # text_array no longer holds them

    def _text_place(self, texts: tuple[str, ...]) -> int:
        place = self.text_ids.get(texts)
        if place is None:
            place = self.text_ids[texts] = len(self.text_symbols)
            self.text_symbols.append(tuple(map(self.symbols.intern, texts)))
            self.text_name_codes.append(self.stats.name_code(texts[1], texts[2]))
        return place

    def _emit_task(self, info: dict[str, Any], device: DeviceTask, pmu_record: Any,
                   extra: list[float | None], context: int = INVALID_CONTEXT) -> None:
        self._build_block()  # the rows before it
        layout = self._pmu_layout(device.device)
        pmu: list[float | None] = []
        job: tuple[tuple[np.ndarray, int], float | None] | None = None  # (PMU record, clock): values worked out later
        hidden: list[float | None] = []  # after the extras: see meta["hidden_pmu_columns"]
        stars = layout.stars
        if stars is not None:
            record = None
            if pmu_record is not None and "overflow" in pmu_record[0].dtype.names:
                record = pmu_record[0][pmu_record[1]]  # else an HWTS-class PMU record on a STARS chip
            pmu, hidden = stars.split_values(record, info["block_dim"], device.end - device.start,
                                             self.extras.clock_mhz(device.device, layout.platform, device.end))
        elif layout.events:
            if pmu_record is not None:  # computed with the other tasks of its batch (_fill_pmu)
                clock = None
                if layout.platform in FREQ_PLATFORMS:
                    chunk, index = pmu_record
                    at = int(chunk["ts_ns"][index]) or device.end
                    clock = self.extras.clock_mhz(device.device, layout.platform, at)
                job = (pmu_record, clock)
            else:
                pmu = [None] * layout.width
        if job is None:
            pmu += extra + hidden
        texts = info.get("texts") or _row_texts(info)
        if len(self.text_ids) >= TEXT_IDS_LIMIT and texts not in self.text_ids:
            self._forget_texts()
        place = self._text_place(texts)
        ids = self.text_symbols[place]
        row = [
            device.device, info["model_id"], info["iteration"], device.stream, device.task, device.batch,
            device.start, device.end, ids[0], ids[1], ids[2], ids[3], info["block_dim"], info["mix_block_dim"],
            info["connection_id"], info["thread_id"], ids[4], ids[5], ids[6], ids[7], ids[8], ids[9], pmu, context,
            ids[10], ids[11], ids[12]]
        if job is not None:
            self.pmu_jobs.add(device.device, job[0], info["block_dim"], device.end - device.start, job[1], extra, row)
        self.task_rows.add_row(row)
        self.stats.queue_ops([device.device], [self.text_name_codes[place]], [device.end - device.start])
        self.tasks_out += 1

    def _pmu_layout(self, device: int) -> PmuLayout:
        """What a device's facts say about its task rows' PMU values, worked out once per device_info."""
        layout = self.pmu_layouts.get(device)
        if layout is None:
            known = self.devices.get(device) or {}
            events = list(known.get("pmu_events", []))
            metric, platform = str(known.get("metric", "")), int(known.get("platform", 1))
            layout = self.pmu_layouts[device] = PmuLayout(
                events, platform, self._stars_pmu(device), len(pmu_columns(events, metric, platform)) if events else 0)
        return layout

    # -- output ---------------------------------------------------------------------------
    def _run_info(self) -> Batch:
        """The run's facts: the host's (session_info), else the first device's; ``end_ns`` 0 while running."""
        first = next(iter(self.devices.values()), {})
        session = self.session
        info = {"pid": session.get("pid") or first.get("pid") or 0,
                "pid_name": session.get("pid_name", ""),
                "hostname": session.get("hostname") or first.get("hostname") or "",
                "host_uid": session.get("host_uid", "0"),
                "devices": {str(d): {"platform": f.get("platform"), "chip": _chip_name(f.get("platform")),
                                     "aic_frequency_mhz": f.get("aic_frequency_mhz")}
                            for d, f in self.devices.items()},
                "start_ns": session.get("start_ns", 0), "end_ns": session.get("end_ns", 0)}
        return pack_rows("run_info", [[info]], "tasks", self.part.meta())

    def _flush_rows(self, force: bool) -> Iterator[Batch]:
        limit = self.config.max_batch_rows or self.ctx.batch_records
        if force or len(self.task_rows) + len(self.taken) >= limit:
            self._build_block()
            self._fill_pmu()
        while self.api_rows and (force or len(self.api_rows) >= limit):
            yield pack_table("api", self.api_rows.table(limit, SCHEMAS["api"]), "tasks",
                             {"symbols": self.symbols.take_unsent()})
        for kind in LIST_ROW_KINDS:
            if kind == "task":
                while self.task_rows and (force or len(self.task_rows) >= limit):
                    meta: dict[str, Any] = {"symbols": self.symbols.take_unsent(),
                                            "pmu_columns": self._pmu_columns(),
                                            "hidden_pmu_columns": self._hidden_pmu_columns()}
                    yield pack_table(kind, self.task_rows.table(limit), "tasks", meta)
                continue
            rows = self.rows[kind]
            while rows and (force or len(rows) >= limit):
                chunk, self.rows[kind] = rows[:limit], rows[limit:]
                rows = self.rows[kind]
                yield pack_table(kind, table_of_rows(kind, chunk), "tasks", {"symbols": self.symbols.take_unsent()})

    def _fill_pmu(self) -> None:
        """The PMU values of the task rows waiting for them, device by device in one batch each (the rows of
        blocks, the rows made one at a time)."""
        fill_blocks(self.task_rows.pending_blocks(), self._block_pmu_values)
        if not self.pmu_jobs:
            return
        every, self.pmu_jobs = self.pmu_jobs, PmuJobs()
        for device, jobs in every.by_device():
            cycles, counters, blocks = record_counts(jobs.records)
            blocks = np.where(blocks != 0, blocks, np.array(jobs.block_dims, np.int64))
            values = self._pmu_values(device, cycles, counters, blocks, np.array(jobs.durations, np.int64),
                                      np.array(jobs.clocks, np.float64))
            extras = np.array(jobs.extras, np.float64).reshape(len(jobs), -1)  # None → NaN
            for row, pmu in zip(jobs.rows, np.hstack((values, extras)), strict=True):
                row[PMU_AT] = pmu

    def _block_pmu_values(self, device: int, records: list[PmuRef], block_dims: np.ndarray,
                          durations: np.ndarray) -> np.ndarray:
        """The AI Core PMU values of block rows of a device without frequency changes (info.json's clock)."""
        cycles, counters, blocks = record_counts(records)
        blocks = np.where(blocks != 0, blocks, block_dims)
        return self._pmu_values(device, cycles, counters, blocks, durations, np.full(len(records), np.nan))

    def _pmu_values(self, device: int, cycles: np.ndarray, counters: np.ndarray, blocks: np.ndarray,
                    durations: np.ndarray, clocks: np.ndarray) -> np.ndarray:
        facts = self.devices.get(device, {})
        return pmu_batch(
            list(facts.get("pmu_events", [])), cycles, counters, blocks,
            int(facts.get("ai_core_num", 1)), float(facts.get("aic_frequency_mhz", 0)),
            metric=str(facts.get("metric", "")), platform=int(facts.get("platform", 1)),
            duration_ns=durations, time_mhz=clocks)

    def _pmu_columns(self) -> list[str]:
        """Names of a task row's ``pmu`` values (the first device's layout): the PMU columns (aic_/aiv_ sides
        on STARS chips), then AI CPU and L2 cache values."""
        first = next(iter(self.devices), None)
        if first is None:
            return []
        stars = self._stars_pmu(first)
        if stars is not None:
            return stars.columns + extra_columns(self.devices[first])
        return _task_columns(self.devices[first])

    def _hidden_pmu_columns(self) -> list[str]:
        """Names of the PMU values after ``pmu_columns`` in a task row's ``pmu`` (first device's layout): the
        metrics msprof computes but keeps out of op_summary (STARS chips), for the database only."""
        first = next(iter(self.devices), None)
        stars = None if first is None else self._stars_pmu(first)
        return [] if stars is None else list(stars.hidden_columns)

    def _stars_pmu(self, device: int) -> StarsPmu | None:
        """The aic_/aiv_ PMU layout of a STARS device (None on other chips)."""
        facts = self.devices.get(device, {})
        if not is_stars(facts):
            return None
        layout = self.stars_pmu.get(device)
        if layout is None or layout.facts is not facts:
            layout = self.stars_pmu[device] = StarsPmu(facts)
        return layout

    def _snapshot(self, final: bool) -> Iterator[Batch]:
        self.stats.changed = False
        meta = {"final": final, **self.part.meta()}
        yield pack_columns("op_statistic", self.stats.op_rows(), "stats", dict(meta))
        yield pack_columns("api_statistic", self.stats.api_rows(), "stats", dict(meta))

    def _prune(self) -> None:
        """Host context older than every task still to come is no longer needed, nor are flips and
        execution windows older than every device task still to be named."""
        track_marks = [mark for stream, mark in self.watermarks.items() if "task_track" in stream]
        if track_marks:
            low = min(track_marks)
            first = self.pending_host.first_ts()
            if first is not None:
                low = min(low, first)
            self.host.prune_before(low)
            self.host_batches.prune_before(low)
        log_marks = [self.watermarks[stream] for stream in self.log_streams]
        if log_marks:  # a device task not yet seen starts after its stream's mark, or is open in self.starts
            device_low = min(log_marks + [q[0] for q in self.starts.values()]
                             + list(self.pending_device.oldest_starts())
                             + [t.start for q in self.parked.values() for t in q]
                             + [t.start for q in self.device_ready.values() for t in q]
                             + [t.start for q in self.static.waiting.values() for t, _ in q])
            self.flips.prune_before(device_low)
            self.static.prune_before(device_low)
            self.contexts.prune_before(device_low)
        self.devices_held = sum(len(q) for q in self.device_ready.values()) + self.static.waiting_count() + \
            sum(len(q) for q in self.parked.values())

    def tick(self, now: float) -> Iterable[Batch]:
        # pruning scans every waiting task: while records stream in, at most every PRUNE_EVERY_S
        if self.records_in == self.records_at_prune or now - self.last_prune >= PRUNE_EVERY_S:
            self._prune()
            self.last_prune, self.records_at_prune = now, self.records_in
        out = list(self._advance(now))
        out.extend(self._flush_rows(force=True))
        return out

    def finish(self) -> Iterable[Batch]:
        self.finishing = True
        now = self.clock()
        out = list(self._advance(now))
        unmatched_host = sum(len(q) for q in self.host_ready.values())
        unmatched_device = sum(len(q) for q in self.device_ready.values())
        if unmatched_host:
            self.ctx.reject("host task without a device task log", unmatched_host)
        if unmatched_device:
            self.ctx.reject("device task without a host task_track", unmatched_device)
        self.extras.leftovers(self.devices)
        self._take_extra_rows()
        launched = self.static.launched_unregistered()
        if launched:
            self.ctx.reject("device task without a host runtime track (legacy layout, launch mode)", launched)
        if self.static.waiting_count() > launched:
            self.ctx.reject("device task on a static model's stream without a load-time registration",
                            self.static.waiting_count() - launched)
        for reason, table in (("PMU record without a device task", self.pmu),
                              ("task start log without an end", self.starts)):
            left = sum(len(q) for q in table.values())
            if left:
                self.ctx.reject(reason, left)
        spans, open_starts = self.contexts.leftovers()
        for reason, left in (("FFTS+ context span no joined task contains", spans),
                             ("FFTS+ subtask start log without an end", open_starts),
                             ("FFTS+ subtask end log without a start", self.contexts.unpaired_ends)):
            if left:
                self.ctx.reject(reason, left)
        out.extend(self._flush_rows(force=True))
        out.extend(self._snapshot(final=True))
        self.unused.update(self.legacy.unused())
        return out

    def progress(self) -> dict[str, Any]:
        waiting = len(self.pending_host) + len(self.pending_device) + len(self.awaiting_pmu) + len(self.parked)
        newest = max(self.watermarks.values(), default=0)
        lag = (time.time_ns() - newest) / 1e9 if newest else 0.0
        return {"tasks": self.tasks_out, "join_waiting": waiting, "lag_s": round(lag, 3)}

    def accounting(self) -> dict[str, Any]:
        return {"records_in": self.records_in, "tasks_out": self.tasks_out, "unused": dict(self.unused),
                "subscribed_ops": self.subscribed.count, "joins_given_up": dict(self.gave_up),
                "slow_path_rows": sum(self.slow_path.values()), "slow_paths": dict(self.slow_path),
                **self.part.accounting()}


def _resolved(texts: tuple[str, ...], contexts: Sequence[int], block_dim: int, mix_block_dim: int,
              connection_id: int, thread_id: int, model_id: int, iteration: int) -> dict[str, Any]:
    """A host task's description (_describe's dict) from its parts."""
    return {"op_name": texts[0], "op_type": texts[1], "task_type": texts[2], "texts": texts, "contexts": contexts,
            "block_dim": block_dim, "mix_block_dim": mix_block_dim, "connection_id": connection_id,
            "thread_id": thread_id, "model_id": model_id, "iteration": iteration}


def _named_in(type_names: np.ndarray, chosen: frozenset[str]) -> np.ndarray:
    """Which of a column of task type names (None: unknown) are among ``chosen``."""
    found = np.zeros(len(type_names), bool)
    for name in chosen:
        found |= type_names == name
    return found


def _as_mark(low: float) -> int:
    """A watermark (an int, or infinity where no stream of its kind was seen) as an int, for numpy comparisons."""
    return int(min(low, np.iinfo(np.int64).max))


def _stream_codes(devices: np.ndarray, streams: np.ndarray) -> np.ndarray:
    """One int64 per (device, stream) (streams not negative)."""
    return (devices.astype(np.int64) << 32) | streams.astype(np.int64)


def _stream_groups(devices: np.ndarray, streams: np.ndarray) -> list[tuple[tuple[int, int], slice | np.ndarray]]:
    """Each (device, stream) of the rows and which rows are its (a slice when all are)."""
    codes = _stream_codes(devices, streams)
    if not len(codes) or (codes == codes[0]).all():
        return [((int(devices[0]), int(streams[0])), slice(None))] if len(codes) else []
    found, inverse = np.unique(codes, return_inverse=True)
    return [((code >> 32, code & STREAM_BITS), inverse == at) for at, code in enumerate(found.tolist())]


def _repeated(keys: list[Any], rows: list[int]) -> bool:
    """Whether the key of one of ``rows`` comes more than once in ``keys``."""
    counts = Counter(keys)
    return any(counts[keys[row]] > 1 for row in rows)


def _by_device(devices: np.ndarray, value: Callable[[int], int]) -> np.ndarray:
    """``value`` of each row's device, as an int64 column (worked out once per device)."""
    first = int(devices[0])
    if (devices == first).all():
        return np.full(len(devices), value(first), np.int64)
    found, inverse = np.unique(devices, return_inverse=True)
    return np.array([value(device) for device in found.tolist()], np.int64)[inverse]


def _collect_young_rarely() -> None:
    young, *older = gc.get_threshold()
    if young < YOUNG_COLLECTION_EVERY:
        gc.set_threshold(YOUNG_COLLECTION_EVERY, *older)


def _task_columns(facts: dict[str, Any]) -> list[str]:
    """Names of a task row's ``pmu`` values on non-STARS chips: the AI Core PMU metric group, then AI CPU
    and L2 cache values."""
    events = list(facts.get("pmu_events", []))
    group = pmu_columns(events, str(facts.get("metric", "")), int(facts.get("platform", 1))) if events else []
    return group + extra_columns(facts)


def _wants(task_type: str, context: int | None, flags: DeviceFlags) -> tuple[bool, bool, bool]:
    """Whether a joined task takes a PMU, an L2 cache and an AI CPU record. The device's facts (sample.json) say
    which of those streams it has (``flags``): a device without one does not wait for it (DeviceFlags)."""
    wants_pmu = task_type in PMU_TASK_TYPES and context is not None and not flags.v6  # v6 PMU: not decoded
    return wants_pmu, wants_pmu and flags.l2, task_type == "AI_CPU" and flags.aicpu


def _row_texts(info: dict[str, Any]) -> tuple[str, ...]:
    """A task row's texts, in its column order, from a description that has them as fields (legacy tracks);
    _describe gives them as ``texts``."""
    return (info["op_name"], info["op_type"], info["task_type"], info["op_state"], info["input_shapes"],
            info["input_dtypes"], info["input_formats"], info["output_shapes"], info["output_dtypes"],
            info["output_formats"], info.get("kernel_name", ""), info.get("runtime_task_type") or info["task_type"],
            info.get("hf32_eligible", "N/A"))


def _raise_marks(marks: dict[int, int], threads: np.ndarray, ends: np.ndarray) -> None:
    """Each thread's mark raised to the latest of its ``ends``."""
    if not len(threads):
        return
    found, inverse = np.unique(threads, return_inverse=True)
    latest = np.full(len(found), np.iinfo(np.int64).min, np.int64)
    np.maximum.at(latest, inverse, ends.astype(np.int64))
    for thread, end in zip(found.tolist(), latest.tolist(), strict=True):
        if end > marks.get(thread, -1):
            marks[thread] = end


def _replay(host: HostTask, model: int, iteration: int) -> HostTask:
    """One execution of a task registered at model load."""
    assert host.resolved is not None
    return HostTask(host.record, {**host.resolved, "model_id": model, "iteration": iteration}, host.legacy)


def _chip_name(platform: Any) -> str:
    """The chip model msprof's NPU_INFO gives a platform_version (msprof's chip_model.py)."""
    return raw.CHIP_NAMES.get(platform, "UNKNOWN") if isinstance(platform, int) else "UNKNOWN"


def _dicts(arr: np.ndarray) -> list[dict[str, Any]]:
    """Records as dicts of Python values: what the join looks up field by field, many times per record.
    Values are taken a column at a time (a structured array's own ``tolist`` costs some twenty times more);
    an array field stays a numpy row, as in a record's ``tolist``."""
    names = tuple(arr.dtype.names or ())
    columns = [arr[name].tolist() if arr.dtype[name].shape == () else list(arr[name]) for name in names]
    return list(map(_record_maker(names), *columns))


_record_makers: dict[tuple[str, ...], Callable[..., dict[str, Any]]] = {}


def _record_maker(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function of one record's values (one argument per field, in ``names`` order) returning its dict: a dict
    display built once per record layout (``{"name": v0, ...}``) costs a third less than ``dict(zip(…))``."""
    maker = _record_makers.get(names)
    if maker is None:
        arguments = ", ".join(f"v{i}" for i in range(len(names)))
        fields = ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names))  # names only as string literals
        maker = _record_makers[names] = eval(f"lambda {arguments}: {{{fields}}}")  # noqa: S307
    return maker


TEXTS_CACHE_LIMIT = 4096
_texts_cache: dict[tuple[tuple[int, bytes], ...], dict[str, str]] = {}
_shared_keys: dict[tuple[int, bytes], tuple[int, bytes]] = {}
# multipliers of a tensor_info row's 64-bit words for a hash of it (wrapping, odd: every word counts)
ROW_HASH = (np.arange(1, 33, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
TENSOR_SLOT_TYPE = np.dtype("<u4")  # records.DTYPES["tensor"]: tensors <u4 (5, 11)


def _tensor_keys(arr: np.ndarray) -> list[tuple[int, bytes]]:
    """What a tensor_info's texts depend on: its tensor count and slot bytes (the same op, the same key). The
    record keeps only this (its slots are read back from the bytes, :func:`_tensor_slots`), one shared copy per
    distinct key: the join holds seconds of tensor records, and a checkpoint pickles each object once."""
    slots = np.ascontiguousarray(arr["tensors"]).reshape(len(arr), -1)
    raw_slots: list[Any] = slots.view(np.dtype((np.void, slots.shape[1] * slots.itemsize))).ravel().tolist()  # bytes
    if len(_shared_keys) >= TEXTS_CACHE_LIMIT:
        _shared_keys.clear()
    shared = _shared_keys.setdefault
    return [shared(key, key) for key in zip(arr["tensor_num"].tolist(), raw_slots, strict=True)]


def _distinct_tensor_records(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of the distinct (tensor count, slots) of tensor_info records each one has, and the first of each."""
    if not len(arr):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    slots = np.ascontiguousarray(arr["tensors"]).reshape(len(arr), -1)
    rows = np.concatenate([arr["tensor_num"].astype(slots.dtype)[:, None], slots], axis=1)
    words = rows.view(np.uint64)  # (a row of 56 uint32: 28 words)
    _, firsts, codes = np.unique((words * ROW_HASH[:words.shape[1]]).sum(axis=1), return_index=True,
                                 return_inverse=True)  # by a hash of the row, taken where no two rows share one
    codes = codes.reshape(-1)
    if not (rows == rows[firsts[codes]]).all():
        _, firsts, codes = np.unique(rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).reshape(-1),
                                     return_index=True, return_inverse=True)
    return codes.reshape(-1), firsts


def _tensor_slots(record: Any) -> Any:
    """A tensor record's slots (TENSOR_SLOTS rows of 11 uint32): its numpy field, or read back from its key."""
    if isinstance(record, dict) and "tensors" not in record:
        return np.frombuffer(record["texts_key"][1], dtype=TENSOR_SLOT_TYPE).reshape(raw.TENSOR_SLOTS, -1)
    return record["tensors"]


def _tensor_texts(tensor: Any) -> dict[str, str]:
    """Shapes, data types and formats of an op's tensors; ``tensor``: one tensor record, a list of them (an op
    with more than five tensors), or None. Texts are cached by what they depend on (tensor counts, slot bytes)."""
    if type(tensor) is list and len(tensor) == 1 and type(tensor[0]) is dict and "texts_key" in tensor[0]:
        key: tuple[tuple[int, bytes], ...] = (tensor[0]["texts_key"],)  # the common case, quickly
    else:
        records = tensor if isinstance(tensor, list) else [tensor]
        if tensor is None or not all(isinstance(record, dict) and "texts_key" in record for record in records):
            return _tensor_texts_of(tensor)
        key = tuple(record["texts_key"] for record in records)
    cached = _texts_cache.get(key)
    if cached is None:
        if len(_texts_cache) >= TEXTS_CACHE_LIMIT:
            _texts_cache.clear()
        cached = _texts_cache[key] = _tensor_texts_of(tensor)
    return cached


def _tensor_texts_of(tensor: Any) -> dict[str, str]:
    texts = {f"{side}_{what}": "N/A" for side in ("input", "output") for what in ("shapes", "dtypes", "formats")}
    if tensor is None:
        return texts
    sides: dict[str, dict[str, list[str]]] = {"input": {"shapes": [], "dtypes": [], "formats": []},
                                              "output": {"shapes": [], "dtypes": [], "formats": []}}
    records = tensor if isinstance(tensor, list) else [tensor]
    slots = [slot for record in records for slot in _tensor_slots(record)[: min(int(record["tensor_num"]), 5)]]
    for slot in slots:
        side = "input" if int(slot[0]) == 0 else "output"
        dims = [str(int(d)) for d in slot[3:] if int(d) != 0]
        sides[side]["shapes"].append(",".join(dims))
        sides[side]["dtypes"].append(ge_enums.data_type_name(int(slot[2])))
        sides[side]["formats"].append(ge_enums.format_name(int(slot[1])))
    for side, values in sides.items():
        for what, items in values.items():
            if items:
                texts[f"{side}_{what}"] = ";".join(items)
    return texts
