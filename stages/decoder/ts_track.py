"""ts_track.data on HWTS-class chips: fixed 40-byte records, one decoded kind per tag.

Tag 10 step trace → ``step``, 11 TS memcpy → ``ts_memcpy``, 12 task type → ``ts_task_type``,
13 old-format task flip → ``ts_flip_old``, 14 task flip → ``flip``, 15 block num → ``ts_block_num``.
Any other tag is rejected. On chip v6 a step trace record puts its tag id before the stream id
and carries a 32-bit task id (msprof STEP_TRACE_V6_FMT). Stream ids keep their low 11 bits, as
msprof's readers do; block num records first undo the STARS id packing (msprof's BlockNumBean
applies StarsCommon to them on every chip; on HWTS chips, whose stream ids stay below 2048, it
changes nothing).
"""

from __future__ import annotations

import struct
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


_SIZE = raw.TS_TRACK_SIZE
_FEW = 8  # up to this many records of a tag are decoded in Python
_FLIP_NAMES = list(raw.TS_TASK_FLIP.fields or ())
_TIMESTAMP, _STREAM = _FLIP_NAMES.index("timestamp"), _FLIP_NAMES.index("stream_id")  # in every tag's layout
_CODES = {"u1": "B", "<u2": "H", "<u4": "I", "<u8": "Q", "<i8": "q"}


def _record_struct(dtype: np.dtype) -> struct.Struct | None:
    """A struct reading a packed record dtype field by field, array fields skipped as padding (None: the dtype
    has gaps or other field types)."""
    fmt, offset = "<", 0
    for name in dtype.names or ():
        field_type, field_offset = dtype.fields[name][:2]  # type: ignore[index]
        code = field_type.str.replace("|", "")
        if field_offset != offset:
            return None
        if field_type.subdtype is not None:  # the ts_track layouts' arrays are reserved bytes
            fmt += f"{field_type.itemsize}x"
        elif code in _CODES:
            fmt += _CODES[code]
        else:
            return None
        offset += field_type.itemsize
    return struct.Struct(fmt) if offset == dtype.itemsize else None


def _few_layout(tag: int) -> tuple[struct.Struct, struct.Struct, tuple[int, ...]] | None:
    """(raw record struct, decoded record struct, where each decoded field after device, time and stream sits in
    the raw record's values); None: this tag is not decoded this way."""
    layout, kind, fields = _TAGS[tag]
    out = records.DTYPES[kind].names or ()
    raw_struct, out_struct = _record_struct(layout), _record_struct(records.DTYPES[kind])
    if tag == raw.TS_TAG_BLOCK_NUM or out[:3] != ("device_id", "ts_ns", "stream_id") or set(out[3:]) != set(fields) \
            or raw_struct is None or out_struct is None:
        return None
    scalars = [name for name in layout.names or () if layout[name].subdtype is None]
    assert scalars.index("timestamp") == _TIMESTAMP and scalars.index("stream_id") == _STREAM
    return raw_struct, out_struct, tuple(scalars.index(name) for name in out[3:])


_FEW_LAYOUTS = {tag: few for tag in _TAGS if (few := _few_layout(tag)) is not None}
assert raw.TS_TAG_TASK_FLIP in _FEW_LAYOUTS

# A step trace chunk is decoded from a copy of itself: the decoded layout keeps time, index and model id where
# the raw record has them (stages/decoder/records.py STEP).
for _layout in (raw.TS_STEP_TRACE, raw.TS_STEP_TRACE_V6):
    assert _layout.itemsize == records.STEP.itemsize
    assert [_layout.fields[name][1] for name in ("timestamp", "index_id", "model_id")] == [  # type: ignore[index]
        records.STEP.fields[name][1] for name in ("ts_ns", "index_id", "model_id")]  # type: ignore[index]


def decode_ts_track(body: bytes, device: int, clock: Clock, reject: Reject,
                    chip_v6: bool = False) -> list[tuple[str, np.ndarray | Batch]]:
    """Every record of a chunk, split by tag into decoded arrays (unknown tags rejected)."""
    body = bytes(body)
    tag_bytes = body[1::_SIZE][: len(body) // _SIZE]  # byte 1 of every record: its tag
    n = len(tag_bytes)
    if not n:
        return []
    first = tag_bytes[:1]
    main, most = first[0], tag_bytes.count(first)
    if main in _TAGS and most == n:  # the usual case: one tag throughout
        return [_decode_tag(main, body, device, clock, chip_v6)]
    if main in _TAGS and most * 2 >= n:  # the next: a few other records (a flip) among one tag's
        return _decode_mostly(main, body, tag_bytes, device, clock, reject, chip_v6)
    return _decode_mixed(body, tag_bytes, device, clock, reject, chip_v6)


def _decode_mostly(main: int, body: bytes, tag_bytes: bytes, device: int, clock: Clock, reject: Reject,
                   chip_v6: bool) -> list[tuple[str, np.ndarray | Batch]]:
    """The chunk's first tag is most of it: the other records are found one by one (bytes.find), decoded on
    their own and cut out of a copy of the chunk, which is then decoded as the main tag."""
    outputs: list[tuple[int, tuple[str, np.ndarray | Batch]]] = []
    holes: list[int] = []
    unknown: list[int] = []
    for tag in set(tag_bytes.translate(None, tag_bytes[:1])):
        at = _positions(tag_bytes, tag)
        holes += at
        if tag not in _TAGS:
            unknown += at
        elif len(at) <= _FEW and tag in _FEW_LAYOUTS:
            outputs.append((tag, _decode_few(tag, body, at, device, clock)))
        else:
            outputs.append((tag, _decode_tag(tag, _records_at(body, at), device, clock, chip_v6)))
    if unknown:
        reject("ts_track: unknown record tag", len(unknown), _records_at(body, sorted(unknown)))
    kept = bytearray(body)
    for i in sorted(holes, reverse=True):
        del kept[i * _SIZE:(i + 1) * _SIZE]
    outputs.append((main, _decode_tag(main, kept, device, clock, chip_v6)))
    return [decoded for _, decoded in sorted(outputs, key=lambda pair: pair[0])]


def _decode_mixed(body: bytes, tag_bytes: bytes, device: int, clock: Clock, reject: Reject,
                  chip_v6: bool) -> list[tuple[str, np.ndarray | Batch]]:
    """No tag leads from the first record: each tag's records picked by mask (unknown ones rejected)."""
    tags = np.frombuffer(tag_bytes, np.uint8)
    arr = np.frombuffer(body, dtype=raw.TS_STEP_TRACE, count=len(tags))
    unknown = ~np.isin(tags, list(_TAGS))
    if unknown.any():
        reject("ts_track: unknown record tag", int(unknown.sum()), records.pick(arr, unknown).tobytes())
    outputs: list[tuple[str, np.ndarray | Batch]] = []
    for tag in _TAGS:
        chosen = tags == tag
        count = int(np.count_nonzero(chosen))
        if not count:
            continue
        if count <= _FEW and tag in _FEW_LAYOUTS:
            outputs.append(_decode_few(tag, body, np.flatnonzero(chosen).tolist(), device, clock))
        else:
            outputs.append(_decode_tag(tag, records.pick(arr, chosen).tobytes(), device, clock, chip_v6))
    return outputs


def _decode_few(tag: int, body: bytes, positions: list[int], device: int, clock: Clock) -> tuple[str, Batch]:
    """A few records of a tag (a chunk's flips), read where they sit, in Python values straight into the batch
    body: numpy's per-call cost is more than these records'. The same bytes as ``_decode_tag``."""
    raw_struct, out_struct, picks = _FEW_LAYOUTS[tag]
    kind, unpack, pack, to_ns = _TAGS[tag][1], raw_struct.unpack_from, out_struct.pack, clock.to_local_ns_one
    rows = []
    for i in positions:
        row = unpack(body, i * _SIZE)
        rows.append(pack(device, to_ns(row[_TIMESTAMP]), row[_STREAM] & 0x7FF, *[row[j] for j in picks]))
    return kind, Batch(kind, len(rows), {}, b"".join(rows))


def _positions(tag_bytes: bytes, tag: int) -> list[int]:
    """Where the records with this tag sit, in order (bytes.find: no numpy call for the few of a chunk)."""
    found: list[int] = []
    needle = bytes((tag,))
    at = tag_bytes.find(needle)
    while at >= 0:
        found.append(at)
        at = tag_bytes.find(needle, at + 1)
    return found


def _records_at(body: bytes, positions: list[int]) -> bytes:
    return b"".join([body[i * _SIZE:(i + 1) * _SIZE] for i in positions])


def _decode_tag(tag: int, body: bytes | bytearray, device: int, clock: Clock, chip_v6: bool) -> tuple[str, np.ndarray]:
    """Records that all carry ``tag``, as their decoded kind."""
    layout, kind, fields = _TAGS[tag]
    n = len(body) // _SIZE
    if tag == raw.TS_TAG_STEP_TRACE:
        return kind, _decode_steps(body, n, device, clock, raw.TS_STEP_TRACE_V6 if chip_v6 else layout)
    rows = np.frombuffer(body, dtype=layout, count=n)
    out = np.empty(n, records.DTYPES[kind])  # every field is written below
    out["device_id"] = device
    clock.to_local_ns(rows["timestamp"], out=out["ts_ns"])
    for name in fields:  # straight from the strided source: no contiguous copy first
        out[name] = rows[name]
    if tag == raw.TS_TAG_BLOCK_NUM:
        out["stream_id"], out["task_id"] = _stars_ids(rows["stream_id"], rows["task_id"])
    else:
        np.bitwise_and(rows["stream_id"], _STREAM_ID_BITS, out=out["stream_id"])
    return kind, out


def _decode_steps(body: bytes | bytearray, n: int, device: int, clock: Clock, layout: np.dtype) -> np.ndarray:
    """Step traces: a copy of the chunk read as the decoded layout (index and model id already in place, the
    time converted where it lies), then device, stream, task and tag id written over the rest."""
    out = np.frombuffer(bytearray(body), dtype=records.STEP, count=n)  # one memcpy (.copy() goes field by field)
    rows = np.frombuffer(body, dtype=layout, count=n)
    out["device_id"] = device
    ticks = out["ts_ns"]
    clock.to_local_ns(ticks.view(np.uint64), out=ticks)
    np.bitwise_and(rows["stream_id"], _STREAM_ID_BITS, out=out["stream_id"])
    out["tag_id"] = rows["tag_id"]
    if layout is not raw.TS_STEP_TRACE_V6:  # v6: its 32-bit task id already lies where the decoded one goes
        out["task_id"] = rows["task_id"]
    return out


def _stars_ids(stream: np.ndarray, task: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stream and task ids packed the STARS way (msprof's parser_item/stars_common.h)."""
    stream, task = stream.astype(np.int64), task.astype(np.int64)
    bit12, bit13 = (stream & 0x1000) != 0, (stream & 0x2000) != 0
    out_stream = np.where(~bit12 & bit13, (task & 0x0FFF) % 2048, stream % 2048)
    out_task = np.where(bit12, (task & 0x1FFF) | (stream & 0xE000),
                        np.where(bit13, (stream & 0x0FFF) | (task & 0xF000), task))
    return out_stream, out_task
