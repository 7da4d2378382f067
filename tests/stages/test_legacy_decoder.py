"""Legacy host records (CANN ≤ 6), their file names, and the compact/additional kinds not joined
yet: field values survive encode → frame → decode, bad data tags are rejected with a reason."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chain import make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.formats import files, host_extra, legacy, raw
from stages.framing import frame

MONO0 = 5_000_000_000
WALL0_US = 1_700_000_000_000_000
OFFSET = WALL0_US * 1000 - MONO0  # local ns − host monotonic ns
CONTROL = {
    "host/info.json": '{"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": [], "devices": "64"}',
    "host/start_info": f'{{"collectionTimeBegin": "{WALL0_US}", "clockMonotonicRaw": "{MONO0}"}}',
    "host/host_start.log": f"[Host]\nclock_monotonic_raw: {MONO0}\ncntvct: {MONO0}\n",
    # a legacy device folder's own offset differs from the host's by 1 µs: the decoder must use it
    "device_3/start_info.3": f'{{"collectionTimeBegin": "{WALL0_US + 1}", "clockMonotonicRaw": "{MONO0}"}}',
}
DEVICE = 3
U16, U32, U64 = st.integers(0, 0xFFFF), st.integers(0, 0xFFFF_FFFF), st.integers(0, 2**63 - 1)
TIME = st.integers(1, 2**40)
NAME = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=40)


def _decoder(tmp_path: Path) -> DecoderStage:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    return decoder


def _decode(kind: files.StreamKind, body: bytes, device: int | None = DEVICE) -> tuple[dict[str, np.ndarray],
                                                                                          DecoderStage]:
    """Frame ``body`` as the collector would, decode it; decoded arrays by kind (and the decoder)."""
    framed = frame(kind, body, final=True)
    assert framed.count * kind.record_size == len(body) and not framed.garbage
    batch = Batch("raw", framed.count, {"kind": kind.name, "stream": kind.name, "device": device,
                                        "size": kind.record_size}, framed.records)
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as folder:  # rejected records are kept aside in it: used while it exists
        decoder = _decoder(Path(folder))
        for decoded in decoder.process(batch):
            out[decoded.kind] = records.from_batch(decoded)
    assert decoder.check() == []
    return out, decoder


def _local(ticks: int) -> int:
    return ticks + OFFSET + 1000


def _records(layout: np.dtype, rows: list[dict[str, Any]]) -> np.ndarray:
    arr = np.zeros(len(rows), layout)
    arr["magic"] = raw.HOST_MAGIC
    for i, row in enumerate(rows):
        for name, value in row.items():
            arr[name][i] = value
    return arr


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({"api_type": st.integers(1, 4), "begin": TIME, "length": st.integers(0, 10**9),
                                       "process_id": U32, "thread_id": U32, "api_name": NAME}), min_size=1, max_size=8))
def test_acl_module_records_become_named_apis(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["end"] = row["begin"] + row.pop("length")
        row["api_name"] = row["api_name"].encode()
    out, _ = _decode(legacy.LEGACY_ACL, _records(legacy.ACL, rows).tobytes())
    apis = out["named_api"]
    assert apis["level"].tolist() == [raw.LEVEL_ACL] * len(rows)
    assert [t >> 16 for t in apis["type"].tolist()] == [r["api_type"] for r in rows]  # ACL_OP … ACL_OTHERS
    assert apis["name"].tolist() == [r["api_name"] for r in rows]
    assert apis["start_ns"].tolist() == [_local(r["begin"]) for r in rows]
    assert apis["end_ns"].tolist() == [_local(r["end"]) for r in rows]
    assert apis["thread_id"].tolist() == [r["thread_id"] for r in rows]
    assert apis["process_id"].tolist() == [r["process_id"] for r in rows]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({
    "task_type": st.integers(0, 10), "name_text": st.booleans(), "name": NAME, "hash": U64, "type_text": st.booleans(),
    "op_type": NAME, "type_hash": U64, "cur_iter": U64, "timestamp": TIME, "shape_type": st.integers(0, 1),
    "block_dims": U32, "model_id": U32, "stream_id": st.integers(0, 2047), "task_id": U16, "batch_id": U16,
    "thread_id": U32, "context_id": U32}), min_size=1, max_size=8))
def test_ge_task_descriptions_keep_both_name_forms(rows: list[dict[str, Any]]) -> None:
    arr = np.zeros(len(rows), legacy.GE_TASK)
    arr["magic"] = raw.HOST_MAGIC
    arr["data_tag"] = legacy.GE_TASK_TAG
    for i, r in enumerate(rows):
        for name in ("task_type", "cur_iter", "timestamp", "shape_type", "block_dims", "model_id", "stream_id",
                     "task_id", "batch_id", "thread_id", "context_id"):
            arr[name][i] = r[name]
        arr["op_name_kind"][i] = legacy.MIX_STRING if r["name_text"] else legacy.MIX_HASH
        arr["op_type_kind"][i] = legacy.MIX_STRING if r["type_text"] else legacy.MIX_HASH
        if r["name_text"]:
            arr["op_name"][i] = r["name"].encode()
        else:
            arr["op_name_hash"][i] = r["hash"]
        if r["type_text"]:
            arr["op_type"][i] = r["op_type"].encode()
        else:
            arr["op_type_hash"][i] = r["type_hash"]
    out, _ = _decode(legacy.LEGACY_GE_TASK, arr.tobytes())
    got = out["ge_task"]
    for i, r in enumerate(rows):
        g = got[i]
        assert (int(g["model_id"]), int(g["iteration"]), int(g["stream_id"]), int(g["task_id"]), int(g["batch_id"]),
                int(g["task_type"]), int(g["block_num"]), int(g["shape_type"]), int(g["context_id"]),
                int(g["thread_id"]), int(g["device_id"])) == \
            (r["model_id"], r["cur_iter"], r["stream_id"], r["task_id"], r["batch_id"], r["task_type"],
             r["block_dims"], r["shape_type"], r["context_id"], r["thread_id"], DEVICE)
        assert int(g["ts_ns"]) == _local(r["timestamp"])
        assert bool(g["name_inline"]) == r["name_text"] and bool(g["type_inline"]) == r["type_text"]
        assert (g["op_name_text"].decode(), int(g["op_name"])) == \
            ((r["name"], 0) if r["name_text"] else ("", r["hash"]))
        assert (g["op_type_text"].decode(), int(g["op_type"])) == \
            ((r["op_type"], 0) if r["type_text"] else ("", r["type_hash"]))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({
    "model_id": U32, "cur_iter": U64, "stream_id": st.integers(0, 2047), "task_id": U16, "batch_id": U16,
    "tensor_num": st.integers(0, 5), "tensors": st.lists(U32, min_size=55, max_size=55)}), min_size=1, max_size=6))
def test_ge_tensor_records(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["tensors"] = np.array(row["tensors"], np.uint32).reshape(5, 11)
        row["data_tag"] = legacy.GE_TENSOR_TAG
    out, _ = _decode(legacy.LEGACY_GE_TENSOR, _records(legacy.GE_TENSOR, rows).tobytes())
    got = out["ge_tensor"]
    for g, r in zip(got, rows, strict=True):
        assert (int(g["model_id"]), int(g["iteration"]), int(g["stream_id"]), int(g["task_id"]), int(g["batch_id"]),
                int(g["tensor_num"]), int(g["device_id"])) == \
            (r["model_id"], r["cur_iter"], r["stream_id"], r["task_id"], r["batch_id"], r["tensor_num"], DEVICE)
        assert (g["tensors"] == r["tensors"]).all()


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({"model_id": U32, "stream_id": U32, "task_id": U16, "timestamp": TIME,
                                       "cur_iter": U32, "thread_id": U32, "tag": st.integers(0, 1)}),
                min_size=1, max_size=8))
def test_step_info_becomes_model_execute_events(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["data_tag"] = legacy.GE_STEP_TAG
    out, _ = _decode(legacy.LEGACY_GE_STEP, _records(legacy.GE_STEP, rows).tobytes())
    events = out["event"]
    assert events["level"].tolist() == [raw.LEVEL_MODEL] * len(rows)
    assert events["type"].tolist() == [raw.MODEL_EXECUTE_TYPE] * len(rows)
    assert events["item_id"].tolist() == [r["model_id"] for r in rows]
    assert events["request_id"].tolist() == [r["cur_iter"] for r in rows]
    assert events["thread_id"].tolist() == [r["thread_id"] for r in rows]
    assert events["ts_ns"].tolist() == [_local(r["timestamp"]) for r in rows]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({"thread_id": U32, "timestamp": TIME, "task_type": NAME, "task_id": U16,
                                       "batch_id": U16, "stream_id": U16}), min_size=1, max_size=8))
def test_runtime_task_tracks(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["data_tag"] = legacy.RT_TRACK_TAG
        row["task_type"] = row["task_type"][:31].encode()
    out, _ = _decode(legacy.LEGACY_RT_TRACK, _records(legacy.RT_TRACK, rows).tobytes())
    got = out["rt_track"]
    assert got["stream_id"].tolist() == [r["stream_id"] % 2048 for r in rows]  # msprof keeps the low 11 bits
    assert got["task_id"].tolist() == [r["task_id"] for r in rows]
    assert got["batch_id"].tolist() == [r["batch_id"] for r in rows]
    assert got["task_type"].tolist() == [r["task_type"] for r in rows]
    assert got["ts_ns"].tolist() == [_local(r["timestamp"]) for r in rows]
    assert got["device_id"].tolist() == [DEVICE] * len(rows)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.fixed_dictionaries({"thread_id": U32, "entry": TIME, "length": st.integers(0, 10**9),
                                       "api_name": NAME, "stream_id": U32, "memcpy_direction": st.integers(0, 7)}),
                min_size=1, max_size=8))
def test_runtime_api_records_become_named_apis(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        row["exit"] = row["entry"] + row.pop("length")
        row["api_name"] = row["api_name"].encode()
        row["data_tag"] = legacy.RT_API_TAG
    out, _ = _decode(legacy.LEGACY_RT_API, _records(legacy.RT_API, rows).tobytes())
    apis = out["named_api"]
    assert apis["level"].tolist() == [raw.LEVEL_RUNTIME] * len(rows)
    assert apis["name"].tolist() == [r["api_name"] for r in rows]
    assert apis["start_ns"].tolist() == [_local(r["entry"]) for r in rows]
    assert apis["end_ns"].tolist() == [_local(r["exit"]) for r in rows]


def test_id_map_records() -> None:
    rows = [{"data_tag": legacy.GE_ID_MAP_TAG, "graph_id": 7, "model_id": 1, "session_id": 9, "timestamp": 123,
             "mode": 1}]
    out, _ = _decode(legacy.LEGACY_GE_ID_MAP, _records(legacy.GE_ID_MAP, rows).tobytes())
    got = out["ge_id_map"][0]
    assert (int(got["graph_id"]), int(got["model_id"]), int(got["session_id"]), int(got["mode"]),
            int(got["ts_ns"])) == (7, 1, 9, 1, _local(123))


def test_model_level_ge_records() -> None:
    load = _records(legacy.GE_MODEL_LOAD, [
        {"data_tag": legacy.GE_MODEL_LOAD_TAG, "model_id": 1, "name_kind": legacy.MIX_STRING, "name": b"ssd",
         "start": 100, "end": 900},
        {"data_tag": legacy.GE_MODEL_LOAD_TAG, "model_id": 2, "name_kind": legacy.MIX_HASH, "name_hash": 2**63 + 3,
         "start": 1000, "end": 1200}])
    got = _decode(legacy.LEGACY_GE_MODEL_LOAD, load.tobytes())[0]["ge_model_load"]
    assert got["model_id"].tolist() == [1, 2] and got["name_inline"].tolist() == [1, 0]
    assert got["name_text"].tolist() == [b"ssd", b""] and got["name"].tolist() == [0, 2**63 + 3]
    assert got["start_ns"].tolist() == [_local(100), _local(1000)] and got["end_ns"].tolist() == [_local(900),
                                                                                                   _local(1200)]
    fusion = _records(legacy.GE_FUSION, [{"data_tag": legacy.GE_FUSION_TAG, "model_id": 1, "name_kind": 1,
                                          "name": b"fused", "input_mem": 1, "output_mem": 2, "weight_mem": 3,
                                          "workspace_mem": 4, "total_mem": 10, "fusion_op_num": 2,
                                          "fusion_ops": [5, 6, 0, 0, 0, 0, 0, 0]}])
    got = _decode(legacy.LEGACY_GE_FUSION, fusion.tobytes())[0]["ge_fusion"][0]
    assert (int(got["total_mem"]), int(got["fusion_op_num"]), got["fusion_ops"][:2].tolist()) == (10, 2, [5, 6])
    infer = _records(legacy.GE_MODEL_TIME, [{"data_tag": legacy.GE_MODEL_TIME_TAG, "model_id": 1, "name_kind": 1,
                                             "name": b"ssd", "request_id": 7, "thread_id": 9,
                                             "times": [10, 20, 30, 40, 50, 60]}])
    got = _decode(legacy.LEGACY_GE_MODEL_TIME, infer.tobytes())[0]["ge_model_time"][0]
    assert (int(got["request_id"]), int(got["thread_id"])) == (7, 9)
    assert got["times_ns"].tolist() == [_local(t) for t in (10, 20, 30, 40, 50, 60)]
    sched = _records(legacy.GE_HOST_SCHED, [{"data_tag": legacy.GE_HOST_SCHED_TAG, "thread_id": 4, "element": 8,
                                             "event": 2, "start": 5, "end": 6}])
    got = _decode(legacy.LEGACY_GE_HOST_SCHED, sched.tobytes())[0]["ge_host_sched"][0]
    assert (int(got["thread_id"]), int(got["element"]), int(got["event"]), int(got["start_ns"]),
            int(got["end_ns"])) == (4, 8, 2, _local(5), _local(6))


def test_wrong_data_tag_and_bad_name_kind_are_rejected_with_a_reason() -> None:
    acl = _records(legacy.ACL, [{"data_tag": 0, "api_type": 2, "begin": 10, "end": 20, "api_name": b"aclInit"},
                                {"data_tag": 23, "api_type": 2, "begin": 10, "end": 20, "api_name": b"x"},
                                {"data_tag": 0, "api_type": 2, "begin": 0, "end": 20, "api_name": b"y"}])
    out, decoder = _decode(legacy.LEGACY_ACL, acl.tobytes())
    assert out["named_api"]["name"].tolist() == [b"aclInit"]
    assert decoder.ctx.rejected == {"legacy_acl: data tag is not 0": 1, "legacy_acl: zero begin time": 1}
    ge = np.zeros(2, legacy.GE_TASK)
    ge["magic"] = raw.HOST_MAGIC
    ge["data_tag"] = legacy.GE_TASK_TAG
    ge["op_name_kind"] = [legacy.MIX_HASH, 7]
    out, decoder = _decode(legacy.LEGACY_GE_TASK, ge.tobytes())
    assert len(out["ge_task"]) == 1
    assert decoder.ctx.rejected == {"legacy_ge_task: op name or type is neither a hash (0) nor text (1)": 1}


def test_legacy_chunks_wait_for_their_device_folder_offset(tmp_path: Path) -> None:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    body = _records(legacy.RT_TRACK, [{"data_tag": legacy.RT_TRACK_TAG, "timestamp": 5}]).tobytes()
    batch = Batch("raw", 1, {"kind": legacy.LEGACY_RT_TRACK.name, "stream": "Runtime.task_track.3", "device": DEVICE,
                             "size": 64}, body)
    assert list(decoder.process(batch)) == []  # no start_info yet
    released = list(decoder.process(Batch("control", 0, {"path": "device_3/start_info.3",
                                                          "text": CONTROL["device_3/start_info.3"]})))
    assert [b.kind for b in released] == ["rt_track"]
    assert records.from_batch(released[0])["ts_ns"].tolist() == [_local(5)]


EXTRA_VALUES: dict[str, dict[str, Any]] = {
    "node_attr_info": {"op_name": 11, "attr_type": 2, "hash_id": 2**62 + 5},
    "memcpy_info": {"data_size": 202_800, "direction": 1, "device_id": 3, "stream_id": 70_000},
    "hccl_op_info": {"flags": 0b10, "data_type": 4, "alg_type": 99, "count": 1 << 40, "group_name": 77},
    "capture_stream_info": {"capture_status": 1, "model_stream_id": 5, "original_stream_id": 6, "model_id": 7,
                            "device_id": 2},
    "context_id_info": {"op_name": 5, "ctx_id_num": 3, "ctx_ids": np.arange(55, dtype=np.uint32) * 3},
    "graph_id_map": {"model_name": 2**63 + 1, "graph_id": 4, "model_id": 1},
    "fusion_op_info": {"op_name": 8, "fusion_op_num": 2, "input_mem": 1, "output_mem": 2, "weight_mem": 3,
                       "workspace_mem": 4, "total_mem": 10, "fusion_op_ids": np.arange(8, dtype=np.uint64) + 100},
    "hccl_info": {"item_id": 1, "ccl_tag": 2, "group_name": 3, "local_rank": 0, "remote_rank": 1, "rank_size": 8,
                  "work_flow_mode": 1, "plane_id": 2, "ctx_id": 9, "notify_id": 2**40, "stage": 3, "role": 1,
                  "duration_estimated": 1.25, "src_addr": 0x1000, "dst_addr": 0x2000, "data_size": 4096,
                  "op_type": 0, "data_type": 4, "link_type": 1, "transport_type": 0, "rdma_type": 0xFFFFFFFF},
    "multi_thread": {"thread_num": 2, "thread_ids": np.arange(25, dtype=np.uint32) + 7},
}
# Field offsets from msprof's format strings (StructFmt): the payload starts after the 24-byte header.
MSPROF_OFFSETS = {("memcpy_info", "direction"): 32, ("hccl_op_info", "alg_type"): 26,
                  ("node_attr_info", "hash_id"): 36, ("hccl_info", "duration_estimated"): 88,
                  ("hccl_info", "rdma_type"): 136, ("fusion_op_info", "fusion_op_ids"): 76,
                  ("multi_thread", "thread_ids"): 28, ("graph_id_map", "model_id"): 36}


@pytest.mark.parametrize("kind", sorted(EXTRA_VALUES))
def test_extra_host_kinds_decode_field_by_field(kind: str) -> None:
    layout = host_extra.LAYOUTS[kind]
    for (name_kind, field), offset in MSPROF_OFFSETS.items():
        if name_kind == kind:
            assert layout.fields[field][1] == offset, field
    arr = np.zeros(3, layout)
    arr["magic"] = raw.HOST_MAGIC
    arr["thread_id"] = [1, 2, 3]
    arr["timestamp"] = [MONO0 + 10, MONO0 + 20, MONO0 + 30]
    for name, value in EXTRA_VALUES[kind].items():
        arr[name] = value
    out, _ = _decode(host_extra.STREAM_KINDS[kind], arr.tobytes(), device=None)
    (decoded_kind, got), = out.items()
    assert got["ts_ns"].tolist() == [MONO0 + 10 + OFFSET, MONO0 + 20 + OFFSET, MONO0 + 30 + OFFSET]
    assert got["thread_id"].tolist() == [1, 2, 3]
    for name, value in EXTRA_VALUES[kind].items():
        if name == "flags":
            assert got["relay"].tolist() == [0] * 3 and got["retry"].tolist() == [1] * 3
        else:
            assert all(np.array_equal(row, value) for row in got[name]), name


LEGACY_NAMES = [
    ("AclModule.acl_model.0", 1, "legacy_acl", 0), ("AclModule.acl_op.2", 1, "legacy_acl", 2),
    ("AclModule.acl_rts.0", 1, "legacy_acl", 0), ("AclModule.acl_others.0", 1, "legacy_acl", 0),
    ("AclModule.hash_dic.0", 1, "hash_dic", 0), ("Framework.hash_dic.6", 1, "hash_dic", 6),
    ("Framework.task_desc_info.0", 1, "legacy_ge_task", 0), ("Framework.host.task_desc_info.1", 1, "legacy_ge_task", 1),
    ("Framework.tensor_data_info.0", 0, "legacy_ge_tensor", 0), ("Framework.step_info.0", 1, "legacy_ge_step", 0),
    ("Framework.id_map_info.0", 1, "legacy_ge_id_map", 0), ("Runtime.task_track.0", 1, "legacy_rt_track", 0),
    ("Framework.model_load_info_1.0", 1, "legacy_ge_model_load", 0),
    ("Framework.host.model_load_info_1.2", 1, "legacy_ge_model_load", 2),
    ("Framework.fusion_op_info_1.0", 1, "legacy_ge_fusion", 0),
    ("Framework.model_time_info_1_3.0", 1, "legacy_ge_model_time", 0),
    ("Framework.dynamic_op_execute.0", 1, "legacy_ge_host_sched", 0),
    ("runtime.host.runtime.0", 1, "legacy_rt_track", 0), ("Runtime.runtime.4", 1, "legacy_rt_track", 4),
    ("Runtime.api.0", 1, "legacy_rt_api", 0), ("Runtime.runtime.data.0", 1, "legacy_rt_api", 0),
    ("hwts.log.data.45.dev.profiler_default_tag.0", 1, "hwts", 0), ("hwts.log.data.45.1", 1, "hwts", 1),
    ("aicore.data.46.dev.profiler_default_tag.0", 1, "aicore", 0), ("aicore.data.46.0", 0, "mini_aicore", 0),
    ("ts_track.data.45.dev.profiler_default_tag.0", 1, "ts_track", 0),
    ("training_trace.46.dev.profiler_default_tag.5", 1, "training_trace", 5),  # 40 or 20 B: its bytes tell
    ("ts_track.data.45.dev.profiler_default_tag.0", 0, "mini_ts_track", 0),
    ("hwts.data.0", 1, "hwts", 0), ("aicore.data.0", 0, "mini_aicore", 0),  # current names still
]


@pytest.mark.parametrize(("base", "platform", "kind", "device"), LEGACY_NAMES)
def test_legacy_file_names(base: str, platform: int, kind: str, device: int) -> None:
    found = files.device_stream_kind(base, platform)
    assert found is not None and (found[0].name, found[1]) == (kind, device)


def test_legacy_names_that_are_not_ours() -> None:
    assert files.device_stream_kind("hwts.log.data.45.dev.profiler_default_tag.0", 0) is None  # the 310: no HWTS
    assert files.device_stream_kind("Framework.device_queue.0", 1) is None
    assert legacy.split_slice_name("AclModule.acl_model.0.slice_3") == ("AclModule.acl_model.0", 3, ".slice_")
    assert legacy.split_slice_name("AclModule.acl_model.0.3") == ("AclModule.acl_model.0", 3, ".")
    assert legacy.split_slice_name("hwts.log.data.45.0.12") == ("hwts.log.data.45.0", 12, ".")
    for name in ("info.json.0", "start_info.0", "host_start.log.0", "AclModule.acl_model.0.3.done"):
        assert legacy.split_slice_name(name) is None, name


@pytest.mark.parametrize("group", ["aging", "unaging"])
def test_aging_and_unaging_groups_are_both_streams(group: str) -> None:
    for tag in ("compact.memcpy_info", "compact.node_attr_info", "compact.hccl_op_info",
                "compact.capture_stream_info", "additional.context_id_info", "additional.graph_id_map",
                "additional.fusion_op_info", "additional.hccl_info", "additional.Multi_Thread",
                "compact.task_track", "api_event.data"):
        assert files.host_stream_kind(f"{group}.{tag}") is not None, tag


RANDOM_KINDS = {kind.name: kind for kind in (*legacy.HOST_KINDS, *host_extra.STREAM_KINDS.values())}


@settings(max_examples=150, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(RANDOM_KINDS)), data=st.data())
def test_random_records_never_crash_and_every_record_is_accounted(kind: str, data: st.DataObject) -> None:
    """Records of random bytes behind a valid magic number are decoded or rejected, one for one."""
    stream = RANDOM_KINDS[kind]
    tails = data.draw(st.lists(st.binary(min_size=stream.record_size - 2, max_size=stream.record_size - 2),
                               min_size=1, max_size=6))
    body = b"".join(b"\x5a\x5a" + tail for tail in tails)
    batch = Batch("raw", len(tails), {"kind": kind, "stream": kind, "device": DEVICE, "size": stream.record_size},
                  body)
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder))
        list(decoder.process(batch))
    accounting = decoder.accounting()
    assert accounting["records_in"] == len(tails) == accounting["decoded"] + accounting["rejected"]
