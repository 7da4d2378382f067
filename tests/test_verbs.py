"""`pipeline export`, `show`, `compare` and the advice file on real runs: the case-study pair of the
simulator (Mish decomposed with TransData and a 5 s sleep, then fused), parsed by real pipelines."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import ROOT, pipeline_env, run_cli

from stages.simulator.run import simulate

ITERATIONS = 20
SLEEP_MS = 5000
FIXED_RULES = {"transdata", "decomposed_activation", "tx_idle"}  # what fusion and removing the sleep fix


@dataclass
class Run:
    prof: Path
    truth: dict[str, Any]

    @property
    def output(self) -> Path:
        return self.prof / "pipeline_output"

    def advice(self) -> dict[str, dict[str, Any]]:
        items = json.loads((self.output / "advice.json").read_text())["advice"]
        return {item["rule"]: item for item in items}

    def table(self, module: str) -> list[dict[str, str]]:
        (path,) = (self.output / "mindstudio_profiler_output").glob(f"{module}_*.csv")
        with open(path, newline="") as handle:
            return list(csv.DictReader(handle))


def _simulate(folder: Path, model: str, sleep_ms: int, seed: int, iterations: int = ITERATIONS) -> Run:
    prof = simulate(folder, iterations=iterations, rate="max", seed=seed, model=model, sleep_ms=sleep_ms)
    return Run(prof, json.loads((folder / "simulator_truth.json").read_text()))


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Before: imported with `pipeline import`; after: parsed on demand by `pipeline show`."""
    root = tmp_path_factory.mktemp("case")
    before = _simulate(root / "before", "face_mask_ssd_mish", SLEEP_MS, seed=4)
    after = _simulate(root / "after", "face_mask_ssd_fused", 0, seed=5)
    imported = run_cli("import", str(before.prof))
    assert imported.returncode == 0, imported.stderr[-3000:]
    shown = run_cli("show", str(after.prof), "--top", "3")
    assert shown.returncode == 0, shown.stderr[-3000:]
    return {"before": before, "after": after, "show": shown}


def test_advice_fires_before_fusion_and_not_after(case: dict[str, Any]) -> None:
    before, after = case["before"].advice(), case["after"].advice()
    assert FIXED_RULES <= {rule for rule, item in before.items() if item["severity"] == "warning"}
    assert not FIXED_RULES & set(after)
    # After fusion the device waits on the host (pre/post-processing): the next thing to fix, and only then.
    assert "host_gaps" in after and "host_gaps" not in before
    assert after["host_gaps"]["evidence"]["idle_share"] > 0.5


def test_model_load_dominates_a_short_run_and_top_types_follow_the_statistics(case: dict[str, Any],
                                                                               tmp_path: Path) -> None:
    short = _simulate(tmp_path / "short", "face_mask_ssd_fused", 0, seed=6, iterations=2)
    imported = run_cli("import", str(short.prof))
    assert imported.returncode == 0, imported.stderr[-3000:]
    load = next(a for a in short.truth["api_statistic"] if a["api_name"] == "aclmdlLoadFromFile")
    execute = next(a for a in short.truth["api_statistic"] if a["api_name"] == "aclmdlExecute")
    assert load["total_ns"] > execute["total_ns"]  # the run is built so: one load, two executions
    evidence = short.advice()["model_load"]["evidence"]
    assert (evidence["load_ns"], evidence["execute_ns"], evidence["executions"]) == \
        (load["total_ns"], execute["total_ns"], 2)
    assert "model_load" not in case["before"].advice()  # twenty executions outweigh the load
    for run in (short, case["before"]):
        totals: dict[str, int] = {}
        for row in run.truth["op_statistic"]:
            totals[row["op_type"]] = totals.get(row["op_type"], 0) + row["total_ns"]
        first, second = sorted(totals, key=lambda op_type: -totals[op_type])[:2]
        title = run.advice()["top_op_types"]["title"]
        assert title.startswith("Top operator types by device time: ") and title.index(first) < title.index(second)


def test_advice_figures_come_from_the_run(case: dict[str, Any]) -> None:
    run: Run = case["before"]
    ops = {t["op_type"]: t for t in run.truth["op_statistic"]}
    advice = run.advice()
    assert advice["transdata"]["evidence"]["count"] == ops["TransData"]["count"]
    assert advice["transdata"]["evidence"]["per_execution"] == ops["TransData"]["count"] / ITERATIONS
    assert advice["decomposed_activation"]["evidence"]["instances"] == ops["Softplus"]["count"]
    ranges = {t["message"]: t for t in run.truth["msproftx"]}
    load = next(a for a in run.truth["api_statistic"] if a["api_name"] == "aclmdlLoadFromFile")
    idle = advice["tx_idle"]["evidence"]
    assert idle["message"] == "CreateMultipleStreamsFromFile"
    assert idle["duration_ns"] == ranges["CreateMultipleStreamsFromFile"]["total_ns"]
    assert idle["idle_ns"] == pytest.approx(idle["duration_ns"] - load["total_ns"], abs=2_000_000)  # 1 ms buckets
    assert idle["idle_ns"] >= SLEEP_MS * 1_000_000
    assert "please check and reduce the transData" in (run.output / "advice.txt").read_text()


def test_show_parses_a_prof_dir_once_and_prints_the_tables(case: dict[str, Any]) -> None:
    run: Run = case["after"]
    first = case["show"]
    assert f"parsing {run.prof}" in first.stderr
    again = run_cli("show", str(run.prof), "--top", "3")
    assert again.returncode == 0 and "parsing" not in again.stderr
    assert "note:" not in again.stdout  # a completed run's files: nothing to warn about
    assert again.stdout.count("\n") > 20
    by_total = sorted(run.table("op_statistic"), key=lambda r: -Decimal(r["Total Time(us)"]))
    lines = [line for line in again.stdout.splitlines() if "AI_C" in line and "│" in line]
    shown = [line.split("│")[2].strip() for line in lines[:3]]
    assert shown == [row["OP Type"] for row in by_total[:3]]
    assert f"{len(by_total) - 3} more rows in the file" in again.stdout
    longest = max(Decimal(r["Task Duration(us)"]) for r in run.table("op_summary"))
    assert f"{longest:.3f}" in again.stdout
    assert "advice" in again.stdout and "host_gaps" in again.stdout


def _sides(rows: list[dict[str, str]], name: str, kind: str, total: str) -> dict[tuple[str, str], tuple[int, Decimal]]:
    out: dict[tuple[str, str], tuple[int, Decimal]] = {}
    for row in rows:
        count, summed = out.get((row[name], row[kind]), (0, Decimal(0)))
        out[(row[name], row[kind])] = (count + int(row["Count"]), summed + Decimal(row[total]))
    return out


def test_compare_csv_holds_the_differences_of_the_two_runs(case: dict[str, Any], tmp_path: Path) -> None:
    before, after = case["before"], case["after"]
    path = tmp_path / "compare.csv"
    result = run_cli("compare", str(before.prof), str(after.prof), "--csv", str(path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "aclmdlExecute:" in result.stdout and "op types (op_statistic)" in result.stdout
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    expected = {"op": (_sides(before.table("op_statistic"), "OP Type", "Core Type", "Total Time(us)"),
                       _sides(after.table("op_statistic"), "OP Type", "Core Type", "Total Time(us)")),
                "api": (_sides(before.table("api_statistic"), "API Name", "Level", "Time(us)"),
                        _sides(after.table("api_statistic"), "API Name", "Level", "Time(us)"))}
    for section, (a, b) in expected.items():
        mine = {(r["Name"], r["Kind"]): r for r in rows if r["Section"] == section}
        assert set(mine) == set(a) | set(b)
        for key, row in mine.items():
            (count_a, total_a), (count_b, total_b) = a.get(key, (0, Decimal(0))), b.get(key, (0, Decimal(0)))
            assert (int(row["Count A"]), int(row["Count B"])) == (count_a, count_b)
            assert int(row["Count Delta"]) == count_b - count_a
            assert Decimal(row["Total Delta(us)"]) == total_b - total_a
            if total_a:
                percent = (total_b - total_a) * 100 / total_a
                assert abs(Decimal(row["Total Delta(%)"]) - percent) <= Decimal("0.0005")  # three decimals
    assert {r["Name"] for r in rows if r["Section"] == "op" and r["Count B"] == "0"} >= \
        {"BNInferenceD", "TransData", "Softplus", "Tanh", "Mul"}
    on_stdout = run_cli("compare", str(before.output), str(after.output), "--csv", "-")
    assert list(csv.DictReader(io.StringIO(on_stdout.stdout))) == rows


def test_export_runs_only_the_chosen_sinks(case: dict[str, Any], tmp_path: Path) -> None:
    run: Run = case["before"]
    summary = tmp_path / "summary"
    result = run_cli("export", "summary", str(run.prof), "--output", str(summary), "--format", "json")
    assert result.returncode == 0, result.stderr[-3000:]
    files = sorted(p.name.split("_2")[0] for p in (summary / "mindstudio_profiler_output").iterdir())
    assert files == ["api_statistic", "msprof_tx", "op_statistic", "op_summary", "step_trace", "task_time"]
    assert not list(summary.glob("msprof_*.db")) and not (summary / "advice.json").exists()
    stages = json.loads((summary / "run_report.json").read_text())["stages"]
    assert set(stages) == {"collect", "decode", "aggregate", "summary"}
    (exported,) = (summary / "mindstudio_profiler_output").glob("op_statistic_*.json")
    assert json.loads(exported.read_text()) == run.table("op_statistic")

    both = tmp_path / "timeline_db"
    result = run_cli("export", "timeline", "db", str(run.prof), "--output", str(both))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [p.name[:7] for p in (both / "mindstudio_profiler_output").iterdir()] == ["msprof_"]
    assert len(list(both.glob("msprof_*.db"))) == 1

    time.sleep(1.0)  # the outputs line goes by whole seconds of modification time
    again = run_cli("export", "db", str(run.prof), "--output", str(summary))  # beside the first export's files
    assert again.returncode == 0, again.stderr[-3000:]
    (line,) = [line for line in again.stdout.splitlines() if line.startswith("outputs in ")]
    listed = line.split(": ", 1)[1].split(", ")
    assert [name[:7] for name in listed] == ["msprof_", "run_rep"], line  # not the summary export's files


def test_a_third_party_rule_from_an_entry_point_appears(case: dict[str, Any], tmp_path: Path) -> None:
    run: Run = case["after"]
    env = {**pipeline_env(), "PYTHONPATH": str(ROOT / "tests" / "plugins" / "advice_entry_point")}
    result = subprocess.run([sys.executable, "-m", "pipeline", "export", "advice", str(run.prof), "--output",
                             str(tmp_path)], capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    advice = {item["rule"]: item for item in json.loads((tmp_path / "advice.json").read_text())["advice"]}
    tasks = sum(t["count"] for t in run.truth["op_statistic"])
    assert advice["acme_task_count"]["evidence"]["tasks"] == tasks
    assert advice["acme_task_count"]["title"] == f"{tasks} device tasks"
    assert "top_op_types" in advice  # the built-in rules still run beside it


@pytest.mark.parametrize(("args", "message"), [
    (["export", "summary", "/nonexistent/PROF"], "export: /nonexistent/PROF is not a directory"),
    (["export", "timeline", "{empty}", "--format", "json"], "--format applies to the summary export"),
    (["export", "db", "{empty}"], "holds no host/ or device_N/ folder"),
    (["show", "{empty}"], "holds no op_statistic / api_statistic files and is not a PROF directory"),
    (["compare", "{empty}", "/nonexistent/run"], "compare: {empty} holds no op_statistic"),
    (["show", "{empty}", "--top", "0"], "--top must be 1 or more"),
    (["export", "{empty}"], "is not a kind to export: name one or more of summary, timeline, db, advice before"),
    (["show"], "pipeline show: the following arguments are required: target (`pipeline show -h` shows"),
])
def test_bad_verb_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_cli(*[arg.replace("{empty}", str(tmp_path)) for arg in args])
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert message.replace("{empty}", str(tmp_path)) in result.stderr


def test_version_is_printed_not_an_error() -> None:
    from pipeline import __version__

    result = subprocess.run([sys.executable, "-m", "pipeline", "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"pipeline {__version__}", result.stderr
