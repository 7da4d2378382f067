"""The simulated 910B (STARS chip): what it writes is what msprof's parser reads."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stages.decoder.stars import func_type, sqe_type, stream_ids, task_ids
from stages.formats import host_extra, raw
from stages.simulator import names, simulate
from stages.simulator.workload import OpTable

START_NS = 1_700_000_000_123_456_789
SLICE = 8192  # a multiple of 128, as msprof's Python path needs for ffts_profile (D11)
D11_KEYS = {"ai_core_profiling", "ai_core_metrics", "ai_core_profiling_events", "ai_core_profiling_mode",
            "aicore_sampling_interval", "aiv_profiling", "aiv_metrics", "aiv_profiling_events", "aiv_profiling_mode",
            "aiv_sampling_interval"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("910b")
    prof = simulate(out, chip="910b", iterations=6, rate="max", slice_bytes=SLICE, start_time_ns=START_NS)
    return prof, json.loads((out / "simulator_truth.json").read_text())


def _slices(data_dir: Path, base: str) -> list[Path]:
    found = [p for p in data_dir.glob(f"{base}.slice_*") if not p.name.endswith(".done")]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))


def _records(data_dir: Path, base: str, dtype: np.dtype) -> np.ndarray:
    data = b"".join(p.read_bytes() for p in _slices(data_dir, base))
    assert len(data) % dtype.itemsize == 0
    return np.frombuffer(data, dtype)


def test_device_files_and_slices(run: tuple[Path, dict]) -> None:
    prof, truth = run
    data = prof / "device_0" / "data"
    bases = {p.name.rsplit(".slice_", 1)[0] for p in data.iterdir()}
    assert bases == {"stars_soc.data.0", "ffts_profile.data.0", "ts_track.data.0"}  # no hwts.data / aicore.data
    for base in ("stars_soc.data.0", "ffts_profile.data.0"):
        slices = _slices(data, base)
        assert len(slices) > 1 and all(p.stat().st_size == SLICE for p in slices[:-1])
        assert all(p.stat().st_size % 128 == 0 for p in slices)
    found = {"stars_soc.data.0": len(_records(data, "stars_soc.data.0", raw.ACSQ_LOG)),
             "ffts_profile.data.0": len(_records(data, "ffts_profile.data.0", raw.FFTS_PMU)),
             "ts_track.data.0": len(_records(data, "ts_track.data.0", raw.TS_STEP_TRACE))}
    assert {k: truth["records"][k] for k in found} == found
    assert truth["ns_per_tick"] == 20 and truth["chip"] == "910b"


def test_control_files_describe_a_910b(run: tuple[Path, dict]) -> None:
    prof, _ = run
    info = json.loads((prof / "device_0" / "info.json.0").read_text())
    device = info["DeviceInfo"][0]
    assert info["platform_version"] == "5"
    assert (device["hwts_frequency"], device["aic_frequency"], device["ai_core_num"], device["aiv_num"]) == (
        "50", "1800", 24, 48)
    sample = json.loads((prof / "device_0" / "sample.json").read_text())
    assert D11_KEYS <= sample.keys()
    assert sample["aiv_profiling"] == "on" and sample["aiv_profiling_mode"] == "task-based"
    assert sample["aiv_profiling_events"] == sample["ai_core_profiling_events"] == "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"


def test_acsq_logs(run: tuple[Path, dict]) -> None:
    prof, truth = run
    soc = _records(prof / "device_0" / "data", "stars_soc.data.0", raw.ACSQ_LOG)
    assert (soc["marker"] == raw.STARS_MARKER).all()
    assert set(func_type(soc["head"]).tolist()) == {raw.ACSQ_START, raw.ACSQ_END, raw.FFTS_LOG_START,
                                                    raw.FFTS_LOG_END}
    assert ((np.diff(((soc["head"] >> 6) & 0xF).astype(int)) % 16) == 1).all()  # rolling counter over all, no gap
    acsq = soc[func_type(soc["head"]) <= raw.ACSQ_END]
    ffts_plus_tasks = truth["iterations"] * int((OpTable.build("910b").contexts > 0).sum())
    assert Counter(sqe_type(acsq["head"]).tolist()) == Counter(
        {raw.SQE_AI_CORE: 2 * (_tasks(truth, "AI_CORE") + ffts_plus_tasks),
         raw.SQE_AI_VECTOR_CORE: 2 * _tasks(truth, "AI_VECTOR_CORE"), raw.SQE_AI_CPU: 2 * _tasks(truth, "AI_CPU")})
    forms = Counter(1 if s & 0x1000 else 2 if s & 0x2000 else 0 for s in acsq["stream_id"].tolist())
    assert set(forms) == {0, 1, 2}  # every STARS id encoding occurs
    assert set(stream_ids(acsq["stream_id"], acsq["task_id"]).tolist()) == {2, 3}
    assert (acsq["timestamp"][1:] >= acsq["timestamp"][:-1]).all()


def _tasks(truth: dict, core: str) -> int:
    return sum(t["count"] for t in truth["op_statistic"] if t["core_type"] == core)


def test_context_pmu_one_per_ai_core_and_vector_task(run: tuple[Path, dict]) -> None:
    prof, truth = run
    data = prof / "device_0" / "data"
    pmu = _records(data, "ffts_profile.data.0", raw.FFTS_PMU)
    assert (pmu["marker"] == raw.STARS_MARKER).all() and (func_type(pmu["head"]) == raw.CONTEXT_PMU).all()
    ffts = Counter((pmu["ffts"] >> 5).tolist())
    assert ffts == {raw.FFTS_TYPE_AIC: _tasks(truth, "AI_CORE"), raw.FFTS_TYPE_AIV: _tasks(truth, "AI_VECTOR_CORE"),
                    raw.FFTS_TYPE_PLUS: _tasks(truth, "MIX_AIC")}  # one per FFTS+ context
    pmu = pmu[(pmu["ffts"] >> 5) != raw.FFTS_TYPE_PLUS]  # contexts: test_ffts_plus_contexts
    soc = _records(data, "stars_soc.data.0", raw.ACSQ_LOG)
    acsq = soc[func_type(soc["head"]) <= raw.ACSQ_END]
    ids = list(zip(stream_ids(acsq["stream_id"], acsq["task_id"]).tolist(),
                   task_ids(acsq["stream_id"], acsq["task_id"]).tolist(), strict=True))
    start = {key: int(ts) for key, ts, f in zip(ids, acsq["timestamp"], func_type(acsq["head"]), strict=True)
             if f == raw.ACSQ_START}
    end = {key: int(ts) for key, ts, f in zip(ids, acsq["timestamp"], func_type(acsq["head"]), strict=True)
           if f == raw.ACSQ_END}
    for record, s, t in zip(pmu, stream_ids(pmu["stream_id"], pmu["task_id"]),
                            task_ids(pmu["stream_id"], pmu["task_id"]), strict=True):
        key = (int(s), int(t))
        assert (int(record["start_cnt"]), int(record["end_cnt"])) == (start[key], end[key])
        dur_cycles = (end[key] - start[key]) * 36  # 1800 MHz AI Core clock / 50 MHz syscnt
        assert 0.85 < record["total_cycle"] / dur_cycles < 0.97 * 48  # busy for the task, on 1 to 48 cores
        assert (record["pmu"][:6] <= record["total_cycle"]).all() and record["pmu"][7] < record["pmu"][6]


def test_vector_ops_and_their_runtime_task_type(run: tuple[Path, dict]) -> None:
    prof, truth = run
    vector = {t["op_type"] for t in truth["op_statistic"] if t["core_type"] == "AI_VECTOR_CORE"}
    assert vector == {"Relu", "TransData", "SoftmaxV2"}
    host = prof / "host" / "data"
    types = dict(line.split(":", 1) for p in _slices(host, "unaging.additional.type_info_dic")
                 for line in p.read_text().splitlines())
    assert types[f"5000_{names.TASK_KERNEL_AIVEC}"] == "KERNEL_AIVEC"
    tracks = _records(host, "unaging.compact.task_track", raw.TASK_TRACK)
    assert Counter(tracks["task_type"].tolist())[names.TASK_KERNEL_AIVEC] == _tasks(truth, "AI_VECTOR_CORE")
    table = OpTable.build("910b")
    assert {op.block_dim for op in table.ops if op.core == "AI_VECTOR_CORE"} <= set(range(1, 49))
    assert max(op.block_dim for op in table.ops if op.core == "AI_VECTOR_CORE") == 48
    assert OpTable.build("cloud").is_aiv.sum() == 0  # the 910 has no vector cores


def test_ffts_plus_contexts(run: tuple[Path, dict]) -> None:
    """Each MIX_AIC task: its host context_id_info, k consecutive subtask spans inside its ACSQ span (context ids
    0 … k−1), and one ContextPmu per context timed like its logs; the contexts' cycles are the op's PMU truth."""
    prof, truth = run
    data, host = prof / "device_0" / "data", prof / "host" / "data"
    table = OpTable.build("910b")
    counts = {op.name: op.contexts for op in table.ops if op.contexts}
    assert counts and all(op.core == "MIX_AIC" for op in table.ops if op.contexts)
    infos = _records(host, "unaging.additional.context_id_info", host_extra.CONTEXT_ID_INFO)
    assert Counter(infos["ctx_id_num"].tolist()) == Counter({k: truth["iterations"] for k in counts.values()})
    assert all(info["ctx_ids"][: info["ctx_id_num"]].tolist() == list(range(info["ctx_id_num"])) for info in infos)
    tracks = _records(host, "unaging.compact.task_track", raw.TASK_TRACK)
    assert Counter(tracks["task_type"].tolist())[names.TASK_FFTS_PLUS] == len(infos)

    soc = _records(data, "stars_soc.data.0", raw.ACSQ_LOG)
    funcs = func_type(soc["head"])
    logs = soc[(funcs == raw.FFTS_LOG_START) | (funcs == raw.FFTS_LOG_END)].view(raw.FFTS_PLUS_LOG)
    assert (logs["subtask_type"] == raw.SUBTASK_MIX_AIC).all() and ((logs["ffts"] >> 13) == raw.FFTS_TYPE_PLUS).all()
    def keys(records: np.ndarray) -> list[tuple[int, int]]:
        return list(zip(stream_ids(records["stream_id"], records["task_id"]).tolist(),
                        task_ids(records["stream_id"], records["task_id"]).tolist(), strict=True))

    acsq = soc[funcs <= raw.ACSQ_END]
    acsq_task = keys(acsq)
    spans: dict[tuple[tuple[int, int], int], list[int]] = {}
    for task, context, ts in zip(keys(logs), logs["subtask_id"].tolist(), logs["timestamp"].tolist(), strict=True):
        spans.setdefault((task, context), []).append(ts)
    by_task: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for (task, context), (start, end) in spans.items():  # ids do not repeat in this short run: one pair each
        by_task.setdefault(task, []).append((context, start, end))
    assert sorted(len(v) for v in by_task.values()) == sorted(list(counts.values()) * truth["iterations"])
    for task, contexts in by_task.items():
        times = [int(t) for t, k in zip(acsq["timestamp"], acsq_task, strict=True) if k == task]
        assert len(times) == 2
        contexts.sort()
        assert [c for c, _, _ in contexts] == list(range(len(contexts)))
        edges = [times[0]] + [t for _, s, e in contexts for t in (s, e)] + [times[1]]
        assert edges == sorted(edges) and len(set(edges)) == len(edges)  # consecutive, inside the task, no overlap

    pmu = _records(data, "ffts_profile.data.0", raw.FFTS_PMU)
    pmu = pmu[(pmu["ffts"] >> 5) == raw.FFTS_TYPE_PLUS]
    assert ((pmu["subtask"] & 0xFF) == raw.SUBTASK_MIX_AIC).all()
    for record, task in zip(pmu, keys(pmu), strict=True):
        start, end = spans[(task, int(record["subtask_id"]))]
        assert (int(record["start_cnt"]), int(record["end_cnt"])) == (start, end)
    mix = [i for i, op in enumerate(table.ops) if op.contexts]
    extras = truth["device_extras"]["ops"]
    assert sum(extras[i]["pmu"]["count"] for i in mix) == len(pmu)
    assert sum(extras[i]["pmu"]["total_cycles"] for i in mix) == int(pmu["total_cycle"].sum())


@pytest.fixture(scope="module")
def v6_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("v6")
    prof = simulate(out, chip="v6", iterations=4, rate="max", slice_bytes=SLICE, start_time_ns=START_NS,
                    first_task_id=65_520)
    return prof, json.loads((out / "simulator_truth.json").read_text())


def test_chip_v6_writes_32_byte_logs_named_by_32_bit_task_ids(v6_run: tuple[Path, dict]) -> None:
    prof, truth = v6_run
    data, host = prof / "device_0" / "data", prof / "host" / "data"
    assert json.loads((prof / "device_0" / "info.json.0").read_text())["platform_version"] == "15"
    assert {p.name.rsplit(".slice_", 1)[0] for p in data.iterdir()} == {"stars_soc.data.0", "ts_track.data.0"}
    acsq = _records(data, "stars_soc.data.0", raw.ACSQ_LOG_V6)
    assert (acsq["marker"] == raw.STARS_MARKER).all() and truth["records"]["stars_soc.data.0"] == len(acsq)
    assert ((np.diff(((acsq["head"] >> 6) & 0xF).astype(int)) % 16) == 1).all()
    assert set(sqe_type(acsq["head"]).tolist()) == {raw.SQE_V6_AI_CORE, raw.SQE_V6_AI_VECTOR_CORE, raw.SQE_V6_AI_CPU}
    tracks = _records(host, "unaging.compact.task_track", raw.TASK_TRACK)
    unique = (tracks["batch_id"].astype(np.int64) << 16) | tracks["task_id"]
    assert unique.max() > 0xFFFF and len(set(unique.tolist())) == len(unique)  # past 16 bits; one id space, no flips
    assert truth["task_flips"] == 0
    starts = acsq[func_type(acsq["head"]) == raw.ACSQ_START]
    assert sorted(starts["task_id"].tolist()) == sorted(unique.tolist())
    steps = _records(data, "ts_track.data.0", raw.TS_STEP_TRACE_V6)
    assert set(steps["tag_id"].tolist()) == {0, 1} and steps["task_id"].max() > 0xFFFF
    sample = json.loads((prof / "device_0" / "sample.json").read_text())
    assert (sample["ai_core_profiling"], sample["ai_core_profiling_events"]) == ("off", "")
