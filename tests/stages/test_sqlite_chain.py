"""TASK_PMU_INFO against op_summary: a simulated board through collector → decoder → aggregator, then both sinks.

Every op_summary PMU cell must be in TASK_PMU_INFO under msprof's metric name, in the db's units (times
ns, bandwidths B/s), and nothing else may be there but, on the 910B, the metrics msprof keeps out of op_summary
and writes to its database all the same.
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest
from chain import make_ctx, run_chain

from stages.formats.raw import PMU_EVENT_SETS
from stages.simulator.run import simulate
from stages.sinks._format import us_to_ns
from stages.sinks.sqlite import SqliteSink
from stages.sinks.summary import SummarySink

STAMP = "20240101120000"
FIRST_PMU_COLUMN = "aicore_time(us)"
# op_summary columns after the PMU block's start that are not PMU metrics of the task
NOT_METRICS = {"memory_bound", "cube_utilization(%)", "aicpu_compute_time(us)", "aicpu_memcpy_time(us)",
               "aicpu_task_time(us)", "aicpu_dispatch_time(us)", "aicpu_total_time(us)", "l2_cache_hit_rate",
               "l2_cache_victim_rate"}
# msprof's TASK_PMU_INFO on a simulated 910B with PipeUtilization events (scripts/compare_db_with_msprof.py):
# the names op_summary shows, and these
HIDDEN_910B = {"aic_vec_time", "aic_vec_ratio", "aiv_mac_time", "aiv_mac_ratio", "aiv_mte1_time", "aiv_mte1_ratio"}
CASES = [("cloud", group) for group in PMU_EVENT_SETS] + [("mini", "PipeUtilization"), ("910b", "PipeUtilization"),
                                                          ("910b", "Memory")]


def metric(column: str, stars: bool) -> tuple[str, float]:
    """msprof's metric name (op_summary's, before units) and the factor from the CSV unit to the db's."""
    if column == "aicore_time(us)":
        return ("aic_total_time" if stars else "total_time"), 1000.0
    if column == "aiv_time(us)":
        return "aiv_total_time", 1000.0
    if column.endswith("(us)"):
        return column[:-len("(us)")], 1000.0
    if column.endswith("(GB/s)"):
        return column[:-len("(GB/s)")], 1024.0**3
    return column, 1.0


def _export(tmp_path: Path, chip: str, group: str) -> tuple[Path, Path]:
    prof = simulate(tmp_path / "board", chip=chip, iterations=2, rate="max", seed=5, aic_metrics=group)
    batches, figures = run_chain(prof, tmp_path / "chain")
    assert figures["rejected"] == {}
    out = tmp_path / "out"
    sinks = [SummarySink(SummarySink.Config(timestamp=STAMP), make_ctx("summary", out)),
             SqliteSink(SqliteSink.Config(timestamp=STAMP), make_ctx("db", out))]
    for sink in sinks:
        sink.open()
        for batch in batches:
            sink.write_batch(batch)
        sink.close()
    return next(out.rglob("op_summary_*.csv")), out / f"msprof_{STAMP}.db"


@pytest.mark.parametrize(("chip", "group"), CASES)
def test_task_pmu_info_holds_op_summary_pmu_values(tmp_path: Path, chip: str, group: str) -> None:
    summary, db_path = _export(tmp_path, chip, group)
    with summary.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        rows = list(reader)
    pmu_columns = [c for c in header[header.index(FIRST_PMU_COLUMN):] if c not in NOT_METRICS]
    stars = chip == "910b"
    expected: dict[tuple[int, int, int], dict[str, float]] = {}
    for row in rows:
        key = (us_to_ns(row["Task Start Time(us)"]), int(row["Stream ID"]), int(row["Task ID"]))
        cells = {metric(c, stars): row[c] for c in pmu_columns if row[c] != "N/A"}
        expected[key] = {name: float(text) * factor for (name, factor), text in cells.items()}
    with sqlite3.connect(db_path) as db:
        stored: dict[tuple[int, int, int], dict[str, float]] = {}
        for start, stream, task, name, value in db.execute(
                """SELECT t.startNs, t.streamId, t.taskId, s.value, p.value FROM TASK_PMU_INFO p
                   JOIN TASK t ON t.globalTaskId = p.globalTaskId JOIN STRING_IDS s ON s.id = p.name"""):
            stored.setdefault((start, stream, task), {})[name] = value
    assert len(expected) == len(rows) > 0 and sum(map(len, expected.values())) > 0
    assert stored.keys() == {key for key, cells in expected.items() if cells}
    hidden = HIDDEN_910B if (chip, group) == ("910b", "PipeUtilization") else set()
    checked = 0
    for key, cells in expected.items():
        found = stored.get(key, {})
        # a hidden metric is there where its side (aic_ / aiv_) has values (not a MIX task's slave side)
        assert found.keys() - cells.keys() == {name for name in hidden if f"{name[:4]}total_cycles" in cells}, key
        assert found.keys() >= cells.keys(), key
        for name, value in cells.items():
            factor = metric(next(c for c in pmu_columns if metric(c, stars)[0] == name), stars)[1]
            # op_summary prints 3 decimals: the db's exact value rounds to what the CSV shows
            assert found[name] / factor == pytest.approx(value / factor, abs=0.0005 + 1e-9), (key, name)
            checked += 1
    assert checked >= len(rows) * 2
