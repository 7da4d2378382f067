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

    with sqlite3.connect(next(out.glob("msprof_*.db"))) as db:
        names = {name for (name,) in db.execute(
            "SELECT DISTINCT s.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name")}
    assert {"aic_total_cycles", "aiv_total_cycles", "aiv_time(us)"} <= names
