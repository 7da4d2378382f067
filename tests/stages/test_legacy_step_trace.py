"""The 20-byte step trace of 2020 MindSpore training jobs: told from the 40-byte ts_track records by
the file's bytes, decoded into step-trace rows."""

from __future__ import annotations

import struct

import numpy as np
from chain import make_ctx

from pipeline.stage import Batch
from pipeline_board import kinds
from stages.aggregator.steps import StepTraceBook
from stages.decoder import DecoderStage, records
from stages.formats import raw

CONTROL = {
    "device_0/info.json.0": '{"platform_version": "1", "DeviceInfo": [{"hwts_frequency": "100"}]}',
    "device_0/start_info.0": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "device_0/dev_start.log.0": "clock_monotonic_raw: 1\ncntvct: 0\n",
    "device_0/host_start.log.0": "[Device0]\nclock_monotonic_raw: 5000000000\ncntvct: 5000000000\n",
    "device_0/sample.json": "{}",
}
OFFSET = 1_700_000_000_000_000_000  # local ns of syscnt 0 (100 MHz: 10 ns a tick)
JOB = 0x10A  # a job id above 255


def _record(tag: int, syscnt: int, stream: int = 5, task: int = 1) -> bytes:
    return struct.pack("<QHHQ", tag, task, stream, syscnt)  # tag, task id, stream id, syscnt


# Two steps: job id, FP start, an all-reduce pair (3/4) on stream 7, BP end, iteration end.
STEPS = b"".join([_record(JOB, 100), _record(1, 200), _record(3, 300, stream=7), _record(4, 500, stream=7),
                  _record(2, 900), _record(255, 1000),
                  _record(JOB, 1100), _record(1, 1300), _record(3, 1400, stream=7), _record(4, 1450, stream=7),
                  _record(2, 1800), _record(255, 2000)])


def _forty(tag: int, syscnt: int) -> bytes:
    rec = np.zeros(1, raw.TS_STEP_TRACE)
    rec["tag"], rec["buf_size"], rec["timestamp"] = tag, 40, syscnt
    return rec.tobytes()


def test_the_bytes_tell_20_byte_records_from_40_byte_ones() -> None:
    assert kinds.settle(kinds.TRAINING_TRACE, STEPS, final=True) is kinds.LEGACY_STEP_TRACE
    forty = b"".join(_forty(tag, 100 * i) for i, tag in enumerate([10, 10, 14, 10, 10, 10, 10, 10, 10]))
    assert kinds.settle(kinds.TRAINING_TRACE, forty, final=False) is kinds.TS_TRACK
    assert kinds.settle(kinds.TRAINING_TRACE, STEPS[:60], final=False) is None  # too few bytes yet
    assert kinds.settle(kinds.TRAINING_TRACE, STEPS[:60], final=True) is kinds.LEGACY_STEP_TRACE
    assert kinds.settle(kinds.TS_TRACK, STEPS, final=True) is kinds.TS_TRACK  # only training_trace is settled


def test_20_byte_step_trace_gives_iteration_fp_bp_and_reduces(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    chunk = Batch("raw", len(STEPS) // 20, {"kind": "legacy_step_trace", "stream": "training_trace.46.dev."
                                            "profiler_default_tag.0", "device": 0, "size": 20}, STEPS)
    out = [b for b in decoder.process(chunk) if b.kind == "step"]
    assert decoder.ctx.rejected == {} and decoder.check() == []
    steps = np.concatenate([records.from_batch(b) for b in out])
    assert len(steps) == 12
    rows = StepTraceBook().add(steps)
    ns = [OFFSET + 10 * t for t in range(2001)]
    assert [row[:10] for row in rows] == [
        # device, model, iteration, FP, BP, end, iteration time (first: from its FP start), FP to BP, refresh, aug
        [0, 0, 1, ns[200], ns[900], ns[1000], 8000, 7000, 1000, None],
        [0, 0, 2, ns[1300], ns[1800], ns[2000], 10000, 5000, 2000, 3000],  # from the previous step's end
    ]
    assert [row[10] for row in rows] == [[[ns[300], ns[500]]], [[ns[1400], ns[1450]]]]


def test_a_training_trace_slice_beside_legacy_data_is_collected_and_decoded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Collector → decoder on a directory: the 20-byte slice is framed as such (no record rejected as an unknown
    ts_track tag) and every record becomes a step record."""
    from chain import decode_dir

    device = tmp_path / "PROF_1" / "device_0"
    (device / "data").mkdir(parents=True)
    for path, text in CONTROL.items():
        (tmp_path / "PROF_1" / path).write_text(text)
    (device / "data" / "training_trace.46.dev.profiler_default_tag.0.slice_0").write_bytes(STEPS)
    decoded, collector, decoder = decode_dir(tmp_path / "PROF_1", tmp_path / "out")
    assert decoder.ctx.rejected == {} and collector.ctx.rejected == {}
    steps = [b for b in decoded if b.kind == "step"]
    assert sum(b.count for b in steps) == 12 and decoder.accounting()["decoded"] == 12
