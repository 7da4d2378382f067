"""Host record decoding (spec §1.4, §1.6): api_event, compact, additional, dictionaries."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.stage import Batch
from stages.decoder import records
from stages.decoder.timebase import TimeBase
from stages.formats import raw
from stages.schema import pack_rows

Reject = Callable[[str, int, bytes], None]
Output = list[tuple[str, "np.ndarray | Batch"]]


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
        layout = {"task_track": raw.TASK_TRACK, "node_basic_info": raw.NODE_BASIC_INFO,
                  "tensor_info": raw.TENSOR_INFO, "msproftx": raw.MSPROFTX}[kind]
        arr = np.frombuffer(batch.body, dtype=layout)
        ts = clock.to_local_ns(arr["timestamp"])
        if kind == "task_track":
            out = np.zeros(len(arr), records.TASK_TRACK)
            for name in ("thread_id", "device_id", "stream_id", "task_id", "batch_id", "task_type", "kernel_name",
                         "num_blocks"):
                out[name] = arr[name]
            out["device_id"] &= 0x0FFF  # high 4 bits: device kind
            out["ts_ns"] = ts
            return [("task_track", out)]
        if kind == "node_basic_info":
            out = np.zeros(len(arr), records.NODE_BASIC)
            for name in ("thread_id", "op_name", "op_type", "task_type", "block_num", "op_flag"):
                out[name] = arr[name]
            out["op_state"] = op_state_of(str(batch.meta.get("stream", "")))
            out["ts_ns"] = ts
            return [("node_basic", out)]
        if kind == "tensor_info":
            out = np.zeros(len(arr), records.TENSOR)
            for name in ("thread_id", "op_name", "tensor_num", "tensors"):
                out[name] = arr[name]
            out["ts_ns"] = ts
            return [("tensor", out)]
        out = np.zeros(len(arr), records.TX)
        for name in ("thread_id", "process_id", "tx_thread_id", "category", "event_type", "payload_type", "payload",
                     "mark_id", "domain", "message_type", "message"):
            out[name] = arr[name]
        out["ts_ns"] = ts
        out["start_ns"] = clock.to_local_ns(arr["start_time"])
        out["end_ns"] = np.where(arr["end_time"] > 0, clock.to_local_ns(arr["end_time"]), out["start_ns"])
        return [("tx", out)]

    def _api_event(self, batch: Batch, clock: object) -> Output:
        arr = np.frombuffer(batch.body, dtype=raw.API_EVENT)
        is_event = arr["end"] == np.uint64(raw.EVENT_FLAG)
        zero = arr["begin"] == 0
        if zero.any():
            self.reject("api_event: zero begin time", int(zero.sum()), arr[zero].tobytes())
        apis, events = arr[~is_event & ~zero], arr[is_event & ~zero]
        api_out = np.zeros(len(apis), records.API)
        event_out = np.zeros(len(events), records.EVENT)
        for target, source in ((api_out, apis), (event_out, events)):
            for name in ("thread_id", "level", "type", "item_id"):
                target[name] = source[name]
            target["request_id"] = source["reserve"]
        api_out["start_ns"] = clock.to_local_ns(apis["begin"])  # type: ignore[attr-defined]
        api_out["end_ns"] = clock.to_local_ns(apis["end"])  # type: ignore[attr-defined]
        event_out["ts_ns"] = clock.to_local_ns(events["begin"])  # type: ignore[attr-defined]
        # Events first: a ModelExecute window must be known before the APIs inside it are resolved.
        return [("event", event_out), ("api", api_out)]

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
