"""STARS decoding (910B class): id rules, record layouts, framing, rejections."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from chain import make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.decoder.stars import core_kind, stream_ids, task_ids
from stages.formats import files, raw
from stages.framing import frame
from stages.simulator.records import stars_ids

CONTROL = {
    "device_0/info.json.0": '{"platform_version": "5", "DeviceInfo": [{"hwts_frequency": "50", "ai_core_num": 24,'
                            ' "aiv_num": 48, "aic_frequency": "1800"}]}',
    "device_0/start_info.0": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "device_0/dev_start.log.0": "clock_monotonic_raw: 1\ncntvct: 1000\n",
    "device_0/host_start.log.0": "[Device0]\nclock_monotonic_raw: 6000000000\ncntvct: 6000000000\n",
    "device_0/sample.json": '{"ai_core_metrics": "PipeUtilization", "ai_core_profiling_events": "0x8,0xa",'
                            ' "aiv_metrics": "PipeUtilization", "aiv_profiling_events": "0x8,0xc,0x54,0x55"}',
}
OFFSET = 1_700_000_000_000_000_000 - 5_000_000_000  # local ns − monotonic ns
T0 = 6_000_000_000 + OFFSET  # local ns of device tick 1000; one tick = 20 ns at 50 MHz


def _decoder(folder: Path) -> DecoderStage:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", folder))
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    return decoder


def _decode(decoder: DecoderStage, kind: files.StreamKind, body: bytes) -> dict[str, np.ndarray]:
    n = len(body) // kind.record_size
    batch = Batch("raw", n, {"kind": kind.name, "stream": kind.name, "device": 0, "size": kind.record_size}, body)
    out: dict[str, list[np.ndarray]] = {}
    for decoded in decoder.process(batch):
        out.setdefault(decoded.kind, []).append(records.from_batch(decoded))
    return {k: np.concatenate(v) for k, v in out.items()}


# -- stream / task id rules (msprof parser_item/stars_common.h; vectors of its stars_common_utest.cpp) --------


def _ids(stream: int, task: int, expand: bool = False, sqe: int | None = None) -> tuple[int, int]:
    s, t = np.array([stream], np.uint16), np.array([task], np.uint16)
    sq = None if sqe is None else np.array([sqe], np.uint8)
    return int(stream_ids(s, t, expand, sq)[0]), int(task_ids(s, t, expand, sq)[0])


def test_plain_ids_keep_the_task_and_the_low_11_stream_bits() -> None:
    assert _ids(3, 8) == (3, 8)
    assert _ids(2048 + 5, 0xFFFF) == (5, 0xFFFF)


def test_bit12_set_takes_task_bits_13_to_15_from_the_stream_field() -> None:
    assert _ids(0x5003, 8) == (3, 16392)  # 20483: task = 8 | 0x4000
    assert _ids(0x3003, 8) == (3, 0x2008)  # 12291: bit 12 wins over bit 13 (which becomes task bit 13)
    assert _ids(0x1000 | 0xE000 | 7, 0xFFFF) == (7, 0xFFFF)  # task's own bits 13–15 are replaced


def test_bit13_set_swaps_the_low_12_bits_of_the_two_ids() -> None:
    assert _ids(0x2003, 8) == (8, 3)  # 8195: stream = task & 0xFFF, task = stream & 0xFFF
    assert _ids(0x2000 | 0x123, 0xA000 | 0x805) == (0x805 % 2048, 0xA123)


def test_expand_mode_bit15_swaps_15_bit_ids_except_placeholder_and_event_record_sqes() -> None:
    assert _ids(0x8000 | 0x1234, 0x8000 | 0x0456, expand=True) == (0x0456, 0x9234)
    assert _ids(0x1234, 0x7456, expand=True) == (0x1234, 0x7456)  # bit 15 clear: as written (15 bits)
    assert _ids(0x3234, 7, expand=True) == (0x3234, 7)  # no 2048 wrap and no bit 12/13 rule in expand mode
    for sqe in (3, 4):  # PLACE_HOLDER_SQE, EVENT_RECORD_SQE
        assert _ids(0x8000 | 0x1234, 0x0456, expand=True, sqe=sqe) == (0x1234, 0x0456)
    assert _ids(0x8000 | 0x1234, 0x0456, expand=True, sqe=2) == (0x0456, 0x1234)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(stream=st.integers(0, 2047), task=st.integers(0, 0xFFFF - 2))
def test_every_encoding_the_simulator_writes_decodes_back(stream: int, task: int) -> None:
    tasks = task - task % 3 + np.arange(3, dtype=np.int64)  # task % 3 picks the encoding: one of each
    streams = np.full(3, stream, np.int64)
    stream_field, task_field = stars_ids(streams, tasks)
    forms = {1 if s & 0x1000 else 2 if s & 0x2000 else 0 for s in stream_field.tolist()}
    assert forms == {0, 1, 2}
    assert stream_ids(stream_field, task_field).tolist() == streams.tolist()
    assert task_ids(stream_field, task_field).tolist() == tasks.tolist()


def _scalar_ids(stream: int, task: int) -> tuple[int, int]:
    """The default-mode rules of ``ids``' docstring, one record at a time."""
    if stream & 0x1000:
        return stream & 0x07FF, (task & 0x1FFF) | (stream & 0xE000)
    if stream & 0x2000:
        return (task & 0x0FFF) % 2048, (stream & 0x0FFF) | (task & 0xF000)
    return stream % 2048, task


def test_every_stream_field_decodes_as_the_rules_say() -> None:
    streams = np.repeat(np.arange(0x10000, dtype=np.uint16), 2)
    tasks = np.random.default_rng(7).integers(0, 0x10000, len(streams)).astype(np.uint16)
    expected = [_scalar_ids(s, t) for s, t in zip(streams.tolist(), tasks.tolist(), strict=True)]
    got_streams, got_tasks = stream_ids(streams, tasks), task_ids(streams, tasks)
    assert got_streams.dtype == got_tasks.dtype == np.uint16
    assert list(zip(got_streams.tolist(), got_tasks.tolist(), strict=True)) == expected


def test_core_kind_follows_ffts_and_subtask_types() -> None:
    ffts = np.array([0, 1, 2, 4, 4, 4, 4, 5], np.uint8)
    subtask = np.array([9, 0, 0, 0, 6, 7, 3, 0], np.uint8)
    assert core_kind(ffts, subtask).tolist() == [
        records.CORE_AIC, records.CORE_AIV, records.CORE_AIV, records.CORE_AIC, records.CORE_MIX_AIC,
        records.CORE_MIX_AIV, records.CORE_AIV, records.CORE_MIX_AIC]


# -- layouts, written byte by byte at msprof's offsets -------------------------------------------------------


def _acsq(func: int, sqe: int, stream: int, task: int, syscnt: int, cnt: int = 0) -> bytes:
    record = bytearray(64)
    struct.pack_into("<HHHHQ", record, 0, func | (cnt << 6) | (sqe << 10), 0x6BD3, stream, task, syscnt)
    return bytes(record)


def _pmu(func: int, stream: int, task: int, *, ffts: int = 0, subtask_type: int = 0, overflow: int = 0,
         subtask_id: int = 0, total: int = 0, counters: tuple[int, ...] = (0,) * 8, start: int = 0, end: int = 0,
         core_byte: int = 0, sub_block: int = 0, block: int = 0) -> bytes:
    record = bytearray(128)
    struct.pack_into("<HHHH", record, 0, func, 0x6BD3, stream, task)
    struct.pack_into("<HHBB", record, 16, subtask_type | (overflow << 10), subtask_id, core_byte, ffts << 5)
    struct.pack_into("<HH", record, 28, sub_block, block)
    struct.pack_into("<Q", record, 32, total)
    struct.pack_into("<8Q", record, 48, *counters)
    struct.pack_into("<QQ", record, 112, start, end)
    return bytes(record)


def test_acsq_start_end_become_task_logs_with_decoded_ids(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    body = (_acsq(raw.ACSQ_START, raw.SQE_AI_CORE, 2, 7, 1000, cnt=3)
            + _acsq(raw.ACSQ_END, raw.SQE_AI_CORE, 2, 7, 1250, cnt=4)
            + _acsq(raw.ACSQ_START, raw.SQE_AI_VECTOR_CORE, 0x2000 | 9, 0x4000 | 3, 1300)  # bit 13: swapped
            + _acsq(raw.ACSQ_END, raw.SQE_AI_CPU, 0x1000 | 0x6000 | 3, 0x0009, 1400))  # bit 12: task high bits
    logs = _decode(decoder, files.STARS_SOC, body)["task_log"]
    assert logs["state"].tolist() == [records.STATE_START, records.STATE_END, records.STATE_START,
                                      records.STATE_END]
    assert logs["stream_id"].tolist() == [2, 2, 3, 3]
    assert logs["task_id"].tolist() == [7, 7, 0x4009, 0x6009]
    assert logs["ts_ns"].tolist() == [T0, T0 + 250 * 20, T0 + 300 * 20, T0 + 400 * 20]  # 50 MHz: 20 ns a tick
    assert decoder.check() == []


def test_other_stars_log_func_types_are_rejected_by_name(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    body = (_acsq(0b100100, 0, 2, 7, 1000) * 2 + _acsq(0b011010, 0, 0, 0, 1000)
            + _acsq(raw.ACSQ_START, 0, 2, 8, 1000) + _acsq(0b111111, 0, 0, 0, 0))
    out = _decode(decoder, files.STARS_SOC, body)
    assert len(out["task_log"]) == 1
    assert decoder.ctx.rejected == {"stars_soc: func type 100100 (block start log) not decoded": 2,
                                    "stars_soc: func type 011010 (ACC PMU) not decoded": 1,
                                    "stars_soc: func type 111111 (unknown func type) not decoded": 1}
    assert decoder.accounting() == {"records_in": 5, "decoded": 1, "rejected": 4, "lost_on_device": 0}


def _subtask(func: int, stream: int, task: int, syscnt: int, *, subtask_type: int = raw.SUBTASK_MIX_AIC,
             context: int = 0, ffts: int = raw.FFTS_TYPE_PLUS, thread: int = 0, cnt: int = 0) -> bytes:
    """An FFTS+ subtask log at msprof's offsets: timestamp @8, subtask type @16, context @18, FFTS type in bits
    13–15 of u16 @20, thread @22."""
    record = bytearray(64)
    struct.pack_into("<HHHHQBBHHH", record, 0, func | (cnt << 6), 0x6BD3, stream, task, syscnt, subtask_type, 0,
                     context, ffts << 13, thread)
    return bytes(record)


def test_ffts_plus_subtask_logs_become_subtask_logs_beside_the_task_logs(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    body = (_acsq(raw.ACSQ_START, raw.SQE_AI_CORE, 2, 7, 1000)
            + _subtask(raw.FFTS_LOG_START, 2, 7, 1001, context=3, thread=9, cnt=1)
            + _subtask(raw.FFTS_LOG_END, 0x2000 | 7, 0x4000 | 2, 1100, context=3, thread=9)  # bit 13: swapped
            + _subtask(raw.FFTS_LOG_START, 0x1000 | 0x6000 | 2, 7, 1101, subtask_type=raw.SUBTASK_AIC, context=0xFFFF)
            + _acsq(raw.ACSQ_END, raw.SQE_AI_CORE, 2, 7, 1200))
    out = _decode(decoder, files.STARS_SOC, body)
    assert out["task_log"]["state"].tolist() == [records.STATE_START, records.STATE_END]
    logs = out["subtask_log"]
    assert logs["state"].tolist() == [records.STATE_START, records.STATE_END, records.STATE_START]
    assert logs["stream_id"].tolist() == [2, 2, 2] and logs["task_id"].tolist() == [7, 0x4007, 0x6007]
    assert logs["context_id"].tolist() == [3, 3, 0xFFFF]
    assert logs["subtask_type"].tolist() == [raw.SUBTASK_MIX_AIC, raw.SUBTASK_MIX_AIC, raw.SUBTASK_AIC]
    assert logs["ffts_type"].tolist() == [raw.FFTS_TYPE_PLUS] * 3 and logs["thread_id"].tolist() == [9, 9, 0]
    assert logs["ts_ns"].tolist() == [T0 + 20, T0 + 100 * 20, T0 + 101 * 20]
    assert decoder.accounting() == {"records_in": 5, "decoded": 5, "rejected": 0, "lost_on_device": 0}


def test_chip_v6_32_byte_acsq_keeps_the_unique_task_id(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    record = bytearray(32)
    struct.pack_into("<HHIQ", record, 0, raw.ACSQ_END | (raw.SQE_AI_VECTOR_CORE << 10), 0x6BD3, 0x0003_0011, 1100)
    logs = _decode(decoder, files.STARS_SOC_V6, bytes(record))["unique_task_log"]
    assert logs[["unique_task_id", "sqe_type", "state"]].tolist() == [(0x0003_0011, 2, records.STATE_END)]
    assert logs["ts_ns"].tolist() == [T0 + 100 * 20]


def test_context_pmu_fields_at_their_offsets(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    counters = tuple(range(11, 19))
    body = (_pmu(raw.CONTEXT_PMU, 2, 7, total=123_456, counters=counters, start=1000, end=1500)
            + _pmu(raw.CONTEXT_PMU, 0x2000 | 5, 0x1000 | 2, ffts=raw.FFTS_TYPE_AIV, total=9, start=1600, end=1700)
            + _pmu(raw.CONTEXT_PMU, 2, 9, ffts=raw.FFTS_TYPE_PLUS, subtask_type=raw.SUBTASK_MIX_AIV, subtask_id=4,
                   overflow=1, end=1800))
    out = _decode(decoder, files.FFTS_PROFILE, body)
    pmu = out["context_pmu"]
    assert pmu["stream_id"].tolist() == [2, 2, 2] and pmu["task_id"].tolist() == [7, 0x1005, 9]
    assert pmu["total_cycle"].tolist() == [123_456, 9, 0]
    assert pmu["pmu"][0].tolist() == list(counters)
    assert pmu["ts_ns"].tolist() == [T0 + 500 * 20, T0 + 700 * 20, T0 + 800 * 20]  # the end count
    assert pmu["start_ns"][:2].tolist() == [T0, T0 + 600 * 20]
    assert pmu["core"].tolist() == [records.CORE_AIC, records.CORE_AIV, records.CORE_MIX_AIV]
    assert pmu["context_id"].tolist() == [0xFFFFFFFF, 0xFFFFFFFF, 4]
    assert pmu["overflow"].tolist() == [0, 0, 1]
    assert "block_pmu" not in out and decoder.check() == []


def test_every_ffts_and_subtask_type_pair_decodes_to_its_core_kind(tmp_path: Path) -> None:
    """All 8 × 256 (FFTS type, subtask type) pairs in one chunk, with the subtask word's other bits set."""
    pairs = [(ffts, subtask) for ffts in range(8) for subtask in range(256)]
    body = b"".join(_pmu(raw.CONTEXT_PMU, 2, 7, ffts=ffts, subtask_type=subtask | 0x0300,
                         subtask_id=ffts * 256 + subtask, overflow=subtask & 1) for ffts, subtask in pairs)
    pmu = _decode(_decoder(tmp_path), files.FFTS_PROFILE, body)["context_pmu"]
    ffts_types, subtask_types = (np.array(column, np.uint8) for column in zip(*pairs, strict=True))
    assert pmu["core"].tolist() == core_kind(ffts_types, subtask_types).tolist()
    assert pmu["context_id"].tolist() == [f * 256 + t if f == raw.FFTS_TYPE_PLUS else 0xFFFFFFFF for f, t in pairs]
    assert pmu["overflow"].tolist() == [t & 1 for _, t in pairs]


def test_block_pmu_is_decoded_and_unknown_pmu_func_types_rejected(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    body = (_pmu(raw.BLOCK_PMU, 2, 7, ffts=raw.FFTS_TYPE_PLUS, subtask_type=raw.SUBTASK_MIX_AIC, subtask_id=1,
                 core_byte=(17 << 1) | 1, sub_block=2, block=5, total=77, end=1010)
            + _pmu(0b000011, 2, 7))
    out = _decode(decoder, files.FFTS_PROFILE, body)
    block = out["block_pmu"]
    assert block[["core_type", "core_id", "block_id", "sub_block_id", "context_id"]].tolist() == [(1, 17, 5, 2, 1)]
    assert block["total_cycle"].tolist() == [77] and block["core"].tolist() == [records.CORE_MIX_AIC]
    assert block["ts_ns"].tolist() == [T0 + 10 * 20]
    assert decoder.ctx.rejected == {"ffts_profile: func type 000011 (unknown func type) not decoded": 1}


# -- property: random fields, bytes split anywhere (device slices split records) ------------------------------

ACSQ_FIELDS = st.tuples(st.sampled_from([raw.ACSQ_START, raw.ACSQ_END]), st.integers(0, 2),
                        st.integers(0, 2047), st.integers(0, 0xFFFF), st.integers(1000, 2**40))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(fields=st.lists(ACSQ_FIELDS, min_size=1, max_size=12), cut=st.integers(0, 10_000))
def test_acsq_round_trip_across_a_split(fields: list[tuple[int, int, int, int, int]], cut: int) -> None:
    stream, task = (np.array([f[i] for f in fields], np.int64) for i in (2, 3))
    stream_field, task_field = stars_ids(stream, task)
    body = b"".join(_acsq(f[0], f[1], int(s), int(t), f[4]) for f, s, t in zip(fields, stream_field, task_field,
                                                                               strict=True))
    cut %= len(body) + 1
    first = frame(files.STARS_SOC, body[:cut], final=False)
    second = frame(files.STARS_SOC, body[first.consumed:], final=True)
    assert first.garbage == second.garbage == [] and first.count + second.count == len(fields)
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        logs = [_decode(decoder, files.STARS_SOC, part.records).get("task_log") for part in (first, second)]
    got = np.concatenate([x for x in logs if x is not None])
    assert got["stream_id"].tolist() == stream.tolist() and got["task_id"].tolist() == task.tolist()
    assert got["state"].tolist() == [records.STATE_START if f[0] == raw.ACSQ_START else records.STATE_END
                                     for f in fields]
    assert got["ts_ns"].tolist() == [T0 + (f[4] - 1000) * 20 for f in fields]


PMU_FIELDS = st.tuples(st.integers(0, 2047), st.integers(0, 0xFFFF), st.integers(0, 2**63),
                       st.lists(st.integers(0, 2**63), min_size=8, max_size=8), st.integers(1000, 2**40),
                       st.sampled_from([0, 1, 2, 3, 5]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(fields=st.lists(PMU_FIELDS, min_size=1, max_size=8), cut=st.integers(0, 10_000))
def test_context_pmu_round_trip_across_a_split(fields: list[tuple], cut: int) -> None:
    stream, task = (np.array([f[i] for f in fields], np.int64) for i in (0, 1))
    stream_field, task_field = stars_ids(stream, task)
    body = b"".join(_pmu(raw.CONTEXT_PMU, int(s), int(t), ffts=f[5], total=f[2], counters=tuple(f[3]), start=f[4],
                         end=f[4] + 7) for f, s, t in zip(fields, stream_field, task_field, strict=True))
    cut %= len(body) + 1
    first = frame(files.FFTS_PROFILE, body[:cut], final=False)
    second = frame(files.FFTS_PROFILE, body[first.consumed:], final=True)
    assert first.count + second.count == len(fields)
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        parts = [_decode(decoder, files.FFTS_PROFILE, part.records).get("context_pmu") for part in (first, second)]
    got = np.concatenate([x for x in parts if x is not None])
    assert got["stream_id"].tolist() == stream.tolist() and got["task_id"].tolist() == task.tolist()
    assert got["total_cycle"].tolist() == [f[2] for f in fields]
    assert got["pmu"].tolist() == [f[3] for f in fields]
    assert got["ts_ns"].tolist() == [T0 + (f[4] + 7 - 1000) * 20 for f in fields]
    expected_core = [records.CORE_AIC if f[5] == 0 else records.CORE_MIX_AIC if f[5] == 5 else records.CORE_AIV
                     for f in fields]
    assert got["core"].tolist() == expected_core


SOC_FIELDS = st.tuples(st.sampled_from([raw.ACSQ_START, raw.ACSQ_END, raw.FFTS_LOG_START, raw.FFTS_LOG_END]),
                       st.integers(0, 2047), st.integers(0, 0xFFFF), st.integers(0, 0xFFFF),
                       st.sampled_from([0, 1, 6, 7, 12]), st.integers(0, 0xFFFF), st.integers(1000, 2**40))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(fields=st.lists(SOC_FIELDS, min_size=1, max_size=12), cut=st.integers(0, 10_000))
def test_subtask_and_task_logs_round_trip_across_a_split(fields: list[tuple], cut: int) -> None:
    """stars_soc with FFTS+ subtask logs among the ACSQ logs, cut anywhere into two slices."""
    stream, task = (np.array([f[i] for f in fields], np.int64) for i in (1, 2))
    stream_field, task_field = stars_ids(stream, task)
    body = b"".join(
        _acsq(f[0], 0, int(s), int(t), f[6]) if f[0] in (raw.ACSQ_START, raw.ACSQ_END)
        else _subtask(f[0], int(s), int(t), f[6], subtask_type=f[4], context=f[3], thread=f[5])
        for f, s, t in zip(fields, stream_field, task_field, strict=True))
    cut %= len(body) + 1
    first = frame(files.STARS_SOC, body[:cut], final=False)
    second = frame(files.STARS_SOC, body[first.consumed:], final=True)
    assert first.garbage == second.garbage == [] and first.count + second.count == len(fields)
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        parts = [_decode(decoder, files.STARS_SOC, part.records) for part in (first, second)]
    subtask = [f for f in fields if f[0] in (raw.FFTS_LOG_START, raw.FFTS_LOG_END)]
    got = [p["subtask_log"] for p in parts if "subtask_log" in p]
    logs = np.concatenate(got) if got else np.zeros(0, records.SUBTASK_LOG)
    for name, at in (("stream_id", 1), ("task_id", 2), ("context_id", 3), ("subtask_type", 4), ("thread_id", 5)):
        assert logs[name].tolist() == [f[at] for f in subtask], name
    assert logs["state"].tolist() == [records.STATE_START if f[0] == raw.FFTS_LOG_START else records.STATE_END
                                      for f in subtask]
    assert logs["ts_ns"].tolist() == [T0 + (f[6] - 1000) * 20 for f in subtask]
    assert sum(len(p.get("task_log", ())) for p in parts) == len(fields) - len(subtask)


V6_FIELDS = st.tuples(st.sampled_from([raw.ACSQ_START, raw.ACSQ_END]), st.sampled_from([0, 1, 5]),
                      st.integers(0, 2**32 - 1), st.integers(1000, 2**40))


def _acsq_v6(func: int, sqe: int, task: int, syscnt: int) -> bytes:
    """A chip-v6 ACSQ log: u16 head, marker, u32 task id @4, timestamp @8, 32 bytes."""
    record = bytearray(32)
    struct.pack_into("<HHIQ", record, 0, func | (sqe << 10), 0x6BD3, task, syscnt)
    return bytes(record)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(fields=st.lists(V6_FIELDS, min_size=1, max_size=16), cut=st.integers(0, 10_000))
def test_chip_v6_acsq_round_trip_across_a_split(fields: list[tuple[int, int, int, int]], cut: int) -> None:
    body = b"".join(_acsq_v6(*f) for f in fields)
    cut %= len(body) + 1
    first = frame(files.STARS_SOC_V6, body[:cut], final=False)
    second = frame(files.STARS_SOC_V6, body[first.consumed:], final=True)
    assert first.garbage == second.garbage == [] and first.count + second.count == len(fields)
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        parts = [_decode(decoder, files.STARS_SOC_V6, part.records).get("unique_task_log") for part in (first, second)]
    got = np.concatenate([x for x in parts if x is not None])
    assert got["unique_task_id"].tolist() == [f[2] for f in fields]
    assert got["sqe_type"].tolist() == [f[1] for f in fields]
    assert got["state"].tolist() == [records.STATE_START if f[0] == raw.ACSQ_START else records.STATE_END
                                     for f in fields]
    assert got["ts_ns"].tolist() == [T0 + (f[3] - 1000) * 20 for f in fields]


def test_chip_v6_step_trace_puts_the_tag_first_and_a_32_bit_task_id(tmp_path: Path) -> None:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    for path, text in CONTROL.items():
        text = text.replace('"platform_version": "5"', '"platform_version": "15"')
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    record = bytearray(40)
    struct.pack_into("<BBHIQQQHHI", record, 0, 1, raw.TS_TAG_STEP_TRACE, 40, 0, 1500, 7, 1, 1, 3, 0x12345)
    steps = _decode(decoder, files.TS_TRACK, bytes(record))["step"]
    assert steps[["index_id", "model_id", "tag_id", "stream_id", "task_id"]].tolist() == [(7, 1, 1, 3, 0x12345)]
    assert steps["ts_ns"].tolist() == [T0 + 500 * 20]
    v4 = _decode(_decoder(tmp_path / "v4"), files.TS_TRACK, bytes(record))["step"]  # the same bytes on a 910B
    assert v4[["tag_id", "stream_id", "task_id"]].tolist() == [(0x2345, 1, 3)]


def test_ffts_plus_logs_in_a_32_byte_stream_are_rejected_by_name(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    body = _acsq_v6(raw.FFTS_LOG_START, 0, 9, 1000) + _acsq_v6(raw.ACSQ_START, 0, 9, 1000)
    out = _decode(decoder, files.STARS_SOC_V6, body)
    assert len(out["unique_task_log"]) == 1
    assert decoder.ctx.rejected == {"stars_soc: func type 100010 (FFTS+ subtask start log) not decoded": 1}


# -- framing and classification -------------------------------------------------------------------------------


def test_a_record_with_a_bad_marker_is_skipped_and_its_neighbours_kept() -> None:
    good = [_acsq(raw.ACSQ_START, 0, 2, t, 1000 + t) for t in range(4)]
    bad = bytearray(good[1])
    bad[2:4] = b"\x00\x00"
    framed = frame(files.STARS_SOC, good[0] + bytes(bad) + good[2] + good[3], final=True)
    assert framed.count == 3 and framed.garbage == [bytes(bad)]
    assert framed.records == good[0] + good[2] + good[3]


@pytest.mark.parametrize(("base", "platform", "expected"), [
    ("stars_soc.data.0", 5, files.STARS_SOC), ("stars_soc.data.3", 7, files.STARS_SOC),
    ("stars_soc.data.0", 15, files.STARS_SOC_V6), ("stars_soc.data.0", 16, files.STARS_SOC_V6),
    ("ffts_profile.data.0", 5, files.FFTS_PROFILE), ("ffts_profile.data.0", 15, None),
    ("stars_soc.data.0", 1, None), ("ffts_profile.data.0", 0, None), ("hwts.data.0", 5, files.HWTS),
])
def test_stars_streams_are_recognised_by_platform(base: str, platform: int,
                                                  expected: files.StreamKind | None) -> None:
    found = files.device_stream_kind(base, platform)
    assert (found[0] if found else None) == expected


def test_device_facts_carry_the_vector_core_side(tmp_path: Path) -> None:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    announced = []
    for path, text in CONTROL.items():
        announced.extend(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    facts = next(b for b in announced if b.kind == "device_info").meta["facts"]
    assert (facts["platform"], facts["aiv_num"], facts["hwts_frequency_mhz"]) == (5, 48, 50.0)
    assert facts["pmu_events"] == [0x8, 0xA] and facts["aiv_pmu_events"] == [0x8, 0xC, 0x54, 0x55]


STARS_KINDS = {kind.name: kind for kind in (files.STARS_SOC, files.STARS_SOC_V6, files.FFTS_PROFILE)}


@settings(max_examples=150, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(STARS_KINDS)), body=st.binary(max_size=1024), anchors=st.integers(0, 8))
def test_random_bytes_never_crash_and_every_record_is_accounted(kind: str, body: bytes, anchors: int) -> None:
    size = STARS_KINDS[kind].record_size
    data = bytearray(body)
    for k in range(min(anchors, len(data) // size)):  # give some records a valid marker
        data[k * size + 2:k * size + 4] = b"\xd3\x6b"
    framed = frame(STARS_KINDS[kind], bytes(data), final=True)
    if framed.count == 0:
        return
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        batch = Batch("raw", framed.count, {"kind": kind, "stream": kind, "device": 0, "size": size}, framed.records)
        list(decoder.process(batch))
        accounting = decoder.accounting()
    assert accounting["records_in"] == framed.count == accounting["decoded"] + accounting["rejected"]
