"""examples/acme-sinks installs as a package, registers by entry point, and runs in a pipeline."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_runs import install_example, stage_config


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return install_example("acme-sinks", tmp_path_factory.mktemp("site"))


def test_example_is_listed_by_its_entry_point(env: dict[str, str]) -> None:
    result = subprocess.run([sys.executable, "-m", "pipeline", "plugins"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.returncode == 0
    assert any(line.split() == ["slowest_ops", "acme_sinks:SlowestOps"] for line in result.stdout.splitlines())


def test_pipeline_runs_through_the_example_sink(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "p.yaml"
    config.write_text(stage_config(out, iterations=40, rate="max",
                                   extra_stages="  slowest: {type: slowest_ops, inputs: [aggregate.stats], top: 3}"))
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    top = json.loads((out / "slowest_ops.json").read_text())["top"]
    statistic = next((out / "mindstudio_profiler_output").glob("op_statistic_*.csv"))
    with statistic.open(newline="") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: (-float(row["Total Time(us)"]), row["OP Type"]))
    assert [(entry["op_type"], entry["count"]) for entry in top] == [(r["OP Type"], int(r["Count"])) for r in rows[:3]]
    report = json.loads((out / "run_report.json").read_text())["stages"]["slowest"]
    assert report["ok"] and report["accounting"]["tables_seen"] >= 1
