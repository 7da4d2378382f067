"""Our outputs next to real exported outputs (../shared/samples): same kinds, names, keys, units."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import run_cli, shared_dir

pytestmark = pytest.mark.slow

# torch_npu's kernel_details renames op_summary columns (spec §3.2).
KERNEL_DETAILS_NAMES = {"Name": "Op Name", "Type": "OP Type", "Accelerator Core": "Task Type",
                        "Start Time(us)": "Task Start Time(us)", "Duration(us)": "Task Duration(us)",
                        "Wait Time(us)": "Task Wait Time(us)"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("samples")
    assert run_cli("simulate", str(root / "board"), "--chip", "cloud", "--iterations", "5").returncode == 0
    prof = json.loads((root / "board" / "simulator_truth.json").read_text())["prof_dir"]
    result = run_cli("import", prof, "--output", str(root / "out"))
    assert result.returncode == 0, result.stderr[-2000:]
    return root / "out"


def _events(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    events: list[dict[str, Any]] = data if isinstance(data, list) else data["traceEvents"]
    return events


def _args_keys_by_process(events: list[dict[str, Any]]) -> dict[str, set[tuple[str, ...]]]:
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    keys: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for event in events:
        if event.get("ph") == "X" and event["pid"] in names:
            keys[names[event["pid"]]].add(tuple(sorted(event.get("args", {}))))
    return keys


def test_timeline_matches_cann7_trace_view(imported: Path) -> None:
    sample = _events(shared_dir() / "samples" / "mstt_torch_npu_outputs" / "trace_view.json")
    ours = _events(next((imported / "mindstudio_profiler_output").glob("msprof_*.json")))
    sample_keys, our_keys = _args_keys_by_process(sample), _args_keys_by_process(ours)
    # CANN API events carry exactly the sample's args.
    assert our_keys["CANN"] == sample_keys["CANN"]
    # Device tasks: CANN 7 said "Stream Id" where current msprof says "Physic Stream Id" (spec §3.3).
    sample_hw = {tuple(sorted(k.replace("Stream Id", "Physic Stream Id") for k in keys))
                 for keys in sample_keys["Ascend Hardware"]}
    assert our_keys["Ascend Hardware"] == sample_hw
    # Event kinds and the µs-string time base.
    assert {"M", "X", "s", "f"} <= {e["ph"] for e in ours}
    for event in ours:
        if event["ph"] == "X":
            assert isinstance(event["ts"], str) and re.fullmatch(r"\d{16}\.\d{3}", event["ts"])
            assert isinstance(event["dur"], (int, float))
    flows = [e for e in ours if e["ph"] in ("s", "f")]
    assert flows and {e["cat"] for e in flows} == {"HostToDevice"}
    threads = {e["args"]["name"] for e in ours if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert any(name.startswith("Stream ") for name in threads) and any(name.startswith("Thread ") for name in threads)


def test_op_summary_header_matches_cann8_kernel_details(imported: Path) -> None:
    with open(shared_dir() / "samples" / "mstt_torch_npu_outputs" / "kernel_details_cann8_pipeutil.csv") as handle:
        sample_header = next(csv.reader(handle))
    with open(next((imported / "mindstudio_profiler_output").glob("op_summary_*.csv"))) as handle:
        ours = next(csv.reader(handle))
    # The descriptive columns, renamed back to msprof's, appear in the same order in ours.
    descriptive = [KERNEL_DETAILS_NAMES.get(c, c) for c in sample_header[1:sample_header.index("Context ID") + 1]]
    assert [c for c in ours if c in descriptive] == descriptive
    # PMU columns: the sample's aic_ names (a 910B with AIV) are ours without the prefix, same units.
    sample_pmu = {c.removeprefix("aic_") for c in sample_header if c.startswith("aic_")}
    our_pmu = set(ours[ours.index("Context ID") + 1:])
    assert {"total_cycles", "mac_time(us)", "mac_ratio", "scalar_time(us)", "mte2_ratio", "icache_miss_rate"} \
        <= sample_pmu & our_pmu


def test_op_statistic_units_and_sort(imported: Path) -> None:
    with open(next((imported / "mindstudio_profiler_output").glob("op_statistic_*.csv"))) as handle:
        rows = list(csv.DictReader(handle))
    totals = [float(r["Total Time(us)"]) for r in rows]
    assert totals == sorted(totals, reverse=True)
    assert sum(float(r["Ratio(%)"]) for r in rows) == pytest.approx(100, abs=0.05)
    for row in rows:
        assert float(row["Min Time(us)"]) <= float(row["Avg Time(us)"]) <= float(row["Max Time(us)"])


def test_task_time_names_and_units_match_real_exports(imported: Path) -> None:
    """Task types from the vocabulary real exports use (CANN 6 task_time timeline, torch_npu kernel_details);
    time points formatted and TAB-guarded as kernel_details' start column; durations in µs = stop − start."""
    timeline = shared_dir() / "samples" / "mindinsight_msprof_cann6" / \
        "PROF_000001_20230818142704322_COJGGGCANRMICFBC" / "device_0" / "timeline"
    vocabulary = {e["args"]["Task Type"] for path in timeline.glob("task_time_*.json") for e in _events(path)
                  if e.get("ph") == "X"}
    kernel_details = shared_dir() / "samples" / "mstt_torch_npu_outputs" / "kernel_details_cann8_pipeutil.csv"
    with open(kernel_details, newline="") as handle:
        sample_rows = list(csv.DictReader(handle))
    vocabulary |= {row["Accelerator Core"] for row in sample_rows}
    sample_start = sample_rows[0]["Start Time(us)"]
    assert re.fullmatch(r"\d{16}\.\d{3}\t", sample_start)  # the TAB quirk, in a real file
    with open(next((imported / "mindstudio_profiler_output").glob("task_time_*.csv")), newline="") as handle:
        ours = list(csv.DictReader(handle))
    assert ours and {row["kernel_type"] for row in ours} <= vocabulary
    for row in ours:
        assert re.fullmatch(r"\d{16}\.\d{3}\t", row["task_start(us)"]) and row["task_stop(us)"].endswith("\t")
        start, stop, duration = (int(row[c].strip().replace(".", "")) for c in  # ns: floats lose digits here
                                 ("task_start(us)", "task_stop(us)", "task_time(us)"))
        assert duration == stop - start
