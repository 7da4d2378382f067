"""SQLite sink: msprof's ``msprof_{timestamp}.db`` schema, kept current while the run goes (spec §3.4).

Example config::

    db:
      type: sqlite
      inputs: [aggregate.tasks, aggregate.stats]
      path: msprof_{timestamp}.db      # relative to the run's output folder
      timestamp: "20240101120000"      # default: when the sink opens

The database is in WAL mode with ``synchronous=NORMAL``; every received batch is one committed
transaction (sqlite-utils' ``atomic``), so other processes can open and query it at any moment.
Tables, columns, types and primary keys are msprof's (:mod:`._msprof_db`); as in msprof, the
run-level and enum tables are there from the start and a data table appears with its first row. Text
columns hold ids into ``STRING_IDS`` as msprof's do. ``SESSION_TIME_INFO`` holds the collection
start and end from the control files; until end_info is written the end (and, without start_info,
the start) is the latest (earliest) record time received. Besides msprof's tables it keeps two of
ours with the live statistics, replaced on every snapshot: ``OP_STATISTIC`` and ``API_STATISTIC``
(columns as in the CSV files, times in µs, plain text). sqlite-utils does the schema work (WAL, our
own tables, the TASK index, dropping and cutting back tables after a crash); rows go in through
multi-row ``INSERT`` statements on its connection, several times faster than ``insert_all``
(reference ecosystem §3.1).

A transaction that the disk refuses (full, read-only) is rolled back, the sink's ids and caches
with it, and tried again until it commits (:mod:`pipeline.output_guard`): a pause never leaves
half a batch, nor an id that points at a string that was never stored.
"""

from __future__ import annotations

import copy
import pickle
import sqlite3
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import sqlite_utils
from pydantic import Field

from pipeline.checkpoint import pickle_state, restore_state
from pipeline.output_guard import check_fault_cue
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages.schema import SymbolTable, unpack_rows
from stages.sinks import _msprof_db as msdb
from stages.sinks._aicore_freq import AicoreFreqTable
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

MSTX_EVENT_IDS = {name: code for code, name in MSTX_EVENT_TYPES.items()}
MARKER_EX = MSTX_EVENT_IDS["marker_ex"]
MSTX_NO_CONNECTION = 4_000_000_000  # msprof's connectionId of an mstx event without a device task
UNKNOWN_CHIP = "UNKNOWN"
SCHEDULE_OP_SUFFIX = "AicpuKernel"  # msprof files such ops under COMMUNICATION_SCHEDULE_TASK_INFO
ORPHAN_CONNECTION_IDS = 1 << 62
MESSAGE_MEMO = 4096  # msproftx message texts remembered twice over (this many recent, and the ones before)
# Crash recovery (snapshot/restore): how each table is cut back to a checkpoint. Rows of these tables go in
# by rowid order; these others by an id the sink hands out in order; the enums and META_DATA never change
# after open; any other table (run info, statistics, AICORE_FREQ: small, replaced or updated in place) is
# saved whole.
APPENDED_BY_ROWID = ("TASK", "TASK_PMU_INFO", "MSTX_EVENTS")
APPENDED_BY_TASK_ID = ("COMPUTE_TASK_INFO", "COMMUNICATION_SCHEDULE_TASK_INFO")
FIXED_AT_OPEN = frozenset({"META_DATA", *msdb.ENUMS})
OWN_TABLES = (msdb.OP_STATISTIC, msdb.API_STATISTIC)  # not msprof's: the live statistics
ROWS_PER_STATEMENT = 500  # rows of one multi-row INSERT (fewer when SQLite allows fewer parameters)


def insert_rows(conn: sqlite3.Connection, table: msdb.Table, rows: list[tuple[Any, ...]], verb: str = "INSERT") -> int:
    """Insert ``rows`` many to a statement (one step per statement, not per row); returns rows inserted."""
    width = len(table.columns)
    per_statement = max(1, min(ROWS_PER_STATEMENT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    whole = len(rows) - len(rows) % per_statement
    inserted = 0
    if whole:
        sql = table.insert_sql(verb, per_statement)
        for first in range(0, whole, per_statement):
            inserted += conn.execute(sql, list(chain.from_iterable(rows[first:first + per_statement]))).rowcount
    if whole < len(rows):
        inserted += conn.executemany(table.insert_sql(verb), rows[whole:]).rowcount
    return inserted


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
        self._created: set[str] = set()
        self._string_ids: dict[str, int] = {}  # names (op, API, type, shape texts): a bounded variety
        self._next_string_id = 0
        # msproftx messages often number what they mark: only the recent ones are remembered (a message seen
        # again after MESSAGE_MEMO new ones gets another STRING_IDS row with the same text)
        self._messages: dict[str, int] = {}
        self._older_messages: dict[str, int] = {}
        self._symbol_ids: dict[int, int] = {}  # our symbol id -> STRING_IDS id
        self._shape_ids: dict[int, int] = {}  # our symbol id of a shapes text -> STRING_IDS id of it quoted
        self._new_strings: list[tuple[int, str]] = []
        self._next_task_id = 0
        self._orphan_connection_id = ORPHAN_CONNECTION_IDS
        self._api_max_connection_id = -1  # of the ids the aggregator gave (crash recovery cuts CANN_API there)
        self._pmu_names: dict[tuple[tuple[str, ...], bool], list[tuple[int, float] | None]] = {}
        self._record_span: tuple[int, int] | None = None  # earliest start, latest end of the rows written
        self._session_row: tuple[int, int] | None = None
        self._aicore_freq = AicoreFreqTable()
        self.counts = {"task_rows": 0, "compute_task_rows": 0, "schedule_task_rows": 0, "pmu_rows": 0,
                       "api_rows": 0, "api_duplicate_connection_ids": 0, "tx_rows": 0, "statistic_snapshots": 0}

    # -- stage interface -------------------------------------------------------------------

    def open(self) -> None:
        timestamp = export_timestamp(self.config.timestamp or self.ctx.export_stamp)
        self.path = self.ctx.resolve(self.config.path.replace("{timestamp}", timestamp))
        self.ctx.output_guard.attempt(self.path, self._create_database, self._discard)

    def _files(self) -> tuple[Path, Path, Path]:
        return self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")

    @property
    def conn(self) -> sqlite3.Connection | None:
        return None if self.db is None else self.db.conn

    def _discard(self) -> None:
        """A database whose creation failed: gone, so that the next attempt starts clean."""
        if self.db is not None:
            self.db.close()
            self.db = None
        self._created = set()
        for path in self._files():
            path.unlink(missing_ok=True)

    def _create_database(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for stale in self._files():
            stale.unlink(missing_ok=True)
        self.db = db = _open(self.path)
        conn = db.conn
        with db.atomic():  # tables and their first rows become visible together
            for table in msdb.TABLES.values():
                if table.always:
                    self._create(conn, table)
            names = ("SCHEMA_VERSION", "SCHEMA_VERSION_MAJOR", "SCHEMA_VERSION_MINOR", "SCHEMA_VERSION_MICRO")
            values = (".".join(msdb.SCHEMA_VERSION), *msdb.SCHEMA_VERSION)
            conn.executemany(msdb.META_DATA.insert_sql(), list(zip(names, values, strict=True)))
            for name, members in msdb.ENUMS.items():
                conn.executemany(msdb.TABLES[name].insert_sql(), sorted(members.items()))
            check_fault_cue(self.path)

    def write_batch(self, batch: Batch) -> None:
        learn_symbols(self.symbols, batch)
        handler = {
            "run_info": self._run_info, "task": self._tasks, "api": self._apis, "tx": self._txs,
            "aicore_freq": self._aicore_freq_changes, "op_statistic": self._op_statistic,
            "api_statistic": self._api_statistic,
        }.get(batch.kind)
        if handler is None:
            return
        if self.db is None:
            self.open()
        assert self.db is not None
        db = self.db
        conn = db.conn
        rows = unpack_rows(batch)

        def transaction() -> None:
            task_id, span, session, created = self._next_task_id, self._record_span, self._session_row, set(
                self._created)
            next_string_id = self._next_string_id
            aicore_freq = copy.deepcopy(self._aicore_freq)
            orphan_id, api_max_id = self._orphan_connection_id, self._api_max_connection_id
            counts = dict(self.counts)
            try:
                # one transaction per batch: commit, or roll back and forget new ids; a new table commits with
                # its first rows (no empty table is ever seen)
                with db.atomic():
                    handler(conn, rows, batch.meta)
                    self._write_session_time(conn)
                    if self._new_strings:
                        conn.executemany(msdb.STRING_IDS.insert_sql(), self._new_strings)
                    check_fault_cue(self.path)  # testing: fail where a full disk fails, before the commit
            except BaseException:
                for _, text in self._new_strings:
                    self._string_ids.pop(text, None)
                self._next_string_id = next_string_id
                self._messages, self._older_messages = {}, {}  # a memo: may hold ids just forgotten
                self._symbol_ids.clear()
                self._shape_ids.clear()
                self._pmu_names.clear()  # it may hold ids of the strings just forgotten
                self._next_task_id, self._record_span, self._session_row = task_id, span, session
                self._created = created  # the rolled-back transaction's CREATEs are undone too
                self._aicore_freq = aicore_freq
                self._orphan_connection_id, self._api_max_connection_id, self.counts = orphan_id, api_max_id, counts
                raise
            finally:
                self._new_strings = []

        self.ctx.output_guard.attempt(self.path, transaction)

    def close(self) -> None:
        if self.db is None:
            return
        db = self.db
        try:  # leave a plain single-file database when no reader holds it open
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.disable_wal()
        except sqlite3.OperationalError:
            pass
        db.close()
        self.db = None

    def accounting(self) -> dict[str, int]:
        return {**self.counts, "strings": self._next_string_id}

    # -- crash recovery -------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Every batch is a committed transaction: the checkpoint is where each table ends now (the small
        tables that are replaced or updated in place: their rows)."""
        db = self.db
        tables = _tables(db) if db is not None else set()
        ends: dict[str, int] = {}
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for name in tables - FIXED_AT_OPEN:
            assert db is not None
            if name in APPENDED_BY_ROWID:
                ends[name] = db.execute(f"SELECT coalesce(max(rowid), 0) FROM {name}").fetchone()[0]
            elif name not in (*APPENDED_BY_TASK_ID, "STRING_IDS", "CANN_API"):
                rows[name] = db.execute(f"SELECT rowid, * FROM {name}").fetchall()
        return pickle.dumps({"state": pickle_state(self, skip=("db",)), "open": db is not None,
                             "tables": tables, "ends": ends, "rows": rows})

    def restore(self, state: bytes) -> None:
        """Reopen the database as it was at the checkpoint: tables created later dropped, rows written later
        deleted, the small tables put back. The batches replayed after it then go in once."""
        saved = pickle.loads(state)
        restore_state(self, saved["state"])
        if not saved["open"]:
            return  # not opened yet: open() will start it
        tables: set[str] = saved["tables"]

        def cut_back() -> sqlite_utils.Database:
            db = _open(self.path)
            try:
                with db.atomic():
                    self._cut_back(db, tables, saved)
                    check_fault_cue(self.path)  # testing: fail where a full disk fails, before the commit
            except BaseException:
                db.close()
                raise
            return db

        self.db = self.ctx.output_guard.attempt(self.path, cut_back)  # a full disk waits here too

    def _cut_back(self, db: sqlite_utils.Database, tables: set[str], saved: dict[str, Any]) -> None:
        for later in sorted(_tables(db) - tables):
            db.table(later).drop()
        for name, end in saved["ends"].items():
            db.table(name).delete_where("rowid > ?", [end])
        for name in APPENDED_BY_TASK_ID:
            if name in tables:
                db.table(name).delete_where("globalTaskId >= ?", [self._next_task_id])
        db.table("STRING_IDS").delete_where("id >= ?", [self._next_string_id])
        if "CANN_API" in tables:
            db.table("CANN_API").delete_where("connectionId > ? AND connectionId <= ? OR connectionId > ?",
                                              [self._api_max_connection_id, ORPHAN_CONNECTION_IDS,
                                               self._orphan_connection_id])
        for name, kept in saved["rows"].items():
            db.table(name).delete_where()
            if kept:
                columns = ", ".join(("rowid", *msdb.TABLES[name].column_names))
                db.conn.executemany(f"INSERT INTO {name} ({columns}) VALUES ({', '.join('?' * len(kept[0]))})",
                                    kept)

    # -- tables and string ids ----------------------------------------------------------------

    def _create(self, conn: sqlite3.Connection, table: msdb.Table) -> None:
        if table.name in self._created:
            return
        assert self.db is not None
        if table in OWN_TABLES:  # plain types: sqlite-utils writes the definition
            self.db.table(table.name).create(dict(table.columns), pk=table.primary_key, if_not_exists=True)
        else:  # msprof's definition, word for word (its NUMERIC columns among them)
            conn.execute(table.create_sql())
        if table is msdb.TASK:
            index, columns = msdb.TASK_INDEX
            self.db.table(table.name).create_index(columns, index_name=index, if_not_exists=True)
        self._created.add(table.name)

    def _insert(self, conn: sqlite3.Connection, table: msdb.Table, rows: list[tuple[Any, ...]],
                verb: str = "INSERT") -> int:
        """Insert rows (creating the table with its first ones); returns how many went in."""
        if not rows:
            return 0
        self._create(conn, table)
        return insert_rows(conn, table, rows, verb)

    def _replace(self, conn: sqlite3.Connection, table: msdb.Table, rows: list[tuple[Any, ...]]) -> None:
        self._create(conn, table)
        conn.execute(f"DELETE FROM {table.name}")  # plain SQL: SESSION_TIME_INFO is replaced on most batches
        self._insert(conn, table, rows)

    def _sid(self, text: str) -> int:
        found = self._string_ids.get(text)
        if found is None:
            found = self._string_ids[text] = self._new_string(text)
        return found

    def _new_string(self, text: str) -> int:
        found = self._next_string_id
        self._next_string_id += 1
        self._new_strings.append((found, text))
        return found

    def _message_sid(self, text: str) -> int:
        """STRING_IDS id of an msproftx message: memory stays bounded however many distinct messages come."""
        found = self._messages.get(text)
        if found is None:
            found = self._older_messages.get(text)
            if found is None:
                found = self._string_ids.get(text)
                if found is None:
                    found = self._new_string(text)
            self._messages[text] = found
            if len(self._messages) > MESSAGE_MEMO:
                self._older_messages, self._messages = self._messages, {}
        return found

    def _sym(self, symbol: int) -> int:
        """STRING_IDS id of a symbol's text ("" is stored as N/A)."""
        found = self._symbol_ids.get(symbol)
        if found is None:
            found = self._symbol_ids[symbol] = self._sid(self.symbols[symbol] or NA)
        return found

    def _shape(self, symbol: int) -> int:
        """STRING_IDS id of a shapes text as msprof stores it: in double quotes (N/A as it is)."""
        found = self._shape_ids.get(symbol)
        if found is None:
            text = self.symbols[symbol]
            found = self._shape_ids[symbol] = self._sid(f'"{text}"' if text and text != NA else NA)
        return found

    # -- run-level tables ----------------------------------------------------------------------

    def _run_info(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        if not rows or not rows[0] or not isinstance(rows[0][0], dict):
            return
        self.info = info = RunInfo.from_row(rows[0][0])
        devices = sorted(info.devices.items())
        npus = [(device, str(facts.get("chip") or UNKNOWN_CHIP)) for device, facts in devices] or [(-1, UNKNOWN_CHIP)]
        self._replace(conn, msdb.NPU_INFO, npus)
        # msprof's exporter maps every device to rank −1 (it does not read info.json's rank_id)
        self._replace(conn, msdb.RANK_DEVICE_MAP, [(-1, device) for device, _ in npus])
        self._replace(conn, msdb.HOST_INFO, [(info.host_uid, info.hostname)])
        self._aicore_freq.run_info(conn, info)

    def _aicore_freq_changes(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        self._aicore_freq.changes(conn, rows)

    def _widen_span(self, start: int, end: int) -> None:
        if self._record_span is None:
            self._record_span = (start, end)
        else:
            low, high = self._record_span
            self._record_span = (min(low, start), max(high, end))

    def _write_session_time(self, conn: sqlite3.Connection) -> None:
        """SESSION_TIME_INFO from start_info / end_info, the records' span standing in for what is not known."""
        low, high = self._record_span or (0, 0)
        row = (self.info.start_ns or low, self.info.end_ns or high)
        if row != self._session_row and any(row):
            self._replace(conn, msdb.SESSION_TIME_INFO, [row])
            self._session_row = row

    # -- data tables ---------------------------------------------------------------------------

    def _pmu_metrics(self, columns: list[str]) -> list[tuple[int, float] | None]:
        """(STRING_IDS id of the metric name, value scale) per PMU column, None for columns left out."""
        stars = "aic_total_cycles" in columns
        key = (tuple(columns), stars)
        found = self._pmu_names.get(key)
        if found is None:
            found = []
            for column in columns:
                metric = msdb.pmu_metric(column, stars)
                found.append(None if metric is None else (self._sid(metric[0]), metric[1]))
            self._pmu_names[key] = found
        return found

    def _tasks(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        sym, symbols, shape = self._sym, self.symbols, self._shape
        pid = self.info.pid
        na, no_attr = self._sid(NA), self._sid("")
        metrics = self._pmu_metrics(list(meta.get("pmu_columns") or []) + list(meta.get("hidden_pmu_columns") or []))
        measured = [(i, metric[0], metric[1]) for i, metric in enumerate(metrics) if metric is not None]
        tasks, compute, schedule, pmu_rows = [], [], [], []
        global_id = self._next_task_id
        for row in rows:
            (device, model_id, _iteration, stream_id, task_id, _batch_id, start, end, op_name, op_type,
             task_type, op_state, block_dim, mix_block_dim, connection_id, _thread_id, in_shapes,
             in_dtypes, in_formats, out_shapes, out_dtypes, out_formats, pmu, context_id, _kernel_name,
             runtime_task_type, hf32, *_) = row
            context = UINT32_NONE if context_id is None else context_id
            # msprof: the runtime's task type (KERNEL_AICORE …); an FFTS+ context's row, the op's core type
            kind = sym(runtime_task_type) if context == UINT32_NONE else sym(task_type)
            tasks.append((start, end, device, connection_id, global_id, pid, kind, context, stream_id, task_id,
                          model_id))
            if op_name and symbols[op_name].endswith(SCHEDULE_OP_SUFFIX):
                schedule.append((sym(op_name), global_id, sym(task_type), sym(op_type)))
            elif op_name:
                compute.append((sym(op_name), global_id, block_dim, mix_block_dim, sym(task_type), sym(op_type),
                                sym(in_formats), sym(in_dtypes), shape(in_shapes), sym(out_formats),
                                sym(out_dtypes), shape(out_shapes), no_attr, sym(op_state), sym(hf32), na, na))
            if pmu:
                count = len(pmu)
                pmu_rows += [(global_id, name, pmu[i] * scale) for i, name, scale in measured
                             if i < count and pmu[i] is not None]
            global_id += 1
        if tasks:
            self._widen_span(min(map(itemgetter(0), tasks)), max(map(itemgetter(1), tasks)))
        self._insert(conn, msdb.TASK, tasks)
        self._insert(conn, msdb.COMPUTE_TASK_INFO, compute)
        self._insert(conn, msdb.COMMUNICATION_SCHEDULE_TASK_INFO, schedule)
        self._insert(conn, msdb.TASK_PMU_INFO, pmu_rows)
        self._next_task_id = global_id
        self.counts["task_rows"] += len(tasks)
        self.counts["compute_task_rows"] += len(compute)
        self.counts["schedule_task_rows"] += len(schedule)
        self.counts["pmu_rows"] += len(pmu_rows)

    def _apis(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        pid = self.info.pid
        values = []
        for start, end, level, _struct_type, name, thread_id, connection_id, _item_id in rows:
            if connection_id is None:  # the primary key needs one: mint it far from the aggregator's
                self._orphan_connection_id += 1
                connection_id = self._orphan_connection_id
            else:
                self._api_max_connection_id = max(self._api_max_connection_id, connection_id)
            values.append((start, end, level_code(level), (pid << 32) | thread_id, connection_id, self._sym(name)))
        if values:
            self._widen_span(min(map(itemgetter(0), values)), max(map(itemgetter(1), values)))
        inserted = self._insert(conn, msdb.CANN_API, values, "INSERT OR IGNORE")
        self.counts["api_rows"] += inserted
        self.counts["api_duplicate_connection_ids"] += len(values) - inserted

    def _txs(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        values = []
        for row in rows:
            (start, end, process_id, thread_id, category, event_type, _payload_type, _payload_value,
             _message_type, message, domain, mark_id) = row
            # msprof joins the tid with the application's pid from info.json, as for CANN_API
            global_tid = ((self.info.pid or process_id) << 32) | thread_id
            kind = event_type if isinstance(event_type, int) else MSTX_EVENT_IDS.get(str(event_type))
            text = self.symbols[message] if isinstance(message, int) else str(message or "")
            if kind == MARKER_EX:  # its mark id links it to a device task; the domain is a name hash here
                connection_id, domain_text = MSTX_NO_CONNECTION + 1 + mark_id, str(domain)
            else:
                connection_id, domain_text = MSTX_NO_CONNECTION, ""
            values.append((start, end, kind, UINT32_NONE, category, self._message_sid(text), global_tid, global_tid,
                           self._sid(domain_text), connection_id))
            self._widen_span(start, end)
        self._insert(conn, msdb.MSTX_EVENTS, values)
        self.counts["tx_rows"] += len(values)

    # -- statistics (ours) ----------------------------------------------------------------------

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
        self._replace(conn, msdb.OP_STATISTIC, values)
        self.counts["statistic_snapshots"] += 1

    def _api_statistic(self, conn: sqlite3.Connection, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        values = []
        for level, name, count, total, low, high, sum_sq in rows:
            mean = total / 1000 / count if count else 0.0
            variance = max(0.0, sum_sq / count - mean * mean) if count else 0.0
            values.append(("host", level_name(level), text_of(self.symbols, name), total / 1000, count, mean,
                           low / 1000, high / 1000, variance))
        self._replace(conn, msdb.API_STATISTIC, values)
        self.counts["statistic_snapshots"] += 1


def _tables(db: sqlite_utils.Database) -> set[str]:
    """The database's tables but SQLite's own (``sqlite_sequence``, ``sqlite_stat1`` …)."""
    return {name for name in db.table_names() if not name.startswith("sqlite_")}


def _open(path: Path) -> sqlite_utils.Database:
    """The database at ``path`` in WAL mode, ``synchronous=NORMAL``; sqlite-utils plugins found on the machine are
    not run on its connection."""
    db = sqlite_utils.Database(path, execute_plugins=False)
    db.enable_wal()
    db.execute("PRAGMA synchronous=NORMAL")
    return db
