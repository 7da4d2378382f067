"""The join and the statistics, over simulated directories (in process, no sockets)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from chain import make_ctx, run_chain

from stages.aggregator import AggregatorStage
from stages.decoder import records
from stages.formats import raw
from stages.schema import SymbolTable, unpack_rows
from stages.simulator.run import simulate
from stages.simulator.workload import AICPU_STREAM, face_mask_ssd


def _op_statistic(batches: list) -> dict[tuple[str, str], tuple[int, int]]:
    final = [b for b in batches if b.kind == "op_statistic" and b.meta.get("final")]
    assert len(final) == 1
    return {(op, core): (count, total) for _, op, core, count, total, _, _ in unpack_rows(final[0])}


def _truth(out_dir: Path) -> dict:
    truth: dict = json.loads((out_dir / "simulator_truth.json").read_text())
    return truth


@pytest.mark.parametrize("chip", ["mini", "cloud"])
def test_task_ids_that_wrap_are_joined_by_stream_task_and_batch(tmp_path: Path, chip: str) -> None:
    # Start near the 16-bit limit so every stream wraps within the run (flips on the 910, plain wrap on the 310).
    prof = simulate(tmp_path / "board", chip=chip, iterations=12, rate="max", seed=5, first_task_id=65_500)
    truth = _truth(tmp_path / "board")
    if chip == "cloud":
        assert truth["task_flips"], "the scenario must contain task-id flips"
    batches, figures = run_chain(prof, tmp_path / "out")
    expected = {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"]) for t in truth["op_statistic"]}
    assert _op_statistic(batches) == expected
    assert figures["rejected"] == {}
    symbols = SymbolTable()
    seen: Counter[tuple[int, int, int]] = Counter()
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            for row in unpack_rows(batch):
                seen[(row[3], row[4], row[5])] += 1  # stream, task, batch
    assert max(seen.values()) == 1 if chip == "cloud" else max(seen.values()) >= 1
    batch_ids = {key[2] for key in seen}
    assert batch_ids == ({0, 1} if chip == "cloud" else {0})


def test_api_statistic_matches_truth(tmp_path: Path) -> None:
    prof = simulate(tmp_path / "board", chip="mini", iterations=8, rate="max", seed=1)
    batches, _ = run_chain(prof, tmp_path / "out")
    final = next(b for b in batches if b.kind == "api_statistic" and b.meta.get("final"))
    ours = {(level, name): (count, total) for level, name, count, total, *_ in unpack_rows(final)}
    written = _truth(tmp_path / "board")["api_statistic"]
    truth = {(t["level"], t["api_name"]): (t["count"], t["total_ns"]) for t in written}
    # ModelExecute is an event pair, not an API call: msprof's api_statistic leaves it out, and so do we.
    del truth[("model", "ModelExecute")]
    assert ours == truth


def test_tasks_carry_host_context(tmp_path: Path) -> None:
    prof = simulate(tmp_path / "board", chip="cloud", iterations=3, rate="max", seed=2)
    batches, _ = run_chain(prof, tmp_path / "out")
    symbols = SymbolTable()
    rows = []
    pmu_columns: list[str] = []
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            rows.extend(unpack_rows(batch))
            pmu_columns = batch.meta["pmu_columns"]
    conv = [r for r in rows if symbols[r[9]] == "Conv2D"]
    assert conv and all(r[1] == 1 and r[2] in (1, 2, 3) for r in conv)  # model id, iteration
    assert all(symbols[r[16]] != "N/A" and "," in symbols[r[16]] for r in conv)  # input shapes
    assert all(r[14] > 0 for r in conv)  # connection id to the Node API
    assert pmu_columns[:2] == ["aicore_time(us)", "total_cycles"]
    assert all(r[22][0] is not None and 0 < r[22][0] <= (r[7] - r[6]) / 1000 * 1.01 for r in conv)


def _device_stream(data: Path, base: str) -> list[Path]:
    found = [p for p in data.glob(f"{base}.slice_*") if not p.name.endswith(".done")]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))


def test_records_lost_on_the_device_are_reported_and_the_rest_joined(tmp_path: Path) -> None:
    """Take one AI CPU task's start and end log out of hwts.data, as a device that lost them would."""
    prof = simulate(tmp_path / "board", chip="cloud", iterations=3, rate="max", seed=4)
    data = prof / "device_0" / "data"
    slices = _device_stream(data, "hwts.data.0")
    logs = np.frombuffer(b"".join(p.read_bytes() for p in slices), raw.HWTS_LOG)
    first = int(np.flatnonzero(logs["stream_id"] == AICPU_STREAM)[0])
    assert logs["head"][first] & 7 == raw.HWTS_TASK_START and logs["task_id"][first + 1] == logs["task_id"][first]
    kept = np.concatenate((logs[:first], logs[first + 2:]))
    for path in slices:
        path.unlink()
        Path(f"{path}.done").unlink()
    (data / "hwts.data.0.slice_0").write_bytes(kept.tobytes())
    (data / "hwts.data.0.slice_0.done").write_text(f"filesize:{kept.nbytes}\n")

    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {"hwts: records lost on the device (rolling counter gap)": 2,
                                   "host task without a device task log": 1}
    assert figures["decoder"]["lost_on_device"] == 2
    assert figures["decoder"]["records_in"] == figures["decoder"]["decoded"] == figures["collector"][
        "records_collected"]
    truth = _truth(tmp_path / "board")
    expected = {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"]) for t in truth["op_statistic"]}
    ours = _op_statistic(batches)
    lost_op = [key for key in expected if ours[key] != expected[key]]
    assert len(lost_op) == 1 and lost_op[0][1] == "AI_CPU" and ours[lost_op[0]][0] == expected[lost_op[0]][0] - 1


def test_ts_track_kinds_without_outputs_are_counted_as_unused(tmp_path: Path) -> None:
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path))
    for kind, n in (("ts_memcpy", 2), ("ts_task_type", 3), ("ts_block_num", 1), ("ts_flip_old", 4)):
        arr = np.zeros(n, records.DTYPES[kind])
        list(agg.process(records.to_batch(kind, arr, {"stream": "ts_track.data.0", "device": 0})))
    unused = agg.accounting()["unused"]
    assert sorted(unused.values()) == [1, 2, 3, 4]
    assert any("tag 13" in reason and count == 4 for reason, count in unused.items())
    assert agg.ctx.rejected == {}


@pytest.mark.parametrize("layout", ["current", "legacy"])
def test_every_tensor_of_an_op_is_named_even_past_five(tmp_path: Path, layout: str) -> None:
    """More than five tensors come in several tensor records of one op: all of them describe the task
    (msprof joins them on op name, time stamp and thread)."""
    ops = {op.name: op for op in face_mask_ssd("mini")}
    many = {name for name, op in ops.items() if len(op.inputs) + len(op.outputs) > raw.TENSOR_SLOTS}
    assert many  # the workload has such ops
    prof = simulate(tmp_path / "board", chip="mini", iterations=2, rate="max", seed=2, layout=layout)
    symbols, seen = SymbolTable(), set()
    for batch in run_chain(prof, tmp_path / "out")[0]:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind != "task":
            continue
        for row in unpack_rows(batch):
            op = ops.get(symbols[row[8]])
            if op is None:
                continue
            seen.add(op.name)
            for side, tensors, column in (("input", op.inputs, 16), ("output", op.outputs, 19)):
                assert symbols[row[column]] == ";".join(",".join(map(str, t.shape)) for t in tensors), (op.name, side)
    assert many <= seen
