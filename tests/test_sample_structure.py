"""Our outputs next to real exported outputs (../shared/samples): same kinds, names, keys, units."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import run_cli, shared_dir

pytestmark = pytest.mark.slow

# torch_npu's kernel_details renames op_summary columns.
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
    """Args keys of API, task and tx events (step trace events, which carry a ``cat``, are left out)."""
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    keys: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for event in events:
        if event.get("ph") == "X" and event["pid"] in names and "cat" not in event:
            keys[names[event["pid"]]].add(tuple(sorted(event.get("args", {}))))
    return keys


def test_timeline_matches_cann7_trace_view(imported: Path) -> None:
    sample = _events(shared_dir() / "samples" / "mstt_torch_npu_outputs" / "trace_view.json")
    ours = _events(next((imported / "mindstudio_profiler_output").glob("msprof_*.json")))
    sample_keys, our_keys = _args_keys_by_process(sample), _args_keys_by_process(ours)
    # CANN API events carry exactly the sample's args.
    assert our_keys["CANN"] == sample_keys["CANN"]
    # Device tasks: CANN 7 said "Stream Id" where current msprof says "Physic Stream Id".
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


CANN6_TIMELINE = ("mindinsight_msprof_cann6/PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/timeline/"
                  "msprof_0_2_1.json")
TX_ARGS = {"Category", "Payload_type", "Payload_value", "Message_type", "event_type"}  # msprof's timeline
META_KINDS = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def _ns(us: str) -> int:
    whole, _, frac = us.partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def _layout(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per process name: its label, sort index and {tid: (thread name, thread sort index)}."""
    meta: dict[int, dict[str, Any]] = defaultdict(lambda: {"threads": defaultdict(dict)})
    for event in events:
        if event.get("ph") != "M":
            continue
        entry, value = meta[event["pid"]], next(iter(event["args"].values()))
        if event["name"].startswith("process_"):
            entry[event["name"]] = value
        else:
            entry["threads"][event["tid"]][event["name"]] = value
    return {entry["process_name"]: entry for entry in meta.values() if "process_name" in entry}


@pytest.mark.parametrize("sample", [CANN6_TIMELINE, "mstt_torch_npu_outputs/trace_view.json"])
def test_timeline_layout_matches_real_exports(imported: Path, sample: str) -> None:
    real = _events(shared_dir() / "samples" / sample)
    ours = _events(next((imported / "mindstudio_profiler_output").glob("msprof_*.json")))
    assert {e["name"] for e in ours if e["ph"] == "M"} == {e["name"] for e in real if e["ph"] == "M"} == META_KINDS
    for layout in (_layout(real), _layout(ours)):
        hardware, cann = layout["Ascend Hardware"], layout["CANN"]
        assert hardware["process_labels"].startswith("NPU") and cann["process_labels"] == "CPU"
        assert cann["process_sort_index"] < hardware["process_sort_index"]  # host rows above the device's
        streams = {tid: t for tid, t in hardware["threads"].items() if t["thread_name"].startswith("Stream")}
        assert streams and all(t == {"thread_name": f"Stream {tid}", "thread_sort_index": tid}
                               for tid, t in streams.items())
        assert cann["threads"] and all(t["thread_name"] == f"Thread {tid}" for tid, t in cann["threads"].items())
    # Device task args: what CANN 6 and 7 both carry is in ours (stream id under today's name).
    shared_keys = {"Task Type", "Task Id", "Batch Id"}
    real_task = _args_keys_by_process(real)["Ascend Hardware"]
    assert any(shared_keys | {"Stream Id"} <= set(keys) for keys in real_task)
    our_task = _args_keys_by_process(ours)["Ascend Hardware"]
    assert all(shared_keys | {"Physic Stream Id"} <= set(keys) for keys in our_task)


def test_flows_and_tx_events_as_exported(imported: Path) -> None:
    real = _events(shared_dir() / "samples" / "mstt_torch_npu_outputs" / "trace_view.json")
    ours = _events(next((imported / "mindstudio_profiler_output").glob("msprof_*.json")))
    for events in (real, ours):
        slices: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for event in events:
            if event["ph"] == "X":
                start = _ns(event["ts"])
                slices[(event["pid"], event["tid"])].append((start, start + _ns(str(event["dur"]))))
        flows = [e for e in events if e["ph"] in "sf" and e.get("cat") == "HostToDevice"]
        assert flows
        by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for flow in flows:
            assert flow["name"] == f"HostToDevice{flow['id']}" and flow["id"].isdigit()
            at, spans = _ns(flow["ts"]), slices[(flow["pid"], flow["tid"])]
            if flow["ph"] == "f":  # the device end sits on its task's start, the host start inside its API
                assert any(start == at for start, _ in spans)
            else:
                assert any(start <= at <= end for start, end in spans)
            by_id[flow["id"]].append(flow)
        for pair in by_id.values():  # one start on the host, one end ("bp": "e") on the device
            assert sorted(e["ph"] for e in pair) == ["f", "s"]
            assert [e.get("bp") for e in pair if e["ph"] == "f"] == ["e"]
    real_keys = {e["ph"]: set(e) for e in real if e["ph"] in "sf" and e.get("cat") == "HostToDevice"}
    assert {e["ph"]: set(e) for e in ours if e["ph"] in "sf"} == real_keys
    # MsprofTx ranges: named by their message, msprof's args, on the application's CPU process.
    tx_pids = {e["pid"] for e in ours if e["ph"] == "M" and e["name"] == "process_sort_index"
               and e["args"]["sort_index"] == 6}
    tx = [e for e in ours if e["ph"] == "X" and e["pid"] in tx_pids]
    assert tx and all(set(e["args"]) == TX_ARGS and e["name"] for e in tx)
    names = Counter(e["name"] for e in tx)
    truth = json.loads((imported.parent / "board" / "simulator_truth.json").read_text())["msproftx"]
    assert truth and all(names[range_["message"]] == range_["count"] for range_ in truth)


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


def test_step_trace_layer_as_in_the_cann6_export(imported: Path) -> None:
    """CANN 6 put the step trace thread on the Ascend Hardware process too; it wrote times in ns where
    current msprof writes µs. Our Iterations are the step_trace summary's rows."""
    real = _events(shared_dir() / "samples" / CANN6_TIMELINE)
    ours = _events(next((imported / "mindstudio_profiler_output").glob("msprof_*.json")))
    for events in (real, ours):
        hardware = _layout(events)["Ascend Hardware"]
        step_threads = {tid: t["thread_name"] for tid, t in hardware["threads"].items()
                        if t["thread_name"].startswith("Step Trace")}
        assert step_threads and all(re.fullmatch(r"Step Trace\(Model ID:\d+\)", name) for name in step_threads.values())
    real_iterations = [e for e in real if e["ph"] == "X" and e.get("cat") == "Iteration Time"]
    our_iterations = [e for e in ours if e["ph"] == "X" and e.get("cat") == "Iteration Time"]
    assert {tuple(k.replace("(ns)", "(us)") for k in e["args"]) for e in real_iterations} \
        == {tuple(e["args"]) for e in our_iterations}
    assert all(re.fullmatch(r"Iteration \d+", e["name"]) for e in real_iterations + our_iterations)
    with open(next((imported / "mindstudio_profiler_output").glob("step_trace_*.csv")), newline="") as handle:
        summary = list(csv.DictReader(handle))
    assert sorted((f"Iteration {r['Iteration ID']}", f"Step Trace(Model ID:{r['Model ID']})",
                   r["Iteration End(us)"].strip(), float(r["Iteration Time(us)"])) for r in summary) == sorted(
        (e["name"], _layout(ours)["Ascend Hardware"]["threads"][e["tid"]]["thread_name"], e["args"]["Iteration End"],
         e["args"]["Iteration Time(us)"]) for e in our_iterations)
