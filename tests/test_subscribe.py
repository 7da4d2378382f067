"""Operator subscription end to end: `pipeline simulate --subscribe FIFO` and `pipeline run configs/subscribe.yaml`
as two real processes around a real FIFO; the live op statistics equal the simulator's truth."""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import pipeline_env, read_report, run_cli

from pipeline.config import load_config
from pipeline.plugins import available_types, load_stage_class
from stages.subscription import BAD_SIGNATURE, SubscriptionStage

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "subscribe.yaml"
TARGET = "stages.subscription:SubscriptionStage"


def _config(tmp_path: Path) -> Path:
    """configs/subscribe.yaml itself, or (installed metadata older than the entry point: `pip install -e .`
    registers it) a copy that names the class."""
    if "subscription" in available_types():
        return CONFIG
    copy = tmp_path / "subscribe.yaml"
    copy.write_text(CONFIG.read_text().replace("type: subscription", f'type: "{TARGET}"'))
    return copy


def _truth_rows(truth: dict[str, Any]) -> dict[tuple[str, str, str], tuple[int, float, float, float]]:
    return {(str(r["device_id"]), r["op_type"], r["core_type"]):
            (r["count"], r["total_ns"] / 1000, r["min_ns"] / 1000, r["max_ns"] / 1000) for r in truth["op_statistic"]}


def _assert_same(found: dict[tuple[str, str, str], tuple[int, float, float, float]],
                 truth: dict[tuple[str, str, str], tuple[int, float, float, float]]) -> None:
    assert found.keys() == truth.keys()
    for key, (count, total, low, high) in truth.items():
        got = found[key]
        assert got[0] == count, key
        assert got[1:] == pytest.approx((total, low, high), abs=0.0011), key  # µs with 3 decimals: to the ns


@pytest.mark.slow
@pytest.mark.parametrize("size", [80, 72])
def test_live_op_statistics_from_a_fifo_equal_the_simulators_truth(tmp_path: Path, size: int) -> None:
    out, fifo = tmp_path / "out", tmp_path / "board" / "ops.fifo"
    env = {**pipeline_env(), "OUT_DIR": str(out), "SUBSCRIBE_FIFO": str(fifo)}
    run = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(_config(tmp_path)), "--live", "off"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        board = run_cli("simulate", "--subscribe", str(fifo), "--iterations", "80", "--seed", "11",
                        "--corrupt-every", "37", "--op-desc-size", str(size), "--rate", "20k", timeout=120)
        assert board.returncode == 0, board.stderr
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stderr + stdout
    truth = json.loads((fifo.parent / "ops.fifo.truth.json").read_text())
    assert truth["op_desc_size"] == size and truth["corrupted"] == truth["records_written"] // 37 > 0

    report = read_report(out)
    subscribe = report["stages"]["subscribe"]
    assert subscribe["rejected"] == {BAD_SIGNATURE: truth["corrupted"]}
    assert subscribe["accounting"]["records_read"] == truth["records_written"]
    assert subscribe["accounting"]["resolver_names_unused"] == truth["corrupted"]
    assert all(row["ok"] for stage in report["stages"].values() for row in stage["reconcile"])
    assert report["stages"]["aggregate"]["accounting"]["subscribed_ops"] == \
        truth["records_written"] - truth["corrupted"]

    expected = _truth_rows(truth)
    (summary,) = (out / "mindstudio_profiler_output").glob("op_statistic_*.csv")
    with open(summary, newline="") as handle:
        rows = list(csv.DictReader(handle))
    _assert_same({(r["Device_id"], r["OP Type"], r["Core Type"]):
                  (int(r["Count"]), float(r["Total Time(us)"]), float(r["Min Time(us)"]), float(r["Max Time(us)"]))
                  for r in rows}, expected)
    (database,) = out.glob("msprof_*.db")
    with sqlite3.connect(database) as db:
        table = db.execute("SELECT deviceId, opType, coreType, count, totalTimeUs, minTimeUs, maxTimeUs "
                           "FROM OP_STATISTIC").fetchall()
    _assert_same({(str(d), t, c): (n, total, low, high) for d, t, c, n, total, low, high in table}, expected)


def test_the_subscribe_config_is_valid_and_its_stage_is_registered() -> None:
    group = (ROOT / "pyproject.toml").read_text().split('[project.entry-points."ascend_pipeline.stages"]')[1]
    found = re.search(r'^subscription = "([^"]+)"$', group.split("\n[", 1)[0], flags=re.MULTILINE)
    assert found is not None, "pyproject.toml registers no subscription stage type"
    assert load_stage_class(found.group(1)) is SubscriptionStage
    config = load_config(CONFIG, {"stages.subscribe.type": found.group(1)})
    stages = config.enabled_stages()
    assert stages["subscribe"].cls is SubscriptionStage and stages["aggregate"].inputs == [("subscribe", "out")]


@pytest.mark.parametrize(("args", "needle"), [
    (["--subscribe", "FIFO", "somewhere"], "OUT_DIR or --subscribe FIFO, not both"),
    ([], "needs OUT_DIR (or --subscribe FIFO)"),
    (["--subscribe", "FIFO", "--corrupt-every", "-1"], "--corrupt-every must be 0 or more"),
])
def test_simulate_subscribe_refuses_bad_arguments_in_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    result = run_cli("simulate", *[a.replace("FIFO", str(tmp_path / "f")) for a in args], timeout=60)
    assert result.returncode != 0
    assert needle in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not os.path.exists(tmp_path / "f")


def test_simulate_subscribe_refuses_a_path_that_is_not_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    result = run_cli("simulate", "--subscribe", str(tmp_path / "plain"), "--iterations", "1", timeout=60)
    assert result.returncode != 0 and "exists and is not a FIFO" in result.stderr
