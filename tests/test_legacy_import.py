"""`pipeline import` of a legacy JOB… directory: real processes, outputs equal the truth."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from pipeline_runs import read_report, run_cli, stage_config

pytestmark = pytest.mark.slow
JOB = "JOBAIFGJEJFEDCBAEADIFJAAAAAAAAAA"


def _rows(out: Path, module: str) -> list[dict[str, str]]:
    (path,) = (out / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv")
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_import_of_a_job_directory(tmp_path: Path) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", "cloud", "--iterations", "5", "--layout",
                     "legacy", "--seed", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    job = tmp_path / JOB
    shutil.copytree(Path(truth["prof_dir"]) / "device_0", job)  # CANN 5: control files and data/ in JOB…/
    out = tmp_path / "out"
    result = run_cli("import", str(job), "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == []
    decoder = report["stages"]["decode"]["accounting"]
    assert decoder["records_in"] == decoder["decoded"] == truth["records_total"]
    op_statistic = {(r["OP Type"], r["Core Type"]): r for r in _rows(out, "op_statistic")}
    assert set(op_statistic) == {(t["op_type"], t["core_type"]) for t in truth["op_statistic"]}
    for t in truth["op_statistic"]:
        row = op_statistic[t["op_type"], t["core_type"]]
        assert int(row["Count"]) == t["count"]
        assert float(row["Total Time(us)"]) == pytest.approx(t["total_ns"] / 1000, abs=0.001)
    api = {(r["Level"], r["API Name"]): int(r["Count"]) for r in _rows(out, "api_statistic")}
    expected = {(t["level"], t["api_name"]): t["count"] for t in truth["api_statistic"]}
    del expected[("model", "ModelExecute")]
    assert api == expected  # names from AclModule / Runtime.api text
    summary = _rows(out, "op_summary")
    assert len(summary) == sum(t["count"] for t in truth["op_statistic"])
    conv = [r for r in summary if r["OP Type"] == "Conv2D"]
    assert conv and all(r["Model ID"] == "1" and "," in r["Input Shapes"] for r in conv)
    assert {r["Op Name"] for r in summary} >= {"conv2d_0/BatchNorm/BNInferenceD"}  # a hashed name, resolved


def test_import_refuses_a_folder_with_no_profile(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_cli("import", str(tmp_path / "empty"))
    assert result.returncode != 0 and "nor a legacy JOB" in result.stderr


def test_live_run_of_the_legacy_layout_equals_its_import(tmp_path: Path) -> None:
    out = tmp_path / "live"
    config = tmp_path / "live.yaml"
    config.write_text(stage_config(out, iterations=40, chip="cloud").replace("output: board}", "output: board, "
                                                                                              "layout: legacy}"))
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_report(out)["problems"] == []
    truth = json.loads((out / "board" / "simulator_truth.json").read_text())
    assert not (Path(truth["prof_dir"]) / "host").exists()
    imported = tmp_path / "imported"
    result = run_cli("import", truth["prof_dir"], "--output", str(imported))
    assert result.returncode == 0, result.stderr[-3000:]
    for module in ("op_statistic", "api_statistic", "op_summary"):
        assert _rows(out, module) == _rows(imported, module), module
    assert len(_rows(out, "op_summary")) == sum(t["count"] for t in truth["op_statistic"])
