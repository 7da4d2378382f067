"""FFTS+ contexts and chip-v6 task ids in the join, from hand-built decoded records and hand-worked rows."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chain import make_ctx

from pipeline.stage import Batch
from stages.aggregator import AggregatorStage
from stages.decoder import records
from stages.formats import raw
from stages.schema import CONTEXT_ID_NONE, SymbolTable, pack_rows, unpack_rows

PIPE = [0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55]
FACTS = {"device": 0, "platform": 5, "aic_frequency_mhz": 1800.0, "ai_core_num": 24, "aiv_num": 48,
         "hwts_frequency_mhz": 50.0, "pmu_events": PIPE, "aiv_pmu_events": PIPE}
THREAD, OP, OP_TYPE = 7, 1111, 2222
FFTS_PLUS, KERNEL_AICPU = 52, 1
STREAM, TASK = 2, 10
SOC, TRACK = "stars_soc.data.0", "ts_track.data.0"
# The FFTS+ task's ACSQ span and its three contexts, in local ns.
TASK_SPAN = (100_000, 200_000)
CONTEXTS = {0: (101_000, 130_000), 1: (131_000, 160_000), 2: (161_000, 199_000)}


def _array(kind: str, rows: list[dict[str, Any]]) -> np.ndarray:
    arr = np.zeros(len(rows), records.DTYPES[kind])
    for i, row in enumerate(rows):
        for name, value in row.items():
            arr[name][i] = value
    return arr


def _batch(kind: str, rows: list[dict[str, Any]], stream: str) -> Batch:
    return records.to_batch(kind, _array(kind, rows), {"stream": stream, "device": 0})


def _host(task_type: int, contexts: list[int] | None, platform: int = 5, task: int = TASK, batch: int = 0,
          later_op: bool = True) -> list[Batch]:
    """One MIX_AIC node launch: Node API ⊃ node_basic_info, context_id_info, task_track; a later op's tensor_info
    (and, with ``later_op``, its context_id_info) moves that stream's mark past the task_track."""
    out = [Batch("device_info", 0, {"facts": dict(FACTS, platform=platform)}),
           pack_rows("hash", [[OP, "conv1/Conv2D"], [OP_TYPE, "Conv2D"]], "out"),
           pack_rows("type_info", [[raw.LEVEL_RUNTIME, FFTS_PLUS, "FFTS_PLUS"],
                                   [raw.LEVEL_RUNTIME, KERNEL_AICPU, "KERNEL_AICPU"]], "out"),
           _batch("api", [{"thread_id": THREAD, "level": raw.LEVEL_NODE, "type": 5, "item_id": OP,
                           "start_ns": 1000, "end_ns": 5000}], "unaging.api_event.data"),
           _batch("node_basic", [{"thread_id": THREAD, "ts_ns": 1200, "op_name": OP, "op_type": OP_TYPE,
                                  "task_type": 4, "block_num": 8}], "unaging.compact.node_basic_info")]
    infos: list[dict[str, Any]] = []
    if contexts is not None:
        ids = np.zeros(55, np.uint32)
        ids[: len(contexts)] = contexts
        infos.append({"thread_id": THREAD, "ts_ns": 1300, "op_name": OP, "ctx_id_num": len(contexts), "ctx_ids": ids})
    if later_op:
        infos.append({"thread_id": THREAD, "ts_ns": 9000, "op_name": 3333})
    if infos:
        out.append(_batch("context_id", infos, "unaging.additional.context_id_info"))
    out.append(_batch("tensor", [{"thread_id": THREAD, "ts_ns": 9000, "op_name": 3333}],  # past the task_track
                      "unaging.additional.tensor_info"))
    out.append(_batch("task_track", [{"thread_id": THREAD, "ts_ns": 1500, "device_id": 0, "stream_id": STREAM,
                                      "task_id": task, "batch_id": batch, "task_type": task_type}],
                      "unaging.compact.task_track"))
    return out


def _subtasks(spans: dict[int, tuple[int, int]], task: int = TASK) -> Batch:
    rows = [{"device_id": 0, "stream_id": STREAM, "task_id": task, "context_id": ctx, "subtask_type": 6,
             "ffts_type": raw.FFTS_TYPE_PLUS, "state": state, "ts_ns": ts}
            for ctx, (start, end) in spans.items()
            for state, ts in ((records.STATE_START, start), (records.STATE_END, end))]
    return _batch("subtask_log", sorted(rows, key=lambda r: r["ts_ns"]), SOC)


def _task_logs(kind: str = "task_log", task: int = TASK, span: tuple[int, int] = TASK_SPAN) -> Batch:
    ids = {"unique_task_id": task} if kind == "unique_task_log" else {"stream_id": STREAM, "task_id": task}
    return _batch(kind, [{"device_id": 0, **ids, "state": records.STATE_START, "ts_ns": span[0]},
                         {"device_id": 0, **ids, "state": records.STATE_END, "ts_ns": span[1]}], SOC)


def _context_pmu(context: int, total: int, counters: list[int]) -> dict[str, Any]:
    return {"device_id": 0, "stream_id": STREAM, "task_id": TASK, "context_id": context, "total_cycle": total,
            "pmu": counters, "core": records.CORE_MIX_AIC}


def _run(tmp_path: Path, batches: list[Batch], live: bool = True) -> tuple[AggregatorStage, list[dict[str, Any]],
                                                                            list[list[Any]]]:
    """Feed the batches, move the ts_track mark past the task (so the join needs no timeout), then finish."""
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path))
    out: list[Batch] = []
    for batch in [*batches, _batch("step", [{"device_id": 0, "ts_ns": 10**6}], TRACK)]:
        out.extend(agg.process(batch))
    out.extend(agg.tick(time.monotonic()))
    live_rows = sum(b.count for b in out if b.kind == "task")
    out.extend(agg.finish())
    symbols, rows, columns = SymbolTable(), [], []
    for batch in out:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            rows.extend(unpack_rows(batch))
            columns = batch.meta["pmu_columns"]
    if live:
        assert live_rows == len(rows), "every row is out before the end of the run"
    named = [{"stream": r[3], "task": r[4], "batch": r[5], "start": r[6], "end": r[7], "op": symbols[r[8]],
              "core": symbols[r[10]], "context": r[23], "pmu": dict(zip(columns, r[22], strict=False))} for r in rows]
    final = next(b for b in out if b.kind == "op_statistic" and b.meta.get("final"))
    return agg, named, unpack_rows(final)


def test_an_ffts_plus_task_makes_one_row_per_context(tmp_path: Path) -> None:
    pmu = _batch("context_pmu", [_context_pmu(0, 360_000, [0, 180_000, 36_000, 0, 0, 0, 0, 0]),
                                 _context_pmu(1, 720_000, [0, 72_000, 0, 0, 0, 0, 0, 0]),
                                 _context_pmu(2, 90_000, [0, 0, 9_000, 0, 0, 0, 0, 0])], "ffts_profile.data.0")
    agg, rows, statistic = _run(tmp_path, [*_host(FFTS_PLUS, [0, 1, 2]), _subtasks(CONTEXTS), _task_logs(), pmu])
    assert [(r["context"], r["start"], r["end"]) for r in rows] == [(c, *span) for c, span in CONTEXTS.items()]
    assert {(r["stream"], r["task"], r["batch"], r["op"], r["core"]) for r in rows} == {
        (STREAM, TASK, 0, "conv1/Conv2D", "MIX_AIC")}
    first = rows[0]["pmu"]
    # 360,000 cycles over block 8 on 24 cores at 1800 MHz: 360000 / 1800 / 8 × ceil(8/24) = 25 µs
    assert first["aicore_time(us)"] == pytest.approx(25.0) and first["aic_total_cycles"] == 360_000
    assert (first["aic_mac_ratio"], first["aic_scalar_ratio"]) == (0.5, 0.1)
    assert first["aic_mac_time(us)"] == pytest.approx(12.5)
    # 360000 / (1800 MHz × 24 cores × 29 µs) × 100
    assert first["cube_utilization(%)"] == pytest.approx(100 * 360_000 / (1800 * 24 * 29))
    assert first["aiv_total_cycles"] is None  # the MIX slave side comes from BlockPmu, not decoded into rows
    assert [r["pmu"]["aic_total_cycles"] for r in rows] == [360_000, 720_000, 90_000]
    assert rows[1]["pmu"]["aic_mac_ratio"] == 0.1 and rows[2]["pmu"]["aic_mac_ratio"] == 0.0
    # op_statistic counts the contexts: 29 + 29 + 38 µs
    assert statistic == [[0, "Conv2D", "MIX_AIC", 3, 96_000, 29_000, 38_000]]
    assert agg.ctx.rejected == {}
    assert agg.accounting()["unused"]["FFTS+ task spans (their contexts make the rows, as in msprof)"] == 1


def test_a_context_without_logs_is_rejected_and_a_stale_span_dropped(tmp_path: Path) -> None:
    stale = _subtasks({0: (40_000, 50_000)})  # an earlier run of (stream, task, context 0) no task joined
    agg, rows, statistic = _run(tmp_path, [*_host(FFTS_PLUS, [0, 1, 2]), stale,
                                           _subtasks({0: CONTEXTS[0], 1: CONTEXTS[1]}), _task_logs()], live=False)
    assert [(r["context"], r["start"], r["end"]) for r in rows] == [(0, *CONTEXTS[0]), (1, *CONTEXTS[1])]
    assert statistic == [[0, "Conv2D", "MIX_AIC", 2, 58_000, 29_000, 29_000]]
    assert agg.ctx.rejected == {"FFTS+ context without subtask start/end logs": 1,
                                "FFTS+ context span no joined task contains": 1}


def test_without_subtask_logs_the_task_makes_one_row_of_its_own(tmp_path: Path) -> None:
    agg, rows, statistic = _run(tmp_path, [*_host(FFTS_PLUS, [0, 1, 2]), _task_logs()])
    assert [(r["context"], r["start"], r["end"]) for r in rows] == [(CONTEXT_ID_NONE, *TASK_SPAN)]
    assert set(rows[0]["pmu"].values()) == {None}  # no PMU wait: its ContextPmu would carry context ids
    assert statistic == [[0, "Conv2D", "MIX_AIC", 1, 100_000, 100_000, 100_000]]
    assert agg.ctx.rejected == {}


def test_launches_of_other_runtime_task_types_carry_no_context_ids(tmp_path: Path) -> None:
    """msprof takes context ids only for the runtime task types of its list (KERNEL_AICPU is not on it)."""
    agg, rows, _ = _run(tmp_path, [*_host(KERNEL_AICPU, [0, 1]), _subtasks({0: CONTEXTS[0], 1: CONTEXTS[1]}),
                                   _task_logs()], live=False)  # live, it waits for a task-level PMU record
    assert [(r["context"], r["start"], r["end"]) for r in rows] == [(CONTEXT_ID_NONE, *TASK_SPAN)]
    assert agg.ctx.rejected == {"FFTS+ context span no joined task contains": 2}


def test_subtask_end_logs_without_a_start_are_rejected(tmp_path: Path) -> None:
    early_end = _batch("subtask_log", [{"device_id": 0, "stream_id": STREAM, "task_id": TASK, "context_id": 0,
                                        "state": records.STATE_END, "ts_ns": 100_500}], SOC)
    pmu = _batch("context_pmu", [_context_pmu(0, 1_000, [0] * 8)], "ffts_profile.data.0")
    agg, rows, _ = _run(tmp_path, [*_host(FFTS_PLUS, [0]), early_end, _subtasks({0: CONTEXTS[0]}), _task_logs(), pmu])
    assert [(r["context"], r["start"], r["end"]) for r in rows] == [(0, *CONTEXTS[0])]
    assert agg.ctx.rejected == {"FFTS+ subtask end log without a start": 1}


def test_a_launch_with_its_context_ids_in_does_not_wait_for_the_stream_mark(tmp_path: Path) -> None:
    """context_id_info is sparse (FFTS+ ops only): an FFTS+ launch whose record is in goes on; one whose record is
    not in waits until the stream passes it (here: the end of the run)."""
    pmu = _batch("context_pmu", [_context_pmu(0, 1_000, [0] * 8)], "ffts_profile.data.0")
    _, rows, _ = _run(tmp_path / "own", [*_host(FFTS_PLUS, [0], later_op=False), _subtasks({0: CONTEXTS[0]}),
                                         _task_logs(), pmu])
    assert [r["context"] for r in rows] == [0]
    other = _batch("context_id", [{"thread_id": THREAD, "ts_ns": 900, "op_name": 3333}],
                   "unaging.additional.context_id_info")  # an earlier op's: the mark stays before the launch
    agg = AggregatorStage(AggregatorStage.Config(), make_ctx("aggregate", tmp_path / "none"))
    out = [b for batch in [*_host(FFTS_PLUS, None, later_op=False), other, _task_logs(),
                           _batch("step", [{"device_id": 0, "ts_ns": 10**6}], TRACK)]
           for b in agg.process(batch)]
    out.extend(agg.tick(time.monotonic()))
    assert not any(b.kind == "task" for b in out)
    assert sum(b.count for b in agg.finish() if b.kind == "task") == 1


def test_chip_v6_task_ids_take_their_stream_from_the_task_track(tmp_path: Path) -> None:
    """The task_track's taskId 5 and batchId 1 are the 32-bit id 0x10005 (batch 0), which the ACSQ log names."""
    unknown = _task_logs("unique_task_log", task=0x20005, span=(300_000, 310_000))
    agg, rows, statistic = _run(tmp_path, [*_host(FFTS_PLUS, [0, 1], platform=15, task=5, batch=1),
                                           _task_logs("unique_task_log", task=0x10005), unknown], live=False)
    # chip v6: no context ids (msprof takes none there), the ACSQ span is the row
    assert [(r["stream"], r["task"], r["batch"], r["context"], r["start"], r["end"]) for r in rows] == [
        (STREAM, 0x10005, 0, CONTEXT_ID_NONE, *TASK_SPAN)]
    assert statistic == [[0, "Conv2D", "MIX_AIC", 1, 100_000, 100_000, 100_000]]
    assert agg.ctx.rejected == {"chip-v6 device task whose task id no host task_track names": 1}
