"""examples/acme-sinks installs as a package, registers by entry point, and runs in a pipeline."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_runs import ROOT, pipeline_env, stage_config

EXAMPLE = ROOT / "examples" / "acme-sinks"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                             str(target), str(EXAMPLE)], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.fail(f"pip could not install the example: {result.stderr[-1500:]}")
    return target


def _env(site: Path) -> dict[str, str]:
    env = pipeline_env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    return env


def test_example_is_listed_by_its_entry_point(installed: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "pipeline", "plugins"], capture_output=True, text=True,
                            env=_env(installed), timeout=60)
    assert result.returncode == 0
    assert any(line.split() == ["slowest_ops", "acme_sinks:SlowestOps"] for line in result.stdout.splitlines())


def test_pipeline_runs_through_the_example_sink(installed: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "p.yaml"
    config.write_text(stage_config(out, iterations=40, rate="max",
                                   extra_stages="  slowest: {type: slowest_ops, inputs: [aggregate.stats], top: 3}"))
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                            capture_output=True, text=True, env=_env(installed), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    top = json.loads((out / "slowest_ops.json").read_text())["top"]
    statistic = next((out / "mindstudio_profiler_output").glob("op_statistic_*.csv"))
    with statistic.open(newline="") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: (-float(row["Total Time(us)"]), row["OP Type"]))
    assert [(entry["op_type"], entry["count"]) for entry in top] == [(r["OP Type"], int(r["Count"])) for r in rows[:3]]
    report = json.loads((out / "run_report.json").read_text())["stages"]["slowest"]
    assert report["ok"] and report["accounting"]["tables_seen"] >= 1
