"""Bad input gets one clear line and no traceback; garbage in raw data is counted, not fatal."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from pipeline_runs import read_report, run_cli

NO_TRACEBACK = "Traceback"


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_import_missing_directory(tmp_path: Path) -> None:
    result = run_cli("import", str(tmp_path / "nope"), "--output", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: import: {tmp_path / 'nope'} is not a directory "
        "(pass a PROF_… directory written by CANN or the simulator)"]


@pytest.mark.parametrize("chip", ["910b", "v6"])
def test_simulating_a_stars_chip_in_the_legacy_layout_is_one_line(tmp_path: Path, chip: str) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", chip, "--layout", "legacy")
    assert result.returncode == 2 and NO_TRACEBACK not in result.stderr
    assert _error_lines(result.stderr) == [f"error: --chip {chip} is not supported with --layout legacy (the legacy "
                                           "layout (CANN 5/6 files) predates the STARS chips: use --layout current)"]
    assert not (tmp_path / "board").exists()


@pytest.mark.parametrize(("flag", "value", "expected"), [
    ("--iterations", "-5", "error: --iterations must be 0 or more, not -5"),
    ("--slice-bytes", "10", "error: --slice-bytes must be at least 1024, not 10"),
])
def test_simulate_refuses_values_out_of_range_in_one_line(tmp_path: Path, flag: str, value: str,
                                                         expected: str) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), flag, value)
    assert result.returncode == 2 and NO_TRACEBACK not in result.stderr
    assert result.stderr.strip().splitlines() == [expected]
    assert not (tmp_path / "board").exists()


REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [
    ("run", str(REPO / "configs" / "live.yaml"), "--live", "off", "--output", "{path}"),
    ("simulate", "{path}"),
    ("keys", "generate", "{path}"),
    ("acl-json", "{path}"),
])
@pytest.mark.parametrize("in_the_way", ["a file", "under /proc"])
def test_an_output_path_that_cannot_be_written_is_one_line(tmp_path: Path, command: tuple[str, ...],
                                                           in_the_way: str) -> None:
    if in_the_way == "a file":
        path = tmp_path / "notes.txt"
        path.write_text("kept\n")
        if command[0] == "acl-json":  # it writes a file: the folder above it is the one in the way
            path = path / "acl.json"
    else:
        path = Path("/proc/pipeline-test/out")
    result = run_cli(*(part.replace("{path}", str(path)) for part in command), timeout=60)
    assert result.returncode == 2, result.stderr
    assert NO_TRACEBACK not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(" in lines[0], lines
    if in_the_way == "a file":
        assert (tmp_path / "notes.txt").read_text() == "kept\n"


def test_run_with_missing_prof_dir_names_the_collector(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"""
run: {{name: missing, output: "{tmp_path / 'out'}"}}
stages:
  collect: {{type: collector, path: "{tmp_path / 'absent'}", wait_s: 4}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
""")
    result = run_cli("run", str(config), "--live", "off", timeout=120)
    assert result.returncode == 2  # the input, as for a bad config: not a failure of the pipeline
    assert '"event": "waiting for a PROF_\\u2026 directory"' in result.stderr  # said while it waits, once
    assert result.stderr.count("waiting for a PROF_") == 1
    assert NO_TRACEBACK not in result.stderr
    errors = _error_lines(result.stderr)
    assert errors == [f"error: collector: {tmp_path / 'absent'} does not exist (point the collector's path "
                      "(or PROF_DIR) at a CANN profiling output directory)"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("stages: {c: {type: collector}\n", "invalid YAML"),
        ("stages:\n  c: {type: not_a_stage}\n", "stages.c: unknown stage type 'not_a_stage'"),
        ("stages:\n  c: {type: collector, pth: x}\n", "stages.c.pth: unknown key"),
        ("stages:\n  c: {type: collector, follow: maybe}\n", "stages.c.follow: input should be a valid boolean"),
    ],
)
def test_run_with_bad_config_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 2
    assert NO_TRACEBACK not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and str(config) in lines[0]


def _slices(folder: Path, base: str) -> list[Path]:
    found = [p for p in folder.glob(f"{base}.slice_*") if not p.name.endswith(".done")]
    return sorted(found, key=lambda p: int(p.name.rsplit("_", 1)[1]))


def test_garbage_appended_to_slices_is_counted_and_the_rest_decoded(tmp_path: Path) -> None:
    # Slices of 40 KiB end on record boundaries of every device kind (64, 128, 40 bytes).
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", "cloud", "--iterations", "40",
                     "--rate", "max", "--slice-bytes", str(64 * 128 * 5))
    assert result.returncode == 0, result.stderr
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    prof = Path(truth["prof_dir"])
    host_slice = _slices(prof / "host" / "data", "unaging.api_event.data")[0]
    device_slice = _slices(prof / "device_0" / "data", "hwts.data.0")[0]
    garbage = bytes(range(7, 7 + 45))
    for path in (host_slice, device_slice):
        with open(path, "ab") as handle:
            handle.write(garbage)

    result = run_cli("import", str(prof), "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert NO_TRACEBACK not in result.stderr
    report = read_report(tmp_path / "out")
    collector = report["stages"]["collect"]
    assert collector["accounting"]["garbage_bytes"] == 2 * len(garbage)
    assert sum(collector["rejected"].values()) == 2 * len(garbage)
    assert collector["accounting"]["records_collected"] == truth["records_total"]
    assert report["stages"]["decode"]["accounting"]["decoded"] == truth["records_total"]
    kept_aside = list((tmp_path / "out" / "rejected").glob("collect.*"))
    assert sum(p.stat().st_size for p in kept_aside) == 2 * len(garbage)

    out_csv = next((tmp_path / "out" / "mindstudio_profiler_output").glob("op_statistic_*.csv"))
    with open(out_csv, newline="") as handle:
        counts = {(r["OP Type"], r["Core Type"]): int(r["Count"]) for r in csv.DictReader(handle)}
    assert counts == {(t["op_type"], t["core_type"]): t["count"] for t in truth["op_statistic"]}


@pytest.mark.parametrize("damaged", ["device_0/info.json.0", "device_0/sample.json"])
def test_a_damaged_control_file_fails_the_run_by_name_and_the_rest_is_written(tmp_path: Path, damaged: str) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", "cloud", "--iterations", "20", "--rate", "max")
    assert result.returncode == 0, result.stderr
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    prof = Path(truth["prof_dir"])
    spoilt = prof / damaged
    spoilt.write_bytes(bytes(range(200, 256)) * 5)  # not JSON, not the size its .done gives

    out = tmp_path / "out"
    result = run_cli("import", str(prof), "--output", str(out))
    assert result.returncode == 1 and NO_TRACEBACK not in result.stderr
    errors = _error_lines(result.stderr)
    assert errors[0].startswith(f"error: collector: {spoilt} is damaged or cut short")
    report = read_report(out)
    assert report["state"] == "failed" and report["problems"] == [line.removeprefix("error: ") for line in errors]
    assert all(final["ok"] for final in report["stages"].values())  # every stage drained: nothing else lost
    collector = report["stages"]["collect"]
    summaries = out / "mindstudio_profiler_output"
    assert list(summaries.glob("api_statistic_*.csv"))  # the host's tables are whole
    if damaged.endswith("info.json.0"):  # no chip: the device's data cannot be read at all
        assert len(errors) == 2 and "device 0 is missing from the outputs" in errors[1]
        device_bytes = sum(p.stat().st_size for p in (prof / "device_0" / "data").iterdir()
                           if not p.name.endswith(".done"))
        assert collector["rejected"]["device data not read: no readable info.json.N"] == device_bytes
        assert not list(summaries.glob("op_statistic_*.csv"))  # a table without rows has no file
    else:  # no PMU event list: the tasks are there, their PMU columns are not
        assert len(errors) == 1
        (op_summary,) = summaries.glob("op_summary_*.csv")
        header = op_summary.read_text().splitlines()[0]
        assert "Task Duration(us)" in header and "aicore_time(us)" not in header
    assert collector["rejected"]["control file damaged or cut short at the end of the job"] == 280
