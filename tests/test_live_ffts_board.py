"""A live run following a simulated Ascend 910B board of two devices (FFTS+ launches) gives the rows an import of the
finished directory gives: a host stream whose first slice the collector lists after the task tracks it describes
(context_id_info, tensor_info) is waited for, not taken as absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_runs import read_report, run_cli, stage_config
from run_outputs import csv_rows

MODULES = ("op_summary", "op_statistic", "task_time")


@pytest.mark.slow
def test_a_live_run_of_a_910b_board_of_two_devices_equals_its_import(tmp_path: Path) -> None:
    out = tmp_path / "live"
    config = tmp_path / "live.yaml"
    config.write_text(stage_config(out, iterations=8, rate="realtime", chip="910b", devices=2))
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    live = read_report(out)["stages"]["aggregate"]
    assert live["rejected"] == {} and live["accounting"]["joins_given_up"] == {}
    imported = tmp_path / "imported"
    prof = json.loads((out / "board" / "simulator_truth.json").read_text())["prof_dir"]
    result = run_cli("import", prof, "--output", str(imported))
    assert result.returncode == 0, result.stderr[-3000:]
    for module in MODULES:
        assert csv_rows(out, module) == csv_rows(imported, module), module
    contexts = {row[20] for row in csv_rows(out, "op_summary")[1:]}  # Context ID
    assert {"0", "1", "N/A"} <= contexts
