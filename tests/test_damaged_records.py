"""`pipeline import` of a board whose host api_event slice was damaged in place (bytes overwritten, the
records' magic intact): the damaged records are rejected with the field that gives them away, and
api_statistic keeps the figures of the records that are left (a damaged end time once made one
API row 15,678,261,577,479,726 µs long)."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pipeline_runs import read_report, run_cli

from stages.formats import raw

pytestmark = pytest.mark.slow
SEED = 7  # of the damage: the same bytes every run
LEVEL_REASON = "api_event: level is not a report level (damaged record)"
END_REASON = "api_event: end time outside the collection window (damaged record)"


def _damage(prof: Path) -> None:
    """100 random bytes from just past the magic of a record in the middle of the slice (the next two records
    lose theirs: the collector drops them), and random top bytes in the end time of an earlier launch."""
    (path,) = (prof / "host" / "data").glob("*api_event.data.slice_0")
    data = bytearray(path.read_bytes())
    size, rng = raw.API_EVENT.itemsize, random.Random(SEED)
    middle = len(data) // 2 // size * size
    data[middle + 2:middle + 102] = rng.randbytes(100)
    rows = np.frombuffer(bytes(data[:middle]), raw.API_EVENT)
    launches = np.flatnonzero((rows["level"] == raw.LEVEL_NODE) & (rows["end"] != raw.EVENT_FLAG))
    launch = int(launches[len(launches) // 2]) * size
    data[launch + 28:launch + 32] = rng.randbytes(4)  # the top half of its end time (bytes 24..32)
    path.write_bytes(bytes(data))


def _import(prof: Path, out: Path) -> dict[str, Any]:
    result = run_cli("import", str(prof), "--output", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    return read_report(out)


def _api_statistic(out: Path) -> dict[tuple[str, str], tuple[float, int]]:
    """(level, API name) → (total µs, count)."""
    (path,) = (out / "mindstudio_profiler_output").glob("api_statistic_[0-9]*.csv")
    with open(path, newline="") as handle:
        return {(row["Level"], row["API Name"]): (float(row["Time(us)"]), int(row["Count"]))
                for row in csv.DictReader(handle)}


def test_damaged_api_records_are_rejected_and_the_statistics_stay_sane(tmp_path: Path) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", "cloud", "--iterations", "30", "--rate", "max")
    assert result.returncode == 0, result.stderr[-3000:]
    prof = Path(json.loads((tmp_path / "board" / "simulator_truth.json").read_text())["prof_dir"])
    damaged = tmp_path / "damaged" / prof.name
    shutil.copytree(prof, damaged)
    _damage(damaged)

    clean_report = _import(prof, tmp_path / "clean")
    assert {name: stage["rejected"] for name, stage in clean_report["stages"].items() if stage["rejected"]} == {}
    report = _import(damaged, tmp_path / "out")
    assert report["stages"]["decode"]["rejected"] == {LEVEL_REASON: 1, END_REASON: 1}
    assert report["problems"] == []

    clean, after = _api_statistic(tmp_path / "clean"), _api_statistic(tmp_path / "out")
    assert after.keys() == clean.keys()  # no row for a level or name the damage made up
    for key, (total_us, count) in after.items():
        assert total_us <= clean[key][0] and clean[key][1] - 3 <= count <= clean[key][1], key
    launch_us, _ = after[("node", "launch")]
    assert launch_us > clean[("node", "launch")][0] * 0.9  # one launch of 2,070 less, not 4e16 µs more
