"""Device record decoding: HWTS-class logs and PMU (910), the 310's TLV streams."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from pipeline.stage import Batch
from stages.decoder import devextra, records
from stages.decoder.checks import Screen
from stages.decoder.counter import RollingCounters
from stages.decoder.timebase import Clock, TimeBase
from stages.decoder.ts_track import decode_ts_track
from stages.formats import legacy, raw

Reject = Callable[[str, int, bytes], None]
Lost = Callable[[str, int], None]
Output = list[tuple[str, "np.ndarray | Batch"]]
_TLV_HEADER = struct.Struct("<BBH")
# Operands as 0-d arrays of the operand's dtype: numpy takes them in faster than Python ints, same results.
_LOG_TYPE_BITS, _LAST_TASK_LOG_TYPE = np.array(0x7, np.uint8), np.array(raw.HWTS_TASK_END, np.uint8)
_HWTS_TO_STATE = np.array(records.STATE_START - raw.HWTS_TASK_START, np.uint8)  # start → STATE_START, end → STATE_END
assert records.STATE_END - records.STATE_START == raw.HWTS_TASK_END - raw.HWTS_TASK_START
_STREAM_ID_BITS = np.array(0x7FF, np.uint32)  # stream id mod 2048


class DeviceDecoder:
    def __init__(self, timebase: TimeBase, reject: Reject, lost: Lost, screen: Screen | None = None) -> None:
        self.timebase = timebase
        self.reject = reject
        self.lost = lost  # records the device never delivered (rolling counter gaps); not input records
        self.counters = RollingCounters()
        self.screen = screen  # for hwts: impossible records are rejected after the rolling counter is read

    def decode(self, kind: str, batch: Batch) -> Output:
        device = int(batch.meta["device"])
        clock = self.timebase.device_clock(device)
        assert clock is not None
        if kind == "hwts":
            stream, body = str(batch.meta.get("stream")), batch.body
            heads = self._count_gaps(kind, stream, body, raw.HWTS_LOG.itemsize)
            kept = None if self.screen is None else self.screen(kind, ("device", device), stream, body)
            if kept is not None:
                body, heads = kept, np.frombuffer(kept, np.uint8)[::raw.HWTS_LOG.itemsize].copy()
            return self._hwts(body, heads, device, clock)
        if kind == "aicore":
            self._count_gaps(kind, str(batch.meta.get("stream")), batch.body, raw.AICORE_PMU.itemsize)
            return self._aicore(batch.body, device)
        if kind == "ts_track":
            chip_v6 = self.timebase.platform(device) in raw.STARS_V6_PLATFORMS
            return list(decode_ts_track(batch.body, device, clock, self.reject, chip_v6))
        if kind == legacy.LEGACY_STEP_TRACE.name:
            return [("step", _legacy_steps(batch.body, device, clock))]
        if kind in ("mini_ts_track", "mini_aicore"):
            return self._mini(kind, batch.body, device, clock)
        if kind in devextra.KINDS:
            return list(devextra.decode(kind, batch.body, device, clock, self.reject))
        raise ValueError(f"no decoder for {kind}")

    def _count_gaps(self, kind: str, stream: str, body: bytes, size: int) -> np.ndarray:
        """Byte 0 of every record (contiguous), after counting the rolling-counter gaps it shows."""
        heads = np.frombuffer(body, np.uint8)[::size].copy()
        missing = self.counters.missing(stream, heads)
        if missing:
            self.lost(f"{kind}: records lost on the device (rolling counter gap)", missing)
        return heads

    def _hwts(self, body: bytes, heads: np.ndarray, device: int, clock: Clock) -> Output:
        arr = np.frombuffer(body, dtype=raw.HWTS_LOG)
        log_type = heads & _LOG_TYPE_BITS
        if np.count_nonzero(log_type > _LAST_TASK_LOG_TYPE):
            usable = log_type <= raw.HWTS_TASK_END
            self.reject("hwts: block-level log types are not used", int((~usable).sum()), arr[~usable].tobytes())
            arr, log_type = arr[usable], log_type[usable]
        out = records.blank(records.TASK_LOG, len(arr), device)
        out["stream_id"] = arr["stream_id"] & _STREAM_ID_BITS
        out["task_id"] = np.ascontiguousarray(arr["task_id"])
        out["state"] = log_type + _HWTS_TO_STATE
        out["ts_ns"] = clock.to_local_ns(arr["syscnt"])
        return [("task_log", out)]

    def _aicore(self, body: bytes, device: int) -> Output:
        arr = np.frombuffer(body, dtype=raw.AICORE_PMU)
        out = records.blank(records.PMU, len(arr), device)
        out["stream_id"] = arr["stream_id"] & _STREAM_ID_BITS
        records.copy_fields(out, arr, ("task_id", "total_cycle", "pmu"))
        return [("pmu", out)]

    def _mini(self, kind: str, body: bytes, device: int, clock: Clock) -> Output:
        by_tag: dict[int, list[bytes]] = {}
        pos = 0
        while pos + 4 <= len(body):
            _, tag, size = _TLV_HEADER.unpack_from(body, pos)
            by_tag.setdefault(tag, []).append(body[pos:pos + size])
            pos += size
        outputs: Output = []
        for tag, chunks in by_tag.items():
            joined = b"".join(chunks)
            if tag == raw.MINI_TAG_TIMELINE and kind == "mini_ts_track":
                arr = np.frombuffer(joined, dtype=raw.MINI_TIMELINE)
                out = np.zeros(len(arr), records.TASK_LOG)
                out["device_id"] = device
                out["stream_id"] = arr["stream_id"] % 2048  # low 11 bits, as msprof reads them (TimeLineData)
                out["task_id"] = arr["task_id"]
                out["state"] = arr["task_state"]
                out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
                outputs.append(("task_log", out))
            elif tag == raw.MINI_TAG_STEP_TRACE and kind == "mini_ts_track":
                outputs.append(("step", _steps(np.frombuffer(joined, dtype=raw.TS_STEP_TRACE), device, clock)))
            elif tag == raw.MINI_TAG_EVENT_COUNT and kind == "mini_aicore":
                arr = np.frombuffer(joined, dtype=raw.MINI_EVENT_COUNT)
                out = np.zeros(len(arr), records.PMU)
                out["device_id"] = device
                for name in ("task_id", "pmu", "block"):
                    out[name] = arr[name]
                out["stream_id"] = arr["stream_id"] % 2048  # as msprof's AiCoreTaskInfo
                out["total_cycle"] = arr["task_cycles"]
                out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
                outputs.append(("pmu", out))
            else:
                self.reject(f"{kind}: TLV tag {tag} not used", len(chunks), joined)
        return outputs


def _steps(arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
    out = np.zeros(len(arr), records.STEP)
    out["device_id"] = device
    for name in ("index_id", "model_id", "task_id", "tag_id"):
        out[name] = arr[name]
    out["stream_id"] = arr["stream_id"] % 2048
    out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
    return out



def _legacy_steps(body: bytes, device: int, clock: Clock) -> np.ndarray:
    """20-byte step-trace records (stages/formats/legacy.py STEP_TRACE_20) as ``step`` records, their tags in the
    step-trace book's terms (stages/formats/legacy.py BOOK_*, read by stages/aggregator/steps.py). No index or
    model id: both 0."""
    rows = np.frombuffer(body, dtype=legacy.STEP_TRACE_20)
    tags = rows["tag"]
    out = np.zeros(len(rows), records.STEP)
    out["device_id"] = device
    clock.to_local_ns(rows["syscnt"], out=out["ts_ns"])
    out["stream_id"] = rows["stream_id"] & 0x7FF
    out["task_id"] = rows["task_id"]
    reduce = np.clip(tags, 3, 254).astype(np.int64) + (legacy.BOOK_REDUCE - 3)
    out["tag_id"] = np.select(
        [(tags == 0) | (tags > 255), tags == legacy.STEP_FP_START, tags == legacy.STEP_BP_END,
         tags == legacy.STEP_ITERATION_END],
        [legacy.BOOK_STEP_START, legacy.BOOK_FP, legacy.BOOK_BP, legacy.BOOK_ITERATION_END], reduce)
    return out
