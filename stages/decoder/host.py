"""Host record decoding: api_event, compact, additional, dictionaries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pipeline.stage import Batch
from stages.decoder import records
from stages.decoder.timebase import Clock, TimeBase
from stages.formats import raw
from stages.schema import pack_rows

Reject = Callable[[str, int, bytes], None]
Output = list[tuple[str, "np.ndarray | Batch"]]
_EVENT_FLAG = np.array(raw.EVENT_FLAG, np.uint64)  # 0-d: a faster operand than an int
# Records whose fields are copied as they are beside their time: stream kind → (raw layout, decoded kind, fields)
_COPIED: dict[str, tuple[np.dtype, str, tuple[str, ...]]] = {
    "task_track": (raw.TASK_TRACK, "task_track", ("thread_id", "device_id", "stream_id", "task_id", "batch_id",
                                                  "task_type", "kernel_name", "num_blocks")),  # device id set after
    "node_basic_info": (raw.NODE_BASIC_INFO, "node_basic", ("thread_id", "op_name", "op_type", "task_type",
                                                            "block_num", "op_flag")),  # OP State: the stream's
    "tensor_info": (raw.TENSOR_INFO, "tensor", ("thread_id", "op_name", "tensor_num", "tensors")),
    "msproftx": (raw.MSPROFTX, "tx", ("thread_id", "process_id", "tx_thread_id", "category", "event_type",
                                      "payload_type", "payload", "mark_id", "domain", "message_type", "message")),
}


OP_STATIC, OP_DYNAMIC = 0, 1


def op_state_of(stream: str) -> int:
    """OP State of the node_basic_info records of a stream: msprof takes it from the file group, not from the
    record's opState byte: `aging.` (non-persistent, reported at each launch) → dynamic, `unaging.` → static
    (NodeBasicInfoParser.get_op_state; C++ NodeBasicInfoParser's static/dynamic file prefixes)."""
    return OP_DYNAMIC if stream.startswith("aging.") else OP_STATIC


class HostDecoder:
    def __init__(self, timebase: TimeBase, reject: Reject) -> None:
        self.timebase = timebase
        self.reject = reject

    def decode(self, kind: str, batch: Batch) -> Output:
        if kind == "hash_dic":
            return self._hash_dic(batch)
        if kind == "type_info_dic":
            return self._type_info(batch)
        clock = self.timebase.host_clock()
        assert clock is not None
        if kind == "api_event":
            return self._api_event(batch, clock)
        layout, out_kind, fields = _COPIED[kind]
        arr = np.frombuffer(batch.body, dtype=layout)
        out = np.zeros(len(arr), records.DTYPES[out_kind])
        records.copy_fields(out, arr, fields)
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        if kind == "task_track":
            out["device_id"] = arr["device_id"] & 0x0FFF  # high 4 bits: device kind
        elif kind == "node_basic_info":
            out["op_state"] = op_state_of(str(batch.meta.get("stream", "")))
        elif kind == "msproftx":
            out["start_ns"] = clock.to_local_ns(arr["start_time"])
            out["end_ns"] = np.where(arr["end_time"] > 0, clock.to_local_ns(arr["end_time"]), out["start_ns"])
        return [(out_kind, out)]

    def _api_event(self, batch: Batch, clock: Clock) -> Output:
        body = batch.body  # records with a zero begin time (or other impossible fields) were screened out
        # Every record decoded as an API from one copy of the chunk (records.API keeps the raw offsets), times
        # converted where they lie; an event is the same row read as records.EVENT.
        every = np.frombuffer(bytearray(body), records.API)
        starts, ends = every["start_ns"], every["end_ns"]
        is_event = ends.view(np.uint64) == _EVENT_FLAG
        clock.to_local_ns(starts.view(np.uint64), out=starts)
        clock.to_local_ns(ends.view(np.uint64), out=ends)
        if not np.count_nonzero(is_event):
            return [("event", np.zeros(0, records.EVENT)), ("api", every)]
        # Events first: a ModelExecute window must be known before the APIs inside it are resolved.
        return [("event", records.pick(every, is_event).view(records.EVENT)), ("api", records.pick(every, ~is_event))]

    def _hash_dic(self, batch: Batch) -> Output:
        rows, bad = [], []
        for line in _lines(batch.body):
            key, sep, text = line.partition(":")
            hash_id = _decimal_id(key)
            if sep and hash_id is not None:
                rows.append([hash_id, text.rstrip("\r")])
            else:
                bad.append(line)
        if bad:
            self.reject("hash_dic: line without '<hash>:<text>'", len(bad), "\n".join(bad).encode())
        return [("hash", pack_rows("hash", rows, "out"))]

    def _type_info(self, batch: Batch) -> Output:
        rows, bad = [], []
        for line in _lines(batch.body):
            key, sep, text = line.partition(":")
            level, _, type_id = key.partition("_")
            level_id, type_number = _decimal_id(level), _decimal_id(type_id)
            if sep and level_id is not None and type_number is not None:
                rows.append([level_id, type_number, text.rstrip("\r")])
            else:
                bad.append(line)
        if bad:
            self.reject("type_info_dic: line without '<level>_<type>:<name>'", len(bad), "\n".join(bad).encode())
        return [("type_info", pack_rows("type_info", rows, "out"))]


def _lines(body: bytes) -> list[str]:
    """The dictionary lines of a chunk: the records the text framer counted (blank by the same byte test)."""
    return [line.decode("utf-8", errors="replace") for line in body.split(b"\n") if line.strip()]


def _decimal_id(text: str) -> int | None:
    """An ASCII decimal id that fits in 64 bits, else None (such a line is rejected, not the chunk)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value < 2**64 else None


def _offsets(dtype: np.dtype, names: tuple[str, ...]) -> list[int]:
    fields: Any = dtype.fields
    return [fields[name][1] for name in names]


# records.API keeps every field at its raw offset; records.EVENT is the same row without its end
assert _offsets(records.API, ("thread_id", "level", "type", "item_id", "request_id", "start_ns", "end_ns")) == \
    _offsets(raw.API_EVENT, ("thread_id", "level", "type", "item_id", "reserve", "begin", "end"))
assert _offsets(records.EVENT, records.EVENT.names or ()) == _offsets(records.API, (*(records.API.names or ())[:-2],
                                                                                  "start_ns"))
