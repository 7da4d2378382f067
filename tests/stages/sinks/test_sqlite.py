"""SqliteSink: msprof's db schema, queryable by another connection while the sink runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from typing import Any

import pytest
import sqlite_utils
from pydantic import ValidationError
from sink_batches import TIMESTAMP, Feed

from pipeline.stage import StageContext
from stages.schema import pack_rows
from stages.sinks.sqlite import MESSAGE_MEMO, SqliteSink

OP_NAMES = """
    SELECT name_ids.value, type_ids.value, TASK.startNs, TASK.deviceId
    FROM COMPUTE_TASK_INFO
    LEFT JOIN TASK ON TASK.globalTaskId = COMPUTE_TASK_INFO.globalTaskId
    LEFT JOIN STRING_IDS AS name_ids ON name_ids.id = COMPUTE_TASK_INFO.name
    LEFT JOIN STRING_IDS AS type_ids ON type_ids.id = COMPUTE_TASK_INFO.opType
    ORDER BY TASK.startNs
"""
PMU = """SELECT s.value, p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name
         WHERE p.globalTaskId = ? ORDER BY s.value"""


def _table(spec: str, primary_key: str = "") -> list[tuple[str, str, int]]:
    """(column, declared type, is primary key) in order, from "column:TYPE …" (INTEGER when no type)."""
    columns = []
    for item in spec.split():
        name, _, kind = item.partition(":")
        columns.append((name, kind or "INTEGER", int(name == primary_key)))
    return columns


ENUM = _table("id name:TEXT", "id")
# msprof's table definitions (analysis/csrc/application/database/msprof_db.cpp)
RUN_LEVEL_SCHEMA = {
    "STRING_IDS": _table("id value:TEXT", "id"),
    "SESSION_TIME_INFO": _table("startTimeNs endTimeNs"),
    "NPU_INFO": _table("id name:TEXT"),
    "RANK_DEVICE_MAP": _table("rankId deviceId"),
    "HOST_INFO": _table("hostUid:TEXT hostName:TEXT"),
    "META_DATA": _table("name:TEXT value:TEXT"),
    **{name: ENUM for name in ("ENUM_API_TYPE", "ENUM_MODULE", "ENUM_HCCL_DATA_TYPE", "ENUM_HCCL_LINK_TYPE",
                               "ENUM_HCCL_TRANSPORT_TYPE", "ENUM_HCCL_RDMA_TYPE", "ENUM_MSTX_EVENT_TYPE",
                               "ENUM_MEMCPY_OPERATION", "ENUM_OVERLAP_ANALYSIS_TYPE")},
}
DATA_SCHEMA = {
    "TASK": _table("startNs endNs deviceId connectionId globalTaskId globalPid taskType contextId streamId taskId "
                   "modelId"),
    "COMPUTE_TASK_INFO": _table("name globalTaskId blockNum mixBlockNum taskType opType inputFormats inputDataTypes "
                                "inputShapes outputFormats outputDataTypes outputShapes attrInfo opState "
                                "hf32Eligible gridDim blockDim", "globalTaskId"),
    "COMMUNICATION_SCHEDULE_TASK_INFO": _table("name globalTaskId taskType opType", "globalTaskId"),
    "CANN_API": _table("startNs endNs type globalTid connectionId name", "connectionId"),
    "MSTX_EVENTS": _table("startNs endNs eventType rangeId category message globalTid endGlobalTid domainId "
                          "connectionId"),
    "TASK_PMU_INFO": _table("globalTaskId name value:NUMERIC"),
    "AICORE_FREQ": _table("deviceId timestampNs:NUMERIC freq dieId:NUMERIC"),
    # ours, not msprof's
    "OP_STATISTIC": _table("deviceId opType:TEXT coreType:TEXT count totalTimeUs:REAL minTimeUs:REAL avgTimeUs:REAL "
                           "maxTimeUs:REAL ratio:REAL"),
    "API_STATISTIC": _table("deviceId:TEXT level:TEXT apiName:TEXT timeUs:REAL count avgUs:REAL minUs:REAL "
                            "maxUs:REAL variance:REAL"),
}


def make_sink(ctx: StageContext, **config: Any) -> SqliteSink:
    sink = SqliteSink(SqliteSink.Config(timestamp=TIMESTAMP, **config), ctx)
    sink.open()
    return sink


def schema(db: sqlite3.Connection) -> dict[str, list[tuple[str, str, int]]]:
    tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {table: [(row[1], row[2], row[5]) for row in db.execute(f"PRAGMA table_info({table})")]
            for table in tables}


def test_readable_mid_stream_by_another_connection(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    path = ctx.output_dir / f"msprof_{TIMESTAMP}.db"
    reader = sqlite3.connect(path)
    assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    sink.write_batch(feed.run_info(pid=4242))
    sink.write_batch(feed.batch("task", [feed.task(1_000, 2_000, connection_id=1),
                                         feed.task(3_000, 4_000, op_name="Add_2", op_type="Add", connection_id=2),
                                         feed.task(5_000, 6_000, op_name="", task_type="EVENT_RECORD",
                                                   runtime_task_type="EVENT_RECORD")]))
    assert reader.execute(OP_NAMES).fetchall() == [("MatMul_1", "MatMul", 1_000, 0), ("Add_2", "Add", 3_000, 0)]
    assert reader.execute("SELECT COUNT(*) FROM TASK").fetchone() == (3,)
    sink.write_batch(feed.batch("task", [feed.task(7_000, 8_000, op_name="Relu_3", op_type="Relu", device_id=1)]))
    assert [r[0] for r in reader.execute(OP_NAMES)] == ["MatMul_1", "Add_2", "Relu_3"]
    task_types = reader.execute(
        "SELECT s.value FROM TASK JOIN STRING_IDS s ON s.id = TASK.taskType ORDER BY startNs").fetchall()
    assert [t for (t,) in task_types] == ["KERNEL_AICORE", "KERNEL_AICORE", "EVENT_RECORD", "KERNEL_AICORE"]
    ids = [r[0] for r in reader.execute("SELECT globalTaskId FROM TASK ORDER BY startNs")]
    assert ids == [0, 1, 2, 3]
    assert reader.execute("SELECT DISTINCT globalPid, contextId FROM TASK").fetchall() == [(4242, 4294967295)]
    reader.close()
    sink.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert len(db.execute(OP_NAMES).fetchall()) == 3


def test_schema_as_msprof_and_data_tables_appear_with_their_rows(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)
    assert schema(db) == RUN_LEVEL_SCHEMA  # what every msprof export has, before any record
    sink.write_batch(feed.run_info(pid=4242))
    sink.write_batch(feed.batch("api", [feed.api(10, 20, connection_id=1)]))
    assert set(schema(db)) == set(RUN_LEVEL_SCHEMA) | {"CANN_API"}
    sink.write_batch(feed.batch("aicore_freq", [[0, 1_700_000_000_000_000_100, 1500]]))
    sink.write_batch(feed.batch("task", [feed.task(100, 200, pmu=[1.5]),
                                         feed.task(300, 400, op_name="memcpy_AicpuKernel", op_type="MemCopy")],
                                pmu_columns=["aicore_time(us)"]))
    sink.write_batch(feed.batch("tx", [feed.tx(5, 9)]))
    sink.write_batch(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 1, 100, 100, 100]]))
    sink.write_batch(feed.batch("api_statistic", [["node", "MatMul_1", 1, 10, 10, 10, 0.0]]))
    assert schema(db) == RUN_LEVEL_SCHEMA | DATA_SCHEMA
    assert [r[2] for r in db.execute("PRAGMA index_info('TaskIndex')")] == ["startNs", "globalTaskId"]
    assert dict(db.execute("SELECT name, value FROM META_DATA")) == {
        "SCHEMA_VERSION": "1.2.0", "SCHEMA_VERSION_MAJOR": "1", "SCHEMA_VERSION_MINOR": "2",
        "SCHEMA_VERSION_MICRO": "0"}
    db.close()
    sink.close()


def test_enum_tables_hold_msprofs_values(ctx: StageContext) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)

    def enum(table: str) -> dict[int, str]:
        return dict(db.execute(f"SELECT id, name FROM {table}"))

    assert enum("ENUM_API_TYPE") == {20000: "acl", 15000: "model", 10000: "node", 5500: "communication",
                                     5000: "runtime", 50001: "op", 50002: "queue", 50003: "trace", 50004: "mstx"}
    assert enum("ENUM_MSTX_EVENT_TYPE") == {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"}
    data_types = enum("ENUM_HCCL_DATA_TYPE")
    assert [data_types[i] for i in (0, 3, 4, 11, 12)] == ["INT8", "FP16", "FP32", "BFP16", "INT128"]
    assert data_types[65534] == "N/A" and data_types[65535] == "INVALID_TYPE"
    assert [enum("ENUM_HCCL_LINK_TYPE")[i] for i in range(7)] == [
        "ON_CHIP", "HCCS", "PCIE", "ROCE", "SIO", "HCCS_SW", "STANDARD_ROCE"]
    assert [enum("ENUM_HCCL_TRANSPORT_TYPE")[i] for i in range(3)] == ["SDMA", "RDMA", "LOCAL"]
    assert enum("ENUM_HCCL_RDMA_TYPE")[0] == "RDMA_SEND_NOTIFY"
    memcpy = enum("ENUM_MEMCPY_OPERATION")
    assert len(memcpy) == 9 and memcpy[1] == "host to device" and memcpy[65535] == "other"
    assert enum("ENUM_OVERLAP_ANALYSIS_TYPE") == {0: "COMPUTE", 1: "COMMUNICATION", 2: "COMM_NOT_OVERLAP_COMP",
                                                  3: "FREE", 65535: "RESERVE"}
    modules = enum("ENUM_MODULE")
    assert len(modules) == 65 and (modules[3], modules[7], modules[45], modules[77]) == (
        "HCCL", "RUNTIME", "GE", "CUSTOM")
    db.close()
    sink.close()


def test_run_level_tables_follow_run_info(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)
    sink.write_batch(feed.run_info(pid=4242, devices={}, start_ns=0))
    assert db.execute("SELECT * FROM NPU_INFO").fetchall() == [(-1, "UNKNOWN")]  # no device known
    assert db.execute("SELECT * FROM RANK_DEVICE_MAP").fetchall() == [(-1, -1)]
    assert db.execute("SELECT * FROM SESSION_TIME_INFO").fetchall() == []  # nothing known yet
    devices = {"2": {"platform": 1, "chip": "Ascend910A"}, "0": {"platform": 1, "chip": "Ascend910A"}}
    sink.write_batch(feed.run_info(pid=4242, devices=devices, host_uid="7f3a", hostname="node-1"))
    assert db.execute("SELECT * FROM NPU_INFO").fetchall() == [(0, "Ascend910A"), (2, "Ascend910A")]
    assert db.execute("SELECT * FROM RANK_DEVICE_MAP").fetchall() == [(-1, 0), (-1, 2)]
    assert db.execute("SELECT * FROM HOST_INFO").fetchall() == [("7f3a", "node-1")]
    db.close()
    sink.close()


def test_session_time_from_control_files_else_record_span(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)

    def session() -> tuple[int, int]:
        rows = db.execute("SELECT startTimeNs, endTimeNs FROM SESSION_TIME_INFO").fetchall()
        assert len(rows) == 1
        return rows[0]

    start = 1_700_000_000_000_000_000
    sink.write_batch(feed.batch("task", [feed.task(start + 500, start + 900)]))
    assert session() == (start + 500, start + 900)  # no start_info yet: the records' span
    sink.write_batch(feed.run_info(start_ns=start))
    assert session() == (start, start + 900)
    sink.write_batch(feed.batch("api", [feed.api(start + 100, start + 2_000, connection_id=1)]))
    sink.write_batch(feed.batch("tx", [feed.tx(start + 50, start + 1_500)]))
    assert session() == (start, start + 2_000)  # the end grows with the run
    sink.write_batch(feed.run_info(start_ns=start, end_ns=start + 10_000))  # end_info written
    assert session() == (start, start + 10_000)
    sink.write_batch(feed.batch("task", [feed.task(start + 3_000, start + 4_000)]))
    assert session() == (start, start + 10_000)
    db.close()
    sink.close()


def test_aicore_freq_from_session_start_to_end(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)
    start = 1_700_000_000_000_000_000
    devices = {"0": {"platform": 5, "chip": "Ascend910B", "aic_frequency_mhz": 1800.0},
               "1": {"platform": 1, "chip": "Ascend910A", "aic_frequency_mhz": 1000.0}}  # msprof: 910B / 310B only

    def rows() -> list[tuple[int, int, int, int]]:
        return db.execute("SELECT * FROM AICORE_FREQ ORDER BY timestampNs").fetchall()

    sink.write_batch(feed.run_info(devices=devices, start_ns=start))
    assert rows() == [(0, start, 1800, -1)]  # info.json's clock from the start
    sink.write_batch(feed.batch("aicore_freq", [[0, start - 100, 1000], [0, start + 10, 1500]]))
    assert rows() == [(0, start, 1000, -1), (0, start + 10, 1500, -1)]  # the clock in effect at the start
    sink.write_batch(feed.batch("aicore_freq", [[0, start + 20, 1200]]))
    sink.write_batch(feed.run_info(devices=devices, start_ns=start, end_ns=start + 500))  # end_info written
    assert rows() == [(0, start, 1000, -1), (0, start + 10, 1500, -1), (0, start + 20, 1200, -1),
                      (0, start + 500, 1200, -1)]
    db.close()
    sink.close()


def test_api_and_mstx_rows(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.run_info(pid=4242))
    sink.write_batch(feed.batch("api", [feed.api(10, 20, connection_id=1),
                                        feed.api(0, 30, level=20000, name="aclmdlExecute", connection_id=2,
                                                 thread_id=7),
                                        feed.api(40, 50, connection_id=1)]))  # duplicate id: kept once, counted
    sink.write_batch(feed.batch("tx", [feed.tx(5, 9, message="forward", thread_id=7, process_id=99),
                                       feed.tx(12, 12, event_type=3, message="step", mark_id=5, domain=77)]))
    db = sqlite3.connect(sink.path)
    apis = db.execute("""SELECT startNs, type, globalTid, connectionId, s.value FROM CANN_API
                         JOIN STRING_IDS s ON s.id = CANN_API.name ORDER BY startNs""").fetchall()
    assert apis == [(0, 20000, (4242 << 32) | 7, 2, "aclmdlExecute"), (10, 10000, (4242 << 32) | 100, 1, "MatMul_1")]
    assert sink.accounting()["api_duplicate_connection_ids"] == 1
    tx = db.execute("""SELECT startNs, endNs, eventType, rangeId, m.value, globalTid, endGlobalTid, d.value,
                              connectionId FROM MSTX_EVENTS
                       JOIN STRING_IDS m ON m.id = MSTX_EVENTS.message
                       JOIN STRING_IDS d ON d.id = MSTX_EVENTS.domainId ORDER BY startNs""").fetchall()
    tid7, tid100 = (4242 << 32) | 7, (4242 << 32) | 100  # msprof: the application's pid from info.json
    assert tx == [(5, 9, 2, 4294967295, "forward", tid7, tid7, "", 4_000_000_000),
                  (12, 12, 3, 4294967295, "step", tid100, tid100, "77", 4_000_000_006)]
    values = [v for (v,) in db.execute("SELECT value FROM STRING_IDS")]
    assert len(values) == len(set(values))  # each text stored once
    db.close()
    sink.close()


def test_numbered_messages_keep_the_sinks_memory_bounded(ctx: StageContext, feed: Feed) -> None:
    """Each mark naming its frame: every MSTX_EVENTS row still reads its text back, a message that recurs while
    it is recent keeps its id, and the sink remembers at most twice MESSAGE_MEMO of them."""
    sink = make_sink(ctx)
    sink.write_batch(feed.run_info())
    frames = 3 * MESSAGE_MEMO
    for first in range(0, frames, 1000):
        sink.write_batch(feed.batch("tx", [feed.tx(n, n + 1, message=f"frame {n}")
                                           for n in range(first, min(first + 1000, frames))]))
        sink.write_batch(feed.batch("tx", [feed.tx(first, first, message="loop")]))  # recurs: one id
        assert len(sink._messages) + len(sink._older_messages) <= 2 * MESSAGE_MEMO + 1
    db = sqlite3.connect(sink.path)
    read_back = db.execute("""SELECT startNs, endNs, s.value FROM MSTX_EVENTS JOIN STRING_IDS s
                              ON s.id = MSTX_EVENTS.message WHERE s.value != 'loop' ORDER BY startNs""").fetchall()
    assert read_back == [(n, n + 1, f"frame {n}") for n in range(frames)]
    assert db.execute("SELECT count(DISTINCT message) FROM MSTX_EVENTS s JOIN STRING_IDS t ON t.id = s.message "
                      "WHERE t.value = 'loop'").fetchone() == (1,)
    db.close()
    sink.close()


def test_pmu_metric_names_and_units(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)
    plain = ["aicore_time(us)", "total_cycles", "mac_time(us)", "mac_ratio", "main_mem_read_bw(GB/s)",
             "gm_to_l1_datas(KB)", "memory_bound", "cube_utilization(%)", "aicpu_total_time(us)", "l2_cache_hit_rate"]
    sink.write_batch(feed.batch("task", [feed.task(0, 10, pmu=[2.5, 3000.0, 1.25, 0.5, 1.5, 64.0, 0.7, 12.0, 3.0,
                                                               0.9])], pmu_columns=plain))
    assert db.execute(PMU, (0,)).fetchall() == [
        ("gm_to_l1_datas(KB)", 64.0), ("mac_ratio", 0.5), ("mac_time", 1250.0), ("main_mem_read_bw", 1.5 * 1024**3),
        ("total_cycles", 3000.0), ("total_time", 2500.0)]
    stars = ["aicore_time(us)", "aic_total_cycles", "aic_mac_ratio", "aiv_time(us)", "aiv_total_cycles",
             "aiv_vec_time(us)", "cube_utilization(%)"]
    sink.write_batch(feed.batch("task", [feed.task(20, 30, pmu=[4.0, 8000.0, 0.25, 0.0, 0.0, 0.0, 50.0]),
                                         feed.task(40, 50, pmu=[None, None, None, 1.0, 500.0, 0.5, None])],
                                pmu_columns=stars))
    assert db.execute(PMU, (1,)).fetchall() == [
        ("aic_mac_ratio", 0.25), ("aic_total_cycles", 8000.0), ("aic_total_time", 4000.0), ("aiv_total_cycles", 0.0),
        ("aiv_total_time", 0.0), ("aiv_vec_time", 0.0)]
    assert db.execute(PMU, (2,)).fetchall() == [  # N/A values have no row
        ("aiv_total_cycles", 500.0), ("aiv_total_time", 1000.0), ("aiv_vec_time", 500.0)]
    db.close()
    sink.close()


def test_statistics_tables_replaced_on_each_snapshot(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)
    sink.write_batch(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 3, 3_000, 500, 1_500],
                                                 [0, "Add", "AI_VECTOR_CORE", 1, 1_000, 1_000, 1_000]]))
    assert db.execute("SELECT opType, count, totalTimeUs, ratio FROM OP_STATISTIC ORDER BY ratio DESC").fetchall() == [
        ("MatMul", 3, 3.0, 75.0), ("Add", 1, 1.0, 25.0)]
    sink.write_batch(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 4, 4_000, 500, 1_500]]))
    assert db.execute("SELECT opType, count FROM OP_STATISTIC").fetchall() == [("MatMul", 4)]
    sink.write_batch(feed.batch("api_statistic", [["acl", "aclmdlExecute", 3, 6_000, 1_000, 3_000, 14.0]]))
    row = db.execute("SELECT deviceId, level, apiName, timeUs, count, avgUs, variance FROM API_STATISTIC").fetchone()
    assert row[:6] == ("host", "acl", "aclmdlExecute", 6.0, 3, 2.0) and row[6] == pytest.approx(2 / 3)
    db.close()
    # a reader with sqlite-utils (or Datasette on top of it) sees typed columns and the rows
    reader = sqlite_utils.Database(sink.path)
    assert reader["OP_STATISTIC"].columns_dict == {
        "deviceId": int, "opType": str, "coreType": str, "count": int, "totalTimeUs": float, "minTimeUs": float,
        "avgTimeUs": float, "maxTimeUs": float, "ratio": float}
    assert [row["apiName"] for row in reader["API_STATISTIC"].rows] == ["aclmdlExecute"]
    reader.close()
    sink.close()


def test_restore_after_a_readers_analyze_keeps_sqlites_own_tables(ctx: StageContext, feed: Feed) -> None:
    """A reader may run ANALYZE (SQLite then keeps sqlite_stat1): cutting back to a checkpoint drops the sink's
    later tables only, never SQLite's own."""
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("task", [feed.task(0, 10)]))
    saved = sink.snapshot()
    sink.write_batch(feed.batch("task", [feed.task(20, 30, op_name="Conv_9", op_type="Conv2D")]))
    # closed before the kill: a connection of this process must not outlive the sink's (ADBC's SQLite is another
    # copy of SQLite, whose close would delete the WAL under it; readers in other processes are safe)
    with closing(sqlite3.connect(sink.path)) as reader, reader:
        reader.execute("ANALYZE")
    assert sink.conn is not None
    sink.conn.close()  # killed
    again = SqliteSink(SqliteSink.Config(timestamp=TIMESTAMP), ctx)
    again.restore(saved)
    again.write_batch(feed.batch("task", [feed.task(40, 50)]))
    again.close()
    db = sqlite3.connect(sink.path)
    assert db.execute("SELECT startNs FROM TASK ORDER BY startNs").fetchall() == [(0,), (40,)]
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone() == (1,)
    db.close()


def test_failed_batch_rolls_back_and_string_ids_stay_consistent(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    good = feed.task(0, 10)
    broken = feed.task(20, 30, op_name="Conv_9", op_type="Conv2D")[:-3]  # too few columns
    # malformed rows no column batch can hold: sent as msgpack rows
    with pytest.raises(ValueError):
        sink.write_batch(pack_rows("task", [good, broken], "tasks", {"symbols": feed.symbols.take_unsent()}))
    unbindable = feed.task(20, 30, block_dim=[8])  # fails inside the transaction, after TASK's rows went in
    with pytest.raises(sqlite3.Error):
        sink.write_batch(pack_rows("task", [unbindable], "tasks", {"symbols": feed.symbols.take_unsent()}))
    sink.write_batch(feed.batch("task", [feed.task(40, 50, op_name="Conv_9", op_type="Conv2D")]))
    db = sqlite3.connect(sink.path)
    assert db.execute(OP_NAMES).fetchall() == [("Conv_9", "Conv2D", 40, 0)]
    assert db.execute("SELECT globalTaskId, startNs FROM TASK").fetchall() == [(0, 40)]
    assert db.execute("SELECT * FROM SESSION_TIME_INFO").fetchall() == [(40, 50)]
    db.close()
    sink.close()


def test_existing_file_replaced_and_config(ctx: StageContext, feed: Feed) -> None:
    path = ctx.output_dir / "dbs" / "run.db"
    path.parent.mkdir()
    path.write_bytes(b"not a database")
    sink = make_sink(ctx, path="dbs/run.db")
    sink.write_batch(feed.batch("task", [feed.task(0, 10)]))
    sink.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM TASK").fetchone() == (1,)
    assert SqliteSink.Config().path == "msprof_{timestamp}.db"
    with pytest.raises(ValidationError):
        SqliteSink.Config(journal="wal")  # type: ignore[call-arg]


def test_a_sink_that_ends_without_close_leaves_no_traceback(tmp_path: Any) -> None:
    """A failed stage never calls close(): its ADBC connection is closed at exit without a complaint (ADBC refuses
    to close a connection whose cursor is open, and prints a traceback from the garbage collector)."""
    script = (
        "from pathlib import Path\n"
        "from pipeline.stage import StageContext\n"
        "from stages.sinks.sqlite import SqliteSink\n"
        f"out = Path({str(tmp_path)!r})\n"
        "ctx = StageContext(stage_id='db', run_id='t', output_dir=out, aside_dir=out / 'rejected')\n"
        "sink = SqliteSink(SqliteSink.Config(), ctx)\n"
        "sink.open()\n"
        "assert sink.conn is not None\n"
        "sink.cycle = sink\n"  # a failed stage's sink is collected with other garbage: in no particular order
        "del sink\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
