"""Board simulator: the PROF_ directory it writes is what msprof's parser reads."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from pipeline.stage import StageContext
from stages.formats import host_extra, raw
from stages.simulator import names, simulate
from stages.simulator.run import records_per_second
from stages.simulator.stage import SimulatorStage
from stages.simulator.workload import OpTable

START_NS = 1_700_000_000_123_456_789
SLICE = 8100  # not a multiple of any record size: device records straddle slices
HOST_RECORD = {
    "unaging.api_event.data": raw.API_EVENT,
    "unaging.compact.task_track": raw.TASK_TRACK,
    "unaging.compact.node_basic_info": raw.NODE_BASIC_INFO,
    "unaging.additional.tensor_info": raw.TENSOR_INFO,
    "unaging.additional.msproftx": raw.MSPROFTX,
    "unaging.additional.graph_id_map": host_extra.GRAPH_ID_MAP,
    "aging.compact.memcpy_info": host_extra.MEMCPY_INFO,
}
TEXT_STREAMS = ("unaging.additional.hash_dic", "unaging.additional.type_info_dic")
PROF_NAME = re.compile(r"^PROF_\d{6}_\d{17}_[A-R]{16}$")
HOST_SLICE = re.compile(r"^(unaging\.(api_event\.data|compact\.(task_track|node_basic_info)|"
                        r"additional\.(tensor_info|msproftx|hash_dic|type_info_dic|graph_id_map))|"
                        r"aging\.compact\.memcpy_info)\.slice_\d+$")
DEVICE_SLICE = re.compile(r"^(hwts\.data|aicore\.data|ts_track\.data|aicpu\.data|l2_cache\.data|lpmFreqConv\.data)"
                          r"\.0\.slice_\d+$")
CLOUD_RECORD = {"hwts.data.0": raw.HWTS_LOG, "aicore.data.0": raw.AICORE_PMU, "ts_track.data.0": raw.TS_STEP_TRACE,
                "aicpu.data.0": raw.AICPU_NODE, "l2_cache.data.0": raw.L2_CACHE, "lpmFreqConv.data.0": raw.LPM_FREQ}


def _run(out: Path, chip: str, iterations: int = 6, **kw: object) -> Path:
    kw.setdefault("rate", "max")
    kw.setdefault("slice_bytes", SLICE)
    return simulate(out, chip=chip, iterations=iterations, start_time_ns=START_NS, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=["mini", "cloud"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, dict]:
    out = tmp_path_factory.mktemp(request.param)
    prof = _run(out, request.param)
    return request.param, prof, json.loads((out / "simulator_truth.json").read_text())


def _stream(data_dir: Path, base: str) -> bytes:
    files = [f for f in data_dir.glob(f"{base}.slice_*") if not f.name.endswith(".done")]
    files.sort(key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return b"".join(f.read_bytes() for f in files)


def _records(data_dir: Path, base: str, dtype: np.dtype) -> np.ndarray:
    data = _stream(data_dir, base)
    assert len(data) % dtype.itemsize == 0
    return np.frombuffer(data, dtype)


def _tlv(data: bytes) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    while pos < len(data):
        tag, size = data[pos + 1], int.from_bytes(data[pos + 2:pos + 4], "little")
        assert raw.MINI_TLV_TAG_SIZES[tag] == size
        out.append((tag, data[pos:pos + size]))
        pos += size
    assert pos == len(data)
    return out


def _device_tasks(chip: str, dev: Path) -> list[tuple[int, int, int, int]]:
    """(stream, task, start tick, end tick) in start order."""
    if chip == "mini":
        tl = [np.frombuffer(b, raw.MINI_TIMELINE)[0] for tag, b in _tlv(_stream(dev, "ts_track.data.0"))
              if tag == raw.MINI_TAG_TIMELINE]
        starts = [r for r in tl if r["task_state"] == raw.MINI_STATE_RUNNING]
        end_list = [int(r["timestamp"]) for r in tl if r["task_state"] == raw.MINI_STATE_COMPLETE]
    else:
        hwts = _records(dev, "hwts.data.0", raw.HWTS_LOG)
        starts = [r for r in hwts if r["head"] & 7 == raw.HWTS_TASK_START]
        end_list = [int(r["syscnt"]) for r in hwts if r["head"] & 7 == raw.HWTS_TASK_END]
    key = "timestamp" if chip == "mini" else "syscnt"
    return [(int(r["stream_id"]), int(r["task_id"]), int(r[key]), e) for r, e in zip(starts, end_list, strict=True)]


def test_layout_and_done_files(run: tuple[str, Path, dict]) -> None:
    chip, prof, _ = run
    assert PROF_NAME.match(prof.name)
    host, dev = prof / "host", prof / "device_0"
    for ctrl in ("info.json", "sample.json", "start_info", "end_info", "host_start.log"):
        assert (host / f"{ctrl}.done").read_text() == f"filesize:{(host / ctrl).stat().st_size}\n"
    for ctrl in ("info.json.0", "sample.json", "start_info.0", "end_info.0", "dev_start.log.0", "host_start.log.0"):
        assert (dev / f"{ctrl}.done").read_text() == f"filesize:{(dev / ctrl).stat().st_size}\n"
    for data_dir, pattern in ((host / "data", HOST_SLICE), (dev / "data", DEVICE_SLICE)):
        slices = [p for p in data_dir.iterdir() if not p.name.endswith(".done")]
        assert slices
        for p in slices:
            assert pattern.match(p.name), p.name
            assert Path(f"{p}.done").read_text() == f"filesize:{p.stat().st_size}\n"
            assert p.stat().st_size <= SLICE
    bases = {p.name.rsplit(".slice_", 1)[0] for p in (dev / "data").iterdir()}
    assert bases == (set(CLOUD_RECORD) if chip == "cloud" else {"ts_track.data.0", "aicore.data.0"})


def test_host_slices_hold_whole_records(run: tuple[str, Path, dict]) -> None:
    _, prof, _ = run
    data = prof / "host" / "data"
    for base, dtype in HOST_RECORD.items():
        sizes = [p.stat().st_size for p in data.glob(f"{base}.slice_*") if not p.name.endswith(".done")]
        assert sizes and all(s % dtype.itemsize == 0 for s in sizes), base
        recs = _records(data, base, dtype)
        assert (recs["magic"] == raw.HOST_MAGIC).all()
    for base in TEXT_STREAMS:
        for p in data.glob(f"{base}.slice_*"):
            if not p.name.endswith(".done"):
                assert p.read_bytes().endswith(b"\n")


def test_device_streams_parse_with_valid_markers(run: tuple[str, Path, dict]) -> None:
    chip, prof, _ = run
    dev = prof / "device_0" / "data"
    for base in ("aicore.data.0", "ts_track.data.0"):
        slices = [p for p in dev.glob(f"{base}.slice_*") if not p.name.endswith(".done")]
        slices.sort(key=lambda p: int(p.name.rsplit("_", 1)[1]))
        assert all(p.stat().st_size == SLICE for p in slices[:-1])  # filled to the limit, records split
    assert len(_stream(dev, "aicore.data.0")) > SLICE
    if chip == "mini":
        tags = Counter(tag for tag, _ in _tlv(_stream(dev, "ts_track.data.0")))
        assert set(tags) == {raw.MINI_TAG_TIMELINE, raw.MINI_TAG_STEP_TRACE}
        counts = [np.frombuffer(b, raw.MINI_EVENT_COUNT)[0] for _, b in _tlv(_stream(dev, "aicore.data.0"))]
        assert all(r["tag"] == raw.MINI_TAG_EVENT_COUNT and r["block"] > 0 for r in counts)
        assert not list(dev.glob("hwts.data*"))
        return
    for base, dtype in (("hwts.data.0", raw.HWTS_LOG), ("aicore.data.0", raw.AICORE_PMU)):
        recs = _records(dev, base, dtype)
        assert (recs["marker"] == raw.HWTS_MARKER).all()
        cnt = recs["head"] >> 4
        assert ((np.diff(cnt.astype(int)) % 16) == 1).all()  # no gap in the rolling counter
    ts = _records(dev, "ts_track.data.0", raw.TS_STEP_TRACE)
    assert set(ts["tag"].tolist()) <= {raw.TS_TAG_STEP_TRACE, raw.TS_TAG_TASK_FLIP}


def test_control_files_have_required_keys(run: tuple[str, Path, dict]) -> None:
    chip, prof, _ = run
    host_info = json.loads((prof / "host" / "info.json").read_text())
    dev_info = json.loads((prof / "device_0" / "info.json.0").read_text())
    host_sample = json.loads((prof / "host" / "sample.json").read_text())
    dev_sample = json.loads((prof / "device_0" / "sample.json").read_text())
    assert host_info["devices"] == "64" and host_info["DeviceInfo"] == []  # D2
    assert host_sample["devices"] == "64" and dev_sample["devices"] == "0"  # D1
    for info in (host_info, dev_info):  # D7 / D8
        assert {"platform_version", "pid", "pid_name", "hostname", "memoryTotal", "netCard", "CPU"} <= info.keys()
        assert info["CPU"][0]["Frequency"] == "1000.000000"
        assert isinstance(info["CPU"][0]["Logical_CPU_Count"], str)
        assert info["drvVersion"] >= 467473
        assert info["platform_version"] == {"mini": "0", "cloud": "1"}[chip]
    device = dev_info["DeviceInfo"][0]
    assert device["hwts_frequency"] == "100" and int(device["aic_frequency"]) > 0 and device["ai_core_num"] > 0
    d11 = {"ai_core_profiling", "ai_core_metrics", "ai_core_profiling_events", "ai_core_profiling_mode",
           "aicore_sampling_interval", "aiv_profiling", "aiv_metrics", "aiv_profiling_events", "aiv_profiling_mode",
           "aiv_sampling_interval", "llc_profiling"}
    assert d11 <= dev_sample.keys()
    assert dev_sample["ai_core_profiling_events"] == "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"
    assert dev_sample["ai_core_profiling_mode"] == "task-based"
    if chip == "mini":
        assert dev_sample["ts_timeline"] == "on" and dev_sample["hwts_log"] == "off"
    for name in ("start_info", "end_info"):
        keys = json.loads((prof / "host" / name).read_text()).keys()
        assert "clockMonotonicRaw" in keys and len(keys) == 3
    start = json.loads((prof / "host" / "start_info").read_text())
    assert int(start["collectionTimeBegin"]) == START_NS // 1000
    assert (prof / "device_0" / "host_start.log.0").read_text().startswith("[Device0]\nclock_monotonic_raw: ")
    assert "cntvct: " in (prof / "device_0" / "dev_start.log.0").read_text()


def _host(prof: Path) -> dict[str, np.ndarray]:
    data = prof / "host" / "data"
    return {base: _records(data, base, dtype) for base, dtype in HOST_RECORD.items()}


def _dictionary(prof: Path, base: str) -> dict[str, str]:
    text = _stream(prof / "host" / "data", base).decode()
    return dict(line.split(":", 1) for line in text.splitlines())


def test_truth_counts_equal_records_on_disk(run: tuple[str, Path, dict]) -> None:
    chip, prof, truth = run
    host = _host(prof)
    found = {base: len(recs) for base, recs in host.items()}
    for base in TEXT_STREAMS:
        found[base] = len(_dictionary(prof, base))
    dev = prof / "device_0" / "data"
    if chip == "mini":
        found["ts_track.data.0"] = len(_tlv(_stream(dev, "ts_track.data.0")))
        found["aicore.data.0"] = len(_tlv(_stream(dev, "aicore.data.0")))
    else:
        for base, dtype in CLOUD_RECORD.items():
            found[base] = len(_records(dev, base, dtype))
    assert truth["records"] == found
    assert truth["records_total"] == sum(found.values())
    assert truth["complete"] and truth["iterations"] == 6 and truth["prof_dir"] == str(prof)


def test_op_statistic_matches_device_tasks_joined_to_host(run: tuple[str, Path, dict]) -> None:
    """Join device tasks to host task_track → node_basic_info, then aggregate like op_statistic."""
    chip, prof, truth = run
    host = _host(prof)
    hashes = _dictionary(prof, "unaging.additional.hash_dic")
    types = _dictionary(prof, "unaging.additional.type_info_dic")
    tracks = host["unaging.compact.task_track"]
    tracks = tracks[np.argsort(tracks["timestamp"], kind="stable")]
    assert {types[f"5000_{t}"] for t in tracks["task_type"]} == {"KERNEL_AICORE", "KERNEL_AICPU"}
    nbi = host["unaging.compact.node_basic_info"]
    nbi = nbi[np.argsort(nbi["timestamp"])]
    owner = np.searchsorted(nbi["timestamp"], tracks["timestamp"]) - 1
    seen: Counter[tuple[int, int]] = Counter()
    index: dict[tuple[int, int, int], int] = {}
    for i, r in enumerate(tracks):
        key = (int(r["stream_id"]), int(r["task_id"]))
        index[(*key, seen[key])] = i
        seen[key] += 1
    stats: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 2**62, 0])
    occurrence: Counter[tuple[int, int]] = Counter()
    tasks = _device_tasks(chip, prof / "device_0" / "data")
    assert len(tasks) == len(tracks)
    for stream, task, start, end in tasks:
        i = index[(stream, task, occurrence[(stream, task)])]
        occurrence[(stream, task)] += 1
        node = nbi[owner[i]]
        s = stats[hashes[str(node["op_type"])], raw.GE_TASK_TYPES[node["task_type"]]]
        dur = (end - start) * 10
        s[0], s[1], s[2], s[3] = s[0] + 1, s[1] + dur, min(s[2], dur), max(s[3], dur)
    expected = [{"device_id": 0, "op_type": t, "core_type": c, "count": s[0], "total_ns": s[1], "min_ns": s[2],
                 "max_ns": s[3]} for (t, c), s in sorted(stats.items())]
    assert truth["op_statistic"] == expected


def test_host_intervals_nest_and_contain_their_records(run: tuple[str, Path, dict]) -> None:
    _, prof, truth = run
    host = _host(prof)
    api = host["unaging.api_event.data"]
    assert len(set(api["thread_id"].tolist())) == 1
    is_event = api["end"] == raw.EVENT_FLAG
    apis = api[~is_event]
    order = np.lexsort((-apis["end"].astype(np.int64), apis["begin"].astype(np.int64)))
    stack: list[int] = []
    for r in apis[order]:
        while stack and stack[-1] <= r["begin"]:
            stack.pop()
        assert not stack or r["end"] <= stack[-1], "partial overlap"
        stack.append(int(r["end"]))
    events = api[is_event]
    assert (events["level"] == raw.LEVEL_MODEL).all() and len(events) == 2 * truth["iterations"]
    assert sorted(Counter(events["reserve"].tolist()).values()) == [2] * truth["iterations"]
    for level, base in ((raw.LEVEL_NODE, "unaging.compact.node_basic_info"), (raw.LEVEL_NODE,
                        "unaging.additional.tensor_info"), (raw.LEVEL_RUNTIME, "unaging.compact.task_track")):
        outer = apis[apis["level"] == level]
        outer = outer[np.argsort(outer["begin"])]
        ts = host[base]["timestamp"]
        k = np.searchsorted(outer["begin"], ts, side="right") - 1
        assert (k >= 0).all() and (ts <= outer["end"][k]).all(), base
    node = apis[apis["level"] == raw.LEVEL_NODE]
    nbi = host["unaging.compact.node_basic_info"]
    assert set(node["item_id"].tolist()) == set(nbi["op_name"].tolist())
    types = _dictionary(prof, "unaging.additional.type_info_dic")
    assert all(f"{r['level']}_{r['type']}" in types for r in apis)
    assert types[f"20000_{names.ACL_APIS['aclmdlExecute']}"] == "aclmdlExecute"
    tx = host["unaging.additional.msproftx"]
    assert {m.decode() for m in tx["message"]} >= {"preprocess", "postprocess", "frame 1"}
    assert set(tx["event_type"].tolist()) == {0, 2}


def test_device_time_follows_host_launch(run: tuple[str, Path, dict]) -> None:
    chip, prof, truth = run
    host_mono0 = int(json.loads((prof / "host" / "start_info").read_text())["clockMonotonicRaw"])
    dev_log = dict(line.split(": ") for line in (prof / "device_0" / "dev_start.log.0").read_text().splitlines())
    host_log = (prof / "device_0" / "host_start.log.0").read_text().splitlines()
    assert host_log[1] == f"clock_monotonic_raw: {host_mono0}"
    cnt0 = int(dev_log["cntvct"])
    tracks = _host(prof)["unaging.compact.task_track"]
    tracks = np.sort(tracks["timestamp"].astype(np.int64))
    tasks = _device_tasks(chip, prof / "device_0" / "data")
    start = np.array([s for _, _, s, _ in tasks], np.int64)
    end = np.array([e for _, _, _, e in tasks], np.int64)
    assert ((host_mono0 + (start - cnt0) * 10) > tracks).all()
    assert (start[1:] > end[:-1]).all() and (end > start).all()  # sequential, never overlapping
    execute = next(a for a in truth["api_statistic"] if a["api_name"] == "aclmdlExecute")
    mean_ms = execute["total_ns"] / execute["count"] / 1e6
    assert (6.0 < mean_ms < 8.5) if chip == "mini" else (1.5 < mean_ms < 4.0)


def test_pmu_cycles_follow_duration(tmp_path: Path) -> None:
    prof = _run(tmp_path, "mini", iterations=2)
    dev = prof / "device_0" / "data"
    counts = [np.frombuffer(b, raw.MINI_EVENT_COUNT)[0] for _, b in _tlv(_stream(dev, "aicore.data.0"))]
    durations = {(int(s), int(t)): e - b for s, t, b, e in _device_tasks("mini", dev)}
    for r in counts:
        dur_cycles = durations[(int(r["stream_id"]), int(r["task_id"]))] * 10  # 1000 MHz / 100 MHz
        ratio = r["task_cycles"] / (dur_cycles * min(int(r["block"]), 2))
        assert 0.85 < ratio < 0.97
        assert (r["pmu"][:6] <= r["task_cycles"]).all() and r["pmu"][7] < r["pmu"][6]


def test_task_id_wrap_flips_on_cloud_only(tmp_path: Path) -> None:
    prof = _run(tmp_path / "cloud", "cloud", iterations=2, first_task_id=65_500)
    truth = json.loads((tmp_path / "cloud" / "simulator_truth.json").read_text())
    ts = _records(prof / "device_0" / "data", "ts_track.data.0", raw.TS_TASK_FLIP)
    flips = ts[ts["tag"] == raw.TS_TAG_TASK_FLIP]
    assert len(flips) == truth["task_flips"] == 1 and flips[0]["task_id"] == 0 and flips[0]["flip_num"] == 1
    tracks = _host(prof)["unaging.compact.task_track"]
    types = _dictionary(prof, "unaging.additional.type_info_dic")
    flip_tracks = tracks[tracks["task_type"] == names.TASK_FLIP]
    assert types[f"5000_{names.TASK_FLIP}"] == "FLIP_TASK"
    assert len(flip_tracks) == 1 and flip_tracks[0]["task_id"] == 0 and flip_tracks[0]["batch_id"] == 1
    stream = tracks[(tracks["stream_id"] == flips[0]["stream_id"]) & (tracks["task_type"] != names.TASK_FLIP)]
    after = stream[stream["timestamp"] > flip_tracks[0]["timestamp"]]
    assert after["task_id"][0] == 1 and (stream["batch_id"] == 0).all()  # a real runtime may write 0 there
    written = _run(tmp_path / "written", "cloud", iterations=2, first_task_id=65_500, batch_ids=True)
    tracks = _host(written)["unaging.compact.task_track"]
    stream = tracks[(tracks["stream_id"] == flips[0]["stream_id"]) & (tracks["task_type"] != names.TASK_FLIP)]
    flip_at = tracks[tracks["task_type"] == names.TASK_FLIP][0]["timestamp"]
    assert (stream[stream["timestamp"] > flip_at]["batch_id"] == 1).all()
    assert (stream[stream["timestamp"] < flip_at]["batch_id"] == 0).all()
    mini = _run(tmp_path / "mini", "mini", iterations=2, first_task_id=65_500)
    mini_tracks = _host(mini)["unaging.compact.task_track"]
    assert names.TASK_FLIP not in mini_tracks["task_type"] and (mini_tracks["batch_id"] == 0).all()
    assert 0 in mini_tracks["task_id"]  # ids simply wrap on the 310


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", "cloud", iterations=3, seed=7)
    b = _run(tmp_path / "b", "cloud", iterations=3, seed=7)
    c = _run(tmp_path / "c", "cloud", iterations=3, seed=8)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert a.name == b.name and a.name != c.name
    for rel in files:
        if rel.name != "sample.json":  # holds result_dir, an absolute path
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert _stream(a / "host" / "data", "unaging.api_event.data") != _stream(c / "host" / "data",
                                                                               "unaging.api_event.data")


def _total_size(prof_parent: Path) -> int:
    return sum(p.stat().st_size for p in prof_parent.rglob("*.slice_*") if p.is_file())


def test_reader_sees_files_grow_then_stop_completes_directory(tmp_path: Path) -> None:
    stop = threading.Event()
    result: list[Path] = []
    thread = threading.Thread(target=lambda: result.append(simulate(
        tmp_path, chip="mini", iterations=0, rate="realtime", burst_ms=10, stop_event=stop)))
    thread.start()
    sizes: list[int] = []
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        sizes.append(_total_size(tmp_path))
        time.sleep(0.02)
    stop.set()
    thread.join(timeout=2)
    assert not thread.is_alive()
    distinct = sorted(set(sizes))
    assert len(distinct) >= 5 and sizes == sorted(sizes)
    prof = result[0]
    assert (prof / "host" / "end_info.done").exists() and (prof / "device_0" / "end_info.0.done").exists()
    assert all(Path(f"{p}.done").exists() for p in prof.rglob("*.slice_*") if not p.name.endswith(".done"))
    truth = json.loads((tmp_path / "simulator_truth.json").read_text())
    assert truth["complete"] and 10 <= truth["iterations"] <= 80
    assert truth["records_total"] > 0


def test_stage_runs_stops_and_accounts(tmp_path: Path) -> None:
    ctx = StageContext(stage_id="board", run_id="r1", output_dir=tmp_path)
    stage = SimulatorStage({"chip": "cloud", "iterations": 0, "rate": "realtime", "output": "board"}, ctx)
    timer = threading.Timer(0.15, stage.stop)
    timer.start()
    t0 = time.monotonic()
    ticks = list(stage.batches())
    assert ticks and set(ticks) == {None}  # the board writes files, not batches: its loop only keeps reporting
    assert time.monotonic() - t0 < 1.0
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    assert stage.accounting() == {"records_written": truth["records_total"]}
    assert stage.progress()["iteration"] == truth["iterations"] > 0
    assert list((tmp_path / "board").glob("PROF_000001_*"))
    with pytest.raises(ValueError):
        SimulatorStage.Config.model_validate({"chip": "ascend", "bogus": 1})


def test_workload_shape() -> None:
    table = OpTable.build("mini")
    assert 60 <= len(table) <= 120
    assert 6_000 < table.mean_us.sum() < 7_500
    op_types = Counter(op.op_type for op in table.ops)
    assert op_types.most_common(1)[0][0] == "Conv2D" and op_types["BNInferenceD"] == 8
    assert {op.core for op in table.ops} == {"AI_CORE", "AI_CPU"}


def test_small_slices_rotate_on_record_and_line_boundaries(tmp_path: Path) -> None:
    prof = _run(tmp_path, "mini", iterations=1, slice_bytes=1024)
    data = prof / "host" / "data"
    dic = [p for p in data.glob("unaging.additional.hash_dic.slice_*") if not p.name.endswith(".done")]
    assert len(dic) > 1 and all(p.stat().st_size <= 1024 and p.read_bytes().endswith(b"\n") for p in dic)
    api = [p for p in data.glob("unaging.api_event.data.slice_*") if not p.name.endswith(".done")]
    api.sort(key=lambda p: int(p.name.rsplit("_", 1)[1]))
    assert all(p.stat().st_size == 1000 for p in api[:-1]) and api[-1].stat().st_size % 40 == 0  # 25 × 40 B
    truth = json.loads((tmp_path / "simulator_truth.json").read_text())
    assert truth["records"]["unaging.additional.hash_dic"] == len(_dictionary(prof, "unaging.additional.hash_dic"))
    assert truth["slices"]["unaging.additional.hash_dic"] == len(dic)


def test_cli_entry_point_in_writer(tmp_path: Path) -> None:
    from stages.simulator.writer import simulate as cli_simulate

    prof = cli_simulate(tmp_path, chip="mini", iterations=1, rate="max", seed=3)
    assert PROF_NAME.match(prof.name) and (prof / "host" / "end_info").exists()


def test_static_mode_reports_ops_once_at_load_and_replays_their_ids(tmp_path: Path) -> None:
    from stages.simulator.writer import simulate as cli_simulate

    prof = cli_simulate(tmp_path, chip="cloud", iterations=3, rate="max", seed=3, first_task_id=65_500,
                        mode="static")
    truth = json.loads((tmp_path / "simulator_truth.json").read_text())
    assert truth["mode"] == "static"
    host = _host(prof)
    api = host["unaging.api_event.data"]
    events = api[api["end"] == raw.EVENT_FLAG]
    load = events[events["type"] == raw.MODEL_LOAD_TYPE]
    assert len(load) == 2 and (load["reserve"] == 0).all() and (load["item_id"] == 1).all()  # static graph (D4)
    begin, end = int(load["begin"].min()), int(load["begin"].max())
    for base in ("unaging.compact.task_track", "unaging.compact.node_basic_info", "unaging.additional.tensor_info"):
        ts = host[base]["timestamp"].astype(np.int64)
        assert ((ts > begin) & (ts < end)).all(), base  # reported once, inside the load
    node = api[(api["level"] == raw.LEVEL_NODE) & (api["end"] != raw.EVENT_FLAG)]
    assert len(node) == len(OpTable.build("cloud")) and (node["reserve"] == 0).all()
    types = _dictionary(prof, "unaging.additional.type_info_dic")
    assert types[f"15000_{raw.MODEL_LOAD_TYPE}"] == "ModelLoad"
    tracks = host["unaging.compact.task_track"]
    assert (tracks["task_type"] == names.TASK_FLIP).sum() == 1  # the load crossed the wrap once
    # The device replays the registered ids: the same (stream, task) sequence on every execution.
    tasks = _device_tasks("cloud", prof / "device_0" / "data")
    per_run = len(tasks) // 3
    runs = [[(s, t) for s, t, _, _ in tasks[k * per_run:(k + 1) * per_run]] for k in range(3)]
    assert runs[0] == runs[1] == runs[2]
    registered = tracks[tracks["task_type"] != names.TASK_FLIP]
    assert sorted(runs[0]) == sorted(zip(registered["stream_id"].tolist(), registered["task_id"].tolist(),
                                         strict=True))
    # The model's own FLIP task runs on every execution: one flip record each time, same number.
    ts = _records(prof / "device_0" / "data", "ts_track.data.0", raw.TS_TASK_FLIP)
    flips = ts[ts["tag"] == raw.TS_TAG_TASK_FLIP]
    assert flips["flip_num"].tolist() == [1, 1, 1] == [1] * truth["task_flips"]


@pytest.mark.parametrize(("rate", "per_second"), [("realtime", None), ("max", None), ("100k", 100_000.0),
                                                  ("2.5M", 2_500_000.0), ("50000", 50_000.0), ("7K", 7_000.0)])
def test_rate_names_a_pace_or_records_per_second(rate: str, per_second: float | None) -> None:
    assert records_per_second(rate) == per_second


@pytest.mark.parametrize("rate", ["fast", "0", "-5k", "100 k/s", ""])
def test_a_rate_that_is_neither_is_refused(rate: str) -> None:
    with pytest.raises(ValueError, match="records per second such as '100k'"):
        records_per_second(rate)
    with pytest.raises(ValueError, match="rate"):
        SimulatorStage.Config(rate=rate)


def test_a_fixed_rate_paces_the_writes_not_the_records(tmp_path: Path) -> None:
    """Records per second change when the bytes are written, never which bytes."""
    paced = _run(tmp_path / "paced", "cloud", iterations=3, rate="400k", seed=7)
    fast = _run(tmp_path / "fast", "cloud", iterations=3, rate="max", seed=7)
    slices = sorted(p.relative_to(paced) for p in paced.rglob("*.slice_*"))
    assert slices and slices == sorted(p.relative_to(fast) for p in fast.rglob("*.slice_*"))
    assert all((paced / rel).read_bytes() == (fast / rel).read_bytes() for rel in slices)
