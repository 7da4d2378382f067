"""Current host kinds: random field values encoded with msprof's layouts decode back exactly,
also when the stream is cut into slices at random places."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decoder import CONTROL, OFFSET

from pipeline.stage import Batch, StageContext
from stages.decoder import DecoderStage, records
from stages.formats import files, raw
from stages.framing import frame

U16, U32, U64 = st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**62)
HOST_TS = st.integers(5_000_000_000, 2**40)


def _decode(kind: files.StreamKind, body: bytes, cut: int) -> dict[str, np.ndarray]:
    """Frame as the collector does (two reads, cut anywhere), then decode."""
    with tempfile.TemporaryDirectory() as folder:
        ctx = StageContext(stage_id="decode", run_id="t", output_dir=Path(folder), aside_dir=Path(folder) / "r")
        decoder = DecoderStage(DecoderStage.Config(), ctx)
        for path, text in CONTROL.items():
            list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
        out: dict[str, list[np.ndarray]] = {}
        first = frame(kind, body[:cut], final=False)
        second = frame(kind, body[first.consumed:], final=True)
        assert first.garbage == [] and second.garbage == []
        for framed in (first, second):
            if framed.count:
                meta = {"kind": kind.name, "stream": kind.name, "device": None, "size": kind.record_size}
                for batch in decoder.process(Batch("raw", framed.count, meta, framed.records)):
                    out.setdefault(batch.kind, []).append(records.from_batch(batch))
        assert decoder.accounting()["rejected"] == 0
        return {name: np.concatenate(parts) for name, parts in out.items()}


def _header(arr: np.ndarray, level: int, thread: list[int], ts: list[int]) -> None:
    arr["magic"], arr["level"], arr["thread_id"], arr["timestamp"] = raw.HOST_MAGIC, level, thread, ts


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.lists(st.tuples(U32, HOST_TS, U16, U16, U16, U16, U64, U64, U16), min_size=1, max_size=40),
       cut=st.integers(0, 4000))
def test_task_track_round_trip(rows: list[tuple[int, ...]], cut: int) -> None:
    arr = np.zeros(len(rows), raw.TASK_TRACK)
    columns = list(zip(*rows, strict=True))
    _header(arr, raw.LEVEL_RUNTIME, list(columns[0]), list(columns[1]))
    for name, values in zip(("device_id", "stream_id", "task_id", "batch_id", "task_type", "kernel_name",
                             "num_blocks"), columns[2:], strict=True):
        arr[name] = values
    out = _decode(files.TASK_TRACK, arr.tobytes(), cut)["task_track"]
    assert out["ts_ns"].tolist() == [t + OFFSET for t in columns[1]]
    assert out["device_id"].tolist() == [d & 0x0FFF for d in columns[2]]  # high 4 bits: device kind
    for name in ("stream_id", "task_id", "batch_id", "task_type", "kernel_name", "num_blocks"):
        assert out[name].tolist() == arr[name].tolist()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.lists(st.tuples(U32, HOST_TS, U64, U64, st.integers(0, 11), U32, st.integers(0, 1)),
                     min_size=1, max_size=40), cut=st.integers(0, 4000))
def test_node_basic_info_round_trip(rows: list[tuple[int, ...]], cut: int) -> None:
    arr = np.zeros(len(rows), raw.NODE_BASIC_INFO)
    columns = list(zip(*rows, strict=True))
    _header(arr, raw.LEVEL_NODE, list(columns[0]), list(columns[1]))
    for name, values in zip(("op_name", "op_type", "task_type", "block_num", "op_state"), columns[2:], strict=True):
        arr[name] = values
    out = _decode(files.NODE_BASIC_INFO, arr.tobytes(), cut)["node_basic"]
    assert out["ts_ns"].tolist() == [t + OFFSET for t in columns[1]]
    for name in ("thread_id", "op_name", "op_type", "task_type", "block_num"):
        assert out[name].tolist() == arr[name].tolist()
    assert out["op_state"].tolist() == [0] * len(rows)  # from the file group (not aging: static), not the byte


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rows=st.lists(st.tuples(U32, st.integers(1, 2**40), st.integers(0, 10**6), U64, U32, st.booleans()),
                     min_size=1, max_size=40), cut=st.integers(0, 2000))
def test_api_event_round_trip(rows: list[tuple[int, ...]], cut: int) -> None:
    arr = np.zeros(len(rows), raw.API_EVENT)
    arr["magic"], arr["level"] = raw.HOST_MAGIC, raw.LEVEL_ACL
    for index, (thread, begin, length, item, reserve, is_event) in enumerate(rows):
        arr[index]["thread_id"], arr[index]["begin"], arr[index]["item_id"] = thread, begin, item
        arr[index]["reserve"] = reserve
        arr[index]["end"] = raw.EVENT_FLAG if is_event else begin + length
    out = _decode(files.API_EVENT, arr.tobytes(), cut)
    apis = [row for row in rows if not row[5]]
    events = [row for row in rows if row[5]]
    api = out.get("api", np.zeros(0, records.API))
    event = out.get("event", np.zeros(0, records.EVENT))
    assert api["start_ns"].tolist() == [r[1] + OFFSET for r in apis]
    assert (api["end_ns"] - api["start_ns"]).tolist() == [r[2] for r in apis]
    assert api["request_id"].tolist() == [r[4] for r in apis]
    assert event["ts_ns"].tolist() == [r[1] + OFFSET for r in events]
    assert event["item_id"].tolist() == [r[3] for r in events]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(rows=st.lists(st.tuples(U32, HOST_TS, U64, st.integers(0, 5),
                               st.lists(U32, min_size=55, max_size=55)), min_size=1, max_size=12),
       cut=st.integers(0, 4000))
def test_tensor_info_round_trip(rows: list[tuple], cut: int) -> None:  # type: ignore[type-arg]
    arr = np.zeros(len(rows), raw.TENSOR_INFO)
    for index, (thread, ts, op_name, count, values) in enumerate(rows):
        arr[index]["thread_id"], arr[index]["timestamp"], arr[index]["op_name"] = thread, ts, op_name
        arr[index]["tensor_num"], arr[index]["tensors"] = count, np.array(values).reshape(5, 11)
    arr["magic"], arr["level"] = raw.HOST_MAGIC, raw.LEVEL_NODE
    out = _decode(files.TENSOR_INFO, arr.tobytes(), cut)["tensor"]
    assert out["ts_ns"].tolist() == [r[1] + OFFSET for r in rows]
    assert out["tensors"].tolist() == arr["tensors"].tolist()
    assert out["op_name"].tolist() == arr["op_name"].tolist()
