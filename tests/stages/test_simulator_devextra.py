"""The simulator's metric groups and its AI CPU, L2 cache and frequency records."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli import AIC_METRICS, build_parser
from stages.formats import raw
from stages.simulator import simulate
from stages.simulator.board import FREQ_DIP_EVERY
from stages.simulator.stage import AicMetrics, SimulatorStage
from stages.simulator.workload import AIC_MHZ

START_NS = 1_700_000_000_000_000_000


def _stream(prof: Path, base: str, dtype: np.dtype) -> np.ndarray:
    files = sorted((p for p in (prof / "device_0" / "data").glob(f"{base}.slice_*") if not p.name.endswith(".done")),
                   key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return np.frombuffer(b"".join(p.read_bytes() for p in files), dtype)


def test_every_metric_group_is_offered_everywhere() -> None:
    assert AIC_METRICS == tuple(raw.PMU_EVENT_SETS) == typing.get_args(AicMetrics)
    args = build_parser().parse_args(["simulate", "out", "--aic-metrics", "MemoryUB"])
    assert args.aic_metrics == "MemoryUB"
    assert SimulatorStage.Config().aic_metrics == "PipeUtilization"
    with pytest.raises(ValueError, match="aic_metrics"):
        simulate(Path("unused"), aic_metrics="NoSuchGroup")


def test_a_metric_group_changes_the_counters_and_nothing_else(tmp_path: Path) -> None:
    pipe = simulate(tmp_path / "pipe", chip="cloud", iterations=2, rate="max", seed=7, start_time_ns=START_NS)
    memory = simulate(tmp_path / "mem", chip="cloud", iterations=2, rate="max", seed=7, start_time_ns=START_NS,
                      aic_metrics="Memory")
    sample = json.loads((memory / "device_0" / "sample.json").read_text())
    assert sample["ai_core_metrics"] == "Memory"
    assert sample["ai_core_profiling_events"] == ",".join(f"0x{e:x}" for e in raw.PMU_EVENT_SETS["Memory"])
    for base in ("hwts.data.0", "ts_track.data.0", "aicpu.data.0", "l2_cache.data.0", "lpmFreqConv.data.0"):
        assert (pipe / "device_0" / "data" / f"{base}.slice_0").read_bytes() == \
            (memory / "device_0" / "data" / f"{base}.slice_0").read_bytes()
    a, b = _stream(pipe, "aicore.data.0", raw.AICORE_PMU), _stream(memory, "aicore.data.0", raw.AICORE_PMU)
    assert (a["total_cycle"] == b["total_cycle"]).all() and (a["pmu"] != b["pmu"]).any()
    assert (b["pmu"] <= b["total_cycle"][:, None]).all()
    l1_read = list(raw.PMU_EVENT_SETS["Memory"]).index(0x31)  # cube traffic: only convolutions move L1 data
    truth = json.loads((tmp_path / "mem" / "simulator_truth.json").read_text())
    for op in truth["device_extras"]["ops"]:
        if "pmu" in op:
            assert (op["pmu"]["counters"][l1_read] > 0) == (op["op_type"] == "Conv2D"), op["op_name"]


def test_aicpu_l2_and_frequency_records(tmp_path: Path) -> None:
    prof = simulate(tmp_path, chip="cloud", iterations=FREQ_DIP_EVERY, rate="max", seed=1, start_time_ns=START_NS)
    hwts = _stream(prof, "hwts.data.0", raw.HWTS_LOG)
    starts = hwts[(hwts["head"] & 7) == raw.HWTS_TASK_START]
    ends = hwts[(hwts["head"] & 7) == raw.HWTS_TASK_END]
    aicpu = _stream(prof, "aicpu.data.0", raw.AICPU_NODE)
    assert (aicpu["magic"] == raw.HOST_MAGIC).all() and (aicpu["level"] == raw.LEVEL_AICPU).all()
    assert (aicpu["type"] == raw.AICPU_NODE_TYPE).all() and len(aicpu) == 2 * FREQ_DIP_EVERY
    for record in aicpu:  # each kernel runs inside its AI CPU task's device time, after submission
        task = (starts["stream_id"] == record["stream_id"]) & (starts["task_id"] == record["task_id"])
        start, end = int(starts["syscnt"][task][0]), int(ends["syscnt"][task[: len(ends)]][0])
        assert start < record["submit_tick"] < record["tick_before_run"] < record["run_start_tick"]
        assert record["run_start_tick"] < record["run_end_tick"] < record["tick_after_run"] <= end
        assert record["compute_start_us"] <= record["memcpy_start_us"] <= record["memcpy_end_us"]
    l2 = _stream(prof, "l2_cache.data.0", raw.L2_CACHE)
    aicore = _stream(prof, "aicore.data.0", raw.AICORE_PMU)
    assert len(l2) == len(aicore) and (l2["task_id"] == aicore["task_id"]).all()
    request, hit, victim = l2["events"][:, 0], l2["events"][:, 1], l2["events"][:, 2]
    assert (hit <= request).all() and (victim < request).all() and (l2["events"][:, 3:] == 0).all()
    freq = _stream(prof, "lpmFreqConv.data.0", raw.LPM_FREQ)
    assert freq["count"].tolist() == [1, 2]  # the clock at load, then one dip and its recovery
    assert freq["points"]["freq_mhz"][1, :2].tolist() == [900, AIC_MHZ]
    dip, back = freq["points"]["syscnt"][1, :2].astype(np.int64)
    assert not ((starts["syscnt"] < back) & (ends["syscnt"] > dip)).any()  # the device is idle meanwhile
