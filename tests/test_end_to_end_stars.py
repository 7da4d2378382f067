"""`pipeline simulate --chip 910b` then `pipeline import`: a STARS directory through every stage and sink."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from pipeline_runs import read_report, run_cli

pytestmark = pytest.mark.slow


def _rows(folder: Path, module: str) -> list[dict[str, str]]:
    found = sorted((folder / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv"))
    assert len(found) == 1, found
    with open(found[0], newline="") as handle:
        return list(csv.DictReader(handle))


def test_import_of_a_simulated_910b(tmp_path: Path) -> None:
    board, out = tmp_path / "board", tmp_path / "imported"
    result = run_cli("simulate", str(board), "--chip", "910b", "--iterations", "15", "--seed", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    truth = json.loads((board / "simulator_truth.json").read_text())
    result = run_cli("import", truth["prof_dir"], "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all counts reconcile" in result.stdout

    report = read_report(out)
    assert report["problems"] == []
    decoder = report["stages"]["decode"]["accounting"]
    assert decoder["records_in"] == decoder["decoded"] == truth["records_total"]

    statistic = {(r["OP Type"], r["Core Type"]): r for r in _rows(out, "op_statistic")}
    assert set(statistic) == {(t["op_type"], t["core_type"]) for t in truth["op_statistic"]}
    for t in truth["op_statistic"]:
        row = statistic[(t["op_type"], t["core_type"])]
        assert int(row["Count"]) == t["count"]
        assert float(row["Total Time(us)"]) == pytest.approx(t["total_ns"] / 1000, abs=0.001)

    summary = _rows(out, "op_summary")
    assert len(summary) == sum(t["count"] for t in truth["op_statistic"])
    header = list(summary[0])
    assert {"aicore_time(us)", "aic_total_cycles", "aic_mac_ratio", "aiv_time(us)", "aiv_total_cycles",
            "aiv_vec_ratio", "cube_utilization(%)"} <= set(header)
    assert "aic_vec_ratio" not in header and "aiv_mac_ratio" not in header
    relu = [r for r in summary if r["OP Type"] == "Relu"]
    assert relu and all(r["Task Type"] == "AI_VECTOR_CORE" and float(r["aiv_total_cycles"]) > 0
                        and r["aic_total_cycles"] == "0" for r in relu)
    conv = [r for r in summary if r["OP Type"] == "Conv2D"]
    assert conv and all(float(r["aic_total_cycles"]) > 0 and 0 < float(r["cube_utilization(%)"]) <= 100 for r in conv)

    # FFTS+ MIX_AIC tasks: one row per context, Context ID filled, as msprof writes them
    mix = [r for r in summary if r["Task Type"] == "MIX_AIC"]
    plain = [r for r in summary if r["Task Type"] != "MIX_AIC"]
    assert len(mix) == sum(t["count"] for t in truth["op_statistic"] if t["core_type"] == "MIX_AIC") > 0
    assert {r["Context ID"] for r in mix} == {"0", "1", "2", "3"} and {r["Context ID"] for r in plain} == {"N/A"}
    per_task = {(r["Stream ID"], r["Task ID"], r["Task Start Time(us)"]) for r in mix}
    assert len(per_task) == len(mix)  # each context has its own span
    assert all(float(r["aic_total_cycles"]) > 0 and r["aiv_total_cycles"] == "N/A" for r in mix)

    with sqlite3.connect(next(out.glob("msprof_*.db"))) as db:
        names = {name for (name,) in db.execute(
            "SELECT DISTINCT s.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name")}
        contexts = dict(db.execute("SELECT contextId, COUNT(*) FROM TASK GROUP BY contextId").fetchall())
    assert {"aic_total_cycles", "aiv_total_cycles", "aiv_total_time"} <= names  # msprof's metric names
    assert {c: n for c, n in contexts.items() if c != 4294967295} == {
        c: sum(1 for r in mix if r["Context ID"] == str(c)) for c in range(4)}

    trace = json.loads(next((out / "mindstudio_profiler_output").glob("msprof_*.json")).read_text())
    subtasks = [e["args"]["Subtask Id"] for e in trace if e.get("ph") == "X" and "Subtask Id" in e.get("args", {})]
    assert sorted(c for c in subtasks if c != 4294967295) == sorted(int(r["Context ID"]) for r in mix)


def test_import_of_a_simulated_chip_v6(tmp_path: Path) -> None:
    """32-byte STARS logs naming tasks by 32-bit ids, a static model: op_statistic equals the simulator's truth."""
    board, out = tmp_path / "board", tmp_path / "imported"
    result = run_cli("simulate", str(board), "--chip", "v6", "--iterations", "10", "--seed", "3", "--mode", "static")
    assert result.returncode == 0, result.stderr[-3000:]
    truth = json.loads((board / "simulator_truth.json").read_text())
    result = run_cli("import", truth["prof_dir"], "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all counts reconcile" in result.stdout
    report = read_report(out)
    assert report["problems"] == []
    assert report["stages"]["decode"]["accounting"]["decoded"] == truth["records_total"]
    statistic = {(r["OP Type"], r["Core Type"]): r for r in _rows(out, "op_statistic")}
    assert set(statistic) == {(t["op_type"], t["core_type"]) for t in truth["op_statistic"]}
    for t in truth["op_statistic"]:
        row = statistic[(t["op_type"], t["core_type"])]
        assert int(row["Count"]) == t["count"]
        assert float(row["Total Time(us)"]) == pytest.approx(t["total_ns"] / 1000, abs=0.001)
    summary = _rows(out, "op_summary")
    assert len(summary) == sum(t["count"] for t in truth["op_statistic"])
    assert {r["Context ID"] for r in summary} == {"N/A"}
