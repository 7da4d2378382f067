"""PMU metric groups, AI CPU times and L2 cache rates through collector → decoder → aggregator, against the
simulator's truth (sums per op of what it wrote)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from chain import run_chain

from stages.formats import raw
from stages.formats.raw import PMU_EVENT_SETS
from stages.schema import SymbolTable, unpack_rows
from stages.simulator.run import simulate

ITERATIONS = 3


def _run(tmp_path: Path, group: str) -> tuple[dict[str, list[dict[str, float | None]]], dict, dict]:
    """Per op name, its task rows as {column: value}; the truth; the stage figures."""
    prof = simulate(tmp_path / "board", chip="cloud", iterations=ITERATIONS, rate="max", seed=4, aic_metrics=group)
    batches, figures = run_chain(prof, tmp_path / "out")
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    symbols = SymbolTable()
    rows: dict[str, list[dict[str, float | None]]] = defaultdict(list)
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            columns = batch.meta["pmu_columns"]
            for row in unpack_rows(batch):
                rows[symbols[row[8]]].append(dict(zip(columns, row[22], strict=True)))
    return rows, truth, figures


def _slot(group: str, event: int) -> int:
    return list(PMU_EVENT_SETS[group]).index(event)


@pytest.mark.parametrize("group", ["PipeUtilization", "ArithmeticUtilization", "Memory"])
def test_pmu_values_add_up_to_the_counters_written(tmp_path: Path, group: str) -> None:
    rows, truth, figures = _run(tmp_path, group)
    assert figures["rejected"] == {}
    assert truth["device_extras"]["metrics"] == group
    checked = 0
    for op in truth["device_extras"]["ops"]:
        pmu = op.get("pmu")
        if pmu is None:
            continue
        tasks = rows[op["op_name"]]
        assert len(tasks) == pmu["count"] == ITERATIONS
        assert sum(t["total_cycles"] or 0 for t in tasks) == pmu["total_cycles"]
        counters = pmu["counters"]
        if group == "PipeUtilization":  # ratio × cycles gives back the busy cycles of each pipe
            for stem, event in (("vec", 0x8), ("mac", 0xA), ("mte2", 0xC)):
                found = sum((t[f"{stem}_ratio"] or 0) * (t["total_cycles"] or 0) for t in tasks)
                assert found == pytest.approx(counters[_slot(group, event)], rel=1e-9, abs=1e-6)
        elif group == "ArithmeticUtilization":
            cube = counters[_slot(group, 0x49)] * 8192 + counters[_slot(group, 0x4A)] * 16384
            assert sum(t["cube_fops"] or 0 for t in tasks) == pytest.approx(cube, rel=1e-9)
        else:  # bandwidth × seconds of cycles × 2^33 / 1024 bytes gives back the UB read requests
            found = sum((t["ub_read_bw(GB/s)"] or 0) * (t["total_cycles"] or 0) / 1e9 * 2**33 / 1024 for t in tasks)
            assert found == pytest.approx(counters[_slot(group, 0x15)], rel=1e-9)
        checked += 1
    assert checked > 40


def test_aicpu_times_and_l2_rates_join_their_tasks(tmp_path: Path) -> None:
    rows, truth, figures = _run(tmp_path, "PipeUtilization")
    assert figures["rejected"] == {}
    aicpu_ops = l2_ops = 0
    for op in truth["device_extras"]["ops"]:
        tasks = rows[op["op_name"]]
        if "aicpu" in op:
            aicpu_ops += 1
            for name in ("compute", "memcpy", "task", "dispatch", "total"):
                found = sum(t[f"aicpu_{name}_time(us)"] or 0 for t in tasks) * 1000
                assert found == pytest.approx(op["aicpu"][f"{name}_ns"], abs=1e-3)
            assert all(t["l2_cache_hit_rate"] is None and t["vec_ratio"] is None for t in tasks)
        if "l2_cache" in op:
            l2_ops += 1
            assert sum(t["l2_cache_hit_rate"] or 0 for t in tasks) == pytest.approx(op["l2_cache"]["hit_rate_sum"])
            assert sum(t["l2_cache_victim_rate"] or 0 for t in tasks) == pytest.approx(
                op["l2_cache"]["victim_rate_sum"])
            assert all(t["aicpu_total_time(us)"] is None for t in tasks)
    assert aicpu_ops == 2 and l2_ops > 40
    unused = figures["aggregator"]["unused"]
    # The 910's AI Core clock changes are decoded and counted: msprof follows them on 910B-class chips only.
    assert unused["AI Core frequency change records (msprof applies them on 910B-class chips only)"] == \
        truth["records"]["lpmFreqConv.data.0"]
    assert not [reason for reason in unused if "AI CPU" in reason or "L2 cache" in reason]


def test_older_data_preprocess_files_are_read_like_aicpu_data(tmp_path: Path) -> None:
    """The same kernels as bare MsprofAicpuProfData (split across two slices) and a text file beside them."""
    prof = simulate(tmp_path / "board", chip="cloud", iterations=ITERATIONS, rate="max", seed=4)
    data = prof / "device_0" / "data"
    slices = sorted((p for p in data.glob("aicpu.data.0.slice_*") if not p.name.endswith(".done")),
                    key=lambda p: int(p.name.rsplit("_", 1)[1]))
    nodes = np.frombuffer(b"".join(p.read_bytes() for p in slices), raw.AICPU_NODE)
    for path in data.glob("aicpu.data.0.slice_*"):
        path.unlink()
    bare = np.zeros(len(nodes), raw.AICPU_PROF)
    for name in bare.dtype.names or ():
        if name in (nodes.dtype.names or ()) and name != "rsv":
            bare[name] = nodes[name]
    bare["data_tag"] = raw.AICPU_DATA_TAG
    body = bare.tobytes()
    (data / "DATA_PREPROCESS.AICPU.0.slice_0").write_bytes(body[:301])
    (data / "DATA_PREPROCESS.AICPU.0.slice_1").write_bytes(body[301:])
    (data / "DATA_PREPROCESS.dev.AICPU.0.slice_0").write_bytes(
        b"Node:GetNext, Run start:100, Run end:250\0Thread[ 1] task end, dispatchTime=3 us, totalTime=160 us.\0")
    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {}
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    symbols = SymbolTable()
    totals: dict[str, float] = defaultdict(float)
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            column = batch.meta["pmu_columns"].index("aicpu_total_time(us)")
            for row in unpack_rows(batch):
                totals[symbols[row[8]]] += row[22][column] or 0
    for op in truth["device_extras"]["ops"]:
        if "aicpu" in op:
            assert totals[op["op_name"]] * 1000 == pytest.approx(op["aicpu"]["total_ns"], abs=1e-3)
    assert figures["aggregator"]["unused"][
        "AI CPU text records (DATA_PREPROCESS.AICPU text form: no stream/task id to join)"] == 2
