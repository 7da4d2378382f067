"""AI CPU, L2 cache and AI Core frequency records: framing and decoding."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decoder import OFFSET, _decoder

from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.formats import files, raw
from stages.framing import frame

DEVICE_NS = 6_000_000_000 + OFFSET  # local ns of device tick 1000 (test_decoder.CONTROL: 100 MHz)


def _local(tick: int) -> int:
    return DEVICE_NS + (tick - 1000) * 10


def _decode(decoder: DecoderStage, kind: files.StreamKind, data: bytes, cut: int | None = None) -> list[Batch]:
    """Frame ``data`` as the collector would (in two reads when ``cut`` is given) and decode it."""
    out: list[Batch] = []
    pending = data
    for chunk_end, final in (((cut, False), (None, True)) if cut is not None else ((None, True),)):
        framed = frame(kind, pending[:chunk_end] if chunk_end is not None else pending, final)
        pending = pending[framed.consumed:]
        for run in framed.garbage:
            decoder.ctx.reject(f"{kind.name}: garbage", len(run), run)
        if framed.count:
            batch = Batch("raw", framed.count, {"kind": kind.name, "stream": kind.name, "device": 0,
                                                "size": kind.record_size}, framed.records)
            out.extend(decoder.process(batch))
    return out


def _aicpu_node(n: int = 1) -> np.ndarray:
    recs = np.zeros(n, raw.AICPU_NODE)
    recs["magic"] = raw.HOST_MAGIC
    recs["level"] = raw.LEVEL_AICPU
    recs["type"] = raw.AICPU_NODE_TYPE
    recs["data_len"] = 232
    return recs


def test_aicpu_node_records_give_the_kernel_times(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    recs = _aicpu_node(3)
    recs["stream_id"] = 2048 + 3  # the low 11 bits are the stream
    recs["task_id"] = [7, 8, 9]
    recs["run_start_tick"], recs["run_end_tick"] = [2000, 2000, 2000], [5000, 5000, 0]
    recs["compute_start_us"], recs["memcpy_start_us"], recs["memcpy_end_us"] = 100, 130, 135
    recs["submit_tick"], recs["tick_after_run"], recs["dispatch_us"] = 1500, 5010, 7
    recs["node_thread_id"] = 4
    recs["type"][1] = 1  # an AICPU_DP record: not a kernel
    out = records.from_batch(_decode(decoder, files.AICPU, recs.tobytes())[0])
    assert len(out) == 1
    row = out[0]
    assert (row["stream_id"], row["task_id"], row["form"], row["thread_id"]) == (3, 7, records.AICPU_BINARY, 4)
    assert (row["start_ns"], row["end_ns"], row["ts_ns"]) == (_local(2000), _local(5000), _local(5000))
    assert (row["task_ns"], row["compute_ns"], row["memcpy_ns"]) == (30_000, 30_000, 5_000)
    assert (row["dispatch_ns"], row["total_ns"]) == (7_000, (5010 - 1500) * 10)
    assert decoder.ctx.rejected == {
        "aicpu: additional info level 6000 type 1 is not an AI CPU node record (not decoded)": 1,
        "aicpu: run start or end tick is 0": 1}
    assert decoder.check() == []


TEXT = (b"[2292299556] Node:InitData, Run start:2298200409 3000, Run end:2298200538 4290\x00"
        b"Thread[ 1] process device[0]:aicpu[ 0] task end, tickDrvTopHalf=38753260078,tickDrvBottomHalf=38753261085,"
        b" tickBeforeRun=38753270138,tickAfterRun=38753416849, dispatchTime=100 us, totalTime=1567 us.\x00"
        b"[2292299556] Node:Default/TruncatedNormal-op0, Run tart:4098200409, compute start:4098200509, "
        b"memcpy start:4098200600, memcpy end:4098200606,Run end:4098200538\n\x00"
        b"not an AI CPU line\x00")


@settings(max_examples=40, deadline=None, derandomize=True)
@given(cut=st.integers(0, len(TEXT)))
def test_preprocess_text_lines_decode_wherever_the_reads_split(cut: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        out = np.concatenate([records.from_batch(b) for b in _decode(decoder, files.AICPU_PREPROCESS, TEXT, cut)])
        nodes, threads = out[out["form"] == records.AICPU_TEXT_NODE], out[out["form"] == records.AICPU_TEXT_THREAD]
        assert nodes["node"].tolist() == [b"InitData", b"Default/TruncatedNormal-op0"]
        assert nodes["task_ns"].tolist() == [129_000, 129_000]
        assert nodes["start_ns"].tolist() == [_local(3000), -1] and nodes["end_ns"].tolist() == [_local(4290), -1]
        assert nodes["compute_ns"].tolist() == [-1, 91_000] and nodes["memcpy_ns"].tolist() == [-1, 6_000]
        assert threads[["thread_id", "dispatch_ns", "total_ns"]].tolist() == [(1, 100_000, 1_567_000)]
        assert decoder.ctx.rejected == {
            "aicpu_preprocess: text line that is neither an AI CPU Node nor a Thread line": 1}
        assert decoder.check() == []


def test_preprocess_binary_records_are_told_from_text(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    recs = np.zeros(2, raw.AICPU_PROF)
    recs["magic"], recs["data_tag"] = raw.HOST_MAGIC, raw.AICPU_DATA_TAG
    recs["stream_id"], recs["task_id"] = 5, [1, 2]
    recs["run_start_tick"], recs["run_end_tick"], recs["submit_tick"], recs["tick_after_run"] = 1100, 1300, 1050, 1310
    batches = _decode(decoder, files.AICPU_PREPROCESS, recs.tobytes(), cut=150)
    out = np.concatenate([records.from_batch(b) for b in batches])
    assert len(batches) == 2 and out["task_id"].tolist() == [1, 2] and (out["form"] == records.AICPU_BINARY).all()
    assert out["task_ns"].tolist() == [2_000, 2_000] and out["total_ns"].tolist() == [2_600, 2_600]


def test_l2_cache_and_frequency_records(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    l2 = np.zeros(2, raw.L2_CACHE)
    l2["stream_id"], l2["task_id"], l2["task_type"] = 2, [3, 4], 0
    l2["events"][:, :3] = [[100, 80, 5], [10, 9, 1]]
    out = records.from_batch(_decode(decoder, files.L2_CACHE, l2.tobytes())[0])
    assert out["task_id"].tolist() == [3, 4] and out["events"][:, :3].tolist() == [[100, 80, 5], [10, 9, 1]]
    freq = np.zeros(2, raw.LPM_FREQ)
    freq["count"] = [2, 56]  # the second claims more points than a record holds
    freq["points"]["syscnt"][0, :2], freq["points"]["freq_mhz"][0, :2] = [1100, 1500], [800, 1000]
    out = records.from_batch(_decode(decoder, files.LPM_FREQ, freq.tobytes())[0])
    assert len(out) == 1 and out["count"][0] == 2
    assert out["points_ns"][0, :3].tolist() == [_local(1100), _local(1500), 0]
    assert out["freq_mhz"][0, :3].tolist() == [800, 1000, 0] and out["ts_ns"][0] == _local(1500)
    assert decoder.ctx.rejected == {"lpm_freq: more than 55 change points in a record": 1}


# -- round trips: random field values, encoded, cut anywhere (records split across slices), decoded ----------

_U32 = st.integers(0, 2**32 - 1)
_TICK = st.integers(1000, 2**40)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(values=st.lists(st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1), _TICK, _TICK, _U32, _U32,
                                 _U32, _U32, _TICK, _TICK), min_size=1, max_size=6), cut=st.integers(0, 2000),
       preprocess=st.booleans())
def test_aicpu_round_trip(values: list[tuple[int, ...]], cut: int, preprocess: bool) -> None:
    recs = np.zeros(len(values), raw.AICPU_PROF if preprocess else raw.AICPU_NODE)
    recs["magic"] = raw.HOST_MAGIC
    if preprocess:
        recs["data_tag"] = raw.AICPU_DATA_TAG
    else:
        recs["level"], recs["type"] = raw.LEVEL_AICPU, raw.AICPU_NODE_TYPE
    names = ("stream_id", "task_id", "run_start_tick", "run_end_tick", "compute_start_us", "memcpy_start_us",
             "memcpy_end_us", "dispatch_us", "submit_tick", "tick_after_run")
    for i, name in enumerate(names):
        recs[name] = [v[i] for v in values]
    kind = files.AICPU_PREPROCESS if preprocess else files.AICPU
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        out = np.concatenate([records.from_batch(b) for b in _decode(decoder, kind, recs.tobytes(), cut)])
    as_int = {name: recs[name].astype(np.int64) for name in names}
    assert out["stream_id"].tolist() == (as_int["stream_id"] % 2048).tolist()
    assert out["task_id"].tolist() == as_int["task_id"].tolist()
    assert out["start_ns"].tolist() == [_local(t) for t in as_int["run_start_tick"].tolist()]
    assert out["end_ns"].tolist() == [_local(t) for t in as_int["run_end_tick"].tolist()]
    assert out["compute_ns"].tolist() == ((as_int["memcpy_start_us"] - as_int["compute_start_us"]) * 1000).tolist()
    assert out["memcpy_ns"].tolist() == ((as_int["memcpy_end_us"] - as_int["memcpy_start_us"]) * 1000).tolist()
    assert out["dispatch_ns"].tolist() == (as_int["dispatch_us"] * 1000).tolist()
    assert out["total_ns"].tolist() == ((as_int["tick_after_run"] - as_int["submit_tick"]) * 10).tolist()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(events=st.lists(st.lists(st.integers(0, 2**64 - 1), min_size=8, max_size=8), min_size=1, max_size=8),
       cut=st.integers(0, 700))
def test_l2_cache_round_trip(events: list[list[int]], cut: int) -> None:
    recs = np.zeros(len(events), raw.L2_CACHE)
    recs["stream_id"], recs["task_id"] = 7, np.arange(len(events))
    recs["events"] = np.array(events, np.uint64)
    with tempfile.TemporaryDirectory() as folder:
        out = np.concatenate([records.from_batch(b) for b in _decode(_decoder(Path(folder)), files.L2_CACHE,
                                                                     recs.tobytes(), cut)])
    assert out["events"].tolist() == events and out["task_id"].tolist() == list(range(len(events)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(points=st.lists(st.lists(st.tuples(_TICK, st.integers(1, 4000)), max_size=raw.LPM_FREQ_POINTS), min_size=1,
                       max_size=3), cut=st.integers(0, 2700))
def test_frequency_round_trip(points: list[list[tuple[int, int]]], cut: int) -> None:
    recs = np.zeros(len(points), raw.LPM_FREQ)
    for i, record in enumerate(points):
        recs["count"][i] = len(record)
        for j, (tick, mhz) in enumerate(record):
            recs["points"]["syscnt"][i, j], recs["points"]["freq_mhz"][i, j] = tick, mhz
    with tempfile.TemporaryDirectory() as folder:
        out = np.concatenate([records.from_batch(b) for b in _decode(_decoder(Path(folder)), files.LPM_FREQ,
                                                                     recs.tobytes(), cut)])
    for row, record in zip(out, points, strict=True):
        count = int(row["count"])
        assert count == len(record)
        assert row["points_ns"][:count].tolist() == [_local(t) for t, _ in record]
        assert row["freq_mhz"][:count].tolist() == [mhz for _, mhz in record]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(lines=st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**6), st.integers(0, 10**6),
                                st.integers(0, 10**6)), min_size=1, max_size=5), cut=st.integers(0, 800))
def test_preprocess_text_round_trip(lines: list[tuple[int, int, int, int]], cut: int) -> None:
    text = b"".join(f"Node:op{i}, Run start:{start}, Run end:{start + run}\0"
                    f"Thread[{i}] task end, dispatchTime={dispatch} us, totalTime={total} us.\0".encode()
                    for i, (start, run, dispatch, total) in enumerate(lines))
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        out = np.concatenate([records.from_batch(b) for b in _decode(decoder, files.AICPU_PREPROCESS, text, cut)])
    assert decoder.ctx.rejected == {}
    nodes, threads = out[out["form"] == records.AICPU_TEXT_NODE], out[out["form"] == records.AICPU_TEXT_THREAD]
    assert nodes["node"].tolist() == [f"op{i}".encode() for i in range(len(lines))]
    assert nodes["task_ns"].tolist() == [run * 1000 for _, run, _, _ in lines]
    assert threads["dispatch_ns"].tolist() == [d * 1000 for _, _, d, _ in lines]
    assert threads["total_ns"].tolist() == [t * 1000 for *_, t in lines]


KINDS = {kind.name: kind for kind in (files.AICPU, files.AICPU_PREPROCESS, files.L2_CACHE, files.LPM_FREQ)}


@settings(max_examples=200, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(KINDS)), body=st.binary(max_size=3000), head=st.sampled_from(
    [b"", raw.AICPU_PROF_HEAD, b"\x5a\x5a\x70\x17\x00\x00", b"Node:x, Run start:1 2, Run end:"]))
def test_random_bytes_never_crash_and_every_record_is_accounted(kind: str, body: bytes, head: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        framed = frame(KINDS[kind], head + body, final=True)
        if framed.count == 0:
            return
        meta = {"kind": kind, "stream": kind, "device": 0, "size": KINDS[kind].record_size}
        list(decoder.process(Batch("raw", framed.count, meta, framed.records)))
        accounting = decoder.accounting()
        assert accounting["decoded"] + accounting["rejected"] == accounting["records_in"] == framed.count


def test_device_file_names_map_to_their_kinds() -> None:
    for base, kind in (("aicpu.data.0", files.AICPU), ("DATA_PREPROCESS.AICPU.1", files.AICPU_PREPROCESS),
                       ("DATA_PREPROCESS.dev.AICPU.2", files.AICPU_PREPROCESS), ("l2_cache.data.0", files.L2_CACHE),
                       ("lpmFreqConv.data.3", files.LPM_FREQ)):
        assert files.device_stream_kind(base, 1) == (kind, int(base[-1]))
    assert files.device_stream_kind("DATA_PREPROCESS.AICPUMI.1", 1) is None
