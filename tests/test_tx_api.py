"""pipeline.tx: acl.prof's msproftx calls write MsprofTxInfo records into the running PROF directory."""

from __future__ import annotations

import ast
import csv
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest
from pipeline_runs import run_cli

from pipeline import tx
from stages.decoder.timebase import TimeBase
from stages.formats import raw

EVENT_TYPES = {"marker": 0, "push/pop": 1, "start/end": 2, "marker_ex": 3}


def make_running_prof_dir(output: Path, frequency: str = "1000.000000", cntvct: int | None = None,
                          mono: int = 5_000_000_000) -> Path:
    """The host control files a runtime writes when a job starts (no end_info: still running)."""
    prof = output / "PROF_000001_20240101000000000_TESTABCDEFGHIJKL"
    host = prof / "host"
    (host / "data").mkdir(parents=True)
    (host / "info.json").write_text(json.dumps({"CPU": [{"Frequency": frequency}], "DeviceInfo": [],
                                                "devices": "64"}))
    (host / "host_start.log").write_text(f"[Host]\nclock_monotonic_raw: {mono}\ncntvct: {cntvct or mono}\n"
                                         "cntvct_diff: 0\n")
    (host / "start_info").write_text(json.dumps({"collectionTimeBegin": "1700000000000000",
                                                 "clockMonotonicRaw": str(mono)}))
    return prof


def records(prof: Path) -> np.ndarray:
    data = (prof / "host" / "data" / tx.FILE_NAME).read_bytes()
    assert len(data) % raw.MSPROFTX.itemsize == 0
    return np.frombuffer(data, raw.MSPROFTX)


def message(record: np.void) -> str:
    return bytes(record["message"]).split(b"\0", 1)[0].decode()


def raw_now() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)


@pytest.fixture
def profiling(tmp_path: Path) -> Iterator[Path]:
    """tx switched on for a running PROF directory in tmp_path; off again afterwards."""
    prof = make_running_prof_dir(tmp_path)
    tx.init(str(tmp_path))
    yield prof
    tx.finalize()


def test_seed_calls_write_one_record_each_with_the_seed_semantics(profiling: Path) -> None:
    before = raw_now()
    stamp = tx.create_stamp()
    assert tx.set_stamp_trace_message(stamp, "model_load_mark", len("model_load_mark")) == 0
    assert tx.mark(stamp) == 0
    assert tx.destroy_stamp(stamp) == 0
    exec_stamp = tx.create_stamp()
    tx.set_stamp_trace_message(exec_stamp, "acl.mdl.execute_duration")
    assert tx.push(exec_stamp) == 0
    time.sleep(0.002)
    assert tx.pop(exec_stamp) == 0
    range_id, ret = tx.range_start(exec_stamp)
    assert ret == 0 and range_id > 0
    time.sleep(0.002)
    assert tx.range_stop(range_id) == 0
    with tx.range("preprocess"):
        pass
    assert tx.mark_ex("model execute start", stream=0) == 0
    assert tx.flush()
    after = raw_now()

    found = records(profiling)
    assert [message(r) for r in found] == ["model_load_mark", "acl.mdl.execute_duration",
                                           "acl.mdl.execute_duration", "preprocess", "model execute start"]
    assert found["event_type"].tolist() == [0, 1, 2, 2, 3]
    assert found["info_type"].tolist() == [0, 0, 0, 0, 1]
    assert (found["magic"] == raw.HOST_MAGIC).all() and (found["stamp_magic"] == raw.HOST_MAGIC).all()
    assert (found["level"] == raw.LEVEL_MSPROFTX).all() and (found["data_len"] == 232).all()
    assert (found["process_id"] == os.getpid()).all()
    assert (found["tx_thread_id"] == threading.get_native_id()).all()
    assert (found["start_time"] >= before).all() and (found["end_time"] <= after).all()
    assert (found["timestamp"] == found["end_time"]).all()  # reported at its end
    assert (found["start_time"][[0, 4]] == found["end_time"][[0, 4]]).all()  # instants
    assert (found["end_time"][1:3] - found["start_time"][1:3] >= 2_000_000).all()  # the sleeps inside


def test_misuse_returns_acl_error_codes_not_exceptions(profiling: Path) -> None:
    stamp = tx.create_stamp()
    assert tx.pop() == tx.ACL_ERROR_INVALID_PARAM  # nothing pushed
    tx.push(stamp)
    assert tx.pop(tx.create_stamp()) == tx.ACL_ERROR_INVALID_PARAM  # not the stamp pushed last
    assert tx.pop() == 0
    assert tx.range_stop(987654) == tx.ACL_ERROR_INVALID_PARAM
    assert tx.set_stamp_trace_message("not a stamp", "x") == tx.ACL_ERROR_INVALID_PARAM  # type: ignore[arg-type]
    assert tx.flush()
    assert len(records(profiling)) == 1


def test_a_long_message_is_cut_at_a_character_boundary(profiling: Path) -> None:
    tx.mark("é" * 100)  # 200 bytes of UTF-8
    tx.flush()
    field = records(profiling).tobytes()[256 - 156:]  # char message[156], the record's last field
    assert field.split(b"\0", 1)[0].decode() == "é" * 77  # 154 bytes: the 155th would split a character
    assert field[154:] == b"\0" * 2


def test_records_made_before_the_runtime_creates_its_directory_wait_for_it(tmp_path: Path) -> None:
    tx.init(str(tmp_path))
    try:
        tx.mark("early")
        with tx.range("early range"):
            pass
        assert not tx.flush() and tx.prof_dir() is None
        prof = make_running_prof_dir(tmp_path)
        tx.mark("late")
        assert tx.flush()
        assert tx.prof_dir() == str(prof)
        assert [message(r) for r in records(prof)] == ["early", "early range", "late"]
    finally:
        tx.finalize()


def test_an_earlier_jobs_directory_left_without_end_info_is_not_written_to(tmp_path: Path) -> None:
    stale = make_running_prof_dir(tmp_path)  # a crashed earlier job: no end_info
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    tx.init(str(tmp_path), since=time.time())
    try:
        tx.mark("this job's")
        assert not tx.flush()
        fresh = stale.with_name("PROF_000002_20240101000100000_TESTABCDEFGHIJKL")
        (fresh / "host" / "data").mkdir(parents=True)
        for name in ("info.json", "host_start.log", "start_info"):
            (fresh / "host" / name).write_text((stale / "host" / name).read_text())
        assert tx.flush() and tx.prof_dir() == str(fresh)
        assert [message(r) for r in records(fresh)] == ["this job's"]
        assert not (stale / "host" / "data" / tx.FILE_NAME).exists()
    finally:
        tx.finalize()


def test_an_ended_job_is_not_written_to(tmp_path: Path) -> None:
    prof = make_running_prof_dir(tmp_path)
    (prof / "host" / "end_info").write_text("{}")
    tx.init(str(tmp_path))
    try:
        tx.mark("after the end")
        assert not tx.flush()
        assert not (prof / "host" / "data" / tx.FILE_NAME).exists()
    finally:
        tx.finalize()


def test_ticks_of_a_slow_host_counter_convert_back_to_the_same_instant(tmp_path: Path) -> None:
    """19.2 MHz host counter: what tx writes, our decoder's clock reads back as the instant of the call."""
    mono0, cnt0 = raw_now() - 1_000_000_000, 777_000_000
    prof = make_running_prof_dir(tmp_path, frequency="19.2", cntvct=cnt0, mono=mono0)
    tx.init(str(tmp_path))
    try:
        before = raw_now()
        tx.mark("slow clock")
        after = raw_now()
        tx.flush()
    finally:
        tx.finalize()
    record = records(prof)[0]
    assert record["start_time"] < 2 * cnt0  # counter ticks, not ns
    timebase = TimeBase()
    for name in ("info.json", "host_start.log", "start_info"):
        timebase.learn(f"host/{name}", (prof / "host" / name).read_text())
    clock = timebase.host_clock()
    assert clock is not None
    offset = 1700000000000000 * 1000 - mono0
    local = int(clock.to_local_ns(np.array([record["start_time"]]))[0])
    assert before + offset - 60 <= local <= after + offset  # one tick is 52 ns


def test_threads_write_whole_records_and_their_push_pop_spans_nest(profiling: Path) -> None:
    per_thread, threads = 300, 6
    handed_over: list[int] = []
    native: dict[str, int] = {}

    def work(name: str) -> None:
        native[name] = threading.get_native_id()
        for i in range(per_thread):
            tx.push(f"{name} outer")
            tx.push(f"{name} inner {i}")
            tx.mark(f"{name} mark")
            tx.pop()
            tx.pop()
            range_id, _ = tx.range_start(f"{name} handed over")
            handed_over.append(range_id)  # another thread stops it

    workers = [threading.Thread(target=work, args=(f"t{k}",)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stopper = threading.Thread(target=lambda: [tx.range_stop(r) for r in handed_over])
    stopper.start()
    stopper.join()
    assert tx.flush()

    found = records(profiling)
    assert len(found) == threads * per_thread * 4
    assert (found["magic"] == raw.HOST_MAGIC).all() and (found["level"] == raw.LEVEL_MSPROFTX).all()
    for name, tid in native.items():
        mine = found[found["tx_thread_id"] == tid]
        texts = [message(r) for r in mine]
        assert texts.count(f"{name} outer") == per_thread and texts.count(f"{name} handed over") == per_thread
        spans = sorted((int(r["start_time"]), int(r["end_time"])) for r in mine if r["event_type"] == 1)
        for (outer_start, outer_end), (inner_start, inner_end) in zip(spans[::2], spans[1::2], strict=True):
            assert outer_start <= inner_start <= inner_end <= outer_end  # inner nests in its outer
        assert all(spans[k][1] <= spans[k + 2][0] for k in range(0, len(spans) - 2, 2))  # pairs one after another


def test_processes_append_to_the_same_file_without_tearing_records(profiling: Path) -> None:
    script = ("import sys; from pipeline import tx; tx.init(sys.argv[1]); "
              "[tx.mark(f'p{sys.argv[2]} {i}') for i in range(2000)]; tx.finalize()")
    children = [subprocess.Popen([sys.executable, "-c", script, str(profiling.parent), str(k)]) for k in range(3)]
    tx.mark("parent")
    for child in children:
        assert child.wait(timeout=120) == 0
    tx.flush()
    found = records(profiling)
    assert len(found) == 3 * 2000 + 1
    assert (found["magic"] == raw.HOST_MAGIC).all() and (found["stamp_magic"] == raw.HOST_MAGIC).all()
    by_process: dict[int, list[str]] = {}
    for record in found:
        by_process.setdefault(int(record["process_id"]), []).append(message(record))
    assert sorted(len(texts) for texts in by_process.values()) == [1, 2000, 2000, 2000]


def test_when_off_every_call_returns_success_and_writes_nothing(tmp_path: Path) -> None:
    prof = make_running_prof_dir(tmp_path)
    assert not tx.enabled()
    stamp = tx.create_stamp()
    assert tx.mark(stamp) == tx.push(stamp) == tx.pop() == tx.range_stop(5) == 0
    assert tx.range_start(stamp) == (0, 0)
    with tx.range("off"):
        pass
    assert not (prof / "host" / "data" / tx.FILE_NAME).exists()


def test_the_environment_switches_it_on_as_the_app_sees_it(tmp_path: Path) -> None:
    acl = tmp_path / "acl.json"
    acl.write_text(json.dumps({"profiler": {"switch": "on", "output": str(tmp_path / "prof")}}))
    assert tx._output_from_environment({"PIPELINE_ACL_JSON": str(acl)}) == str(tmp_path / "prof")
    acl.write_text(json.dumps({"profiler": {"switch": "off", "output": str(tmp_path / "prof")}}))
    assert tx._output_from_environment({"PIPELINE_ACL_JSON": str(acl)}) is None
    options = json.dumps({"output": "/data/prof", "task_trace": "on"})
    assert tx._output_from_environment({"PROFILING_MODE": "true", "PROFILING_OPTIONS": options}) == "/data/prof"
    assert tx._output_from_environment({"PROFILING_MODE": "false", "PROFILING_OPTIONS": options}) is None
    assert tx._output_from_environment({}) is None


def test_the_module_is_standard_library_only_and_python_3_7_syntax() -> None:
    source = Path(tx.__file__).read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 7))

    def imports(nodes: Iterable[ast.AST]) -> set[str]:
        names = {alias.name.split(".")[0] for node in nodes if isinstance(node, ast.Import) for alias in node.names}
        return names | {node.module.split(".")[0] for node in nodes if isinstance(node, ast.ImportFrom) and node.module}

    imported = imports(tree.body)
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)
    # pyzmq only where annotations go to a collector's socket, imported when that mode starts
    assert imports(ast.walk(tree)) - imported == {"zmq"}
    (socket_class,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "_Socket"]
    assert imports(ast.walk(socket_class)) == {"zmq"}
    loaded = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pipeline.tx"], capture_output=True,
                            text=True, check=True).stderr
    modules = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in loaded.splitlines() if "|" in line}
    assert not modules & {"numpy", "zmq", "pydantic", "yaml", "msgpack", "structlog", "stages"}


@pytest.mark.slow
def test_annotations_in_a_finished_directory_reach_every_output(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Marks made while the job ran show in the timeline's MsprofTx layer, MSTX_EVENTS and the msprof_tx
    summary, with their event types, next to the runtime's own msproftx records."""
    simulated = run_cli("simulate", str(tmp_path / "board"), "--iterations", "5", "--rate", "max", timeout=120)
    assert simulated.returncode == 0, simulated.stderr
    prof = next((tmp_path / "board").glob("PROF_*"))
    end_info = (prof / "host" / "end_info").read_text()
    (prof / "host" / "end_info").unlink()  # the job is "running" again while the app annotates
    # The simulator's host clock is its own (host_start.log), not this machine's CLOCK_MONOTONIC_RAW: the marks
    # are made on its clock, inside the job's collection window (the decoder rejects times outside it)
    begun = int(json.loads((prof / "host" / "start_info").read_text())["clockMonotonicRaw"])
    ticks = iter(range(begun + 1_000_000, begun + 2_000_000, 1_000))
    monkeypatch.setattr(tx, "_now", lambda: next(ticks))
    tx.init(str(tmp_path / "board"))
    try:
        with tx.range("tx: outer"):
            tx.push("tx: pushed")
            tx.mark("tx: instant")
            tx.pop()
        assert tx.flush()
    finally:
        tx.finalize()
    (prof / "host" / "end_info").write_text(end_info)
    out = tmp_path / "out"
    imported = run_cli("import", str(prof), "--output", str(out), timeout=240)
    assert imported.returncode == 0, imported.stderr[-2000:]

    trace = json.loads(next((out / "mindstudio_profiler_output").glob("msprof_*.json")).read_text())
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    ours = {e["name"]: e for e in events if e.get("name", "").startswith("tx: ")}
    assert {name: e["args"]["event_type"] for name, e in ours.items()} == \
        {"tx: outer": "start/end", "tx: pushed": "push/pop", "tx: instant": "marker"}
    outer, pushed = ours["tx: outer"], ours["tx: pushed"]
    assert outer["tid"] == pushed["tid"] == threading.get_native_id()
    assert float(outer["ts"]) <= float(pushed["ts"]) <= float(ours["tx: instant"]["ts"])
    tx_pid = outer["pid"]
    assert any(e.get("name") == "frame 1" and e["pid"] == tx_pid for e in events)  # the same MsprofTx layer

    db = sqlite3.connect(next(out.glob("msprof_*.db")))
    rows = dict(db.execute("SELECT s.value, m.eventType FROM MSTX_EVENTS m JOIN STRING_IDS s ON m.message = s.id "
                           "WHERE s.value LIKE 'tx: %'").fetchall())
    db.close()
    assert rows == {"tx: outer": EVENT_TYPES["start/end"], "tx: pushed": EVENT_TYPES["push/pop"],
                    "tx: instant": EVENT_TYPES["marker"]}
    (summary,) = (out / "mindstudio_profiler_output").glob("msprof_tx_*.csv")
    with open(summary, newline="") as handle:
        rows = {r["message"]: r for r in csv.DictReader(handle) if r["message"].startswith("tx: ")}
    assert {name: r["event_type"] for name, r in rows.items()} == \
        {"tx: outer": "start/end", "tx: pushed": "push/pop", "tx: instant": "marker"}
    assert {r["tid"] for r in rows.values()} == {str(threading.get_native_id())}
