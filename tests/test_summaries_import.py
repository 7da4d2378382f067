"""`pipeline import` of simulated boards writes every summary the data supports, with msprof's
headers and values equal to the simulator's truth."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import read_report, run_cli
from run_outputs import SUMMARY_HEADERS as HEADERS

from stages.simulator.workload import MODEL_ID, face_mask_ssd

pytestmark = pytest.mark.slow
ITERATIONS = 4


def _import(tmp_path: Path, chip: str, fmt: str = "csv") -> tuple[Path, dict[str, Any]]:
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", chip, "--iterations", str(ITERATIONS),
                     "--seed", "5")
    assert result.returncode == 0, result.stderr[-3000:]
    truth: dict[str, Any] = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    out = tmp_path / "out"
    if fmt == "csv":
        result = run_cli("import", truth["prof_dir"], "--output", str(out))
    else:  # `pipeline import`'s stages with the summary sink switched to JSON
        config = tmp_path / "import.yaml"
        config.write_text(f"""
run: {{name: json-import, output: "{out}"}}
stages:
  collect: {{type: collector, path: "{truth['prof_dir']}", follow: false}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], format: {fmt}}}
""")
        result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_report(out)["problems"] == []
    return out / "mindstudio_profiler_output", truth


def _table(folder: Path, module: str) -> list[dict[str, str]]:
    (path,) = folder.glob(f"{module}_[0-9]*.csv")
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        assert header == HEADERS[module].split(","), module
        return [dict(zip(header, (cell.rstrip("\t") for cell in row), strict=True)) for row in reader]


def _ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    assert len(frac) == 3, text  # µs with exactly three decimals
    return int(whole) * 1000 + int(frac)


def _check_common(folder: Path, truth: dict[str, Any], chip: str) -> None:
    tasks = _table(folder, "task_time")
    assert len(tasks) == sum(t["count"] for t in truth["op_statistic"])
    by_core: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in tasks:
        duration = _ns(row["task_time(us)"])
        assert _ns(row["task_stop(us)"]) - _ns(row["task_start(us)"]) == duration
        by_core[row["kernel_type"]][0] += 1
        by_core[row["kernel_type"]][1] += duration
    expected: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in truth["op_statistic"]:
        expected[t["core_type"]][0] += t["count"]
        expected[t["core_type"]][1] += t["total_ns"]
    assert by_core == expected
    kernels = Counter(op.kernel_name for op in face_mask_ssd(chip))  # type: ignore[arg-type]
    assert Counter(row["kernel_name"] for row in tasks) == {name: n * ITERATIONS for name, n in kernels.items()}
    starts = [(row["Device_id"], _ns(row["task_start(us)"])) for row in tasks]
    assert starts == sorted(starts)

    steps = _table(folder, "step_trace")
    assert [int(r["Iteration ID"]) for r in steps] == list(range(1, ITERATIONS + 1))
    assert [_ns(r["Iteration Time(us)"]) for r in steps] == truth["iteration_ns"]
    assert {r["Model ID"] for r in steps} == {str(MODEL_ID)}
    assert {r["FP Start(us)"] for r in steps} == {"N/A"}  # inference: no FP / BP keypoints
    # each iteration holds its tasks: model start before the first, model end after the last
    ends = [_ns(r["Iteration End(us)"]) for r in steps]
    for end, row in zip(ends, steps, strict=True):
        inside = [t for t in tasks if end - _ns(row["Iteration Time(us)"]) < _ns(t["task_start(us)"]) < end]
        assert len(inside) == len(tasks) // ITERATIONS

    tx = _table(folder, "msprof_tx")
    assert {row["Device_id"] for row in tx} == {"host"}
    ranges: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in tx:
        if row["event_type"] == "start/end":
            ranges[row["message"]][0] += 1
            ranges[row["message"]][1] += _ns(row["End_time(us)"]) - _ns(row["Start_time(us)"])
    assert ranges == {t["message"]: [t["count"], t["total_ns"]] for t in truth["msproftx"]}
    marks = [row for row in tx if row["event_type"] == "marker"]  # the simulator marks "frame N" per image
    assert [row["message"] for row in marks] == [f"frame {n}" for n in range(1, ITERATIONS + 1)]
    assert all(row["Start_time(us)"] == row["End_time(us)"] for row in marks)
    starts = [_ns(row["Start_time(us)"]) for row in tx]
    assert starts == sorted(starts)


def test_cloud_import_writes_every_summary_equal_to_the_truth(tmp_path: Path) -> None:
    folder, truth = _import(tmp_path, "cloud")
    names = {p.name.rsplit("_", 1)[0] for p in folder.glob("*.csv")}
    assert names == {"op_summary", "op_statistic", "api_statistic", "task_time", "step_trace", "msprof_tx", "aicpu",
                     "l2_cache"}
    _check_common(folder, truth, "cloud")
    extras = {op["op_name"]: op for op in truth["device_extras"]["ops"]}
    aicpu: dict[str, list[Any]] = defaultdict(list)
    for row in _table(folder, "aicpu"):
        aicpu[row["Node"]].append(row)
    assert set(aicpu) == {name for name, op in extras.items() if "aicpu" in op}
    for name, rows in aicpu.items():
        assert len(rows) == extras[name]["aicpu"]["count"]
        for column, field in (("Compute_time(us)", "compute_ns"), ("Memcpy_time(us)", "memcpy_ns"),
                              ("Task_time(us)", "task_ns"), ("Dispatch_time(us)", "dispatch_ns"),
                              ("Total_time(us)", "total_ns")):
            assert sum(_ns(r[column]) for r in rows) == extras[name]["aicpu"][field], (name, column)
    l2: dict[str, list[Any]] = defaultdict(list)
    for row in _table(folder, "l2_cache"):
        l2[row["Op Name"]].append(row)
    assert set(l2) == {name for name, op in extras.items() if "l2_cache" in op}
    for name, rows in l2.items():
        op = extras[name]["l2_cache"]
        assert len(rows) == op["count"]
        assert sum(float(r["Hit Rate"]) for r in rows) == pytest.approx(op["hit_rate_sum"], abs=1e-6 * len(rows))
        assert sum(float(r["Victim Rate"]) for r in rows) == pytest.approx(op["victim_rate_sum"],
                                                                           abs=1e-6 * len(rows))


def test_310_import_and_json_format(tmp_path: Path) -> None:
    folder, truth = _import(tmp_path, "mini")
    _check_common(folder, truth, "mini")
    assert not list(folder.glob("aicpu_*")) and not list(folder.glob("l2_cache_*"))  # the 310 writes neither
    json_folder, _ = _import(tmp_path / "again", "mini", fmt="json")
    for module in ("task_time", "step_trace", "msprof_tx"):
        (path,) = json_folder.glob(f"{module}_[0-9]*.json")
        rows = json.loads(path.read_text())
        assert list(rows[0]) == HEADERS[module].split(",")
        assert len(rows) == len(_table(folder, module))
