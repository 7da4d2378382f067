"""msprof-analyze (PyPI) reads our msprof_*.db as msprof's own: its compute_op_sum and cann_api_sum
recipes give the figures of our op_statistic and api_statistic."""

from __future__ import annotations

import csv
import shutil
import sqlite3
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from msprof_analyze_tool import msprof_analyze
from pipeline_runs import run_cli


@pytest.fixture(scope="module")
def tool() -> Path:
    found = msprof_analyze()
    if isinstance(found, str):
        pytest.skip(f"msprof-analyze unavailable: {found}")
    return found


@pytest.fixture(scope="module")
def cluster(tool: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A one-rank cluster folder: the simulated PROF dir with our database at its root, as msprof leaves it."""
    work = tmp_path_factory.mktemp("analyze")
    assert run_cli("simulate", str(work / "board"), "--chip", "910b", "--iterations", "8").returncode == 0
    [prof] = (work / "board").glob("PROF_*")
    result = run_cli("import", str(prof), "--output", str(work / "ours"))
    assert result.returncode == 0, result.stderr[-2000:]
    rank = work / "cluster" / prof.name
    shutil.copytree(prof, rank)
    [database] = (work / "ours").glob("msprof_*.db")
    shutil.copy(database, rank / database.name)
    for recipe in ("compute_op_sum", "cann_api_sum"):
        run = subprocess.run([str(tool), "cluster", "-d", str(work / "cluster"), "-m", recipe],
                             capture_output=True, text=True, timeout=600, cwd=work)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert "analysis finished" in run.stdout + run.stderr, run.stdout[-2000:]
    return work / "cluster" / "cluster_analysis_output" / "cluster_analysis.db", work / "ours"


def _csv(folder: Path, kind: str) -> list[dict[str, str]]:
    [path] = (folder / "mindstudio_profiler_output").glob(f"{kind}_*.csv")
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _ns(us_text: str) -> int:
    return int(Decimal(us_text) * 1000)


def test_compute_op_sum_equals_our_op_statistic(cluster: tuple[Path, Path]) -> None:
    analysis, ours = cluster
    with sqlite3.connect(analysis) as db:
        theirs = {(op_type, task_type): (count, int(total), int(low), int(high)) for op_type, task_type, count, total,
                  low, high in db.execute("SELECT OpType, TaskType, Count, SumNs, MinNs, MaxNs "
                                          "FROM ComputeOpPerRankStatsByOpType WHERE Rank = 0")}
    mine = {(row["OP Type"], row["Core Type"]): (int(row["Count"]), _ns(row["Total Time(us)"]),
                                                  _ns(row["Min Time(us)"]), _ns(row["Max Time(us)"]))
            for row in _csv(ours, "op_statistic")}
    assert len(mine) >= 10
    assert theirs == mine


def test_cann_api_sum_equals_our_api_statistic(cluster: tuple[Path, Path]) -> None:
    analysis, ours = cluster
    with sqlite3.connect(analysis) as db:
        theirs = {name: (count, int(total), int(low), int(high)) for name, count, total, low, high in
                  db.execute("SELECT name, totalCount, totalTimeNs, minNs, maxNs FROM CannApiSum")}
    mine: dict[str, tuple[int, int, int, int]] = {}
    for row in _csv(ours, "api_statistic"):  # msprof-analyze groups by name across levels
        count, total, low, high = int(row["Count"]), _ns(row["Time(us)"]), _ns(row["Min(us)"]), _ns(row["Max(us)"])
        if row["API Name"] in mine:
            was = mine[row["API Name"]]
            count, total, low, high = was[0] + count, was[1] + total, min(was[2], low), max(was[3], high)
        mine[row["API Name"]] = (count, total, low, high)
    assert len(mine) >= 10
    assert theirs == mine
