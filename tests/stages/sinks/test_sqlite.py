"""SqliteSink: msprof's db schema, queryable by another connection while the sink runs."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from pydantic import ValidationError
from sink_batches import TIMESTAMP, Feed

from pipeline.stage import StageContext
from stages.sinks.sqlite import SqliteSink

OP_NAMES = """
    SELECT name_ids.value, type_ids.value, TASK.startNs, TASK.deviceId
    FROM COMPUTE_TASK_INFO
    LEFT JOIN TASK ON TASK.globalTaskId = COMPUTE_TASK_INFO.globalTaskId
    LEFT JOIN STRING_IDS AS name_ids ON name_ids.id = COMPUTE_TASK_INFO.name
    LEFT JOIN STRING_IDS AS type_ids ON type_ids.id = COMPUTE_TASK_INFO.opType
    ORDER BY TASK.startNs
"""


def make_sink(ctx: StageContext, **config: Any) -> SqliteSink:
    sink = SqliteSink(SqliteSink.Config(timestamp=TIMESTAMP, **config), ctx)
    sink.open()
    return sink


def columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def test_readable_mid_stream_by_another_connection(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    path = ctx.output_dir / f"msprof_{TIMESTAMP}.db"
    reader = sqlite3.connect(path)
    assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    sink.write_batch(feed.run_info(pid=4242))
    sink.write_batch(feed.batch("task", [feed.task(1_000, 2_000, connection_id=1),
                                         feed.task(3_000, 4_000, op_name="Add_2", op_type="Add", connection_id=2),
                                         feed.task(5_000, 6_000, op_name="", task_type="EVENT_RECORD")]))
    assert reader.execute(OP_NAMES).fetchall() == [("MatMul_1", "MatMul", 1_000, 0), ("Add_2", "Add", 3_000, 0)]
    assert reader.execute("SELECT COUNT(*) FROM TASK").fetchone() == (3,)
    sink.write_batch(feed.batch("task", [feed.task(7_000, 8_000, op_name="Relu_3", op_type="Relu", device_id=1)]))
    assert [r[0] for r in reader.execute(OP_NAMES)] == ["MatMul_1", "Add_2", "Relu_3"]
    task_types = reader.execute(
        "SELECT s.value FROM TASK JOIN STRING_IDS s ON s.id = TASK.taskType ORDER BY startNs").fetchall()
    assert [t for (t,) in task_types] == ["AI_CORE", "AI_CORE", "EVENT_RECORD", "AI_CORE"]
    ids = [r[0] for r in reader.execute("SELECT globalTaskId FROM TASK ORDER BY startNs")]
    assert ids == [0, 1, 2, 3]
    assert reader.execute("SELECT DISTINCT globalPid, contextId FROM TASK").fetchall() == [(4242, 4294967295)]
    reader.close()
    sink.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert len(db.execute(OP_NAMES).fetchall()) == 3


def test_schema_as_msprof(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    db = sqlite3.connect(sink.path)
    assert columns(db, "STRING_IDS") == ["id", "value"]
    assert columns(db, "TASK") == ["startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "globalPid",
                                   "taskType", "contextId", "streamId", "taskId", "modelId"]
    assert columns(db, "COMPUTE_TASK_INFO") == [
        "name", "globalTaskId", "blockNum", "mixBlockNum", "taskType", "opType", "inputFormats", "inputDataTypes",
        "inputShapes", "outputFormats", "outputDataTypes", "outputShapes", "attrInfo", "opState", "hf32Eligible",
        "gridDim", "blockDim"]
    assert columns(db, "CANN_API") == ["startNs", "endNs", "type", "globalTid", "connectionId", "name"]
    assert columns(db, "MSTX_EVENTS") == ["startNs", "endNs", "eventType", "rangeId", "category", "message",
                                          "globalTid", "endGlobalTid", "domainId", "connectionId"]
    assert columns(db, "TASK_PMU_INFO") == ["globalTaskId", "name", "value"]
    index = db.execute("SELECT name FROM pragma_index_list('TASK')").fetchall()
    assert ("TaskIndex",) in index
    assert [r[2] for r in db.execute("PRAGMA index_info('TaskIndex')")] == ["startNs", "globalTaskId"]
    assert dict(db.execute("SELECT name, value FROM META_DATA")) == {
        "SCHEMA_VERSION": "1.2.0", "SCHEMA_VERSION_MAJOR": "1", "SCHEMA_VERSION_MINOR": "2",
        "SCHEMA_VERSION_MICRO": "0"}
    api_types = dict(db.execute("SELECT id, name FROM ENUM_API_TYPE"))
    assert {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime"}.items() <= \
        api_types.items()
    db.close()
    sink.close()


def test_api_tx_pmu_and_run_info(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.run_info(pid=4242))
    sink.write_batch(feed.batch("api", [feed.api(10, 20, connection_id=1),
                                        feed.api(0, 30, level=20000, name="aclmdlExecute", connection_id=2,
                                                 thread_id=7),
                                        feed.api(40, 50, connection_id=1)]))  # duplicate id: kept once, counted
    pmu = ["aicore_time(us)", "aic_mac_ratio"]
    sink.write_batch(feed.batch("task", [feed.task(100, 200, pmu=[1.5, None])], pmu_columns=pmu))
    sink.write_batch(feed.batch("tx", [feed.tx(5, 9, message="forward", thread_id=7)]))
    db = sqlite3.connect(sink.path)
    apis = db.execute("""SELECT startNs, type, globalTid, connectionId, s.value FROM CANN_API
                         JOIN STRING_IDS s ON s.id = CANN_API.name ORDER BY startNs""").fetchall()
    assert apis == [(0, 20000, (4242 << 32) | 7, 2, "aclmdlExecute"), (10, 10000, (4242 << 32) | 100, 1, "MatMul_1")]
    assert sink.accounting()["api_duplicate_connection_ids"] == 1
    assert db.execute("""SELECT s.value, TASK_PMU_INFO.value FROM TASK_PMU_INFO
                         JOIN STRING_IDS s ON s.id = TASK_PMU_INFO.name""").fetchall() == [("aicore_time(us)", 1.5)]
    assert db.execute("""SELECT startNs, endNs, eventType, s.value, globalTid FROM MSTX_EVENTS
                         JOIN STRING_IDS s ON s.id = MSTX_EVENTS.message""").fetchall() == [
        (5, 9, 2, "forward", (4242 << 32) | 7)]
    assert db.execute("SELECT id, name FROM NPU_INFO").fetchall() == [(0, "Ascend910B")]
    assert db.execute("SELECT startTimeNs FROM SESSION_TIME_INFO").fetchall() == [(1_700_000_000_000_000_000,)]
    values = [v for (v,) in db.execute("SELECT value FROM STRING_IDS")]
    assert len(values) == len(set(values))  # each text stored once
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
    sink.write_batch(feed.batch("api_statistic", [[20000, "aclmdlExecute", 3, 6_000, 1_000, 3_000, 14.0]]))
    row = db.execute("SELECT deviceId, level, apiName, timeUs, count, avgUs, variance FROM API_STATISTIC").fetchone()
    assert row[:6] == ("host", "acl", "aclmdlExecute", 6.0, 3, 2.0) and row[6] == pytest.approx(2 / 3)
    db.close()
    sink.close()


def test_failed_batch_rolls_back_and_string_ids_stay_consistent(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    good = feed.task(0, 10)
    broken = feed.task(20, 30, op_name="Conv_9", op_type="Conv2D")[:-3]  # too few columns
    with pytest.raises(ValueError):
        sink.write_batch(feed.batch("task", [good, broken]))
    sink.write_batch(feed.batch("task", [feed.task(40, 50, op_name="Conv_9", op_type="Conv2D")]))
    db = sqlite3.connect(sink.path)
    assert db.execute(OP_NAMES).fetchall() == [("Conv_9", "Conv2D", 40, 0)]
    assert db.execute("SELECT globalTaskId FROM TASK").fetchall() == [(0,)]
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
