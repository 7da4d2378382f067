"""The whole pipeline as real processes over real ZeroMQ sockets, while a simulator writes."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import crossing_slices, read_report, run_cli, stage_config, start_run

pytestmark = pytest.mark.slow


def _output_file(folder: Path, module: str) -> Path:
    found = sorted((folder / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv"))
    assert len(found) == 1, f"expected one {module} CSV in {folder}, found {found}"
    return found[0]


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _truth(out: Path) -> dict[str, Any]:
    truth: dict[str, Any] = json.loads((out / "board" / "simulator_truth.json").read_text())
    return truth


def _assert_op_statistic_equals_truth(out: Path) -> None:
    rows = {(r["OP Type"], r["Core Type"]): r for r in _csv_rows(_output_file(out, "op_statistic"))}
    truth = {(t["op_type"], t["core_type"]): t for t in _truth(out)["op_statistic"]}
    assert set(rows) == set(truth)
    for key, expected in truth.items():
        row = rows[key]
        assert int(row["Count"]) == expected["count"], key
        assert float(row["Total Time(us)"]) == pytest.approx(expected["total_ns"] / 1000, abs=0.001), key
        assert float(row["Min Time(us)"]) == pytest.approx(expected["min_ns"] / 1000, abs=0.001), key
        assert float(row["Max Time(us)"]) == pytest.approx(expected["max_ns"] / 1000, abs=0.001), key


def _assert_reconciled(out: Path) -> dict[str, Any]:
    report = read_report(out)
    assert report["problems"] == []
    stages = report["stages"]
    assert all(final["ok"] for final in stages.values())
    for final in stages.values():
        assert all(row["ok"] for row in final["reconcile"])
    truth = _truth(out)
    assert stages["collect"]["accounting"]["records_collected"] == truth["records_total"]
    decoder = stages["decode"]["accounting"]
    assert decoder["records_in"] == truth["records_total"] == decoder["decoded"]
    return report


def test_live_run_reconciles_matches_truth_and_import(tmp_path: Path) -> None:
    out = tmp_path / "live"
    config = tmp_path / "live.yaml"
    config.write_text(stage_config(out, iterations=150))
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    report = _assert_reconciled(out)
    assert "all counts reconcile" in result.stdout
    _assert_op_statistic_equals_truth(out)
    truth = _truth(out)
    tasks = sum(t["count"] for t in truth["op_statistic"])
    assert report["stages"]["aggregate"]["accounting"]["tasks_out"] == tasks
    assert len(_csv_rows(_output_file(out, "op_summary"))) == tasks
    assert len(_csv_rows(_output_file(out, "task_time"))) == tasks
    assert len(_csv_rows(_output_file(out, "step_trace"))) == truth["iterations"]

    prof = Path(truth["prof_dir"])
    imported = tmp_path / "imported"
    result = run_cli("import", str(prof), "--output", str(imported))
    assert result.returncode == 0, result.stderr[-3000:]
    for module in ("op_statistic", "api_statistic", "op_summary", "task_time", "step_trace", "msprof_tx"):
        live_rows = _output_file(out, module).read_text().splitlines()
        import_rows = _output_file(imported, module).read_text().splitlines()
        assert live_rows == import_rows, module

    timeline = json.loads(next((out / "mindstudio_profiler_output").glob("msprof_*.json")).read_text())
    names = {e["args"]["name"] for e in timeline if e.get("ph") == "M" and e["name"] == "process_name"}
    assert {"CANN", "Ascend Hardware"} <= names
    assert crossing_slices(timeline) == 0
    with sqlite3.connect(next(out.glob("msprof_*.db"))) as db:
        assert db.execute("SELECT count(*) FROM TASK").fetchone()[0] == tasks


def test_slow_sink_loses_no_record(tmp_path: Path) -> None:
    out = tmp_path / "slow"
    config = tmp_path / "slow.yaml"
    slow = "  slow: {type: 'slow_sink:SlowSink', inputs: [aggregate.tasks], delay_s: 0.05}\n"
    config.write_text(stage_config(out, iterations=60, rate="max", extra_stages=slow))
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    report = _assert_reconciled(out)
    counts = json.loads((out / "slow_sink.json").read_text())
    sent = report["stages"]["aggregate"]["out"]["tasks"]
    assert sum(counts.values()) == sent == report["stages"]["slow"]["in"]
    assert counts["task"] == sum(t["count"] for t in _truth(out)["op_statistic"])


def _wait_for(predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")


def test_killed_mid_run_outputs_still_open(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    config = tmp_path / "killed.yaml"
    config.write_text(stage_config(out, iterations=100_000))
    supervisor = start_run(config, capture=False)
    try:
        def has_rows() -> bool:  # op_summary well under way, and a statistics snapshot with ops written
            found = list((out / "mindstudio_profiler_output").glob("op_summary_*.csv"))
            stats = list((out / "mindstudio_profiler_output").glob("op_statistic_*.csv"))
            return bool(found) and found[0].stat().st_size > 50_000 and bool(stats) and len(_csv_rows(stats[0])) > 0
        _wait_for(has_rows, 60)
        pids = json.loads((out / "run.json").read_text())["stage_pids"]
    finally:
        supervisor.kill()
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5)
    folder = out / "mindstudio_profiler_output"
    events = json.loads(next(folder.glob("msprof_*.json")).read_text())
    assert any(e.get("ph") == "X" for e in events)
    for path in folder.glob("*.csv"):
        rows = _csv_rows(path)
        assert rows and all(None not in row for row in rows), path  # every line has the header's width
    with sqlite3.connect(next(out.glob("msprof_*.db"))) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "STRING_IDS" in tables  # msprof's data tables (TASK …) appear with their first row
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
