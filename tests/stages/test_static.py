"""Static models (.om): op and task information registered once at model load, replayed by every
execution, with task-id flips on the 910. Compared with the simulator's truth."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chain import aggregate, decode_dir, make_ctx, run_chain

from pipeline.stage import Batch
from stages import aggregator
from stages.aggregator import AggregatorStage
from stages.aggregator.static import StaticModels
from stages.decoder import records
from stages.formats import raw
from stages.schema import SymbolTable, unpack_rows
from stages.simulator import names
from stages.simulator.run import simulate

ITERATIONS = 4
WRAP = 65_500  # task ids already used on each stream: the model load crosses the 16-bit wrap


def _simulate(tmp_path: Path, chip: str, first_task_id: int) -> tuple[Path, dict[str, Any]]:
    prof = simulate(tmp_path / "board", chip=chip, iterations=ITERATIONS, rate="max", seed=11,
                    first_task_id=first_task_id, mode="static")
    truth: dict[str, Any] = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    return prof, truth


def _op_statistic(batches: list[Batch]) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    final = [b for b in batches if b.kind == "op_statistic" and b.meta.get("final")]
    assert len(final) == 1
    return {(op, core): (count, total, low, high) for _, op, core, count, total, low, high in unpack_rows(final[0])}


def _expected(truth: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    return {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"], t["min_ns"], t["max_ns"])
            for t in truth["op_statistic"]}


def _task_rows(batches: list[Batch]) -> list[list[Any]]:
    return [row for batch in batches if batch.kind == "task" for row in unpack_rows(batch)]


def _task_tracks(prof: Path) -> np.ndarray:
    data = prof / "host" / "data"
    paths = sorted((p for p in data.glob("unaging.compact.task_track.slice_*") if not p.name.endswith(".done")),
                   key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return np.frombuffer(b"".join(p.read_bytes() for p in paths), raw.TASK_TRACK)


@pytest.mark.parametrize("first_task_id", [0, WRAP])
@pytest.mark.parametrize("chip", ["mini", "cloud"])
def test_every_execution_is_named_by_its_load_time_registration(tmp_path: Path, chip: str,
                                                                first_task_id: int) -> None:
    prof, truth = _simulate(tmp_path, chip, first_task_id)
    assert truth["mode"] == "static" and truth["iterations"] == ITERATIONS
    tracks = _task_tracks(prof)
    ops = tracks[tracks["task_type"] != names.TASK_FLIP]
    assert len(ops) == sum(t["count"] for t in truth["op_statistic"]) // ITERATIONS  # reported once, at load

    batches, figures = run_chain(prof, tmp_path / "out")
    assert _op_statistic(batches) == _expected(truth)
    assert figures["rejected"] == {}
    rows = _task_rows(batches)
    assert Counter(row[2] for row in rows) == {i: len(ops) for i in range(1, ITERATIONS + 1)}  # iteration
    assert {row[1] for row in rows} == {1}  # model id, from the load
    replays = Counter((row[3], row[4], row[5]) for row in rows)  # stream, task, batch
    assert set(replays.values()) == {ITERATIONS}
    # the runtime writes batchId 0 in the kernels' task_tracks: their batch is that of the FLIP task before them
    flip_tracks = tracks[tracks["task_type"] == names.TASK_FLIP]
    assert (ops["batch_id"] == 0).all()
    assert set(replays) == {(int(r["stream_id"]), int(r["task_id"]),
                             max([int(f["batch_id"]) for f in flip_tracks
                                  if f["stream_id"] == r["stream_id"] and f["timestamp"] <= r["timestamp"]],
                                 default=0)) for r in ops}
    wrapped = chip == "cloud" and first_task_id == WRAP
    assert {key[2] for key in replays} == ({0, 1} if wrapped else {0})
    assert truth["task_flips"] == (ITERATIONS if wrapped else 0)  # the model's FLIP task runs every time


def _flips(decoded: list[Batch]) -> dict[int, list[tuple[int, int]]]:
    """Device task-flip records per stream: (local ns, flip number)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for batch in decoded:
        if batch.kind == "flip":
            for r in records.from_batch(batch):
                out.setdefault(int(r["stream_id"]), []).append((int(r["ts_ns"]), int(r["flip_num"])))
    return out


def test_flips_of_earlier_executions_do_not_rename_registered_tasks(tmp_path: Path) -> None:
    """The load crossed a wrap, so the model's stream holds batch-0 and batch-1 ids and the device repeats
    flip number 1 on every execution. Naming a task by the last flip number (or by counting flips, as
    msprof does) would put every batch-0 task of executions 2… in batch 1; the execution-relative rule
    keeps the registered batch."""
    prof, truth = _simulate(tmp_path, "cloud", WRAP)
    decoded, _, _ = decode_dir(prof, tmp_path / "out")
    flips = _flips(decoded)
    assert [n for stream in flips.values() for _, n in stream] == [1] * ITERATIONS
    emitted, agg = aggregate(decoded, tmp_path / "out")
    assert _op_statistic(emitted) == _expected(truth) and agg.ctx.rejected == {}
    rows = _task_rows(emitted)
    renamed: Counter[int] = Counter()  # iteration → tasks the last flip number would misname
    for row in rows:
        stream, batch, start = row[3], row[5], row[6]
        before = [n for ts, n in flips.get(stream, []) if ts <= start]
        renamed[row[2]] += (before[-1] if before else 0) != batch
    batch0_on_flipped_stream = sum(1 for row in rows if row[2] == 1 and row[5] == 0 and row[3] in flips)
    assert batch0_on_flipped_stream > 0
    assert renamed == {1: 0, **{i: batch0_on_flipped_stream for i in range(2, ITERATIONS + 1)}}


def _is_device(batch: Batch) -> bool:
    return batch.kind == "device_info" or batch.meta.get("device") is not None


@pytest.mark.parametrize("order", ["device_first", "host_first"])
def test_arrival_order_does_not_change_the_join(tmp_path: Path, order: str) -> None:
    """Device tasks that arrive before their model's registrations are taken for launched tasks, then named
    again once the load binds their stream; registrations that arrive first name them at once."""
    prof, truth = _simulate(tmp_path, "cloud", WRAP)
    decoded, _, _ = decode_dir(prof, tmp_path / "out")
    device = [b for b in decoded if _is_device(b)]
    host = [b for b in decoded if not _is_device(b)]
    emitted, agg = aggregate(device + host if order == "device_first" else host + device, tmp_path / "out")
    assert _op_statistic(emitted) == _expected(truth)
    assert agg.ctx.rejected == {}
    per_execution = sum(t["count"] for t in truth["op_statistic"]) // ITERATIONS
    assert Counter(row[2] for row in _task_rows(emitted)) == {i: per_execution for i in range(1, ITERATIONS + 1)}


def _without_model_execute(batch: Batch) -> Batch:
    arr = records.from_batch(batch)
    kept = arr[~((arr["level"] == raw.LEVEL_MODEL) & (arr["type"] == raw.MODEL_EXECUTE_TYPE))]
    return records.to_batch("event", kept, dict(batch.meta))


def test_without_step_trace_the_host_model_execute_windows_give_iterations(tmp_path: Path) -> None:
    prof, truth = _simulate(tmp_path, "cloud", WRAP)
    decoded, _, _ = decode_dir(prof, tmp_path / "out")
    no_steps = [b for b in decoded if b.kind != "step"]
    host_first = [b for b in no_steps if not _is_device(b)] + [b for b in no_steps if _is_device(b)]
    emitted, agg = aggregate(host_first, tmp_path / "out")
    assert _op_statistic(emitted) == _expected(truth) and agg.ctx.rejected == {}
    assert {row[2] for row in _task_rows(emitted)} == set(range(1, ITERATIONS + 1))
    # Neither step trace nor ModelExecute: a (stream, task) registered under one batch is still that task.
    bare = [_without_model_execute(b) if b.kind == "event" else b for b in no_steps]
    emitted, agg = aggregate(bare, tmp_path / "out2")
    assert _op_statistic(emitted) == _expected(truth) and agg.ctx.rejected == {}
    assert {row[2] for row in _task_rows(emitted)} == {0}  # the iteration is unknown


def test_static_api_statistic_matches_truth(tmp_path: Path) -> None:
    prof, truth = _simulate(tmp_path, "mini", 0)
    batches, _ = run_chain(prof, tmp_path / "out")
    final = next(b for b in batches if b.kind == "api_statistic" and b.meta.get("final"))
    ours = {(level, name): (count, total) for level, name, count, total, *_ in unpack_rows(final)}
    expected = {(t["level"], t["api_name"]): (t["count"], t["total_ns"]) for t in truth["api_statistic"]}
    # Model-level event pairs are not API calls: api_statistic leaves them out, as msprof does.
    assert expected.pop(("model", "ModelExecute"))[0] == ITERATIONS and expected.pop(("model", "ModelLoad"))[0] == 1
    assert ours == expected
    assert ours[("runtime", "ModelExecute")][0] == ITERATIONS
    assert ours[("node", "launch")][0] == len(_task_tracks(prof))  # launched once, at load


def test_symbols_name_the_replayed_ops(tmp_path: Path) -> None:
    prof, _ = _simulate(tmp_path, "cloud", 0)
    batches, _ = run_chain(prof, tmp_path / "out")
    symbols = SymbolTable()
    conv = []
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            conv += [row for row in unpack_rows(batch) if symbols[row[9]] == "Conv2D"]
    assert conv and all(row[14] > 0 and "," in symbols[row[16]] for row in conv)  # Node API link, input shapes
    by_name = Counter(symbols[row[8]] for row in conv)
    assert set(by_name.values()) == {ITERATIONS}


def test_long_run_with_live_ticks_prunes_flips_and_windows_but_names_every_execution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    iterations = 16
    prof = simulate(tmp_path / "board", chip="cloud", iterations=iterations, rate="max", seed=12,
                    first_task_id=WRAP, mode="static")
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    assert truth["task_flips"] == iterations
    decoded, _, _ = decode_dir(prof, tmp_path / "out")
    # The model's last registration waits for tensor_info past it, which never comes after a load; one device
    # task of each execution waits with it, however long: no clock ends the wait, only the end of the job or
    # the bound on waiting records (here lowered to 8 once all is in), which gives it up (counted). Then nothing
    # older than the newest execution is still needed.
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path / "out"))
    emitted: list[Batch] = []
    for batch in decoded:
        emitted += [*agg.process(batch), *agg.tick(time.monotonic() + 1e6)]
    assert agg.static.waiting_count() == iterations
    monkeypatch.setattr(aggregator, "MAX_PENDING", 8)
    for day in (2, 3, 4):  # the device tasks held are counted when pruning, then the wait is given up, then pruned
        emitted += agg.tick(time.monotonic() + 1e6 + day * 86_400)
    assert agg.static.waiting_count() == 0
    assert sum(len(log.times) for log in agg.flips.flips.values()) == 1
    assert sum(len(log.times) for log in agg.static.device_runs.logs.values()) == 1
    emitted += agg.finish()
    assert _op_statistic(emitted) == _expected(truth) and agg.ctx.rejected == {}
    assert {row[2] for row in _task_rows(emitted)} == set(range(1, iterations + 1))
    assert agg.accounting()["joins_given_up"] == {"host task waiting for its context given up: more than 8 records "
                                                  "waiting": 1}


def test_without_the_bound_a_static_model_waits_for_the_end_of_the_job_whatever_the_clock(tmp_path: Path) -> None:
    prof = simulate(tmp_path / "board", chip="cloud", iterations=4, rate="max", seed=12, first_task_id=WRAP,
                    mode="static")
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    decoded, _, _ = decode_dir(prof, tmp_path / "out")
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path / "out"))
    emitted: list[Batch] = []
    for batch in decoded:
        emitted += [*agg.process(batch), *agg.tick(time.monotonic() + 1e6)]
    assert agg.static.waiting_count() == 4 and len(agg.pending_host) == 1  # a day later: still waiting
    emitted += agg.finish()
    assert _op_statistic(emitted) == _expected(truth) and agg.ctx.rejected == {}
    assert agg.accounting()["joins_given_up"] == {}  # the end of the job is no giving up


def test_a_binding_holds_from_its_load_until_the_stream_is_taken_over() -> None:
    """Model 1 loads on stream 2 at t=100, a task is launched there at t=500 (model unloaded, stream id
    reused), model 2 loads there at t=700: each device task is named by the owner at its start."""
    models = StaticModels()
    first = models.register(0, 1, 2, task=7, batch=0, ts=100, host="conv of model 1")
    assert first is not None and models.register(0, 1, 2, task=8, batch=0, ts=110, host="relu") is None
    models.launched(0, 2, ts=500)
    second = models.register(0, 2, 2, task=7, batch=0, ts=700, host="conv of model 2")
    assert second is not None and second.since == 700
    owners = {ts: models.binding_at(0, 2, ts) for ts in (50, 300, 600, 800)}
    assert owners[50] is None and owners[600] is None  # before any load; launched work in between
    assert owners[300] is first and first.find(7, 0) == (0, "conv of model 1") and first.find(8, None) == (0, "relu")
    assert owners[800] is second and second.find(7, None) == (0, "conv of model 2")
    assert models.binding_at(0, 3, 300) is None  # another stream
    models.prune_before(650)  # no device task older than 650 is still to be named
    assert models.binding_at(0, 2, 300) is None and models.binding_at(0, 2, 800) is second
