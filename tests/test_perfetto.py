"""A simulated run's timeline loaded into Perfetto's trace processor: nothing dropped, nothing lost.

Perfetto drops complete events that cross on one track and reads string ``ts`` as a double, so
touching tasks can cross after rounding (see stages/sinks/_tracks.py). The binary is found or
installed by tests/perfetto_tp.py; without it the test is skipped with the reason.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from perfetto_tp import trace_processor
from pipeline_runs import read_report, run_cli

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


def _csv(folder: Path, module: str) -> list[dict[str, str]]:
    with open(next((folder / "mindstudio_profiler_output").glob(f"{module}_*.csv")), newline="") as handle:
        return list(csv.DictReader(handle))


def test_trace_processor_keeps_every_event(shell: Path, run: Path, tmp_path: Path) -> None:
    [trace] = (run / "mindstudio_profiler_output").glob("msprof_*.json")
    events: list[dict[str, Any]] = json.loads(trace.read_text())
    complete = sum(1 for e in events if e["ph"] == "X")
    flow_starts = sum(1 for e in events if e["ph"] == "s")
    written = read_report(run)["stages"]["timeline"]["accounting"]
    assert complete == written["tasks_written"] + written["apis_written"] + written["tx_written"]
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
    assert int(flows["n"]) == flow_starts

    # Device slices grouped by op (name + task type → OP Type from op_summary) = op_statistic.
    op_types = {(r["Op Name"], r["Task Type"]): r["OP Type"] for r in _csv(run, "op_summary")}
    grouped: Counter[tuple[str, str]] = Counter()
    for row in query(shell, trace, HARDWARE_OPS, tmp_path):
        op_type = op_types.get((row["name"], row["task_type"]))
        if op_type is not None:
            grouped[(op_type, row["task_type"])] += int(row["n"])
    statistic = {(r["OP Type"], r["Core Type"]): int(r["Count"]) for r in _csv(run, "op_statistic")}
    assert dict(grouped) == statistic
