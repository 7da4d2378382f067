"""A simulated board of several devices: one app process, one PROF_ directory, a device_N/ folder per device and
one host/ folder holding every device's host records in the order they were reported."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pipeline_runs import read_report, run_cli, stage_config

from stages.formats import raw
from stages.simulator import simulate
from stages.simulator.board import APP_TID
from stages.simulator.run import MAX_DEVICES

START_NS = 1_700_000_000_123_456_789
SLICE = 8100  # not a multiple of any record size: device records straddle slices
DEVICES = 3
CONTROL_FILES = ("info.json.{n}", "sample.json", "start_info.{n}", "dev_start.log.{n}", "host_start.log.{n}",
                 "end_info.{n}")
HOST_RECORDS = {"unaging.api_event.data": raw.API_EVENT, "unaging.compact.task_track": raw.TASK_TRACK,
                "unaging.compact.node_basic_info": raw.NODE_BASIC_INFO,
                "unaging.additional.tensor_info": raw.TENSOR_INFO, "unaging.additional.msproftx": raw.MSPROFTX}
DEVICE_SLICE = re.compile(r"\.data\.(\d+)\.slice_\d+$")
NAME_DICTIONARIES = ("unaging.additional.hash_dic", "unaging.additional.type_info_dic")


def _board(out: Path, chip: str = "cloud", devices: int = DEVICES, **kw: Any) -> tuple[Path, dict[str, Any]]:
    prof = simulate(out, chip=chip, iterations=4, rate="max", seed=11, slice_bytes=SLICE, start_time_ns=START_NS,
                    devices=devices, **kw)
    return prof, json.loads((out / "simulator_truth.json").read_text())


def _stream(data_dir: Path, base: str) -> bytes:
    files = [f for f in data_dir.glob(f"{base}.slice_*") if not f.name.endswith(".done")]
    files.sort(key=lambda p: int(p.name.rsplit("_", 1)[1]))
    return b"".join(f.read_bytes() for f in files)


def _records(prof: Path, base: str) -> np.ndarray:
    return np.frombuffer(_stream(prof / "host" / "data", base), HOST_RECORDS[base])


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def boards(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, dict[str, Any]]]:
    """The same job on one device and on three."""
    return {n: _board(tmp_path_factory.mktemp(f"devices{n}"), devices=n) for n in (1, DEVICES)}


def test_each_device_has_its_folder_control_files_and_clock(boards: dict[int, tuple[Path, dict[str, Any]]]) -> None:
    prof, _ = boards[DEVICES]
    assert sorted(p.name for p in prof.iterdir()) == [*(f"device_{n}" for n in range(DEVICES)), "host"]
    counters = set()
    for n in range(DEVICES):
        device = prof / f"device_{n}"
        expected = {name.format(n=n) for name in CONTROL_FILES}
        assert {p.name for p in device.iterdir() if p.is_file()} == expected | {f"{name}.done" for name in expected}
        slices = [p.name for p in (device / "data").iterdir() if not p.name.endswith(".done")]
        assert slices and all(DEVICE_SLICE.search(name)[1] == str(n) for name in slices)  # type: ignore[index]
        info = json.loads((device / f"info.json.{n}").read_text())
        assert info["devices"] == str(n) and [d["id"] for d in info["DeviceInfo"]] == [n]
        sample = json.loads((device / "sample.json").read_text())
        assert sample["devices"] == str(n) and sample["result_dir"] == f"{device}/"
        counters.add((device / f"dev_start.log.{n}").read_text())
    assert len(counters) == DEVICES  # each device's syscnt started at its own moment
    assert not any(DEVICE_SLICE.search(p.name) for p in (prof / "host" / "data").iterdir())


def test_host_files_interleave_every_device_in_the_order_reported(
        boards: dict[int, tuple[Path, dict[str, Any]]]) -> None:
    prof, truth = boards[DEVICES]
    tracks = _records(prof, "unaging.compact.task_track")
    threads = {int(t): set(tracks["device_id"][tracks["thread_id"] == t].tolist())
               for t in np.unique(tracks["thread_id"])}
    assert threads == {APP_TID + n: {n} for n in range(DEVICES)}  # each device's loop is its own thread
    assert (np.diff(tracks["timestamp"].astype(np.int64)) >= 0).all()
    per_device = Counter(tracks["device_id"].tolist())
    assert per_device == {d["device_id"]: sum(r["count"] for r in d["op_statistic"]) for d in truth["devices"]}
    apis = _records(prof, "unaging.api_event.data")
    reported = np.where(apis["end"] == raw.EVENT_FLAG, apis["begin"], apis["end"]).astype(np.int64)
    assert (np.diff(reported) >= 0).all()
    assert set(apis["thread_id"].tolist()) == {APP_TID + n for n in range(DEVICES)}
    switches = np.count_nonzero(np.diff(apis["thread_id"].astype(np.int64)))
    assert switches > 10 * DEVICES  # interleaved, not one device after another
    one, _ = boards[1]
    for base in NAME_DICTIONARIES:  # the process reports its dictionaries once, whatever the devices
        assert _stream(prof / "host" / "data", base) == _stream(one / "host" / "data", base)


def test_device_0_of_a_board_is_the_one_device_job_and_the_others_differ(
        boards: dict[int, tuple[Path, dict[str, Any]]]) -> None:
    (one, one_truth), (many, truth) = boards[1], boards[DEVICES]
    assert _files(many / "device_0" / "data") == _files(one / "device_0" / "data")
    for base in HOST_RECORDS:
        mine = _records(many, base)
        assert mine[mine["thread_id"] == APP_TID].tobytes() == _records(one, base).tobytes(), base
    assert truth["devices"][0]["op_statistic"] == one_truth["op_statistic"]
    hwts = [_stream(many / f"device_{n}" / "data", f"hwts.data.{n}") for n in range(DEVICES)]
    assert len(set(hwts)) == DEVICES
    assert len({json.dumps(d["op_statistic"]) for d in truth["devices"]}) == DEVICES
    assert truth["records_total"] > 2.5 * one_truth["records_total"]


@pytest.mark.parametrize("chip", ["mini", "910b", "v6"])
def test_one_device_writes_the_same_bytes_as_the_default(tmp_path: Path, chip: str) -> None:
    out = tmp_path / "board"
    simulate(out, chip=chip, iterations=4, rate="max", seed=2, slice_bytes=SLICE, start_time_ns=START_NS)
    default = _files(out)
    for path in sorted(out.iterdir()):
        if path.is_dir():
            for f in sorted(path.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
            path.rmdir()
    simulate(out, chip=chip, iterations=4, rate="max", seed=2, slice_bytes=SLICE, start_time_ns=START_NS, devices=1)
    assert _files(out) == default


def test_the_legacy_layout_keeps_host_files_per_device(tmp_path: Path) -> None:
    prof, truth = _board(tmp_path, layout="legacy", devices=2)
    assert sorted(p.name for p in prof.iterdir()) == ["device_0", "device_1"]
    for n in range(2):
        names = {p.name.split(".slice_")[0] for p in (prof / f"device_{n}" / "data").iterdir()}
        assert f"Runtime.task_track.{n}" in names and f"Framework.hash_dic.{n}" in names
    assert [d["device_id"] for d in truth["devices"]] == [0, 1]


@pytest.mark.parametrize("devices", ["0", str(MAX_DEVICES + 1)])
def test_the_command_refuses_a_device_count_out_of_range(tmp_path: Path, devices: str) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--devices", devices)
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --devices must be from 1 to {MAX_DEVICES}, not {devices}"
    assert not (tmp_path / "board").exists()


def _summary(out: Path, module: str) -> list[dict[str, str]]:
    (path,) = (out / "mindstudio_profiler_output").glob(f"{module}_[0-9]*.csv")
    with open(path, newline="") as handle:
        return [{k: v.rstrip("\t") for k, v in row.items()} for row in csv.DictReader(handle)]


def _assert_outputs_match_truth(out: Path, truth: dict[str, Any]) -> None:
    report = read_report(out)
    assert report["problems"] == []
    for name, final in report["stages"].items():
        assert final["ok"] and all(row["ok"] for row in final["reconcile"]), name
        assert not final.get("rejected"), name
    stats = {(r["Device_id"], r["OP Type"], r["Core Type"]): (int(r["Count"]), round(float(r["Total Time(us)"]) * 1000))
             for r in _summary(out, "op_statistic")}
    assert stats == {(str(t["device_id"]), t["op_type"], t["core_type"]): (t["count"], t["total_ns"])
                     for t in truth["op_statistic"]}
    tasks = Counter(r["Device_id"] for r in _summary(out, "op_summary"))
    assert tasks == {str(d["device_id"]): sum(r["count"] for r in d["op_statistic"]) for d in truth["devices"]}
    steps = Counter(r["Device_id"] for r in _summary(out, "step_trace"))
    assert steps == {str(d["device_id"]): d["iterations"] for d in truth["devices"]}


@pytest.mark.slow
def test_import_of_a_board_has_each_devices_tasks(tmp_path: Path) -> None:
    result = run_cli("simulate", str(tmp_path / "board"), "--chip", "cloud", "--iterations", "6", "--devices", "3",
                     "--first-task-id", "65500", "--seed", "4")
    assert result.returncode == 0, result.stderr[-3000:]
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    assert [d["device_id"] for d in truth["devices"]] == [0, 1, 2] and truth["task_flips"] > 0
    result = run_cli("import", truth["prof_dir"], "--output", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all counts reconcile" in result.stdout
    _assert_outputs_match_truth(tmp_path / "out", truth)


@pytest.mark.slow
def test_a_live_run_follows_a_board_of_two_devices(tmp_path: Path) -> None:
    out = tmp_path / "live"
    config = tmp_path / "live.yaml"
    config.write_text(stage_config(out, iterations=8, rate="max", chip="cloud", devices=2))
    result = run_cli("run", str(config), "--live", "off")
    assert result.returncode == 0, result.stderr[-3000:]
    _assert_outputs_match_truth(out, json.loads((out / "board" / "simulator_truth.json").read_text()))
