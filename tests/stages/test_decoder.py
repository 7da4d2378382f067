"""Decoder: time bases, record kinds, and bytes that never crash it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from chain import make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.decoder.timebase import Clock
from stages.formats import files, raw
from stages.framing import frame

CONTROL = {
    "host/info.json": '{"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": [], "devices": "64"}',
    "host/start_info": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "host/host_start.log": "[Host]\nclock_monotonic_raw: 5000000000\ncntvct: 5000000000\n",
    "device_0/info.json.0": '{"platform_version": "1", "DeviceInfo": [{"hwts_frequency": "100", "ai_core_num": 32,'
                            ' "aic_frequency": "1000"}]}',
    "device_0/start_info.0": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "device_0/dev_start.log.0": "clock_monotonic_raw: 1\ncntvct: 1000\n",
    "device_0/host_start.log.0": "[Device0]\nclock_monotonic_raw: 6000000000\ncntvct: 6000000000\n",
    "device_0/sample.json": '{"ai_core_metrics": "PipeUtilization", "ai_core_profiling_events": "0x8,0xa"}',
}
OFFSET = 1_700_000_000_000_000_000 - 5_000_000_000  # local ns − monotonic ns


def _decoder(tmp_path) -> DecoderStage:  # type: ignore[no-untyped-def]
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    return decoder


def _raw(kind: str, body: bytes, size: int, device: int | None = None) -> Batch:
    return Batch("raw", len(body) // size, {"kind": kind, "stream": kind, "device": device, "size": size}, body)


def test_clock_conversion_is_exact_integer_ns() -> None:
    clock = Clock(freq_khz=100_000, cnt0=1000, mono0=6_000_000_000, local_offset=OFFSET)
    ticks = np.array([1000, 1001, 1000 + 123_456_789_012], dtype=np.uint64)
    assert clock.to_local_ns(ticks).tolist() == [6_000_000_000 + OFFSET, 6_000_000_010 + OFFSET,
                                                 6_000_000_000 + 1_234_567_890_120 + OFFSET]


def test_api_and_event_told_apart_and_zero_begin_rejected(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    arr = np.zeros(3, raw.API_EVENT)
    arr["magic"] = raw.HOST_MAGIC
    arr["level"] = raw.LEVEL_ACL
    arr["begin"] = [5_000_000_100, 5_000_000_200, 0]
    arr["end"] = [5_000_000_150, raw.EVENT_FLAG, 7]
    out = {b.kind: records.from_batch(b) for b in decoder.process(_raw("api_event", arr.tobytes(), 40))}
    assert out["api"]["start_ns"].tolist() == [5_000_000_100 + OFFSET]
    assert out["api"]["end_ns"].tolist() == [5_000_000_150 + OFFSET]
    assert out["event"]["ts_ns"].tolist() == [5_000_000_200 + OFFSET]
    assert decoder.ctx.rejected == {"api_event: zero begin time": 1}
    assert decoder.check() == []


def test_hwts_start_end_and_device_time(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    arr = np.zeros(2, raw.HWTS_LOG)
    arr["head"] = [raw.HWTS_TASK_START, raw.HWTS_TASK_END | (1 << 4)]
    arr["marker"] = raw.HWTS_MARKER
    arr["task_id"] = 7
    arr["stream_id"] = 2048 + 5  # msprof keeps the low 11 bits
    arr["syscnt"] = [1000, 1250]
    out = [b for b in decoder.process(_raw("hwts", arr.tobytes(), 64, device=0)) if b.kind == "task_log"]
    logs = records.from_batch(out[0])
    assert logs["state"].tolist() == [records.STATE_START, records.STATE_END]
    assert logs["stream_id"].tolist() == [5, 5]
    assert logs["ts_ns"].tolist() == [6_000_000_000 + OFFSET, 6_000_002_500 + OFFSET]


def test_device_chunks_wait_for_their_time_base(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    arr = np.zeros(1, raw.HWTS_LOG)
    arr["marker"] = raw.HWTS_MARKER
    assert list(decoder.process(_raw("hwts", arr.tobytes(), 64, device=0))) == []
    released = []
    for path, text in CONTROL.items():
        released.extend(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    assert [b.kind for b in released] == ["device_info", "task_log"]
    assert released[0].meta["facts"]["pmu_events"] == [0x8, 0xA]


KINDS = {kind.name: kind for kind in (files.API_EVENT, files.TASK_TRACK, files.NODE_BASIC_INFO, files.TENSOR_INFO,
                                      files.MSPROFTX, files.HWTS, files.AICORE, files.TS_TRACK, files.MINI_TS_TRACK,
                                      files.MINI_AICORE, files.HASH_DIC, files.TYPE_INFO_DIC)}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(KINDS)), body=st.binary(max_size=2048))
def test_random_bytes_never_crash_and_every_record_is_accounted(kind: str, body: bytes) -> None:
    """Whatever the framer lets through, the decoder decodes or rejects, one for one."""
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        framed = frame(KINDS[kind], body, final=True)
        if framed.count == 0:
            return
        size = KINDS[kind].record_size
        batch = Batch("raw", framed.count, {"kind": kind, "stream": kind, "device": 0, "size": size}, framed.records)
        list(decoder.process(batch))
        accounting = decoder.accounting()
        assert accounting["records_in"] == framed.count
        assert accounting["decoded"] + accounting["rejected"] == framed.count
