"""examples/acme-advice installs as a package, registers its rule by entry point, and its finding shows
in a run's advice.json with the figures of that run's op_statistic."""

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
    return install_example("acme-advice", tmp_path_factory.mktemp("advice-site"))


def test_the_rule_is_found_by_its_entry_point(env: dict[str, str]) -> None:
    probe = "from pipeline.advice import available_rules; print(available_rules().get('aicpu_share'))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert result.stdout.strip() == "acme_advice:AiCpuShare", result.stderr[-1000:]


def test_a_run_advises_with_the_example_rule(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = tmp_path / "p.yaml"
    config.write_text(stage_config(out, iterations=40, rate="max", extra_stages=(
        "  advice: {type: advice, inputs: [aggregate.stats, aggregate.tasks], rules: [aicpu_share],"
        " options: {aicpu_share: {max_share: 0.01}}}")))
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    statistic = next((out / "mindstudio_profiler_output").glob("op_statistic_*.csv"))
    with statistic.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    device_us = sum(float(row["Total Time(us)"]) for row in rows)
    aicpu = [row for row in rows if row["Core Type"] == "AI_CPU"]
    assert aicpu, "the simulated model has no AI CPU operator: the example rule would stay quiet"
    share = sum(float(row["Total Time(us)"]) for row in aicpu) / device_us
    findings = [item for item in json.loads((out / "advice.json").read_text())["advice"]
                if item["rule"] == "aicpu_share"]
    assert len(findings) == 1
    assert findings[0]["evidence"]["share"] == pytest.approx(share, abs=1e-3)
    heaviest = max(aicpu, key=lambda row: float(row["Total Time(us)"]))["OP Type"]
    assert findings[0]["evidence"]["heaviest"] == heaviest
