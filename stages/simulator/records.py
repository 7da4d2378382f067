"""Raw record builders (numpy structured arrays of stages.formats.raw) and time-ordered chunks.

Every builder fills `np.zeros(n, dtype)` column by column; scalars broadcast. A `Chunk` is a run of
records of one stream sorted by the (host monotonic) time the board emits them, so a writer can cut
it at any burst boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stages.formats import host_extra, raw
from stages.simulator import names

ArrayLike = np.ndarray | int

COMPACT_DATA_LEN = 40  # payload bytes after the 24-byte header
ADDITIONAL_DATA_LEN = 232
MSPROFTX_DATA_TAG = 120
DEVICE_MODE = 1  # mode byte of device TLV / ts_track records


@dataclass(frozen=True)
class Chunk:
    """Records of one stream: `data` bytes, record `ends` (byte offsets), `emit` times (sorted)."""

    emit: np.ndarray
    ends: np.ndarray
    data: bytes

    @property
    def count(self) -> int:
        return len(self.emit)

    def split(self, until_ns: int) -> tuple[Chunk, Chunk]:
        """Records emitted at or before `until_ns`, and the rest."""
        k = int(np.searchsorted(self.emit, until_ns, side="right"))
        cut = int(self.ends[k - 1]) if k else 0
        head = Chunk(self.emit[:k], self.ends[:k], self.data[:cut])
        tail = Chunk(self.emit[k:], self.ends[k:] - cut, self.data[cut:])
        return head, tail


def merge(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> Chunk:
    """Interleave structured arrays (emit times, records) of any record sizes into one emit-ordered chunk."""
    parts = [(np.asarray(emit, dtype=np.int64), recs) for emit, recs in parts if len(recs)]
    if not parts:
        return Chunk(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
    emit = np.concatenate([e for e, _ in parts])
    order = np.argsort(emit, kind="stable")
    rows = [np.ascontiguousarray(r).view(np.uint8).reshape(len(r), r.dtype.itemsize) for _, r in parts]
    sizes = {r.shape[1] for r in rows}
    if len(sizes) == 1:  # one record size: reorder whole rows
        size = sizes.pop()
        ends = np.arange(1, len(emit) + 1, dtype=np.int64) * size
        flat = rows[0] if len(rows) == 1 else np.concatenate(rows)
        data = flat.tobytes() if (order[1:] > order[:-1]).all() else flat[order].tobytes()
        return Chunk(emit[order], ends, data)
    record_size = np.concatenate([np.full(len(r), r.shape[1], np.int64) for r in rows])
    ends = np.cumsum(record_size[order])
    starts = np.empty_like(record_size)
    starts[order] = ends - record_size[order]
    out = np.empty(int(ends[-1]), np.uint8)
    first = 0
    for r in rows:  # scatter each part's rows to their byte offsets
        out[starts[first:first + len(r), None] + np.arange(r.shape[1])] = r
        first += len(r)
    return Chunk(emit[order], ends, out.tobytes())


def interleave(chunks: Sequence[Chunk]) -> Chunk:
    """Chunks of one stream from several sources (each emit-ordered) as one emit-ordered chunk; records with equal
    emit times keep the order of ``chunks``."""
    chunks = [c for c in chunks if c.count]
    if len(chunks) <= 1:
        return chunks[0] if chunks else Chunk(np.zeros(0, np.int64), np.zeros(0, np.int64), b"")
    emit = np.concatenate([c.emit for c in chunks])
    order = np.argsort(emit, kind="stable")
    data = b"".join(c.data for c in chunks)
    offsets = np.cumsum([0] + [len(c.data) for c in chunks[:-1]])
    ends = np.concatenate([c.ends + offset for c, offset in zip(chunks, offsets, strict=True)])
    sizes = np.diff(ends, prepend=0)
    starts = (ends - sizes)[order]
    new_ends = np.cumsum(sizes[order])
    byte_index = np.repeat(starts - (new_ends - sizes[order]), sizes[order]) + np.arange(int(new_ends[-1]))
    return Chunk(emit[order], new_ends, np.frombuffer(data, np.uint8)[byte_index].tobytes())


def text_chunk(emit_ns: int, lines: Sequence[str]) -> Chunk:
    """Dictionary lines (one record each) emitted together."""
    encoded = [f"{line}\n".encode() for line in lines]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return Chunk(np.full(len(encoded), emit_ns, np.int64), ends, b"".join(encoded))


def _host_header(recs: np.ndarray, level: ArrayLike, type_: ArrayLike, thread_id: int, timestamp: ArrayLike,
                 data_len: int) -> None:
    recs["magic"] = raw.HOST_MAGIC
    recs["level"] = level
    recs["type"] = type_
    recs["thread_id"] = thread_id
    recs["data_len"] = data_len
    recs["timestamp"] = timestamp


def apis(n: int, level: ArrayLike, type_: ArrayLike, thread_id: int, begin: ArrayLike, end: ArrayLike,
         item_id: ArrayLike = 0, reserve: ArrayLike = 0) -> np.ndarray:
    """MsprofApi records (api_event stream)."""
    recs = np.zeros(n, raw.API_EVENT)
    recs["magic"] = raw.HOST_MAGIC
    recs["level"] = level
    recs["type"] = type_
    recs["thread_id"] = thread_id
    recs["reserve"] = reserve
    recs["begin"] = begin
    recs["end"] = end
    recs["item_id"] = item_id
    return recs


def events(n: int, level: int, type_: int, thread_id: int, request_id: ArrayLike, timestamp: ArrayLike,
           item_id: ArrayLike) -> np.ndarray:
    """MsprofEvent records (api_event stream, end field = EVENT_FLAG)."""
    return apis(n, level, type_, thread_id, timestamp, raw.EVENT_FLAG, item_id, request_id)


def task_tracks(n: int, thread_id: int, timestamp: ArrayLike, device_id: int, stream_id: ArrayLike,
                task_id: ArrayLike, batch_id: ArrayLike, task_type: ArrayLike, kernel_name: ArrayLike,
                num_blocks: ArrayLike, args_size: ArrayLike) -> np.ndarray:
    recs = np.zeros(n, raw.TASK_TRACK)
    _host_header(recs, raw.LEVEL_RUNTIME, names.TASK_TRACK_TYPE, thread_id, timestamp, COMPACT_DATA_LEN)
    recs["device_id"] = device_id
    recs["stream_id"] = stream_id
    recs["task_id"] = task_id
    recs["batch_id"] = batch_id
    recs["task_type"] = task_type
    recs["kernel_name"] = kernel_name
    recs["num_blocks"] = num_blocks
    recs["args_size"] = args_size
    return recs


def node_basic_infos(n: int, thread_id: int, timestamp: ArrayLike, op_name: ArrayLike, task_type: ArrayLike,
                     op_type: ArrayLike, block_num: ArrayLike) -> np.ndarray:
    recs = np.zeros(n, raw.NODE_BASIC_INFO)
    _host_header(recs, raw.LEVEL_NODE, names.NODE_BASIC_INFO_TYPE, thread_id, timestamp, COMPACT_DATA_LEN)
    recs["op_name"] = op_name
    recs["task_type"] = task_type
    recs["op_type"] = op_type
    recs["block_num"] = block_num
    return recs


def tensor_infos(thread_id: int, timestamp: ArrayLike, op_name: ArrayLike, tensor_num: ArrayLike,
                 tensors: np.ndarray) -> np.ndarray:
    """One record per row of `tensors` (n, TENSOR_SLOTS, 11) u32 — ops with more tensors span rows."""
    recs = np.zeros(len(tensors), raw.TENSOR_INFO)
    _host_header(recs, raw.LEVEL_NODE, names.TENSOR_INFO_TYPE, thread_id, timestamp, ADDITIONAL_DATA_LEN)
    recs["op_name"] = op_name
    recs["tensor_num"] = tensor_num
    recs["tensors"] = tensors
    return recs


def context_id_infos(thread_id: int, timestamp: ArrayLike, op_name: ArrayLike, contexts: np.ndarray) -> np.ndarray:
    """context_id_info (node level): an FFTS+ op's context ids 0 … contexts−1."""
    recs = np.zeros(len(contexts), host_extra.CONTEXT_ID_INFO)
    _host_header(recs, raw.LEVEL_NODE, host_extra.NODE_CONTEXT_ID_INFO_TYPE, thread_id, timestamp,
                 host_extra.ADDITIONAL_DATA_LEN)
    recs["op_name"] = op_name
    recs["ctx_id_num"] = contexts
    recs["ctx_ids"] = np.arange(host_extra.CTX_ID_MAX)
    recs["ctx_ids"][np.arange(host_extra.CTX_ID_MAX) >= np.asarray(contexts)[:, None]] = 0
    return recs


def graph_id_maps(thread_id: int, timestamp: ArrayLike, model_name: ArrayLike, graph_id: ArrayLike,
                  model_id: ArrayLike) -> np.ndarray:
    """One graph_id_map (model level) per model loaded."""
    recs = np.zeros(np.broadcast(timestamp, model_name).size, host_extra.GRAPH_ID_MAP)
    _host_header(recs, raw.LEVEL_MODEL, host_extra.MODEL_GRAPH_ID_MAP_TYPE, thread_id, timestamp,
                 host_extra.ADDITIONAL_DATA_LEN)
    recs["model_name"] = model_name
    recs["graph_id"] = graph_id
    recs["model_id"] = model_id
    return recs


def memcpy_infos(thread_id: int, timestamp: ArrayLike, data_size: ArrayLike, direction: ArrayLike,
                 device_id: int) -> np.ndarray:
    """Runtime memcpy_info (compact): bytes and direction of a synchronous copy."""
    recs = np.zeros(np.broadcast(timestamp, data_size).size, host_extra.MEMCPY_INFO)
    _host_header(recs, raw.LEVEL_RUNTIME, host_extra.RUNTIME_MEMCPY_INFO_TYPE, thread_id, timestamp,
                 host_extra.COMPACT_DATA_LEN)
    recs["data_size"] = data_size
    recs["direction"] = direction
    recs["device_id"] = device_id
    return recs


def msproftx(pid: int, thread_id: int, event_type: int, start: int, end: int, message: str) -> np.ndarray:
    """One msproftx stamp (eventType 0 marker, 2 start/end range); reported at its end."""
    rec = np.zeros(1, raw.MSPROFTX)
    _host_header(rec, raw.LEVEL_MSPROFTX, names.MSPROFTX_TYPE, thread_id, end, ADDITIONAL_DATA_LEN)
    rec["stamp_magic"] = raw.HOST_MAGIC
    rec["data_tag"] = MSPROFTX_DATA_TAG
    rec["process_id"] = pid
    rec["tx_thread_id"] = thread_id
    rec["event_type"] = event_type
    rec["start_time"] = start
    rec["end_time"] = end
    rec["message"] = message.encode()[:155]
    return rec


def rolling_cnt(first: int, n: int) -> np.ndarray:
    """4-bit rolling record counter (bits 4–7 of byte 0 of HWTS/AI Core records)."""
    return ((first + np.arange(n)) % 16).astype(np.uint8) << 4


def hwts_logs(log_type: ArrayLike, task_type: ArrayLike, stream_id: ArrayLike, task_id: ArrayLike, syscnt: ArrayLike,
              cnt: np.ndarray) -> np.ndarray:
    recs = np.zeros(len(cnt), raw.HWTS_LOG)
    recs["head"] = cnt | np.asarray(log_type, np.uint8)
    recs["task_type"] = task_type
    recs["marker"] = raw.HWTS_MARKER
    recs["task_id"] = task_id
    recs["syscnt"] = syscnt
    recs["stream_id"] = stream_id
    return recs


def aicore_pmus(stream_id: ArrayLike, task_id: ArrayLike, total_cycle: ArrayLike, pmu: np.ndarray,
                cnt: np.ndarray) -> np.ndarray:
    recs = np.zeros(len(cnt), raw.AICORE_PMU)
    recs["head"] = cnt
    recs["marker"] = raw.HWTS_MARKER
    recs["task_id"] = task_id
    recs["total_cycle"] = total_cycle
    recs["pmu"] = pmu
    recs["stream_id"] = stream_id
    return recs


def step_traces(n: int, timestamp: ArrayLike, index_id: ArrayLike, model_id: int, stream_id: ArrayLike,
                task_id: ArrayLike, tag_id: ArrayLike, chip_v6: bool = False) -> np.ndarray:
    """Tag-10 step trace / keypoint records (ts_track on every chip, TLV-framed the same on the 310; chip v6:
    tag id before the stream id, 32-bit task id)."""
    recs = np.zeros(n, raw.TS_STEP_TRACE_V6 if chip_v6 else raw.TS_STEP_TRACE)
    recs["mode"] = DEVICE_MODE
    recs["tag"] = raw.TS_TAG_STEP_TRACE
    recs["buf_size"] = recs.dtype.itemsize
    recs["timestamp"] = timestamp
    recs["index_id"] = index_id
    recs["model_id"] = model_id
    recs["stream_id"] = stream_id
    recs["task_id"] = task_id
    recs["tag_id"] = tag_id
    return recs


def task_flips(n: int, timestamp: ArrayLike, stream_id: ArrayLike, flip_num: ArrayLike) -> np.ndarray:
    """Tag-14 task flip: the flip task takes task id 0 of the new batch, as msprof's flip calculator expects."""
    recs = np.zeros(n, raw.TS_TASK_FLIP)
    recs["mode"] = DEVICE_MODE
    recs["tag"] = raw.TS_TAG_TASK_FLIP
    recs["buf_size"] = raw.TS_TASK_FLIP.itemsize
    recs["timestamp"] = timestamp
    recs["stream_id"] = stream_id
    recs["flip_num"] = flip_num
    recs["task_id"] = 0
    return recs


def mini_timelines(n: int, task_type: ArrayLike, task_state: int, stream_id: ArrayLike, task_id: ArrayLike,
                   timestamp: ArrayLike, device_id: int) -> np.ndarray:
    recs = np.zeros(n, raw.MINI_TIMELINE)
    recs["mode"] = DEVICE_MODE
    recs["tag"] = raw.MINI_TAG_TIMELINE
    recs["buf_size"] = raw.MINI_TIMELINE.itemsize
    recs["task_type"] = task_type
    recs["task_state"] = task_state
    recs["stream_id"] = stream_id
    recs["task_id"] = task_id
    recs["timestamp"] = timestamp
    recs["device_id"] = device_id
    return recs


def mini_event_counts(stream_id: ArrayLike, task_id: ArrayLike, pmu: np.ndarray, task_cycles: ArrayLike,
                      timestamp: ArrayLike, block: ArrayLike) -> np.ndarray:
    recs = np.zeros(len(pmu), raw.MINI_EVENT_COUNT)
    recs["mode"] = DEVICE_MODE
    recs["tag"] = raw.MINI_TAG_EVENT_COUNT
    recs["buf_size"] = raw.MINI_EVENT_COUNT.itemsize
    recs["stream_id"] = stream_id
    recs["task_id"] = task_id
    recs["pmu"] = pmu
    recs["task_cycles"] = task_cycles
    recs["timestamp"] = timestamp
    recs["block"] = block
    return recs


def stars_cnt(first: int, n: int) -> np.ndarray:
    """4-bit rolling record counter in bits 6–9 of the first u16 of STARS records."""
    return ((first + np.arange(n)) % 16).astype(np.uint16) << 6


def with_stars_cnt(chunk: Chunk, first: int, size: int) -> Chunk:
    """The chunk (records of `size` bytes, in file order) with STARS rolling counters from `first` on."""
    rows = np.frombuffer(chunk.data, np.uint8).reshape(-1, size).copy()
    head = np.ascontiguousarray(rows[:, :2]).view("<u2").ravel()
    head = (head & np.uint16(~0x3C0 & 0xFFFF)) | stars_cnt(first, len(head))
    rows[:, :2] = head.astype("<u2").view(np.uint8).reshape(-1, 2)
    return Chunk(chunk.emit, chunk.ends, rows.tobytes())


def stars_ids(stream_id: np.ndarray, task_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stream field, task field) of STARS records, in the three encodings msprof's STARS parser (stars_common.h) reads.

    The encoding goes by task id (mod 3), so a task's start, end and PMU records agree and every
    decoding rule runs on every run: plain; bit 12 set (task bits 13–15 in the stream field); bit 13
    set (the low 12 bits of the two ids swapped). Stream ids are below 2048, as the rules assume.
    """
    stream, task = np.asarray(stream_id, np.int64), np.asarray(task_id, np.int64)
    form = task % 3
    stream_field = np.select([form == 1, form == 2], [0x1000 | (task & 0xE000) | stream, 0x2000 | (task & 0x0FFF)],
                             stream)
    task_field = np.select([form == 1, form == 2], [task & 0x1FFF, (task & 0xF000) | stream], task)
    return stream_field.astype(np.uint16), task_field.astype(np.uint16)


def acsq_logs(func_type: ArrayLike, sqe_type: ArrayLike, stream_id: np.ndarray, task_id: np.ndarray,
              timestamp: ArrayLike, cnt: np.ndarray) -> np.ndarray:
    """ACSQ task start (func type 0) / end (1) logs of stars_soc.data."""
    recs = np.zeros(len(cnt), raw.ACSQ_LOG)
    recs["head"] = np.asarray(func_type, np.uint16) | cnt | (np.asarray(sqe_type, np.uint16) << 10)
    recs["marker"] = raw.STARS_MARKER
    recs["stream_id"], recs["task_id"] = stars_ids(stream_id, task_id)
    recs["timestamp"] = timestamp
    return recs


def acsq_logs_v6(func_type: ArrayLike, sqe_type: ArrayLike, task_id: ArrayLike, timestamp: ArrayLike,
                 cnt: np.ndarray) -> np.ndarray:
    """Chip-v6 ACSQ task start / end logs: 32 bytes, one 32-bit task id."""
    recs = np.zeros(len(cnt), raw.ACSQ_LOG_V6)
    recs["head"] = np.asarray(func_type, np.uint16) | cnt | (np.asarray(sqe_type, np.uint16) << 10)
    recs["marker"] = raw.STARS_MARKER
    recs["task_id"] = task_id
    recs["timestamp"] = timestamp
    return recs


def ffts_plus_logs(func_type: ArrayLike, stream_id: np.ndarray, task_id: np.ndarray, subtask_type: ArrayLike,
                   subtask_id: ArrayLike, timestamp: ArrayLike, cnt: np.ndarray) -> np.ndarray:
    """FFTS+ subtask (context) start (func type 100010) / end (100011) logs of stars_soc.data, thread 0."""
    recs = np.zeros(len(cnt), raw.FFTS_PLUS_LOG)
    recs["head"] = np.asarray(func_type, np.uint16) | cnt | (raw.SQE_AI_CORE << 10)
    recs["marker"] = raw.STARS_MARKER
    recs["stream_id"], recs["task_id"] = stars_ids(stream_id, task_id)
    recs["timestamp"] = timestamp
    recs["subtask_type"] = subtask_type
    recs["subtask_id"] = subtask_id
    recs["ffts"] = raw.FFTS_TYPE_PLUS << 13
    return recs


def context_pmus(ffts_type: ArrayLike, stream_id: np.ndarray, task_id: np.ndarray, total_cycle: ArrayLike,
                 pmu: np.ndarray, start: ArrayLike, end: ArrayLike, cnt: np.ndarray, subtask_type: ArrayLike = 0,
                 subtask_id: ArrayLike = 0) -> np.ndarray:
    """ContextPmu records of ffts_profile.data (plain tasks: no FFTS+ context, subtask type and id 0)."""
    recs = np.zeros(len(cnt), raw.FFTS_PMU)
    recs["head"] = raw.CONTEXT_PMU | cnt
    recs["marker"] = raw.STARS_MARKER
    recs["stream_id"], recs["task_id"] = stars_ids(stream_id, task_id)
    recs["subtask"] = subtask_type
    recs["subtask_id"] = subtask_id
    recs["ffts"] = np.asarray(ffts_type, np.uint8) << 5
    recs["total_cycle"] = total_cycle
    recs["pmu"] = pmu
    recs["start_cnt"] = start
    recs["end_cnt"] = end
    return recs
