"""Timeline sink: msprof's chrome-trace JSON array, written as events arrive.

Example config::

    timeline:
      type: timeline
      inputs: [aggregate.tasks]
      directory: mindstudio_profiler_output   # under the run's output folder
      timestamp: "20240101120000"             # the {ts} of file names (default: when the sink opens)
      rotate_bytes: 209715200                 # start msprof_{ts}_1.json ... past this size;
                                              # at close: msprof_slice_{k}_{ts}.json, k from 0
      overlap_window_s: 5.0                   # how far back host spans are checked for overlap
      fsync: false                            # fsync on every flush (close always does)

Layout as current msprof writes it: a "CANN" process (label CPU, sort 7) with one thread per
host thread and ``{Level}@{api}`` events; an "Ascend Hardware" process per device (label
``NPU {dev}``, sort 14) with one thread per stream and one event per device task; the
application's process (label CPU, sort 6) for MsprofTx ranges; ``HostToDevice`` flows from
Node-level APIs to their device tasks; the step trace layer, a thread per model on the Ascend Hardware
process (:mod:`._step_layer`). pid = (app pid << 10) | (sort index << 5) | device id, with device id 31
for the host. ``ts`` is a µs string with three decimals, exact from ns.

The file is a complete JSON array after every batch (see :mod:`._jsonarray`), each rotated file
carries its own metadata, and no two complete events cross on one track (see :mod:`._tracks`).
"""

from __future__ import annotations

import json
import os
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from pipeline.checkpoint import pickle_state, restore_state
from pipeline.heap import collect_young_less_often
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages import tables
from stages.schema import SymbolTable, unpack_rows
from stages.sinks._arrow_text import int_text, join, or_default, us_text
from stages.sinks._format import (
    DEFAULT_OUTPUT_DIR,
    LEVELS,
    MSTX_EVENT_TYPES,
    NA,
    NODE_LEVEL,
    UINT32_NONE,
    RunInfo,
    export_timestamp,
    learn_symbols,
    level_code,
    us,
)
from stages.sinks._jsonarray import JsonArrayFile
from stages.sinks._partitions import PartitionMerge
from stages.sinks._step_layer import StepLayer, StepTrack, step_thread_name, step_tid
from stages.sinks._track_columns import place_nested, place_serial
from stages.sinks._tracks import HostTrack, SerialTrack

HOST_DEVICE_ID = 31
SORT_TX, SORT_CANN, SORT_HARDWARE = 6, 7, 14
LEVEL_CODES = np.array(sorted(LEVELS), np.int64)  # an api level's index here picks its texts below, unknown: last
LEVEL_PREFIX_TEXTS = pa.array([LEVELS[code][1] for code in LEVEL_CODES.tolist()] + ["Api"])  # {prefix}@{api}
LEVEL_NAME_TEXTS = pa.array([LEVELS[code][0] for code in LEVEL_CODES.tolist()] + [""])  # args "level"
FLOW_MEMORY = 1 << 16  # connection ids remembered to pair flows whose ends arrive apart


def format_pid(pid: int, sort_index: int, device_id: int) -> int:
    """msprof's ``GetFormatPid`` (uint32 arithmetic)."""
    return ((pid << 10) | (sort_index << 5) | (device_id & 31)) & 0xFFFFFFFF


def _js(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


_DEFAULT_TEXTS = {"": '""', NA: _js(NA)}


def _meta(name: str, pid: int, tid: int, key: str, value: Any) -> str:
    arg = json.dumps(value, ensure_ascii=False)
    return f'{{"name":"{name}","pid":{pid},"tid":{tid},"args":{{"{key}":{arg}}},"ph":"M"}}'


class _Bounded:
    """An insertion-ordered map that forgets its oldest entries past ``cap``."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data: OrderedDict[int, Any] = OrderedDict()

    def put(self, key: int, value: Any = None) -> None:
        self.data[key] = value
        if len(self.data) > self.cap:
            self.data.popitem(last=False)


class TimelineSink(Sink):
    """Streams msprof_{timestamp}.json (chrome-trace array) as task/api/tx batches arrive."""

    class Config(StageConfig):
        directory: str = Field(DEFAULT_OUTPUT_DIR, description="output folder, relative to the run output")
        timestamp: str | None = Field(None, description="the {timestamp} of file names; default: open time")
        rotate_bytes: int = Field(200 * 1024 * 1024, gt=0, description="start a new file past this size")
        overlap_window_s: float = Field(5.0, gt=0, description="how long host spans are kept for overlap checks")
        fsync: bool = Field(False, description="fsync the file on every flush()")

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, self.Config):
            config = self.Config.model_validate(config or {})
        super().__init__(config, ctx)
        collect_young_less_often()  # host tracks keep their recent spans as small objects
        self.config: TimelineSink.Config = config
        self.symbols = SymbolTable()
        self.info = RunInfo()
        self.partitions = PartitionMerge()  # a partitioned aggregator's run_info, merged
        self.timestamp = ""
        self.paths: list[Path] = []
        self._file: JsonArrayFile | None = None
        self._announced: set[tuple[int, int]] = set()
        self._serial: dict[tuple[int, int], SerialTrack] = {}
        self._nested: dict[tuple[int, int], HostTrack] = {}
        self._names: dict[tuple[int, int], str] = {}  # (level code | -1, symbol) -> JSON string
        self._texts: dict[int, str] = {}  # symbol -> JSON string
        self._node_connections = _Bounded(FLOW_MEMORY)
        self._waiting_flow_ends = _Bounded(FLOW_MEMORY)  # connection id -> (pid, tid, ts)
        self._flow_ended = _Bounded(FLOW_MEMORY)  # connection ids whose flow has its end
        self.counts = {"task": 0, "api": 0, "tx": 0, "flows": 0, "per_span": 0}
        self._json_texts: pa.Array | None = None  # every symbol's text as a JSON string, by id (not pickled)
        self._steps = StepLayer()

    # -- stage interface -------------------------------------------------------------------

    def open(self) -> None:
        self.timestamp = export_timestamp(self.config.timestamp or self.ctx.export_stamp)
        self._start_file()

    def write_batch(self, batch: Batch) -> None:
        learn_symbols(self.symbols, batch)
        if batch.meta.get("symbols"):
            self._json_texts = None
        batch = self.partitions.merged(batch)
        kind = batch.kind
        if kind == "run_info":
            rows = unpack_rows(batch)
            if rows and rows[0] and isinstance(rows[0][0], dict):
                self.info = RunInfo.from_row(rows[0][0])
            return
        if kind not in ("task", "api", "tx", "step_trace"):
            return
        if self._file is None:  # tolerate a runner that skips open()
            self.open()
        out: list[str] = []
        if kind == "task":
            self._tasks(self._table(batch, kind), out)
        elif kind == "api":
            self._apis(self._table(batch, kind), out)
        elif kind == "step_trace":
            self._step_trace(unpack_rows(batch), out)
        else:
            self._txs(unpack_rows(batch), out)
        self._write(out)

    def flush(self) -> None:
        if self._file is not None and self.config.fsync:
            self._file.sync()

    def close(self) -> None:
        if self._file is not None:
            self._file.sync()
            self._file.close()
            self._file = None
        if len(self.paths) > 1:  # rotated: msprof's slice names, k from 0, once the files are final
            final = [old.with_name(f"msprof_slice_{k}_{self.timestamp}.json") for k, old in enumerate(self.paths)]
            for path, target in zip(self.paths, final, strict=True):
                self.ctx.output_guard.attempt(target, lambda: os.replace(path, target))  # noqa: B023 (called now)
            self.paths = final

    snapshot_in_child = True  # the file's end is known in memory: a forked child may pickle the tracks

    def snapshot(self) -> bytes:
        """Tracks, names and counts, and where the current file ends (crash recovery)."""
        if self._file is not None and self.config.fsync:
            self._file.sync()
        end = (self._file.size, self._file.count) if self._file is not None else None
        return pickle.dumps({"state": pickle_state(self, skip=("_file", "_json_texts")), "end": end})

    def restore(self, state: bytes) -> None:
        """Files as they were at the checkpoint: later rotations removed, the current file cut back to its end
        then and closed again as a JSON array."""
        saved = pickle.loads(state)
        restore_state(self, saved["state"])
        if not self.paths:
            return
        directory = self.paths[-1].parent
        for index, path in enumerate(self.paths):  # a close after the checkpoint gave them their slice names
            final = directory / f"msprof_slice_{index}_{self.timestamp}.json"
            if not path.exists() and final.exists():
                os.replace(final, path)
        for later in [*directory.glob(f"msprof_{self.timestamp}_*.json"),
                      *directory.glob(f"msprof_slice_*_{self.timestamp}.json")]:
            if later not in self.paths:
                later.unlink(missing_ok=True)
        if saved["end"] is not None:
            size, count = saved["end"]
            self._file = JsonArrayFile.reopen(self.paths[-1], size, count, self.ctx.output_guard)

    def accounting(self) -> dict[str, int]:
        trimmed: list[HostTrack | StepTrack] = [*self._nested.values(), *self._steps.tracks.values()]
        adjusted = sum(t.adjusted for t in self._serial.values()) + sum(t.adjusted for t in trimmed)
        dropped = sum(t.dropped for t in trimmed)
        return {
            "tasks_written": self.counts["task"],
            "apis_written": self.counts["api"],
            "tx_written": self.counts["tx"],
            "flows_written": self.counts["flows"],
            "step_trace_written": self._steps.slices,
            "step_flows_written": self._steps.flow_starts,
            "events_adjusted_for_overlap": adjusted,
            "events_dropped_for_overlap": dropped,
            "slow_path_rows": self.counts.get("per_span", 0),  # placed by the per-span code (overlaps, ties)
            "files": len(self.paths),
        }

    # -- files ------------------------------------------------------------------------------

    def _start_file(self) -> None:
        directory = self.ctx.resolve(self.config.directory)
        suffix = f"_{len(self.paths)}" if self.paths else ""
        path = directory / f"msprof_{self.timestamp}{suffix}.json"
        self._file = JsonArrayFile(path, self.ctx.output_guard)
        self.paths.append(path)
        self._announced.clear()

    def _write(self, out: list[str]) -> None:
        if not out:
            return
        assert self._file is not None
        self._file.append(out)
        if self._file.size >= self.config.rotate_bytes:
            self._file.close()
            self._start_file()

    # -- metadata -----------------------------------------------------------------------------

    def _place_nested(self, pid: int, tid: int, start_ns: int, end_ns: int) -> tuple[int, int] | None:
        """A host span on its thread's track, trimmed so spans nest and never cross (None: nothing left)."""
        track = self._nested.get((pid, tid))
        if track is None:
            track = self._nested[(pid, tid)] = HostTrack(int(self.config.overlap_window_s * 1e9))
        return track.place(start_ns, end_ns)

    def _process(self, out: list[str], pid: int, name: str, label: str, sort_index: int) -> None:
        if (pid, -1) in self._announced:
            return
        self._announced.add((pid, -1))
        out.append(_meta("process_name", pid, 0, "name", name))
        out.append(_meta("process_labels", pid, 0, "labels", label))
        out.append(_meta("process_sort_index", pid, 0, "sort_index", sort_index))

    def _thread(self, out: list[str], pid: int, tid: int, name: str) -> None:
        if (pid, tid) in self._announced:
            return
        self._announced.add((pid, tid))
        out.append(_meta("thread_name", pid, tid, "name", name))
        out.append(_meta("thread_sort_index", pid, tid, "sort_index", tid))

    def _text(self, symbol: int, default: str = "") -> str:
        """A symbol's text as a JSON string."""
        if not symbol:
            return _DEFAULT_TEXTS.get(default) or _js(default)
        cached = self._texts.get(symbol)
        if cached is None:
            cached = self._texts[symbol] = _js(self.symbols[symbol] or default)
        return cached

    def _task_name(self, op_name: int, task_type: int) -> str:
        """Op name, else the task type (MEMCPY_ASYNC, EVENT_RECORD ...), as a JSON string."""
        key = (-1, op_name) if op_name else (-2, task_type or 0)
        cached = self._names.get(key)
        if cached is None:
            cached = self._names[key] = _js(self.symbols[key[1]] or "UNKNOWN")
        return cached

    def _api_name(self, code: int, api_name: int) -> str:
        """``{AscendCL|Model|Node|Runtime|Communication|Api}@{name}`` as a JSON string."""
        key = (code, api_name)
        cached = self._names.get(key)
        if cached is None:
            prefix = LEVELS[code][1] if code in LEVELS else "Api"
            cached = self._names[key] = _js(f"{prefix}@{self.symbols[api_name]}")
        return cached

    # -- events -------------------------------------------------------------------------------

    def _table(self, batch: Batch, kind: str) -> pa.Table:
        """The batch's Arrow table (a column batch), or one made of its msgpack rows."""
        if tables.is_table(batch):
            return tables.unpack_table(batch)
        rows = unpack_rows(batch)
        if kind == "api":  # a level given by its name
            rows = [row if type(row[2]) is int else [*row[:2], level_code(row[2]), *row[3:]] for row in rows]
        return tables.table_of_rows(kind, rows)

    def _symbol_json(self) -> pa.Array:
        """Every symbol's text as a JSON string, by id."""
        if self._json_texts is None:
            self._json_texts = pa.array([_js(text) for text in self.symbols.texts], pa.string())
        return self._json_texts

    def _tasks(self, table: pa.Table, out: list[str]) -> None:
        """Device tasks: a slice per task on its stream's track, a flow end where its launch's flow starts."""
        n = table.num_rows
        if n == 0:
            return
        column = table.column
        device = column("device_id").to_numpy().astype(np.int64)
        stream = column("stream_id").to_numpy().astype(np.int64)
        pid = ((self.info.pid << 10) | (SORT_HARDWARE << 5) | (device & 31)) & 0xFFFFFFFF
        pairs, first, group = np.unique(np.stack([pid, stream], axis=1), axis=0, return_index=True,
                                        return_inverse=True)
        serial = self._serial
        tracks: list[SerialTrack] = []
        for track_pid, track_stream in pairs.tolist():
            track = serial.get((track_pid, track_stream))
            if track is None:
                track = serial[(track_pid, track_stream)] = SerialTrack()
            tracks.append(track)
        for index in np.argsort(first).tolist():
            track_pid, track_stream = pairs[index].tolist()
            if (track_pid, -1) not in self._announced:
                device_id = int(device[first[index]])
                self._process(out, track_pid, "Ascend Hardware", f"NPU {device_id}", SORT_HARDWARE)
            self._thread(out, track_pid, track_stream, f"Stream {track_stream}")
        start, end, per_span = place_serial(tracks, group.reshape(-1), column("start_ns").to_numpy().astype(np.int64),
                                            column("end_ns").to_numpy().astype(np.int64))
        self.counts["per_span"] += per_span
        texts = self._symbol_json()
        op_name, task_type = column("op_name"), pc.fill_null(column("task_type"), 0)
        name = or_default(pc.take(texts, pc.if_else(pc.not_equal(op_name, 0), op_name, task_type)), '"UNKNOWN"')
        stream_text, ts = int_text(column("stream_id")), us_text(start)
        out += join(
            '{"name":', name, ',"pid":', int_text(pid), ',"tid":', stream_text, ',"ts":"', ts, '","dur":',
            us_text(end - start), ',"args":{"Model Id":', int_text(column("model_id")), ',"Task Type":',
            or_default(pc.take(texts, task_type), _js(NA)), ',"Physic Stream Id":', stream_text, ',"Task Id":',
            int_text(column("task_id")), ',"Batch Id":', int_text(column("batch_id")), ',"Subtask Id":',
            int_text(column("context_id"), str(UINT32_NONE)), ',"connection_id":',
            int_text(column("connection_id"), str(UINT32_NONE)), '},"ph":"X"}')
        self.counts["task"] += n
        # One flow per launch: an FFTS+ task's contexts share its connection id, the first one ends it.
        connection = column("connection_id")
        launched = pc.is_valid(connection)
        if not pc.any(launched).as_py():
            return
        rows = np.flatnonzero(launched.to_numpy(zero_copy_only=False))
        flow_ended, cap = self._flow_ended.data, self._flow_ended.cap
        node_connections, waiting = self._node_connections.data, self._waiting_flow_ends
        connections, at = pc.take(connection, rows), pc.take(ts, rows)
        ends: list[int] = []  # of rows: the tasks that end their launch's flow
        for index, (connection_id, task_pid, stream_id, task_ts) in enumerate(zip(
                connections.to_pylist(), pid[rows].tolist(), stream[rows].tolist(), at.to_pylist(), strict=True)):
            if connection_id not in flow_ended:
                if connection_id in node_connections:
                    flow_ended[connection_id] = None  # as _Bounded.put
                    if len(flow_ended) > cap:
                        flow_ended.popitem(last=False)
                    ends.append(index)
                elif connection_id not in waiting.data:
                    waiting.put(connection_id, (task_pid, stream_id, task_ts))
        if ends:
            flow_ids = _flow_ids(pc.take(connections, ends))
            if flow_ids is None:
                for connection_id, task_pid, stream_id, task_ts in zip(
                        pc.take(connections, ends).to_pylist(), pid[rows[ends]].tolist(),
                        stream[rows[ends]].tolist(), pc.take(at, ends).to_pylist(), strict=True):
                    out.append(_flow_end_text(connection_id, task_pid, stream_id, task_ts))
            else:
                out += join('{"name":"HostToDevice', flow_ids, '","ph":"f","id":"', flow_ids, '","ts":"',
                            pc.take(at, ends), '","cat":"HostToDevice","pid":', int_text(pid[rows[ends]]), ',"tid":',
                            int_text(stream[rows[ends]]), ',"bp":"e"}')

    def _step_trace(self, rows: list[list[Any]], out: list[str]) -> None:
        """The step trace layer: a thread per model on the device's Ascend Hardware process."""
        for row in rows:
            device_id, model_id = row[0], row[1]
            pid = format_pid(self.info.pid, SORT_HARDWARE, device_id)
            self._process(out, pid, "Ascend Hardware", f"NPU {device_id}", SORT_HARDWARE)
            tid = step_tid(model_id)
            self._thread(out, pid, tid, step_thread_name(model_id))
            self._steps.events(row, pid, out)

    def _apis(self, table: pa.Table, out: list[str]) -> None:
        """Host APIs: a slice per API on its thread's track (spans nest, never cross), a flow start per Node API."""
        pid = format_pid(self.info.pid, SORT_CANN, HOST_DEVICE_ID)
        self._process(out, pid, "CANN", "CPU", SORT_CANN)
        n = table.num_rows
        if n == 0:
            return
        thread = table.column("thread_id").to_numpy().astype(np.int64)
        start = table.column("start_ns").to_numpy().astype(np.int64)
        end = table.column("end_ns").to_numpy().astype(np.int64)
        threads, first, group = np.unique(thread, return_index=True, return_inverse=True)
        group = group.reshape(-1)
        kept = np.ones(n, bool)
        window = int(self.config.overlap_window_s * 1e9)
        for index in np.argsort(first).tolist():
            thread_id = int(threads[index])
            self._thread(out, pid, thread_id, f"Thread {thread_id}")
            track = self._nested.get((pid, thread_id))
            if track is None:
                track = self._nested[(pid, thread_id)] = HostTrack(window)
            rows = np.flatnonzero(group == index) if len(threads) > 1 else np.arange(n)
            placed_s, placed_e, placed, per_span = place_nested(track, start[rows], end[rows])
            start[rows], end[rows], kept[rows] = placed_s, placed_e, placed
            self.counts["per_span"] += per_span
        code = pc.fill_null(table.column("level"), -3).to_numpy().astype(np.int64)
        if not kept.all():
            table, start, end, code = table.filter(pa.array(kept)), start[kept], end[kept], code[kept]
        column = table.column
        level = np.searchsorted(LEVEL_CODES, code)  # the level's place among the known ones, else past them
        level[(level == len(LEVEL_CODES)) | (LEVEL_CODES[np.minimum(level, len(LEVEL_CODES) - 1)] != code)] = len(
            LEVEL_CODES)
        texts = self._symbol_json()
        name = pc.take(texts, column("name"))
        thread_text, ts = int_text(column("thread_id")), us_text(start)
        out += join(
            '{"name":"', pc.take(LEVEL_PREFIX_TEXTS, level), "@", pc.utf8_slice_codeunits(name, 1),
            f',"pid":{pid},"tid":', thread_text, ',"ts":"', ts, '","dur":', us_text(end - start),
            ',"args":{"Thread Id":', thread_text, ',"Mode":', pc.take(texts, column("struct_type")), ',"level":"',
            pc.take(LEVEL_NAME_TEXTS, level), '","id":', name, ',"item_id":"', int_text(column("item_id")),
            '","connection_id":', int_text(column("connection_id"), str(UINT32_NONE)), '},"ph":"X"}')
        self.counts["api"] += len(start)
        connection = column("connection_id")
        node = pc.and_(pc.equal(pa.array(code), NODE_LEVEL), pc.is_valid(connection))
        if not pc.any(node).as_py():
            return
        rows = np.flatnonzero(node.to_numpy(zero_copy_only=False))
        waiting = self._waiting_flow_ends.data
        connections = pc.take(connection, rows)
        flow_ids = _flow_ids(connections)
        if flow_ids is None:  # connection ids past uint32: one at a time
            for connection_id, thread_id, at in zip(connections.to_pylist(), thread_text.take(rows).to_pylist(),
                                                    pc.take(ts, rows).to_pylist(), strict=True):
                out.append(self._flow_start(connection_id, pid, thread_id, at))
                self._node_connections.put(connection_id)
                ended = waiting.pop(connection_id, None)
                if ended is not None:
                    out.append(self._flow_end(connection_id, *ended))
            return
        out += join('{"name":"HostToDevice', flow_ids, '","ph":"s","cat":"HostToDevice","id":"', flow_ids,
                    f'","pid":{pid},"tid":', thread_text.take(rows), ',"ts":"', pc.take(ts, rows), '"}')
        self.counts["flows"] += len(rows)
        remembered, cap = self._node_connections.data, self._node_connections.cap
        for connection_id in connections.to_pylist():  # as _Bounded.put, and the flow ends that waited for it
            remembered[connection_id] = None
            if len(remembered) > cap:
                remembered.popitem(last=False)
            ended = waiting.pop(connection_id, None)
            if ended is not None:
                out.append(self._flow_end(connection_id, *ended))

    def _txs(self, rows: list[list[Any]], out: list[str]) -> None:
        pid = format_pid(self.info.pid, SORT_TX, HOST_DEVICE_ID)
        self._process(out, pid, self.info.pid_name or "MsprofTx", "CPU", SORT_TX)
        written = 0
        for row in rows:
            (start_ns, end_ns, _process_id, thread_id, category, event_type, payload_type,
             payload_value, message_type, message, domain, _mark_id) = row
            self._thread(out, pid, thread_id, f"Thread {thread_id}")
            placed = self._place_nested(pid, thread_id, start_ns, end_ns)
            if placed is None:
                continue
            start_ns, end_ns = placed
            kind = MSTX_EVENT_TYPES.get(event_type, "") if isinstance(event_type, int) else str(event_type)
            if kind == "marker_ex":
                args: dict[str, Any] = {"event_type": kind, "domain": domain}
            else:
                args = {"Category": str(category), "Payload_type": payload_type,
                        "Payload_value": payload_value, "Message_type": message_type, "event_type": kind}
            out.append(
                f'{{"name":{_js(self.symbols[message] if isinstance(message, int) else str(message or ""))},'
                f'"pid":{pid},"tid":{thread_id},"ts":"{us(start_ns)}","dur":{us(end_ns - start_ns)},'
                f'"args":{json.dumps(args, ensure_ascii=False, separators=(",", ":"))},"ph":"X"}}'
            )
            written += 1
        self.counts["tx"] += written

    def _flow_start(self, connection_id: int, pid: int, tid: int, ts: str) -> str:
        flow_id = connection_id << 32
        self.counts["flows"] += 1
        return (f'{{"name":"HostToDevice{flow_id}","ph":"s","cat":"HostToDevice","id":"{flow_id}",'
                f'"pid":{pid},"tid":{tid},"ts":"{ts}"}}')

    def _flow_end(self, connection_id: int, pid: int, tid: int, ts: str) -> str:
        self._flow_ended.put(connection_id)
        return _flow_end_text(connection_id, pid, tid, ts)


def _flow_end_text(connection_id: int, pid: int, tid: int, ts: str) -> str:
    flow_id = connection_id << 32
    return (f'{{"name":"HostToDevice{flow_id}","ph":"f","id":"{flow_id}","ts":"{ts}",'
            f'"cat":"HostToDevice","pid":{pid},"tid":{tid},"bp":"e"}}')


def _flow_ids(connections: pa.Array) -> pa.Array | None:
    """HostToDevice flow ids (connection id << 32) as text; None when an id is past uint32 (Python ints do it)."""
    ids = connections.to_numpy(zero_copy_only=False)
    if len(ids) and (ids.min() < 0 or ids.max() >= 1 << 32):
        return None
    return int_text(ids.astype(np.uint64) << np.uint64(32))
