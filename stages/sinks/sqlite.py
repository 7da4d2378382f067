"""SQLite sink: msprof's ``msprof_{timestamp}.db`` schema, kept current while the run goes (spec §3.4).

Example config::

    db:
      type: sqlite
      inputs: [aggregate.tasks, aggregate.stats]
      path: msprof_{timestamp}.db      # relative to the run's output folder
      timestamp: "20240101120000"      # default: when the sink opens

The database is in WAL mode with ``synchronous=NORMAL``; every received batch is one committed
transaction, so other processes can open and query it at any moment. A transaction that the
disk refuses (full, read-only) is rolled back and tried again until it commits (see
:mod:`pipeline.output_guard`), so a pause never leaves half a batch. Text columns hold ids
into ``STRING_IDS`` as msprof's do. Besides msprof's tables it keeps two of ours with the live
statistics, replaced on every snapshot: ``OP_STATISTIC`` and ``API_STATISTIC`` (columns as in
the CSV files, times in µs, plain text).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlite_utils
from pydantic import Field

from pipeline.output_guard import check_fault_cue
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages.schema import SymbolTable, unpack_rows
from stages.sinks._format import (
    MSTX_EVENT_TYPES,
    NA,
    UINT32_NONE,
    RunInfo,
    export_timestamp,
    learn_symbols,
    level_code,
    level_name,
    text_of,
)

SCHEMA_VERSION = ("1", "2", "0")  # msprof's SCHEMA_VERSION_MAJOR / MINOR / MICRO
API_TYPES = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime",
             50001: "op", 50002: "queue", 50003: "trace", 50004: "mstx"}
CHIPS = {0: "Ascend310", 1: "Ascend910A", 4: "Ascend310P", 5: "Ascend910B", 7: "Ascend310B", 15: "Ascend950"}
MSTX_EVENT_IDS = {name: code for code, name in MSTX_EVENT_TYPES.items()}

_INT, _TEXT, _REAL = "INTEGER", "TEXT", "REAL"
TABLES: dict[str, dict[str, str]] = {
    "STRING_IDS": {"id": _INT, "value": _TEXT},
    "SESSION_TIME_INFO": {"startTimeNs": _INT, "endTimeNs": _INT},
    "NPU_INFO": {"id": _INT, "name": _TEXT},
    "HOST_INFO": {"hostUid": _TEXT, "hostName": _TEXT},
    "TASK": {c: _INT for c in ("startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "globalPid",
                               "taskType", "contextId", "streamId", "taskId", "modelId")},
    "COMPUTE_TASK_INFO": {c: _INT for c in (
        "name", "globalTaskId", "blockNum", "mixBlockNum", "taskType", "opType", "inputFormats",
        "inputDataTypes", "inputShapes", "outputFormats", "outputDataTypes", "outputShapes", "attrInfo",
        "opState", "hf32Eligible", "gridDim", "blockDim")},
    "CANN_API": {c: _INT for c in ("startNs", "endNs", "type", "globalTid", "connectionId", "name")},
    "MSTX_EVENTS": {c: _INT for c in ("startNs", "endNs", "eventType", "rangeId", "category", "message",
                                      "globalTid", "endGlobalTid", "domainId", "connectionId")},
    "TASK_PMU_INFO": {"globalTaskId": _INT, "name": _INT, "value": _REAL},
    "META_DATA": {"name": _TEXT, "value": _TEXT},
    "ENUM_API_TYPE": {"id": _INT, "name": _TEXT},
    "ENUM_MSTX_EVENT_TYPE": {"id": _INT, "name": _TEXT},
    "OP_STATISTIC": {"deviceId": _INT, "opType": _TEXT, "coreType": _TEXT, "count": _INT, "totalTimeUs": _REAL,
                     "minTimeUs": _REAL, "avgTimeUs": _REAL, "maxTimeUs": _REAL, "ratio": _REAL},
    "API_STATISTIC": {"deviceId": _TEXT, "level": _TEXT, "apiName": _TEXT, "timeUs": _REAL, "count": _INT,
                      "avgUs": _REAL, "minUs": _REAL, "maxUs": _REAL, "variance": _REAL},
}
PRIMARY_KEYS = {"STRING_IDS": "id", "COMPUTE_TASK_INFO": "globalTaskId", "CANN_API": "connectionId",
                "ENUM_API_TYPE": "id", "ENUM_MSTX_EVENT_TYPE": "id"}


def _insert_sql(table: str, verb: str = "INSERT") -> str:
    columns = TABLES[table]
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


class SqliteSink(Sink):
    """Writes msprof_{timestamp}.db, one committed transaction per received batch."""

    class Config(StageConfig):
        path: str = Field("msprof_{timestamp}.db", description="database file; {timestamp} is substituted")
        timestamp: str | None = Field(None, description="the {timestamp} of the name; default: open time")

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, self.Config):
            config = self.Config.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: SqliteSink.Config = config
        self.symbols = SymbolTable()
        self.info = RunInfo()
        self.path = Path()
        self.db: sqlite_utils.Database | None = None
        self._string_ids: dict[str, int] = {}
        self._symbol_ids: dict[int, int] = {}  # our symbol id -> STRING_IDS id
        self._new_strings: list[tuple[int, str]] = []
        self._next_task_id = 0
        self._orphan_connection_id = 1 << 62
        self.counts = {"task_rows": 0, "compute_task_rows": 0, "pmu_rows": 0, "api_rows": 0,
                       "api_duplicate_connection_ids": 0, "tx_rows": 0, "statistic_snapshots": 0}

    # -- stage interface -------------------------------------------------------------------

    def open(self) -> None:
        timestamp = export_timestamp(self.config.timestamp or self.ctx.export_stamp)
        self.path = self.ctx.resolve(self.config.path.replace("{timestamp}", timestamp))
        self.ctx.output_guard.attempt(self.path, self._create, self._discard)

    def _files(self) -> tuple[Path, Path, Path]:
        return self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")

    def _discard(self) -> None:
        """A database whose creation failed: gone, so that the next attempt starts clean."""
        if self.db is not None:
            self.db.conn.close()
            self.db = None
        for path in self._files():
            path.unlink(missing_ok=True)

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for stale in self._files():
            stale.unlink(missing_ok=True)
        self.db = db = sqlite_utils.Database(self.path)
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")
        with db.conn:
            for table, columns in TABLES.items():
                db.table(table).create(columns, pk=PRIMARY_KEYS.get(table))
            db.table("TASK").create_index(["startNs", "globalTaskId"], index_name="TaskIndex")
            names = ("SCHEMA_VERSION", "SCHEMA_VERSION_MAJOR", "SCHEMA_VERSION_MINOR", "SCHEMA_VERSION_MICRO")
            values = (".".join(SCHEMA_VERSION), *SCHEMA_VERSION)
            db.conn.executemany(_insert_sql("META_DATA"), list(zip(names, values, strict=True)))
            db.conn.executemany(_insert_sql("ENUM_API_TYPE"), sorted(API_TYPES.items()))
            db.conn.executemany(_insert_sql("ENUM_MSTX_EVENT_TYPE"), sorted(MSTX_EVENT_TYPES.items()))
            check_fault_cue(self.path)

    def write_batch(self, batch: Batch) -> None:
        learn_symbols(self.symbols, batch)
        handler = {
            "run_info": self._run_info, "task": self._tasks, "api": self._apis, "tx": self._txs,
            "op_statistic": self._op_statistic, "api_statistic": self._api_statistic,
        }.get(batch.kind)
        if handler is None:
            return
        if self.db is None:
            self.open()
        assert self.db is not None
        conn = self.db.conn
        rows = unpack_rows(batch)

        def transaction() -> None:
            task_id, orphan_id, counts = self._next_task_id, self._orphan_connection_id, dict(self.counts)
            try:
                with conn:  # one transaction per batch: commit, or roll back and forget new ids
                    handler(conn, rows, batch.meta)
                    if self._new_strings:
                        conn.executemany(_insert_sql("STRING_IDS"), self._new_strings)
                    check_fault_cue(self.path)  # testing: fail where a full disk fails, before the commit
            except BaseException:
                for _, text in self._new_strings:
                    del self._string_ids[text]
                self._symbol_ids.clear()
                self._next_task_id, self._orphan_connection_id, self.counts = task_id, orphan_id, counts
                raise
            finally:
                self._new_strings = []

        self.ctx.output_guard.attempt(self.path, transaction)

    def close(self) -> None:
        if self.db is None:
            return
        conn = self.db.conn
        try:  # leave a plain single-file database when no reader holds it open
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.OperationalError:
            pass
        conn.close()
        self.db = None

    def accounting(self) -> dict[str, int]:
        return {**self.counts, "strings": len(self._string_ids)}

    # -- string ids ---------------------------------------------------------------------------

    def _sid(self, text: str) -> int:
        found = self._string_ids.get(text)
        if found is None:
            found = self._string_ids[text] = len(self._string_ids)
            self._new_strings.append((found, text))
        return found

    def _sym(self, symbol: int) -> int:
        """STRING_IDS id of a symbol's text ("" is stored as N/A)."""
        found = self._symbol_ids.get(symbol)
        if found is None:
            found = self._symbol_ids[symbol] = self._sid(self.symbols[symbol] or NA)
        return found

    # -- batches ------------------------------------------------------------------------------

    def _run_info(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        if not rows or not rows[0] or not isinstance(rows[0][0], dict):
            return
        self.info = info = RunInfo.from_row(rows[0][0])
        conn.execute("DELETE FROM SESSION_TIME_INFO")
        conn.execute(_insert_sql("SESSION_TIME_INFO"), (info.start_ns, info.end_ns))
        conn.execute("DELETE FROM NPU_INFO")
        conn.executemany(_insert_sql("NPU_INFO"), [
            (device, str(d.get("chip") or CHIPS.get(d.get("platform", -1), ""))) for device, d in info.devices.items()
        ])
        conn.execute("DELETE FROM HOST_INFO")
        conn.execute(_insert_sql("HOST_INFO"), ("", info.hostname))

    def _tasks(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        sym = self._sym
        pid = self.info.pid
        na = self._sid(NA)
        pmu_ids = [self._sid(name) for name in meta.get("pmu_columns") or []]
        tasks, compute, pmu_rows = [], [], []
        global_id = self._next_task_id
        for row in rows:
            (device, model_id, _iteration, stream_id, task_id, _batch_id, start, end, op_name, op_type,
             task_type, op_state, block_dim, mix_block_dim, connection_id, _thread_id, in_shapes,
             in_dtypes, in_formats, out_shapes, out_dtypes, out_formats, pmu, context_id, *_) = row
            tasks.append((start, end, device, connection_id, global_id, pid, sym(task_type),
                          UINT32_NONE if context_id is None else context_id,
                          stream_id, task_id, model_id))
            if op_name:
                compute.append((sym(op_name), global_id, block_dim, mix_block_dim, sym(task_type), sym(op_type),
                                sym(in_formats), sym(in_dtypes), sym(in_shapes), sym(out_formats),
                                sym(out_dtypes), sym(out_shapes), na, sym(op_state), na, na, na))
                for name_id, value in zip(pmu_ids, pmu or (), strict=False):
                    if value is not None:
                        pmu_rows.append((global_id, name_id, value))
            global_id += 1
        conn.executemany(_insert_sql("TASK"), tasks)
        conn.executemany(_insert_sql("COMPUTE_TASK_INFO"), compute)
        conn.executemany(_insert_sql("TASK_PMU_INFO"), pmu_rows)
        self._next_task_id = global_id
        self.counts["task_rows"] += len(tasks)
        self.counts["compute_task_rows"] += len(compute)
        self.counts["pmu_rows"] += len(pmu_rows)

    def _apis(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        pid = self.info.pid
        values = []
        for start, end, level, _struct_type, name, thread_id, connection_id, _item_id in rows:
            if connection_id is None:  # the primary key needs one: mint it far from the aggregator's
                self._orphan_connection_id += 1
                connection_id = self._orphan_connection_id
            values.append((start, end, level_code(level), (pid << 32) | thread_id, connection_id, self._sym(name)))
        inserted = conn.executemany(_insert_sql("CANN_API", "INSERT OR IGNORE"), values).rowcount
        self.counts["api_rows"] += inserted
        self.counts["api_duplicate_connection_ids"] += len(values) - inserted

    def _txs(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        values = []
        for row in rows:
            (start, end, process_id, thread_id, category, event_type, _payload_type, _payload_value,
             _message_type, message, domain, mark_id) = row
            global_tid = (process_id << 32) | thread_id
            kind = event_type if isinstance(event_type, int) else MSTX_EVENT_IDS.get(str(event_type))
            text = self.symbols[message] if isinstance(message, int) else str(message or "")
            values.append((start, end, kind, None, category, self._sid(text), global_tid, global_tid, domain,
                           mark_id))
        conn.executemany(_insert_sql("MSTX_EVENTS"), values)
        self.counts["tx_rows"] += len(values)

    def _op_statistic(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        totals: dict[int, int] = {}
        for row in rows:
            totals[row[0]] = totals.get(row[0], 0) + row[4]
        values = [
            (device, text_of(self.symbols, op_type), text_of(self.symbols, core_type), count, total / 1000,
             low / 1000, total / count / 1000 if count else 0.0, high / 1000,
             total * 100 / totals[device] if totals[device] else 0.0)
            for device, op_type, core_type, count, total, low, high in rows
        ]
        conn.execute("DELETE FROM OP_STATISTIC")
        conn.executemany(_insert_sql("OP_STATISTIC"), values)
        self.counts["statistic_snapshots"] += 1

    def _api_statistic(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        values = []
        for level, name, count, total, low, high, sum_sq in rows:
            mean = total / 1000 / count if count else 0.0
            variance = max(0.0, sum_sq / count - mean * mean) if count else 0.0
            values.append(("host", level_name(level), text_of(self.symbols, name), total / 1000, count, mean,
                           low / 1000, high / 1000, variance))
        conn.execute("DELETE FROM API_STATISTIC")
        conn.executemany(_insert_sql("API_STATISTIC"), values)
        self.counts["statistic_snapshots"] += 1
