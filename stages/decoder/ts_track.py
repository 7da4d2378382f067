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

from pipeline.stage import Batch
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


_FEW = 8  # up to this many records of a tag are decoded in Python
_FLIP_NAMES = list(raw.TS_TASK_FLIP.fields or ())
_TIMESTAMP, _STREAM = _FLIP_NAMES.index("timestamp"), _FLIP_NAMES.index("stream_id")  # in every tag's layout


def _few_fields(tag: int) -> tuple[int, ...] | None:
    """Where each decoded field after device, time and stream sits in the raw record (None: not this way)."""
    layout, kind, fields = _TAGS[tag]
    out = records.DTYPES[kind].names or ()
    if tag == raw.TS_TAG_BLOCK_NUM or out[:3] != ("device_id", "ts_ns", "stream_id") or set(out[3:]) != set(fields):
        return None
    assert layout.names is not None and layout.names.index("timestamp") == _TIMESTAMP
    assert layout.names.index("stream_id") == _STREAM
    return tuple(layout.names.index(name) for name in out[3:])


_FEW_FIELDS = {tag: picks for tag in _TAGS if (picks := _few_fields(tag)) is not None}


def _block(layout: np.dtype, first: str) -> np.dtype:
    """A view of ``layout`` whose one field "ids" spans ``first`` and the 8-byte field after it."""
    assert layout.fields is not None
    offset = layout.fields[first][1]
    parts = [("before", f"V{offset}"), ("ids", "V16"), ("after", f"V{layout.itemsize - offset - 16}")]
    return np.dtype([part for part in parts if part[1] != "V0"])


assert _TAGS[raw.TS_TAG_STEP_TRACE][2][:2] == ("index_id", "model_id")
for _layout in (raw.TS_STEP_TRACE, raw.TS_STEP_TRACE_V6, records.DTYPES["step"]):
    assert _layout.fields is not None and _layout.fields["model_id"][1] == _layout.fields["index_id"][1] + 8
assert _block(raw.TS_STEP_TRACE_V6, "index_id") == _block(raw.TS_STEP_TRACE, "index_id")
_STEP_IDS_IN = _block(raw.TS_STEP_TRACE, "index_id")  # the same offset on chip v6
_STEP_IDS_OUT = _block(records.DTYPES["step"], "index_id")


def decode_ts_track(body: bytes, device: int, clock: Clock, reject: Reject,
                    chip_v6: bool = False) -> list[tuple[str, np.ndarray | Batch]]:
    """Every record of a chunk, split by tag into decoded arrays (unknown tags rejected)."""
    body = bytes(body)
    size = raw.TS_TRACK_SIZE
    tag_bytes = body[1::size][: len(body) // size]  # byte 1 of every record: its tag
    n = len(tag_bytes)
    first = tag_bytes[:1]
    if tag_bytes.count(first) == n:  # the usual case: one tag throughout, decoded in place
        tag = first[0] if n else raw.TS_TAG_STEP_TRACE
        if tag in _TAGS:
            return [_decode_tag(tag, body, device, clock, chip_v6)] if n else []
    counts = _tag_counts(tag_bytes, first)
    picked: dict[int, bytes] = {}
    if sum(counts.values()) < n:  # unknown tags: rejected, the others picked by mask
        tags = np.frombuffer(tag_bytes, np.uint8)
        arr = np.frombuffer(body, dtype=raw.TS_STEP_TRACE, count=n)
        unknown = ~np.isin(tags, list(_TAGS))
        reject("ts_track: unknown record tag", int(unknown.sum()), records.pick(arr, unknown).tobytes())
        picked = {tag: records.pick(arr, tags == tag).tobytes() for tag, count in counts.items() if count}
    outputs: list[tuple[str, np.ndarray | Batch]] = []
    for tag, count in counts.items():
        if count and not picked and count * 2 >= n:
            outputs.append(_decode_most(tag, body, tag_bytes, counts, device, clock, chip_v6))
        elif count:
            chosen = picked.get(tag) or _records_of(body, tag_bytes, tag)
            few = count <= _FEW and tag in _FEW_FIELDS and not (chip_v6 and tag == raw.TS_TAG_STEP_TRACE)
            outputs.append(_decode_few(tag, chosen, device, clock) if few
                           else _decode_tag(tag, chosen, device, clock, chip_v6))
    return outputs


def _tag_counts(tag_bytes: bytes, first: bytes) -> dict[int, int]:
    """Records per known tag, in tag order. When the first record's tag is most of the chunk, only the
    others are counted one by one (they are a few)."""
    counts = dict.fromkeys(_TAGS, 0)
    most = tag_bytes.count(first)
    if first[0] not in _TAGS or most * 2 < len(tag_bytes):
        return {tag: tag_bytes.count(tag) for tag in _TAGS}
    counts[first[0]] = most
    others = tag_bytes.translate(None, first)
    for tag in set(others):
        if tag in counts:
            counts[tag] = others.count(tag)
    return counts


def _decode_few(tag: int, body: bytes, device: int, clock: Clock) -> tuple[str, np.ndarray]:
    """A few records of a tag (a chunk's flips): Python values and one array, where the per-field numpy
    calls of ``_decode_tag`` cost more than the records. The same values as ``_decode_tag``."""
    layout, kind, _ = _TAGS[tag]
    picks = _FEW_FIELDS[tag]
    rows = [(device, clock.to_local_ns_one(row[_TIMESTAMP]), row[_STREAM] & 0x7FF, *(row[i] for i in picks))
            for row in np.frombuffer(body, dtype=layout).tolist()]
    return kind, np.array(rows, dtype=records.DTYPES[kind])


def _decode_most(tag: int, body: bytes, tag_bytes: bytes, counts: dict[int, int], device: int, clock: Clock,
                 chip_v6: bool) -> tuple[str, Batch]:
    """The tag most records carry: the whole chunk decoded as it, then the decoded runs between the other
    records joined straight into the batch body (one copy, where picking the raw records first costs two)."""
    kind, out = _decode_tag(tag, body, device, clock, chip_v6)
    flat, size = out.view(np.uint8).data, out.dtype.itemsize
    pieces: list[memoryview] = []
    begin = 0
    for other in _positions(tag_bytes, [t for t, count in counts.items() if count and t != tag]):
        if other > begin:
            pieces.append(flat[begin * size:other * size])
        begin = other + 1
    pieces.append(flat[begin * size:len(out) * size])
    return kind, Batch(kind, counts[tag], {}, b"".join(pieces))


def _positions(tag_bytes: bytes, tags: list[int]) -> list[int]:
    """Where records with these tags sit, in order (bytes.find: no numpy call for the few of a chunk)."""
    found: list[int] = []
    for tag in tags:
        needle, at = bytes((tag,)), tag_bytes.find(tag)
        while at >= 0:
            found.append(at)
            at = tag_bytes.find(needle, at + 1)
    return sorted(found) if len(tags) > 1 else found


def _records_of(body: bytes, tag_bytes: bytes, tag: int) -> bytes:
    """The records of one of the chunk's minor tags, joined (bytes.find: no numpy call for a few records)."""
    size = raw.TS_TRACK_SIZE
    return b"".join([body[i * size:(i + 1) * size] for i in _positions(tag_bytes, [tag])])


def _decode_tag(tag: int, body: bytes, device: int, clock: Clock, chip_v6: bool) -> tuple[str, np.ndarray]:
    """Records that all carry ``tag``, as their decoded kind."""
    layout, kind, fields = _TAGS[tag]
    if chip_v6 and tag == raw.TS_TAG_STEP_TRACE:
        layout = raw.TS_STEP_TRACE_V6
    rows = np.frombuffer(body, dtype=layout, count=len(body) // raw.TS_TRACK_SIZE)
    out = np.empty(len(rows), records.DTYPES[kind])  # every field is written below
    out["device_id"] = device
    clock.to_local_ns(rows["timestamp"], out=out["ts_ns"])
    if tag == raw.TS_TAG_STEP_TRACE:  # index and model id sit side by side on both sides: one 16-byte copy
        out.view(_STEP_IDS_OUT)["ids"] = rows.view(_STEP_IDS_IN)["ids"]
        fields = fields[2:]
    for name in fields:  # straight from the strided source: no contiguous copy first
        out[name] = rows[name]
    if tag == raw.TS_TAG_BLOCK_NUM:
        out["stream_id"], out["task_id"] = _stars_ids(rows["stream_id"], rows["task_id"])
    else:
        np.bitwise_and(rows["stream_id"], _STREAM_ID_BITS, out=out["stream_id"])
    return kind, out


def _stars_ids(stream: np.ndarray, task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stream and task ids packed the STARS way (spec §1.7, msprof parser_item/stars_common.h)."""
    stream, task = stream.astype(np.int64), task.astype(np.int64)
    bit12, bit13 = (stream & 0x1000) != 0, (stream & 0x2000) != 0
    out_stream = np.where(~bit12 & bit13, (task & 0x0FFF) % 2048, stream % 2048)
    out_task = np.where(bit12, (task & 0x1FFF) | (stream & 0xE000),
                        np.where(bit13, (stream & 0x0FFF) | (task & 0xF000), task))
    return out_stream, out_task
