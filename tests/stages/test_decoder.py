"""Decoder: time bases, record kinds, and bytes that never crash it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from chain import make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import wire
from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.decoder.counter import RollingCounters
from stages.decoder.timebase import Clock
from stages.decoder.ts_track import decode_ts_track
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


@settings(max_examples=200, deadline=None)
@given(freq_khz=st.one_of(st.sampled_from([1_000_000, 100_000, 50_000, 38_400, 19_200, 1_800_000, 3_000]),
                          st.integers(1000, 2_000_000)),
       cnt0=st.integers(0, 2**40), mono0=st.integers(0, 2**40), local_offset=st.integers(-2**61, 2**61),
       ticks=st.lists(st.integers(0, 2**49), min_size=1, max_size=20),
       dtype=st.sampled_from([np.uint64, np.int64, np.uint32]))
def test_clock_conversion_matches_integer_arithmetic(freq_khz: int, cnt0: int, mono0: int, local_offset: int,
                                                     ticks: list[int], dtype: type) -> None:
    """Every frequency (a whole number of ns per tick or not) and tick type: floor((ticks − cnt0) / freq) in ns."""
    ticks = [t % 2**32 for t in ticks] if dtype is np.uint32 else ticks
    clock = Clock(freq_khz=freq_khz, cnt0=cnt0, mono0=mono0, local_offset=local_offset)
    expected = [mono0 + local_offset + (t - cnt0) * 1_000_000 // freq_khz for t in ticks]
    assert clock.to_local_ns(np.array(ticks, dtype=dtype)).tolist() == expected


@settings(max_examples=200, deadline=None)
@given(freq_khz=st.sampled_from([1_000_000, 100_000, 50_000, 38_400, 3_000]), cnt0=st.integers(0, 2**62),
       mono0=st.integers(0, 2**61), local_offset=st.integers(-2**61, 2**61), tick=st.integers(0, 2**64 - 1))
def test_one_tick_converts_as_an_array_of_ticks_does(freq_khz: int, cnt0: int, mono0: int, local_offset: int,
                                                      tick: int) -> None:
    """The scalar form used for a chunk's few flips: the array form's value, 64-bit wrap-around included (for
    clocks whose start fits int64, as checks.usable lets through)."""
    clock = Clock(freq_khz=freq_khz, cnt0=cnt0, mono0=mono0, local_offset=local_offset)
    assert clock.to_local_ns_one(tick) == int(clock.to_local_ns(np.array([tick], np.uint64))[0])


def test_clocks_follow_control_files_learned_later(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    before = decoder.timebase.device_clock(0)
    assert before is not None and before.cnt0 == 1000 and decoder.timebase.device_clock(1) is None
    list(decoder.process(Batch("control", 0, {"path": "device_0/dev_start.log.0", "text": "cntvct: 2000\n"})))
    start_info = '{"collectionTimeBegin": "1700000000000001", "clockMonotonicRaw": "5000000000"}'
    list(decoder.process(Batch("control", 0, {"path": "host/start_info", "text": start_info})))
    device, host = decoder.timebase.device_clock(0), decoder.timebase.host_clock()
    assert device is not None and device.cnt0 == 2000
    assert host is not None and host.local_offset == OFFSET + 1000


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


def test_op_state_comes_from_the_file_group_not_the_byte(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """msprof: unaging.compact.node_basic_info holds static ops, aging.… dynamic ones; the opState byte is not read."""
    decoder = _decoder(tmp_path)
    arr = np.zeros(2, raw.NODE_BASIC_INFO)
    arr["magic"] = raw.HOST_MAGIC
    arr["timestamp"] = 5_000_000_100
    arr["op_state"] = [1, 0]
    for stream, expected in (("unaging.compact.node_basic_info", 0), ("aging.compact.node_basic_info", 1)):
        batch = Batch("raw", 2, {"kind": "node_basic_info", "stream": stream, "device": None, "size": 64},
                      arr.tobytes())
        (out,) = decoder.process(batch)
        assert records.from_batch(out)["op_state"].tolist() == [expected, expected], stream


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
    released = [b for b in released if b.kind != "session_info"]
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


# -- ts_track tags on HWTS chips and the HWTS rolling counter ---------------------------

TS_LAYOUTS = {raw.TS_TAG_STEP_TRACE: raw.TS_STEP_TRACE, raw.TS_TAG_TS_MEMCPY: raw.TS_MEMCPY,
              raw.TS_TAG_TASK_TYPE: raw.TS_TASK_TYPE, raw.TS_TAG_TASK_FLIP_OLD: raw.TS_TASK_FLIP,
              raw.TS_TAG_TASK_FLIP: raw.TS_TASK_FLIP, raw.TS_TAG_BLOCK_NUM: raw.TS_BLOCK_NUM}
TS_KINDS = {raw.TS_TAG_STEP_TRACE: "step", raw.TS_TAG_TS_MEMCPY: "ts_memcpy", raw.TS_TAG_TASK_TYPE: "ts_task_type",
            raw.TS_TAG_TASK_FLIP_OLD: "ts_flip_old", raw.TS_TAG_TASK_FLIP: "flip",
            raw.TS_TAG_BLOCK_NUM: "ts_block_num"}
TS_FIELDS = {"step": ("index_id", "model_id", "task_id", "tag_id"), "ts_memcpy": ("task_id", "task_state"),
             "ts_task_type": ("task_id", "task_type", "task_state"), "ts_flip_old": ("flip_num", "task_id"),
             "flip": ("flip_num", "task_id"), "ts_block_num": ("task_id", "block_num")}


def _ts_record(tag: int, values: dict[str, int]) -> bytes:
    rec = np.zeros(1, TS_LAYOUTS[tag])
    rec["mode"], rec["tag"], rec["buf_size"] = 1, tag, raw.TS_TRACK_SIZE
    for name, value in values.items():
        rec[name] = value
    return rec.tobytes()


def test_every_ts_track_tag_decodes_into_its_own_kind(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    body = b"".join([
        _ts_record(raw.TS_TAG_STEP_TRACE, {"timestamp": 1100, "index_id": 7, "model_id": 3, "stream_id": 2048 + 2,
                                           "task_id": 9, "tag_id": raw.STEP_TAG_MODEL_END}),
        _ts_record(raw.TS_TAG_TS_MEMCPY, {"timestamp": 1200, "stream_id": 4, "task_id": 10, "task_state": 2}),
        _ts_record(raw.TS_TAG_TASK_TYPE, {"timestamp": 1300, "stream_id": 5, "task_id": 11, "task_type": 6,
                                          "task_state": 1}),
        _ts_record(raw.TS_TAG_TASK_FLIP_OLD, {"timestamp": 1400, "stream_id": 6, "flip_num": 2, "task_id": 0}),
        _ts_record(raw.TS_TAG_TASK_FLIP, {"timestamp": 1500, "stream_id": 6, "flip_num": 3, "task_id": 0}),
        _ts_record(raw.TS_TAG_BLOCK_NUM, {"timestamp": 1600, "stream_id": 7, "task_id": 12, "block_num": 48}),
        _ts_record(raw.TS_TAG_STEP_TRACE, {"timestamp": 1700})[:1] + b"\x3d" + bytes(38),  # tag 61: not ts_track's
    ])
    out = {b.kind: records.from_batch(b) for b in decoder.process(_raw("ts_track", body, 40, device=0))}
    assert sorted(out) == sorted(TS_KINDS.values())
    step = out["step"][0]
    assert (int(step["stream_id"]), int(step["index_id"]), int(step["model_id"]), int(step["tag_id"])) == (2, 7, 3, 1)
    assert out["ts_memcpy"][["stream_id", "task_id", "task_state"]].tolist() == [(4, 10, 2)]
    assert out["ts_task_type"][["stream_id", "task_id", "task_type", "task_state"]].tolist() == [(5, 11, 6, 1)]
    assert out["ts_flip_old"][["stream_id", "flip_num"]].tolist() == [(6, 2)]
    assert out["flip"][["stream_id", "flip_num"]].tolist() == [(6, 3)]
    assert out["ts_block_num"][["stream_id", "task_id", "block_num"]].tolist() == [(7, 12, 48)]
    assert [int(out[k]["ts_ns"][0]) - OFFSET for k in ("ts_memcpy", "ts_block_num")] == [6_000_002_000,
                                                                                          6_000_006_000]
    assert decoder.ctx.rejected == {"ts_track: unknown record tag": 1}
    assert decoder.check() == []


def _bytes_of(decoded: np.ndarray | Batch) -> bytes:
    """A decoded kind's records as bytes (the chunk's main tag comes as a ready batch body)."""
    return decoded.body if isinstance(decoded, Batch) else decoded.tobytes()


@settings(max_examples=80, deadline=None, derandomize=True)
@given(tags=st.lists(st.sampled_from([*sorted(TS_LAYOUTS), 61]), min_size=1, max_size=300), seed=st.integers(0, 99),
       dominant=st.sampled_from(sorted(TS_LAYOUTS)), share=st.floats(0, 1))
def test_a_mixed_ts_track_chunk_decodes_as_its_records_one_by_one(tags: list[int], seed: int, dominant: int,
                                                                  share: float) -> None:
    """However the tags mix (one mostly, a few of others, unknown ones), each kind holds its records in order,
    as decoding every record alone gives them; unknown tags are rejected."""
    rng = np.random.default_rng(seed)
    tags = [dominant if rng.random() < share else tag for tag in tags]
    body = bytearray(rng.integers(0, 256, len(tags) * raw.TS_TRACK_SIZE, dtype=np.uint8).tobytes())
    body[1::raw.TS_TRACK_SIZE] = bytes(tags)
    clock = Clock(freq_khz=100_000, cnt0=1_000, mono0=5_000_000_000, local_offset=OFFSET)
    rejected: list[int] = []
    got = decode_ts_track(bytes(body), 0, clock, lambda _reason, count, _data: rejected.append(count))
    alone: dict[str, list[bytes]] = {}
    for i in range(len(tags)):
        for kind, arr in decode_ts_track(bytes(body[i * 40:(i + 1) * 40]), 0, clock, lambda *_: None):
            alone.setdefault(kind, []).append(_bytes_of(arr))
    assert {kind: _bytes_of(arr) for kind, arr in got} == {kind: b"".join(parts) for kind, parts in alone.items()}
    assert sum(rejected) == tags.count(61)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.lists(st.tuples(st.sampled_from(sorted(TS_LAYOUTS)), st.integers(0, 2**12 - 1),
                               st.integers(0, 2**32 - 1), st.integers(1000, 2**40)), min_size=1, max_size=30),
       cut=st.integers(0, 30 * 40))
def test_ts_track_fields_round_trip_across_a_slice_boundary(rows: list[tuple[int, int, int, int]],
                                                            cut: int) -> None:
    """Random field values, encoded with the raw layouts, cut at any byte (the next slice holds the rest).
    Stream ids stay below 4096: bits 12/13 are the STARS packing (next test)."""
    encoded, expected = [], []
    for tag, small, large, ticks in rows:
        kind = TS_KINDS[tag]
        values = {name: (small if TS_LAYOUTS[tag][name].itemsize <= 2 else large) for name in TS_FIELDS[kind]}
        values = {name: value % 256 if TS_LAYOUTS[tag][name].itemsize == 1 else value for name, value in values.items()}
        encoded.append(_ts_record(tag, {"timestamp": ticks, "stream_id": small, **values}))
        expected.append((kind, small % 2048, values, 6_000_000_000 + (ticks - 1000) * 10 + OFFSET))
    data = b"".join(encoded)
    cut = min(cut, len(data))
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        first = frame(files.TS_TRACK, data[:cut], final=False)
        second = frame(files.TS_TRACK, data[first.consumed:], final=True)
        decoded: list[tuple[str, np.ndarray]] = []
        for framed in (first, second):
            if framed.count:
                batch = Batch("raw", framed.count, {"kind": "ts_track", "stream": "ts_track.data.0", "device": 0},
                              framed.records)
                decoded += [(b.kind, r) for b in decoder.process(batch) for r in records.from_batch(b)]
    assert len(decoded) == len(expected)
    by_kind: dict[str, list[np.ndarray]] = {}
    for kind, record in decoded:
        by_kind.setdefault(kind, []).append(record)
    for kind, stream, values, ts_ns in expected:  # within a kind, file order is kept
        record = by_kind[kind].pop(0)
        assert int(record["stream_id"]) == stream and int(record["ts_ns"]) == ts_ns
        assert {name: int(record[name]) for name in values} == values


def test_block_num_ids_undo_the_stars_packing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Worked by hand from msprof's stars_common.h: bit 12 → task takes stream bits 13–15; bit 13 → stream and
    task swap halves."""
    decoder = _decoder(tmp_path)
    body = b"".join(_ts_record(raw.TS_TAG_BLOCK_NUM, {"stream_id": stream, "task_id": task, "block_num": 8})
                    for stream, task in ((0x1000 | 0x2000 | 5, 0x0123),  # bit 12: stream 5, task 0x2123
                                         (0x2000 | 0x0456, 0xA007),  # bit 13: stream 7, task 0xA456
                                         (2048 + 9, 0xFFFF)))  # neither: low 11 bits of the stream
    out = [records.from_batch(b) for b in decoder.process(_raw("ts_track", body, 40, device=0))]
    assert out[0][["stream_id", "task_id"]].tolist() == [(5, 0x2123), (7, 0xA456), (9, 0xFFFF)]


def _hwts(counters: list[int], task_id: int = 1) -> bytes:
    arr = np.zeros(len(counters), raw.HWTS_LOG)
    arr["head"] = (np.array(counters, np.uint8) << 4) | raw.HWTS_TASK_START
    arr["marker"] = raw.HWTS_MARKER
    arr["task_id"] = task_id
    arr["syscnt"] = 2000
    return arr.tobytes()


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.integers(1, 40), min_size=1, max_size=200), first=st.integers(0, 15),
       cuts=st.lists(st.integers(0, 200), max_size=6), low_bits=st.integers(0, 15))
def test_rolling_counter_counts_every_gap_mod_16_across_chunk_cuts(steps: list[int], first: int, cuts: list[int],
                                                                   low_bits: int) -> None:
    """Counters that advance by ``steps`` (1 = no record lost): each step k loses (k − 1) mod 16 records,
    however the stream is cut into chunks; the low 4 bits of the byte play no part."""
    counters = np.cumsum([first] + steps) % 16
    heads = ((counters << 4) | low_bits).astype(np.uint8)
    rolling = RollingCounters()
    bounds = [0, *sorted(min(c, len(heads)) for c in cuts), len(heads)]
    found = sum(rolling.missing("hwts", heads[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))
    assert found == sum((k - 1) % 16 for k in steps)


def test_rolling_counter_gaps_are_reported_as_lost_records_per_stream(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    chunks = [("hwts.data.0", [14, 15, 0, 3]),  # 1 and 2 lost, across the 15 → 0 wrap
              ("hwts.data.0", [4, 5, 9]),  # carried from the last chunk: 6, 7, 8 lost
              ("hwts.aiv_data.0", [7, 8])]  # another stream keeps its own counter
    for stream, counters in chunks:
        batch = Batch("raw", len(counters), {"kind": "hwts", "stream": stream, "device": 0}, _hwts(counters))
        list(decoder.process(batch))
    pmu = np.zeros(3, raw.AICORE_PMU)
    pmu["head"], pmu["marker"] = np.array([0, 1, 4], np.uint8) << 4, raw.HWTS_MARKER
    list(decoder.process(Batch("raw", 3, {"kind": "aicore", "stream": "aicore.data.0", "device": 0}, pmu.tobytes())))
    assert decoder.ctx.rejected == {"hwts: records lost on the device (rolling counter gap)": 5,
                                    "aicore: records lost on the device (rolling counter gap)": 2}
    accounting = decoder.accounting()
    assert accounting["lost_on_device"] == 7  # never received: outside the one-for-one count
    assert accounting["records_in"] == accounting["decoded"] == 12 and accounting["rejected"] == 0
    assert decoder.check() == []


def _session_facts(decoder: DecoderStage, path: str, text: str) -> list[dict]:
    return [b.meta["facts"] for b in decoder.process(Batch("control", 0, {"path": path, "text": text}))
            if b.kind == "session_info"]


def test_session_facts_from_host_control_files_then_end_info(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    assert _session_facts(decoder, "device_0/info.json.0", CONTROL["device_0/info.json.0"])[-1]["start_ns"] == 0
    info = '{"pid": "3141", "pid_name": "python3", "hostname": "node-7", "hostUid": "a1b2", "DeviceInfo": []}'
    _session_facts(decoder, "host/info.json", info)
    [facts] = _session_facts(decoder, "host/start_info", CONTROL["host/start_info"])
    assert facts == {"pid": 3141, "pid_name": "python3", "hostname": "node-7", "host_uid": "a1b2",
                     "start_ns": 1_700_000_000_000_000_000, "end_ns": 0}
    assert _session_facts(decoder, "host/host_start.log", CONTROL["host/host_start.log"]) == []  # no change
    [ended] = _session_facts(decoder, "host/end_info", '{"collectionTimeEnd": "1700000000250000"}')
    assert ended == {**facts, "end_ns": 1_700_000_000_250_000_000}


def test_session_facts_from_the_first_device_without_a_host_folder(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    _session_facts(decoder, "device_3/info.json.3", '{"pid": "9", "hostname": "late"}')
    _session_facts(decoder, "device_3/start_info.3", '{"collectionTimeBegin": "2000"}')
    _session_facts(decoder, "device_1/info.json.1", '{"pid": "8", "hostname": "edge"}')
    [facts] = _session_facts(decoder, "device_1/start_info.1", '{"collectionTimeBegin": "1000"}')
    assert (facts["pid"], facts["hostname"], facts["host_uid"], facts["start_ns"]) == (8, "edge", "0", 1_000_000)


@pytest.mark.parametrize(("meta", "count", "body", "reason"), [
    ({"stream": "s", "device": 0}, 1, b"\0" * 64, "raw chunk of an unknown kind"),
    ({"kind": ["hwts"], "device": 0}, 1, b"\0" * 64, "raw chunk of an unknown kind"),
    ({"kind": "hwts", "device": "x"}, 1, b"\0" * 64, "hwts: malformed chunk (device id is not a number from 0 to "
                                                      "65535)"),
    ({"kind": "hwts", "device": 70000}, 1, b"\0" * 64, "hwts: malformed chunk (device id is not a number from 0 to "
                                                       "65535)"),
    ({"kind": "api_event", "device": None}, 3, b"ZZ" + b"\1" * 38, "api_event: malformed chunk (its bytes are not "
                                                                   "its count of 40-byte records)"),
    ({"kind": "mini_ts_track", "device": 0}, 1, b"\x00\x03\x00\x00" + b"\0" * 28,  # a TLV size of 0: looped forever
     "mini_ts_track: malformed chunk (its bytes are not its count of whole records)"),
])
def test_chunks_no_collector_sends_are_rejected_whole(tmp_path, meta, count, body, reason) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    assert list(decoder.process(Batch("raw", count, meta, body))) == []
    assert decoder.ctx.rejected == {reason: count}
    assert decoder.check() == []


def test_control_messages_without_a_usable_path_are_counted(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder = _decoder(tmp_path)
    for meta in ({"text": "x"}, {"path": None, "text": "x"}, {"path": ["a"], "text": "x"},
                 {"path": "../etc/passwd", "text": "x"}, {"path": "device_abc/info.json.0", "text": "{}"}):
        assert list(decoder.process(Batch("control", 0, meta))) == []
    assert decoder.ctx.rejected == {"control message without a path and a text": 3,
                                    "control message for a file outside host/ and device_N/": 2}


@pytest.mark.parametrize(("path", "text"), [
    ("device_0/dev_start.log.0", "clock_monotonic_raw: 1\ncntvct: 99999999999999999999999999999\n"),
    ("device_0/info.json.0",
     '{"platform_version": "x", "DeviceInfo": [{"hwts_frequency": "abc", "ai_core_num": "y"}]}'),
    ("device_0/info.json.0", '{"platform_version": "1", "DeviceInfo": [7]}'),
    ("device_0/sample.json", '{"ai_core_profiling_events": "0xZZ,0x8"}'),
    ("host/info.json", '{"pid": "99999999999999999999999", "CPU": [{"Frequency": "1000.000000"}]}'),
])
def test_control_values_that_are_not_numbers_never_stop_the_decoder(tmp_path, path: str,  # type: ignore[no-untyped-def]
                                                                    text: str) -> None:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    out = []
    for rel, original in CONTROL.items():
        out += decoder.process(Batch("control", 0, {"path": rel, "text": text if rel == path else original}))
    arr = np.zeros(2, raw.HWTS_LOG)
    arr["marker"] = raw.HWTS_MARKER
    out += decoder.process(_raw("hwts", arr.tobytes(), 64, device=0))
    out += decoder.finish()
    figures = decoder.accounting()
    assert figures["decoded"] + figures["rejected"] == figures["records_in"] == 2
    facts = [b.meta["facts"] for b in out if b.kind == "device_info"]
    assert all(isinstance(f["platform"], int) and all(0 <= e < 2**32 for e in f["pmu_events"]) for f in facts)
    assert all(wire.decode(wire.encode_batch("decode", 0, b)).batch == b for b in out)  # all can be sent
