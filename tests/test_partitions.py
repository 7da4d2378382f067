"""Partitions by device (`partitions: auto|N`): the config's expansion and its refusals, the merge of the
partitions' statistics, and an import of a board of 4 devices with 1 and with 4 partitions whose outputs are the
same, device by device, with the work divided evenly."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq
from board_replay import BoardReplay
from pipeline_runs import read_report, run_cli, start_run

from pipeline import partitions
from pipeline.config import parse_config
from pipeline.errors import UserError
from pipeline.stage import StageContext
from stages.aggregator import AggregatorStage
from stages.aggregator.partition import PartitionSymbols
from stages.decoder import records
from stages.formats import raw
from stages.schema import SymbolTable, pack_rows, unpack_rows
from stages.sinks._partitions import PartitionMerge
from stages.tables import pack_columns

DEVICES = 4
ITERATIONS = 8
OUTPUT_FOLDER = "mindstudio_profiler_output"
NUMBERS = {"globalTaskId", "blockNum", "mixBlockNum"}
# columns that hold STRING_IDS ids (numbered by the sink in the order texts first come)
STRING_COLUMNS = {"TASK": {"taskType"}, "COMMUNICATION_SCHEDULE_TASK_INFO": {"name", "taskType", "opType"},
                  "CANN_API": {"name"}, "MSTX_EVENTS": {"message", "domainId"}, "TASK_PMU_INFO": {"name"}}


def _config(**stages: dict[str, Any]) -> dict[str, Any]:
    return {"run": {"name": "t", "output": "/tmp/partitions-test"}, "stages": stages}


def _board(decode: dict[str, Any], aggregate: dict[str, Any], **more: dict[str, Any]) -> dict[str, Any]:
    return _config(collect={"type": "collector", "path": "/nowhere", "follow": False},
                   decode={"type": "decoder", "inputs": ["collect"], **decode},
                   aggregate={"type": "aggregator", "inputs": ["decode"], **aggregate},
                   summary={"type": "summary", "inputs": ["aggregate.tasks", "aggregate.stats"]}, **more)


def test_partitions_expand_into_stages_paired_or_read_by_all() -> None:
    config = parse_config(_board({"partitions": 3}, {"partitions": "3"}), Path("p.yaml"))
    assert list(config.stages) == ["collect", "decode-0", "decode-1", "decode-2", "aggregate-0", "aggregate-1",
                                   "aggregate-2", "summary"]
    assert config.stages["aggregate-1"].inputs == [("decode-1", "out")]  # paired: the same index
    assert config.stages["summary"].inputs == [(f"aggregate-{k}", port) for port in ("tasks", "stats")
                                               for k in range(3)]
    assert config.consumers("collect", "out") == ["decode-0", "decode-1", "decode-2"]
    assert config.route("collect", "decode-2") == (2, 3)  # routed by device
    assert config.route("decode-2", "aggregate-2") is None  # paired: everything goes
    assert config.route("aggregate-0", "summary") is None
    assert (config.stages["decode-2"].partition, config.stages["decode-2"].partitions) == (2, 3)
    assert config.partition_groups() == {"decode": ["decode-0", "decode-1", "decode-2"],
                                         "aggregate": ["aggregate-0", "aggregate-1", "aggregate-2"]}
    # one decoder, a partitioned aggregator: each aggregator partition takes its devices from the one decoder
    routed = parse_config(_board({}, {"partitions": 2}), Path("p.yaml"))
    assert routed.stages["aggregate-1"].inputs == [("decode", "out")]
    assert routed.route("decode", "aggregate-1") == (1, 2)
    auto = parse_config(_board({"partitions": "auto"}, {"partitions": "auto"}), Path("p.yaml"))
    assert len(auto.partition_groups()["aggregate"]) == max(1, min(8, os.cpu_count() or 1))
    single = parse_config(_board({"partitions": 1}, {}), Path("p.yaml"))
    assert "decode" in single.stages and not single.partition_groups()


def test_a_batch_goes_to_the_partition_of_its_device_and_the_host_to_all() -> None:
    assert partitions.takes((1, 4), {"device": 5})
    assert not partitions.takes((2, 4), {"device": 5})
    assert partitions.takes((2, 4), {"device": None})  # the host's
    assert partitions.takes((3, 4), {"path": "host/info.json"})
    assert partitions.takes((3, 4), {"path": "device_7/info.json.7"})  # a device's control file
    assert not partitions.takes((0, 4), {"path": "device_7/info.json.7"})
    assert partitions.takes(None, {"device": 5})


@pytest.mark.parametrize(("tree", "message"), [
    (_board({"partitions": 0}, {}), "p.yaml: stages.decode.partitions: must be 'auto' or a whole number from 1 to "
                                     "64, got 0"),
    (_board({"partitions": "x"}, {}), "stages.decode.partitions: must be 'auto' or a whole number from 1 to 64, "
                                      "got 'x'"),
    (_board({"partitions": True}, {}), "got True"),
    (_board({"partitions": 65}, {}), "got 65"),
    (_config(collect={"type": "collector", "path": "/x"}, sink={"type": "summary", "inputs": ["collect"],
                                                                "partitions": 2}),
     "stages.sink.partitions: a sink of type 'summary' does not run in partitions"),
    (_board({"partitions": 4}, {}), "stages.aggregate.inputs: 'decode' runs as 4 partitions, each with the host's "
                                    "records"),
    (_board({}, {"partitions": 2, "endpoint": "ipc:///tmp/agg.ipc"}),
     "stages.aggregate.endpoint: a stage of 2 partitions binds one input socket per partition"),
    (_board({"partitions": 2}, {"partitions": 2}, **{"decode-1": {"type": "decoder", "inputs": ["collect"]}}),
     "stages.decode-1: this id is partition 1's of 'decode'"),
])
def test_a_bad_partitions_setting_is_one_line_naming_it(tree: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_config(tree, Path("p.yaml"))
    assert message in caught.value.line()
    assert "\n" not in caught.value.line()


def test_validate_says_a_bad_partitions_value_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("stages:\n  collect: {type: collector, path: /x}\n"
                      "  decode: {type: decoder, inputs: [collect], partitions: many}\n")
    result = run_cli("validate", str(config), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {config}: stages.decode.partitions: must be 'auto' or a whole number from 1 to 64, got 'many' "
        f"({partitions.HINT})"]


def test_partition_symbol_ids_never_collide() -> None:
    tables = [PartitionSymbols(k, 3) for k in range(3)]
    ids = [[table.intern(f"op{k}-{i}") for i in range(5)] for k, table in enumerate(tables)]
    assert all(sym_id % 3 == k for k, row in enumerate(ids) for sym_id in row)
    sink = SymbolTable()
    for table in tables:
        sink.learn(table.take_unsent())
    assert all(sink[sym_id] == f"op{k}-{i}" for k, row in enumerate(ids) for i, sym_id in enumerate(row))
    assert tables[1].intern("op1-3") == ids[1][3]  # interned once


def test_a_partition_other_than_0_keeps_api_marks_and_a_device_folders_api_rows(tmp_path: Path) -> None:
    """Host API records (every partition gets them): rows from partition 0 only, API marks in every partition
    (a host task without a Node API waits for them); legacy API records of a device folder reach one partition,
    which writes their rows."""
    ctx = StageContext(stage_id="aggregate-1", run_id="t", output_dir=tmp_path, partition=1, partitions=2)
    aggregator = AggregatorStage(AggregatorStage.Config(), ctx)
    api = np.zeros(2, records.DTYPES["api"])
    api["thread_id"], api["level"], api["start_ns"], api["end_ns"] = 7, raw.LEVEL_ACL, [10, 30], [20, 40]
    list(aggregator.process(records.to_batch("api", api, {"stream": "host/data/api_event", "device": None})))
    assert aggregator.api_marks == {7: 40} and aggregator.pending_api_records == 0
    assert aggregator.part.sends_host_rows("named_api", 2, 1)  # a batch of device_1/: only this partition has it
    assert not aggregator.part.sends_host_rows("api", 2, None)


def test_the_sinks_merge_the_partitions_latest_snapshots() -> None:
    merge = PartitionMerge()

    def snapshot(partition: int, rows: list[list[Any]], final: bool) -> Any:
        return pack_columns("op_statistic", rows, "stats", {"final": final, "partition": partition, "partitions": 2})

    row0, row1 = [0, "Conv2D", "AI_CORE", 2, 20, 5, 15], [1, "Add", "AI_VECTOR_CORE", 1, 7, 7, 7]
    first = merge.merged(snapshot(1, [row1], final=True))
    assert unpack_rows(first) == [row1] and not first.meta["final"]  # partition 0 has not sent its final one
    merged = merge.merged(snapshot(0, [row0], final=True))
    assert unpack_rows(merged) == [row0, row1] and merged.meta == {"final": True}
    info = merge.merged(pack_rows("run_info", [[{"pid": 7, "devices": {"1": {"chip": "910"}}, "end_ns": 0}]],
                                  "tasks", {"partition": 1, "partitions": 2}))
    info = merge.merged(pack_rows("run_info", [[{"pid": 7, "devices": {"0": {"chip": "910"}}, "end_ns": 9}]],
                                  "tasks", {"partition": 0, "partitions": 2}))
    assert unpack_rows(info) == [[{"pid": 7, "devices": {"0": {"chip": "910"}, "1": {"chip": "910"}}, "end_ns": 9}]]
    alone = pack_columns("op_statistic", [row0], "stats", {"final": True})
    assert merge.merged(alone) is alone  # an aggregator of one partition


def test_one_apis_statistics_from_two_partitions_merge_into_one_row() -> None:
    """The legacy layout keeps the host's API records in each device's folder: two partitions count one API."""
    merge = PartitionMerge()
    rows = [["acl", "aclmdlExecute", 2, 30, 10, 20, 0.5], ["acl", "aclmdlExecute", 1, 5, 5, 5, 0.025]]
    for partition, row in enumerate(rows):
        merged = merge.merged(pack_columns("api_statistic", [row], "stats",
                                           {"final": True, "partition": partition, "partitions": 2}))
    assert unpack_rows(merged) == [["acl", "aclmdlExecute", 3, 35, 5, 20, 0.525]] and merged.meta["final"]


# -- an import of a board of 4 devices ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("board")
    result = run_cli("simulate", str(folder), "--devices", str(DEVICES), "--iterations", str(ITERATIONS),
                     "--chip", "cloud", "--rate", "max", "--seed", "5", timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    (prof,) = folder.glob("PROF_*")
    return prof


def _import(board: Path, out: Path, count: int) -> dict[str, Any]:
    result = run_cli("import", str(board), "--output", str(out), "--partitions", str(count), timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == [] and report["state"] == "completed"
    assert all(row["ok"] for final in report["stages"].values() for row in final["reconcile"])
    return report


def _csv_by_device(out: Path) -> dict[str, dict[str, list[str]]]:
    """Each summary CSV's lines, by their first cell (the device; `host` for api_statistic), in file order."""
    tables: dict[str, dict[str, list[str]]] = {}
    for path in sorted((out / OUTPUT_FOLDER).glob("*.csv")):
        lines = path.read_text(encoding="utf-8").splitlines()
        by_device: dict[str, list[str]] = defaultdict(list)
        for line in lines[1:]:
            by_device[next(csv.reader(io.StringIO(line)))[0]].append(line)
        tables[path.name.rsplit("_", 1)[0]] = {"header": lines[:1], **by_device}
    return tables


def _timeline_by_device(out: Path, by_track: bool = False) -> tuple[dict[Any, list[str]], Counter[str]]:
    """The timeline's events per process (a device, or the host) in file order, and its flow events (written when
    both ends have come, so their place varies with the arrival of API and task rows) as a multiset. ``by_track``:
    per (process, thread): where a run's messages end depends on when its statistics snapshots fall (a snapshot
    sends the rows before it), and where a track's events fall among another track's of the same device with it."""
    events: dict[Any, list[str]] = defaultdict(list)
    flows: Counter[str] = Counter()
    for path in sorted((out / OUTPUT_FOLDER).glob("msprof_*.json")):
        for event in json.loads(path.read_text(encoding="utf-8")):
            text = json.dumps(event, sort_keys=True)
            if event.get("ph") in ("s", "f"):
                flows[text] += 1
            else:
                events[(event.get("pid"), event.get("tid")) if by_track else event.get("pid")].append(text)
    return events, flows


def _database_by_device(out: Path) -> dict[str, Any]:
    """Every table's rows with STRING_IDS resolved: TASK (and the tables keyed by its globalTaskId) per device in
    rowid order, the task's global id replaced by its place among its device's tasks; the others as multisets."""
    (path,) = out.glob("msprof_*.db")
    with sqlite3.connect(path) as db:
        text = dict(db.execute("SELECT id, value FROM STRING_IDS"))
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        place: dict[int, tuple[int, int]] = {}
        tasks: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        for row in db.execute("SELECT globalTaskId, deviceId, startNs, endNs, connectionId, taskType, contextId, "
                              "streamId, taskId, modelId FROM TASK ORDER BY rowid"):
            place[row[0]] = (row[1], len(tasks[row[1]]))
            tasks[row[1]].append((*row[1:5], text[row[5]], *row[6:]))
        tables: dict[str, Any] = {"TASK": dict(tasks)}
        for name in names:
            if name in ("TASK", "STRING_IDS"):
                continue
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({name})")]
            strings = set(columns) - NUMBERS if name == "COMPUTE_TASK_INFO" else STRING_COLUMNS.get(name, set())
            rows: Counter[tuple[Any, ...]] = Counter()
            for row in db.execute(f"SELECT * FROM {name}"):
                rows[tuple(place[value] if column == "globalTaskId" else text[value] if column in strings else value
                           for column, value in zip(columns, row, strict=True))] += 1
            tables[name] = rows
        tables["STRING_IDS"] = Counter(text.values())
    return tables


@pytest.fixture(scope="module")
def reference(board: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The board's import with one partition: its output folder and run report."""
    out = tmp_path_factory.mktemp("one") / "out"
    return out, _import(board, out, 1)


def _assert_same_by_device(out: Path, reference: Path, by_track: bool = False) -> None:
    csv_one, csv_out = _csv_by_device(reference), _csv_by_device(out)
    assert set(csv_one) >= {"op_summary", "op_statistic", "api_statistic", "task_time"}
    assert csv_out == csv_one
    assert set(csv_one["op_summary"]) == {"header", *map(str, range(DEVICES))}
    events_one, flows_one = _timeline_by_device(reference, by_track)
    events_out, flows_out = _timeline_by_device(out, by_track)
    assert events_out == events_one and flows_out == flows_one and len(events_one) > DEVICES
    db_one, db_out = _database_by_device(reference), _database_by_device(out)
    assert set(db_out) == set(db_one) and len(db_one["TASK"]) == DEVICES
    for table, rows in db_one.items():
        assert db_out[table] == rows, table


@pytest.mark.slow
def test_four_partitions_give_one_partitions_outputs_device_by_device(
        board: Path, reference: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    one_out, one = reference
    four = _import(board, tmp_path / "four", 4)
    assert "partitions" not in one
    assert set(four["stages"]) >= {f"{group}-{k}" for group in ("decode", "aggregate") for k in range(DEVICES)}
    # the work divides: every aggregator partition takes the host's records and a quarter of the devices'
    ins = four["partitions"]["aggregate"]["records_in"]
    mean = sum(ins.values()) / len(ins)
    assert len(ins) == DEVICES and all(abs(n - mean) <= 0.25 * mean for n in ins.values()), ins
    assert four["partitions"]["aggregate"]["max_off_mean_pct"] <= 25
    tasks = [four["stages"][f"aggregate-{k}"]["accounting"]["tasks_out"] for k in range(DEVICES)]
    assert sum(tasks) == one["stages"]["aggregate"]["accounting"]["tasks_out"] and min(tasks) > 0
    kept_out = four["stages"]["aggregate-1"]["accounting"]["partition"]["kept_out"]
    assert kept_out["host task tracks of another partition's devices"] > 0  # counted, never rejected
    assert not four["stages"]["aggregate-1"]["rejected"]

    _assert_same_by_device(tmp_path / "four", one_out, by_track=True)  # messages end where snapshots fall


class ViewWatcher:
    """The run's live view (what `pipeline top` shows), newest snapshot only."""

    def __init__(self, out: Path) -> None:
        deadline = time.monotonic() + 60
        while not (out / "run.json").is_file():
            assert time.monotonic() < deadline, "the run never wrote run.json"
            time.sleep(0.1)
        self.zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sub = self.zctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.CONFLATE, 1)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(json.loads((out / "run.json").read_text())["top_endpoint"])
        self.view: dict[str, Any] = {}

    def wait_for(self, what: Any, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sub.poll(200):
                self.view = msgpack.unpackb(self.sub.recv(), raw=False)
                if what(self.view):
                    return self.view
        raise AssertionError(f"the run's view never showed what the test waits for; last: {self.view}")

    def close(self) -> None:
        self.sub.close(0)
        self.zctx.term()


def _handled(view: dict[str, Any], stage: str, key: str = "") -> int:
    row = view.get("stages", {}).get(stage, {})
    counts = row.get(key, {}) if key else row
    return int(counts.get("out" if row.get("role") == "source" else "in", 0))


@pytest.mark.slow
def test_a_partition_killed_mid_run_is_restarted_from_the_checkpoint_and_nothing_is_lost_or_doubled(
        board: Path, reference: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Routed links (the collector to each decoder partition) and per-link counts survive a restart: an aggregator
    partition killed with records no checkpoint covers is restarted, and the outputs are the import's."""
    out, live_board = tmp_path / "out", tmp_path / "board" / board.name
    config = tmp_path / "run.yaml"
    config.write_text(f"""
run: {{name: part{os.getpid()}, output: "{out}", progress_s: 1, checkpoint_s: 0.3}}
stages:
  collect: {{type: collector, path: "{live_board}", follow: true, wait_s: 60}}
  decode: {{type: decoder, inputs: [collect], partitions: 2}}
  aggregate: {{type: aggregator, inputs: [decode], partitions: 2, snapshot_every_s: 0.5}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
  top: {{type: live, inputs: [aggregate.stats]}}
""")
    replay = BoardReplay(board, live_board, holds=(6, 12))
    victim = "aggregate-1"
    supervisor = start_run(config)
    replay.start()
    try:
        watcher = ViewWatcher(out)
        try:  # the first part all in a complete epoch; the live sink stopped, so no later epoch completes
            watcher.wait_for(lambda v: v.get("checkpoint", {}).get("epoch", 0) >= 1 and _handled(v, victim) > 0
                             and _handled(v, "collect") == _handled(v, "collect", "checkpointed"))
            frozen = json.loads((out / "run.json").read_text())["stage_pids"]["top"]
            os.kill(frozen, signal.SIGSTOP)
            replay.release()
            watcher.wait_for(lambda v: _handled(v, victim) > _handled(v, victim, "checkpointed"))
            os.kill(json.loads((out / "run.json").read_text())["stage_pids"][victim], signal.SIGKILL)
            watcher.wait_for(lambda v: v["state"] == "recovering", 30)
            os.kill(frozen, signal.SIGCONT)
            watcher.wait_for(lambda v: v["stages"][victim].get("restarts") == 1, 60)
        finally:
            watcher.close()
    finally:
        replay.release_all()
    _, stderr = supervisor.communicate(timeout=240)
    assert replay.error is None
    assert supervisor.returncode == 0, stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == [] and report["recovery"]["restarts"] == {victim: 1}
    assert all(final["ok"] and all(row["ok"] for row in final["reconcile"]) for final in report["stages"].values())
    _assert_same_by_device(out, reference[0], by_track=True)
