"""ts_track.data on HWTS-class chips: fixed 40-byte records, one decoded kind per tag (spec §1.7).

Tag 10 step trace → ``step``, 11 TS memcpy → ``ts_memcpy``, 12 task type → ``ts_task_type``,
13 old-format task flip → ``ts_flip_old``, 14 task flip → ``flip``, 15 block num → ``ts_block_num``.
Any other tag is rejected. On chip v6 a step trace record puts its tag id before the stream id
and carries a 32-bit task id (msprof STEP_TRACE_V6_FMT). Stream ids keep their low 11 bits, as
msprof's readers do; block num records first undo the STARS id packing (msprof's BlockNumBean
applies StarsCommon to them on every chip; on HWTS chips, whose stream ids stay below 2048, it
changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stages.decoder import records
from stages.decoder.timebase import Clock
from stages.formats import raw

Reject = Callable[[str, int, bytes], None]
_STREAM_ID_BITS = np.array(0x7FF, np.uint16)  # mod 2048, as a 0-d array: numpy takes it in faster than an int

# tag → (raw layout, decoded kind, fields copied as they are besides stream id and time)
_TAGS: dict[int, tuple[np.dtype, str, tuple[str, ...]]] = {
    raw.TS_TAG_STEP_TRACE: (raw.TS_STEP_TRACE, "step", ("index_id", "model_id", "task_id", "tag_id")),
    raw.TS_TAG_TS_MEMCPY: (raw.TS_MEMCPY, "ts_memcpy", ("task_id", "task_state")),
    raw.TS_TAG_TASK_TYPE: (raw.TS_TASK_TYPE, "ts_task_type", ("task_id", "task_type", "task_state")),
    raw.TS_TAG_TASK_FLIP_OLD: (raw.TS_TASK_FLIP, "ts_flip_old", ("flip_num", "task_id")),
    raw.TS_TAG_TASK_FLIP: (raw.TS_TASK_FLIP, "flip", ("flip_num", "task_id")),
    raw.TS_TAG_BLOCK_NUM: (raw.TS_BLOCK_NUM, "ts_block_num", ("task_id", "block_num")),
}


def decode_ts_track(body: bytes, device: int, clock: Clock, reject: Reject,
                    chip_v6: bool = False) -> list[tuple[str, np.ndarray]]:
    """Every record of a chunk, split by tag into decoded arrays (unknown tags rejected)."""
    arr = np.frombuffer(body, dtype=raw.TS_STEP_TRACE)
    tags = np.ascontiguousarray(arr["tag"])
    tag_bytes = tags.tobytes()
    if tag_bytes.count(tag_bytes[:1]) == len(tag_bytes):  # the usual case: one tag throughout
        counts = dict.fromkeys(_TAGS, 0) | {tag_bytes[0]: len(tag_bytes)}
    else:
        per_tag = np.bincount(tags).tolist()
        counts = {tag: per_tag[tag] if tag < len(per_tag) else 0 for tag in _TAGS}
    if sum(counts[tag] for tag in _TAGS) < len(tags):
        unknown = ~np.isin(tags, list(_TAGS))
        reject("ts_track: unknown record tag", int(unknown.sum()), records.pick(arr, unknown).tobytes())
    ts = clock.to_local_ns(arr["timestamp"])  # at the same offset in every layout
    outputs: list[tuple[str, np.ndarray]] = []
    for tag, (layout, kind, fields) in _TAGS.items():
        if not counts[tag]:
            continue
        if chip_v6 and tag == raw.TS_TAG_STEP_TRACE:
            layout = raw.TS_STEP_TRACE_V6
        rows, rows_ts, keep = np.frombuffer(body, dtype=layout), ts, None
        if counts[tag] < len(rows):
            which = tags == tag
            if counts[tag] * 2 > len(rows):  # most records: decoded among the others (no copy), which are dropped after
                keep = which
            else:  # a few records: picked first
                rows, rows_ts = records.pick(rows, which), ts[which]
        out = records.blank(records.DTYPES[kind], len(rows), device)
        out["ts_ns"] = rows_ts
        records.copy_fields(out, rows, fields)
        if tag == raw.TS_TAG_BLOCK_NUM:
            out["stream_id"], out["task_id"] = _stars_ids(rows["stream_id"], rows["task_id"])
        else:
            out["stream_id"] = rows["stream_id"] & _STREAM_ID_BITS
        outputs.append((kind, out if keep is None else records.pick(out, keep)))
    return outputs


def _stars_ids(stream: np.ndarray, task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stream and task ids packed the STARS way (spec §1.7, msprof parser_item/stars_common.h)."""
    stream, task = stream.astype(np.int64), task.astype(np.int64)
    bit12, bit13 = (stream & 0x1000) != 0, (stream & 0x2000) != 0
    out_stream = np.where(~bit12 & bit13, (task & 0x0FFF) % 2048, stream % 2048)
    out_task = np.where(bit12, (task & 0x1FFF) | (stream & 0xE000),
                        np.where(bit13, (stream & 0x0FFF) | (task & 0xF000), task))
    return out_stream, out_task
