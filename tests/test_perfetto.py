"""A simulated run's timeline loaded into Perfetto's trace processor: nothing dropped, nothing lost.

Perfetto drops complete events that cross on one track and reads string ``ts`` as a double, so
touching tasks can cross after rounding (see stages/sinks/_tracks.py). The binary is found or
installed by tests/perfetto_tp.py; without it the test is skipped with the reason.
"""

from __future__ import annotations

import csv
import io
import json
import random
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from perfetto_tp import trace_processor
from pipeline_runs import read_report, run_cli

from pipeline.stage import StageContext
from stages.schema import pack_rows
from stages.sinks.timeline import TimelineSink

pytestmark = pytest.mark.slow

HARDWARE_OPS = """
select s.name as name, extract_arg(s.arg_set_id, 'args.Task Type') as task_type, count(*) as n
from slice s join thread_track tt on s.track_id = tt.id join thread using (utid) join process p using (upid)
where p.name = 'Ascend Hardware' group by 1, 2
"""


@pytest.fixture(scope="module")
def shell() -> Path:
    found = trace_processor()
    if isinstance(found, str):
        pytest.skip(f"no trace_processor_shell: {found}")
    return found


def query(shell: Path, trace: Path, sql: str, tmp: Path) -> list[dict[str, str]]:
    script = tmp / "query.sql"
    script.write_text(sql)
    result = subprocess.run([str(shell), "-q", str(script), str(trace)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(result.stdout)))


@pytest.fixture(scope="module", params=["cloud", "910b"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"perfetto-{request.param}")
    simulated = run_cli("simulate", str(root / "board"), "--chip", request.param, "--iterations", "30")
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    prof = json.loads((root / "board" / "simulator_truth.json").read_text())["prof_dir"]
    result = run_cli("import", prof, "--output", str(root / "out"))
    assert result.returncode == 0, result.stderr[-2000:]
    return root / "out"


def test_training_step_trace_layer_imports_clean(shell: Path, tmp_path: Path) -> None:
    """Iterations with FP/BP, all-reduces and Data_aug Bound flows (the simulator infers: no FP/BP)."""
    sink = TimelineSink(TimelineSink.Config(timestamp="20240101000000"),
                        StageContext(stage_id="timeline", run_id="t", output_dir=tmp_path))
    sink.open()
    sink.write_batch(pack_rows("run_info", [[{"pid": 4242}]], "tasks"))
    rng, rows = random.Random(1), []
    for model in (1, 7):
        end = 1_704_161_511_000_000_000
        for n in range(1, 40):
            start = end + (rng.randrange(0, 50_000) if n % 5 == 0 else 0)  # a gap now and then
            fp = start + rng.randrange(1_000, 900_000)
            bp = fp + rng.randrange(500_000, 900_000)
            end = bp + rng.randrange(100, 300_000)
            reduces = [[bp + 10, bp + 60_000], [bp + 40_000, bp + 90_000]]
            rows.append([0, model, n, fp, bp, end, end - start, bp - fp, end - bp, fp - start if n > 1 else None,
                         reduces])
    sink.write_batch(pack_rows("step_trace", rows, "tasks"))
    sink.close()
    [trace] = sink.paths
    events = json.loads(trace.read_text())
    assert query(shell, trace, "select name, value from stats where value > 0 "
                               "and severity in ('error', 'data_loss')", tmp_path) == []
    [slices] = query(shell, trace, "select count(*) as n from slice", tmp_path)
    assert int(slices["n"]) == sum(1 for e in events if e["ph"] == "X") == sink.accounting()["step_trace_written"]
    [flows] = query(shell, trace, "select count(*) as n from flow", tmp_path)
    # msprof starts iteration n's flow at BP end + Data Aug Bound / 2 and steps it at n + 1's FP start; a step
    # that would come before its start is left out, and so is the first iteration's.
    stepped = sum(1 for before, after in zip(rows, rows[1:], strict=False)
                  if before[1] == after[1] and before[4] + (before[9] or 0) // 2 <= after[3])
    assert 0 < stepped < len(rows) - 2
    assert int(flows["n"]) == sum(1 for e in events if e["ph"] == "t") == stepped
    [fp_bp] = query(shell, trace, "select count(*) as n from slice where category = 'FP_BP Time'", tmp_path)
    assert int(fp_bp["n"]) == len(rows)


def _csv(folder: Path, module: str) -> list[dict[str, str]]:
    with open(next((folder / "mindstudio_profiler_output").glob(f"{module}_*.csv")), newline="") as handle:
        return list(csv.DictReader(handle))


def test_trace_processor_keeps_every_event(shell: Path, run: Path, tmp_path: Path) -> None:
    [trace] = (run / "mindstudio_profiler_output").glob("msprof_*.json")
    events: list[dict[str, Any]] = json.loads(trace.read_text())
    complete = sum(1 for e in events if e["ph"] == "X")
    flow_starts = sum(1 for e in events if e["ph"] == "s" and e["cat"] == "HostToDevice")
    flow_steps = sum(1 for e in events if e["ph"] == "t")  # step trace's Data_aug Bound (training runs only)
    written = read_report(run)["stages"]["timeline"]["accounting"]
    assert written["step_trace_written"] > 0  # one Iteration per inference here (no FP/BP keypoints)
    assert complete == (written["tasks_written"] + written["apis_written"] + written["tx_written"]
                        + written["step_trace_written"])
    assert flow_starts == written["flows_written"] > 0

    problems = query(shell, trace, "select name, value from stats where value > 0 "
                                   "and severity in ('error', 'data_loss')", tmp_path)
    assert problems == []
    [dropped] = query(shell, trace, "select value from stats "
                                    "where name = 'slice_drop_overlapping_complete_event'", tmp_path)
    assert dropped["value"] == "0"
    [slices] = query(shell, trace, "select count(*) as n from slice", tmp_path)
    assert int(slices["n"]) == complete
    [flows] = query(shell, trace, "select count(*) as n from flow", tmp_path)
    assert int(flows["n"]) == flow_starts + flow_steps
    # The step trace layer: one Iteration slice per step_trace row, on the model's thread.
    iterations = query(shell, trace, "select s.name as name, s.dur as dur, t.name as thread from slice s "
                                     "join thread_track tt on s.track_id = tt.id join thread t using (utid) "
                                     "where s.category = 'Iteration Time'", tmp_path)
    steps = _csv(run, "step_trace")
    assert sorted((f"Iteration {r['Iteration ID']}", f"Step Trace(Model ID:{r['Model ID']})") for r in steps) \
        == sorted((r["name"], r["thread"]) for r in iterations)

    # Device slices grouped by op (name + task type → OP Type from op_summary) = op_statistic.
    op_types = {(r["Op Name"], r["Task Type"]): r["OP Type"] for r in _csv(run, "op_summary")}
    grouped: Counter[tuple[str, str]] = Counter()
    for row in query(shell, trace, HARDWARE_OPS, tmp_path):
        op_type = op_types.get((row["name"], row["task_type"]))
        if op_type is not None:
            grouped[(op_type, row["task_type"])] += int(row["n"])
    statistic = {(r["OP Type"], r["Core Type"]): int(r["Count"]) for r in _csv(run, "op_statistic")}
    assert dict(grouped) == statistic
