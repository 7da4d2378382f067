"""The pure-Python baseline of bench/decode.py: what a careful parser without numpy does.

Each parser takes the chunk bodies, the clock and the device id and returns, per decoded kind, one tuple per
record holding the decoder's output fields in its dtype's order (array fields as flat tuples). It applies the
same filters and the same integer time-base conversion (``ticks * scale + shift`` for clocks whose frequency
divides 1 GHz, as the bench's do). Struct formats come from the raw numpy layouts, so both read the same bytes;
field indices are looked up once, outside the loops. Only what the bench data holds is handled (other ts_track
tags and BlockPmu records raise).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from math import prod
from operator import itemgetter
from typing import Any

import numpy as np

from stages.decoder import host, host_records, records
from stages.decoder.timebase import Clock
from stages.formats import host_extra, raw

Rows = dict[str, list[tuple]]
Parser = Callable[[list[bytes], Clock, int], Rows]
_CODES = {("u", 1): "B", ("u", 2): "H", ("u", 4): "I", ("u", 8): "Q", ("i", 1): "b", ("i", 2): "h", ("i", 4): "i",
          ("i", 8): "q", ("f", 8): "d"}


def layout(dtype: np.dtype, names: Iterable[str]) -> tuple[struct.Struct, dict[str, Any]]:
    """A struct reading only ``names`` of a packed record dtype (the other bytes skipped), and where each
    field's values sit in its tuple (fields in byte order; array fields as slices)."""
    fields: Any = dtype.fields or {}
    fmt, where, pos, count = "<", {}, 0, 0
    for name in sorted(names, key=lambda n: fields[n][1]):
        ftype, offset = fields[name][0], fields[name][1]
        fmt += f"{offset - pos}x" if offset > pos else ""
        base, n = ftype.base, prod(ftype.shape)
        fmt += f"{n}{_CODES[base.kind, base.itemsize]}"
        where[name] = count if not ftype.shape else slice(count, count + n)
        count, pos = count + n, offset + ftype.itemsize
    fmt += f"{dtype.itemsize - pos}x" if dtype.itemsize > pos else ""
    unpack = struct.Struct(fmt)
    assert unpack.size == dtype.itemsize, (fmt, dtype)
    return unpack, where


def scalars(dtype: np.dtype, *names: str) -> struct.Struct:
    """A struct reading these scalar fields, to be unpacked into names: they must be given in byte order."""
    unpack, where = layout(dtype, names)
    assert list(where.values()) == list(range(len(names))) and list(where) == list(names), names
    return unpack


def scale_shift(clock: Clock) -> tuple[int, int]:
    """ns = ticks * scale + shift (the bench's clocks tick at a divisor of 1 GHz)."""
    scale, rest = divmod(1_000_000, clock.freq_khz)
    assert rest == 0, clock
    return scale, clock.mono0 + clock.local_offset - clock.cnt0 * scale


def api_event(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack = scalars(raw.API_EVENT, "level", "type", "thread_id", "reserve", "begin", "end", "item_id")
    scale, shift = scale_shift(clock)
    apis: list[tuple] = []
    events: list[tuple] = []
    flag = raw.EVENT_FLAG
    for body in bodies:
        for level, type_, thread, reserve, begin, end, item in unpack.iter_unpack(body):
            if begin == 0:
                continue
            if end == flag:
                events.append((thread, level, type_, item, reserve, begin * scale + shift))
            else:
                apis.append((thread, level, type_, item, reserve, begin * scale + shift, end * scale + shift))
    return {"event": events, "api": apis}


def _host_copy(kind: str, out: np.dtype, raw_layout: np.dtype) -> Parser:
    """Host records that copy their fields and convert the header time (output fields: thread id, ts, rest)."""
    names = (out.names or ())[2:]
    unpack, at = layout(raw_layout, ("thread_id", "timestamp", *names))
    rest = itemgetter(*(at[name] for name in names))
    thread, stamp = at["thread_id"], at["timestamp"]

    def parse(bodies: list[bytes], clock: Clock, device: int) -> Rows:
        scale, shift = scale_shift(clock)
        rows = [(f[thread], f[stamp] * scale + shift, *rest(f)) for body in bodies for f in unpack.iter_unpack(body)]
        return {kind: rows}

    return parse


def task_track(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack = scalars(raw.TASK_TRACK, "thread_id", "timestamp", "device_id", "stream_id", "task_id", "batch_id",
                     "task_type", "kernel_name", "num_blocks")
    scale, shift = scale_shift(clock)
    return {"task_track": [(thread, stamp * scale + shift, dev & 0x0FFF, stream, task, batch, type_, kernel, blocks)
                           for body in bodies
                           for thread, stamp, dev, stream, task, batch, type_, kernel, blocks
                           in unpack.iter_unpack(body)]}


def node_basic_info(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    """OP State comes from the stream's file group (host.op_state_of); the bench's stream is not an aging one."""
    unpack = scalars(raw.NODE_BASIC_INFO, "thread_id", "timestamp", "op_name", "task_type", "op_type", "block_num",
                     "op_flag")
    scale, shift = scale_shift(clock)
    state = host.op_state_of("node_basic_info")
    return {"node_basic": [(thread, stamp * scale + shift, name, op_type, task_type, blocks, state, flag)
                           for body in bodies
                           for thread, stamp, name, task_type, op_type, blocks, flag in unpack.iter_unpack(body)]}


def hccl_op_info(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack = scalars(host_extra.HCCL_OP_INFO, "thread_id", "timestamp", "flags", "data_type", "alg_type", "count",
                     "group_name")
    scale, shift = scale_shift(clock)
    return {"hccl_op": [(thread, stamp * scale + shift, flags & 1, (flags >> 1) & 1, data_type, alg, count, group)
                        for body in bodies
                        for thread, stamp, flags, data_type, alg, count, group in unpack.iter_unpack(body)]}


def hwts(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack = scalars(raw.HWTS_LOG, "head", "task_id", "syscnt", "stream_id")
    scale, shift = scale_shift(clock)
    rows: list[tuple] = []
    last, lost = None, 0
    for body in bodies:
        for head, task, syscnt, stream in unpack.iter_unpack(body):
            counter = head >> 4
            if last is not None:
                lost += (counter - last - 1) % 16
            last = counter
            log_type = head & 0x7
            if log_type > raw.HWTS_TASK_END:
                continue
            rows.append((device, stream % 2048, task, 2 if log_type == raw.HWTS_TASK_START else 3,
                         syscnt * scale + shift))
    return {"task_log": rows}


def aicore(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack, at = layout(raw.AICORE_PMU, ("head", "task_id", "total_cycle", "pmu", "stream_id"))
    head, stream, task, total, pmu = at["head"], at["stream_id"], at["task_id"], at["total_cycle"], at["pmu"]
    rows: list[tuple] = []
    last, lost = None, 0
    for body in bodies:
        for f in unpack.iter_unpack(body):
            counter = f[head] >> 4
            if last is not None:
                lost += (counter - last - 1) % 16
            last = counter
            rows.append((device, f[stream] % 2048, f[task], 0, f[total], f[pmu], 0))
    return {"pmu": rows}


def ts_track(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    """Records read as step traces (the usual tag), re-read in their own layout when the tag says otherwise."""
    step = scalars(raw.TS_STEP_TRACE, "tag", "timestamp", "index_id", "model_id", "stream_id", "task_id", "tag_id")
    flip = scalars(raw.TS_TASK_FLIP, "timestamp", "stream_id", "flip_num", "task_id")
    scale, shift = scale_shift(clock)
    steps: list[tuple] = []
    flips: list[tuple] = []
    size = raw.TS_TRACK_SIZE
    for body in bodies:
        for i, (tag, stamp, index, model, stream, task, tag_id) in enumerate(step.iter_unpack(body)):
            if tag == raw.TS_TAG_STEP_TRACE:
                steps.append((device, stamp * scale + shift, index, model, stream % 2048, task, tag_id))
            elif tag == raw.TS_TAG_TASK_FLIP:
                stamp, stream, flip_num, task = flip.unpack_from(body, i * size)
                flips.append((device, stamp * scale + shift, stream % 2048, flip_num, task))
            else:
                raise ValueError(f"ts_track tag {tag}: not in the bench data")
    return {"step": steps, "flip": flips}


def _stars_ids(stream: int, task: int) -> tuple[int, int]:
    if stream & 0x1000:
        return stream & 0x07FF, (task & 0x1FFF) | (stream & 0xE000)
    if stream & 0x2000:
        return task & 0x07FF, (stream & 0x0FFF) | (task & 0xF000)
    return stream & 0x07FF, task


def stars_soc(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack = scalars(raw.ACSQ_LOG, "head", "stream_id", "task_id", "timestamp")
    scale, shift = scale_shift(clock)
    rows: list[tuple] = []
    for body in bodies:
        for head, stream_field, task_field, stamp in unpack.iter_unpack(body):
            func = head & 0x3F
            if func > raw.ACSQ_END:
                continue
            stream, task = _stars_ids(stream_field, task_field)
            rows.append((device, stream, task, 2 if func == raw.ACSQ_START else 3, stamp * scale + shift))
    return {"task_log": rows}


def _core(ffts_type: int, subtask_type: int) -> int:
    plus = ffts_type == raw.FFTS_TYPE_PLUS
    if ffts_type == raw.FFTS_TYPE_AIC or (plus and subtask_type == raw.SUBTASK_AIC):
        return records.CORE_AIC
    if ffts_type == raw.FFTS_TYPE_MIX_AIC or (plus and subtask_type == raw.SUBTASK_MIX_AIC):
        return records.CORE_MIX_AIC
    if plus and subtask_type == raw.SUBTASK_MIX_AIV:
        return records.CORE_MIX_AIV
    return records.CORE_AIV


def ffts_profile(bodies: list[bytes], clock: Clock, device: int) -> Rows:
    unpack, at = layout(raw.FFTS_PMU, ("head", "stream_id", "task_id", "subtask", "subtask_id", "ffts", "total_cycle",
                                       "pmu", "start_cnt", "end_cnt"))
    head, stream_at, task_at, subtask_at, subtask_id, ffts_at, total, pmu, start, end = at.values()
    scale, shift = scale_shift(clock)
    rows: list[tuple] = []
    for body in bodies:
        for f in unpack.iter_unpack(body):
            if f[head] & 0x3F != raw.CONTEXT_PMU:
                raise ValueError("ffts_profile: only ContextPmu records are in the bench data")
            stream, task = _stars_ids(f[stream_at], f[task_at])
            ffts_type, subtask = f[ffts_at] >> 5, f[subtask_at]
            context = f[subtask_id] if ffts_type == raw.FFTS_TYPE_PLUS else 0xFFFFFFFF
            rows.append((device, stream, task, context, f[end] * scale + shift, f[start] * scale + shift, f[total],
                         f[pmu], _core(ffts_type, subtask & 0xFF), (subtask >> 10) & 1))
    return {"context_pmu": rows}


PARSERS: dict[str, Parser] = {
    "api_event": api_event, "task_track": task_track,
    "node_basic_info": node_basic_info,
    "tensor_info": _host_copy("tensor", records.TENSOR, raw.TENSOR_INFO),
    **{kind: _host_copy(host_records.EXTRA_KINDS[kind], records.DTYPES[host_records.EXTRA_KINDS[kind]], dtype)
       for kind, dtype in host_extra.LAYOUTS.items() if kind != "hccl_op_info"},
    "hccl_op_info": hccl_op_info,
    "hwts": hwts, "aicore": aicore, "ts_track": ts_track, "stars_soc": stars_soc, "ffts_profile": ffts_profile,
}
