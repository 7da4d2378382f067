"""SQLite sink: msprof's ``msprof_{timestamp}.db`` schema, kept current while the run goes (msprof's ``msprof_db.cpp``).

Example config::

    db:
      type: sqlite
      inputs: [aggregate.tasks, aggregate.stats]
      path: msprof_{timestamp}.db      # relative to the run's output folder
      timestamp: "20240101120000"      # default: when the sink opens

The database is in WAL mode with ``synchronous=NORMAL``; every received batch is one committed
transaction, so other processes can open and query it at any moment. Tables, columns, types and
primary keys are msprof's (:mod:`._msprof_db`); as in msprof, the run-level and enum tables are there
from the start and a data table appears with its first row. Text columns hold ids into ``STRING_IDS``
as msprof's do. ``SESSION_TIME_INFO`` holds the collection start and end from the control files;
until end_info is written the end (and, without start_info, the start) is the latest (earliest)
record time received. Besides msprof's tables it keeps two of ours with the live statistics,
replaced on every snapshot: ``OP_STATISTIC`` and ``API_STATISTIC`` (columns as in the CSV files,
times in µs, plain text).

Rows are made column-wise from the aggregator's Arrow tables (pyarrow compute, numpy) and go in by
ADBC bulk ingest (``adbc_ingest``, mode append: one prepared INSERT stepped in C over the Arrow
buffers), one transaction per batch. sqlite-utils does the schema work: it creates the database (WAL,
the run-level and enum tables), writes our own tables' definitions, closes the database (checkpoint,
back to a single file), and drops and cuts back tables after a crash.

One connection at a time: ADBC's SQLite driver carries its own copy of SQLite, and two copies of
SQLite in one process do not see each other's POSIX locks (an ADBC write went through while a
``sqlite3`` connection of the same process held the write lock, and was lost at its commit; and a
close by one copy drops the other's locks, SQLite's "how to corrupt" §2.2.1). So the sink's
``sqlite3`` connection (sqlite-utils) is open only while the ADBC one is closed: at creation, at a
restore's cut-back, at close. Readers in other processes are safe: across processes both copies
lock the file and its WAL index the same way.

A transaction that the disk refuses (full, read-only) is rolled back, the sink's ids and caches
with it, and tried again until it commits (:mod:`pipeline.output_guard`): a pause never leaves
half a batch, nor an id that points at a string that was never stored.
"""

from __future__ import annotations

import copy
import functools
import pickle
import sqlite3
import sys
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from pipeline.checkpoint import pickle_state, restore_state
from pipeline.output_guard import check_fault_cue
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages import tables as arrow_tables
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
    level_name,
)
from stages.sinks._partitions import PartitionMerge

if TYPE_CHECKING:
    import adbc_driver_manager
    import sqlite_utils

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
API_SCRATCH = "api_rows"  # temp table of a CANN_API batch whose connection ids are already there
# sqlite error codes of ADBC's error messages (the driver gives the message, not the code)
SQLITE_CODES = (("database or disk is full", 13), ("readonly", 8), ("read-only", 8), ("disk I/O error", 10),
                ("unable to open", 14), ("database is locked", 5), ("constraint failed", 19))
BUSY_TIMEOUT_MS = 5000  # a reader's checkpoint holding a lock: wait (ADBC's SQLite would fail at once)
_I64 = pa.int64()


# -- the ADBC connection ----------------------------------------------------------------------------

@functools.cache
def _adbc_sqlite() -> ModuleType:
    """ADBC's SQLite DB-API module, imported by the sink's process when it opens its database (a process that only
    validates a config goes without it). ADBC's parameter binding would import polars (~0.1 s of CPU) to bind
    polars frames, which this sink never passes: it is imported without it unless polars is already there."""
    hide_polars = "polars" not in sys.modules
    if hide_polars:
        sys.modules["polars"] = None  # type: ignore[assignment]  # import polars → ImportError: ADBC goes without
    try:
        import adbc_driver_sqlite.dbapi as adbc_sqlite
    finally:
        if hide_polars:
            del sys.modules["polars"]
    return adbc_sqlite


def _sqlite_utils() -> ModuleType:
    import sqlite_utils

    return sqlite_utils


def _sqlite_error(exc: adbc_driver_manager.Error) -> sqlite3.Error:
    """An ADBC error as the sqlite3 error it stands for (the output guard reads ``sqlite_errorcode``)."""
    text = str(exc)
    code = next((code for words, code in SQLITE_CODES if words in text), 1)
    error = (sqlite3.IntegrityError if code == 19 else sqlite3.OperationalError)(text)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@contextmanager
def _as_sqlite() -> Iterator[None]:
    import adbc_driver_manager

    try:
        yield
    except adbc_driver_manager.Error as exc:
        raise _sqlite_error(exc) from exc


class Writer:
    """The sink's connection while it runs: ADBC's SQLite driver, autocommit (transactions by BEGIN/COMMIT)."""

    def __init__(self, path: Path) -> None:
        with _as_sqlite():
            self.conn = _adbc_sqlite().connect(str(path), autocommit=True)
            self.cursor = self.conn.cursor()
            self.cursor.execute("PRAGMA synchronous=NORMAL")
            self.cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")  # as Python's sqlite3 waits by default
        # closed by close(), or when the stage ends without it (a failed stage): ADBC refuses to close a
        # connection whose cursor is open, and would say so in a traceback at exit
        self._closer = weakref.finalize(self, _close_handles, self.cursor, self.conn)

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        with _as_sqlite():
            self.cursor.execute(sql, params)

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with _as_sqlite():
            self.cursor.execute(sql, params)
            return [tuple(row) for row in self.cursor.fetchall()]

    def ingest(self, name: str, table: pa.Table, temporary: bool = False) -> None:
        """Append ``table``'s rows to ``name`` (its columns named as the table's)."""
        with _as_sqlite():
            self.cursor.adbc_ingest(name, table, mode="replace" if temporary else "append", temporary=temporary)

    def insert(self, table: msdb.Table, rows: Sequence[Sequence[Any]]) -> None:
        """Python rows (the small tables) by the same bulk path."""
        if rows:
            self.ingest(table.name, rows_table(table, rows))

    def rollback(self) -> None:
        try:
            self.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # no transaction (the error ended it)

    def close(self) -> None:
        self._closer()


def _close_handles(cursor: Any, conn: Any) -> None:
    """The cursor, then its connection (once each; already closed is fine)."""
    import adbc_driver_manager

    for handle in (cursor, conn):
        try:
            handle.close()
        except adbc_driver_manager.Error:
            pass


def rows_table(table: msdb.Table, rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Python rows as an Arrow table with ``table``'s column names (types as Python's: int, float, text)."""
    columns = list(zip(*rows, strict=True))
    arrays = [pa.array(values) for values in columns]
    arrays = [array.cast(_I64) if array.type == pa.null() else array for array in arrays]
    return pa.Table.from_arrays(arrays, names=list(table.column_names))


def _arrow(table: msdb.Table, columns: Sequence[Any]) -> pa.Table:
    """Arrays (a scalar: the same value on every row) as a table with ``table``'s column names."""
    length = next(len(column) for column in columns if not isinstance(column, int | float | str))
    arrays = [pa.array(np.full(length, column)) if isinstance(column, int | float) else
              pa.array([column] * length, pa.string()) if isinstance(column, str) else column
              for column in columns]
    return pa.Table.from_arrays(arrays, names=list(table.column_names))


_SCHEMA_SQL: sqlite_utils.Database | None = None


def _own_table_sql(table: msdb.Table) -> str:
    """sqlite-utils' definition of one of our own tables (rendered on a scratch in-memory database)."""
    global _SCHEMA_SQL
    if _SCHEMA_SQL is None:
        _SCHEMA_SQL = _sqlite_utils().Database(memory=True, execute_plugins=False)
    return _SCHEMA_SQL.create_table_sql(table.name, dict(table.columns), pk=table.primary_key, if_not_exists=True)


def _index_sql(table: msdb.Table, index: str, columns: Sequence[str]) -> str:
    """The index as sqlite-utils' ``create_index`` writes it."""
    quoted = ", ".join(f'"{column}"' for column in columns)
    return f'CREATE INDEX IF NOT EXISTS "{index}"\n    ON "{table.name}" ({quoted});'


def _array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _np(column: pa.ChunkedArray | pa.Array, fill: int = 0) -> np.ndarray:
    """An integer column as numpy (nulls as ``fill``)."""
    if column.null_count:
        column = pc.fill_null(column, fill)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_numpy(zero_copy_only=False)


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
        self.partitions = PartitionMerge()  # a partitioned aggregator's snapshots and run_info, merged
        self.path = Path()
        self.db: Writer | None = None
        self._created: set[str] = set()
        self._string_ids: dict[str, int] = {}  # names (op, API, type, shape texts): a bounded variety
        self._next_string_id = 0
        # msproftx messages often number what they mark: only the recent ones are remembered (a message seen
        # again after MESSAGE_MEMO new ones gets another STRING_IDS row with the same text)
        self._messages: dict[str, int] = {}
        self._older_messages: dict[str, int] = {}
        # our symbol id -> STRING_IDS id of its text, of its text as a quoted shapes text (−1: not looked up)
        self._symbol_sids = np.full(0, -1, np.int64)
        self._shape_sids = np.full(0, -1, np.int64)
        self._new_strings: list[tuple[int, str]] = []
        self._next_task_id = 0
        self._orphan_connection_id = ORPHAN_CONNECTION_IDS
        self._api_max_connection_id = -1  # of the ids the aggregator gave (crash recovery cuts CANN_API there)
        self._pmu_names: dict[tuple[tuple[str, ...], bool], list[tuple[int, float] | None]] = {}
        self._record_span: tuple[int, int] | None = None  # earliest start, latest end of the rows written
        self._session_row: tuple[int, int] | None = None
        self._aicore_freq = AicoreFreqTable()
        self.counts = {"task_rows": 0, "compute_task_rows": 0, "schedule_task_rows": 0, "pmu_rows": 0,
                       "api_rows": 0, "api_duplicate_connection_ids": 0, "tx_rows": 0, "statistic_snapshots": 0,
                       "api_batches_with_duplicates": 0, "row_batches": 0}

    # -- stage interface -------------------------------------------------------------------

    def open(self) -> None:
        timestamp = export_timestamp(self.config.timestamp or self.ctx.export_stamp)
        self.path = self.ctx.resolve(self.config.path.replace("{timestamp}", timestamp))
        self.ctx.output_guard.attempt(self.path, self._create_database, self._discard)

    def _files(self) -> tuple[Path, Path, Path]:
        return self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")

    @property
    def conn(self) -> Writer | None:
        """The connection (ADBC's), None before open and after close."""
        return self.db

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
        db = _open(self.path)
        conn = db.conn
        try:
            with db.atomic():  # tables and their first rows become visible together
                for table in msdb.TABLES.values():
                    if table.always:
                        conn.execute(table.create_sql())
                        self._created.add(table.name)
                names = ("SCHEMA_VERSION", "SCHEMA_VERSION_MAJOR", "SCHEMA_VERSION_MINOR", "SCHEMA_VERSION_MICRO")
                values = (".".join(msdb.SCHEMA_VERSION), *msdb.SCHEMA_VERSION)
                conn.executemany(msdb.META_DATA.insert_sql(), list(zip(names, values, strict=True)))
                for name, members in msdb.ENUMS.items():
                    conn.executemany(msdb.TABLES[name].insert_sql(), sorted(members.items()))
                check_fault_cue(self.path)
        finally:
            db.close()  # one connection at a time: the ADBC one takes over
        self.db = Writer(self.path)

    def write_batch(self, batch: Batch) -> None:
        learn_symbols(self.symbols, batch)
        batch = self.partitions.merged(batch)
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
        if batch.kind in ("run_info", "aicore_freq"):  # rare, a few rows: Python rows
            data: Any = unpack_rows(batch)
        elif arrow_tables.is_table(batch):
            data = arrow_tables.unpack_table(batch)
        else:  # msgpack rows (an older sender): typed once; a value of the wrong type is refused as SQLite would
            rows = unpack_rows(batch)
            self.counts["row_batches"] += 1
            try:
                data = arrow_tables.table_of_rows(batch.kind, rows)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise sqlite3.InterfaceError(f"Error binding parameter: {exc}") from exc

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
                db.execute("BEGIN")
                try:
                    handler(db, data, batch.meta)
                    self._write_session_time(db)
                    if self._new_strings:
                        db.insert(msdb.STRING_IDS, self._new_strings)
                    check_fault_cue(self.path)  # testing: fail where a full disk fails, before the commit
                    db.execute("COMMIT")
                except BaseException:
                    db.rollback()
                    raise
            except BaseException:
                for _, text in self._new_strings:
                    self._string_ids.pop(text, None)
                self._next_string_id = next_string_id
                self._messages, self._older_messages = {}, {}  # a memo: may hold ids just forgotten
                self._symbol_sids.fill(-1)
                self._shape_sids.fill(-1)
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
        self.db.close()
        self.db = None
        db = _sqlite_utils().Database(self.path, execute_plugins=False)
        try:  # leave a plain single-file database when no reader holds it open
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.disable_wal()
        except sqlite3.OperationalError:
            pass
        db.close()

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
                ends[name] = db.query(f"SELECT coalesce(max(rowid), 0) FROM {name}")[0][0]
            elif name not in (*APPENDED_BY_TASK_ID, "STRING_IDS", "CANN_API"):
                rows[name] = _typed_rows(db, name)
        return pickle.dumps({"state": pickle_state(self, skip=("db",)), "open": db is not None,
                             "tables": tables, "ends": ends, "rows": rows})

    def restore(self, state: bytes) -> None:
        """Reopen the database as it was at the checkpoint: tables created later dropped, rows written later
        deleted, the small tables put back. The batches replayed after it then go in once."""
        saved = pickle.loads(state)
        restore_state(self, saved["state"])
        if self.db is not None:
            self.db.close()
        self.db = None
        if not saved["open"]:
            return  # not opened yet: open() will start it
        tables: set[str] = saved["tables"]

        def cut_back() -> Writer:
            db = _open(self.path)
            try:
                with db.atomic():
                    self._cut_back(db, tables, saved)
                    check_fault_cue(self.path)  # testing: fail where a full disk fails, before the commit
            finally:
                db.close()  # one connection at a time: the ADBC one takes over
            return Writer(self.path)

        self.db = self.ctx.output_guard.attempt(self.path, cut_back)  # a full disk waits here too

    def _cut_back(self, db: sqlite_utils.Database, tables: set[str], saved: dict[str, Any]) -> None:
        for later in sorted(_names(db.table_names()) - tables):
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

    def _create(self, db: Writer, table: msdb.Table) -> None:
        if table.name in self._created:
            return
        if table in OWN_TABLES:  # plain types: sqlite-utils writes the definition
            db.execute(_own_table_sql(table))
        else:  # msprof's definition, word for word (its NUMERIC columns among them)
            db.execute(table.create_sql())
        if table is msdb.TASK:
            index, columns = msdb.TASK_INDEX
            db.execute(_index_sql(table, index, columns))
        self._created.add(table.name)

    def _ingest(self, db: Writer, table: msdb.Table, columns: Sequence[Any]) -> int:
        """Append the rows of ``columns`` (arrays; a scalar stands for a constant column), creating the table
        with its first ones; returns how many went in."""
        rows = _arrow(table, columns)
        if not rows.num_rows:
            return 0
        self._create(db, table)
        db.ingest(table.name, rows)
        return rows.num_rows

    def _replace(self, db: Writer, table: msdb.Table, rows: Sequence[Sequence[Any]] | pa.Table) -> None:
        self._create(db, table)
        db.execute(f"DELETE FROM {table.name}")  # plain SQL: SESSION_TIME_INFO is replaced on most batches
        if isinstance(rows, pa.Table):
            if rows.num_rows:
                db.ingest(table.name, rows)
        else:
            db.insert(table, rows)

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

    def _symbol_text(self, symbol: int, shape: bool) -> str:
        """A symbol's STRING_IDS text: "" is stored as N/A; a shapes text in double quotes (N/A as it is)."""
        text = self.symbols[symbol]
        if shape:
            return f'"{text}"' if text and text != NA else NA
        return text or NA

    def _symbol_columns(self, slots: Sequence[tuple[bool, np.ndarray, np.ndarray | None]]) -> list[np.ndarray]:
        """STRING_IDS ids of symbol columns: ``slots`` are (shape text?, symbols, rows that use it or None: all)
        in the order a row's cells are read; texts not seen before get ids in the order of their first cell
        (row by row, a row's cells in order), as a row-at-a-time writer hands them out."""
        size = len(self.symbols.texts)
        if len(self._symbol_sids) < size:
            grow = np.full(size - len(self._symbol_sids), -1, np.int64)
            self._symbol_sids = np.concatenate([self._symbol_sids, grow])
            self._shape_sids = np.concatenate([self._shape_sids, grow])
        lookups = [(self._shape_sids if shape else self._symbol_sids)[symbols] for shape, symbols, _ in slots]
        unknown = [(found < 0) if used is None else (found < 0) & used
                   for found, (_, _, used) in zip(lookups, slots, strict=True)]
        if any(mask.any() for mask in unknown):
            # every unknown cell as shape flag << 32 | symbol, row-major; new texts in order of first cell
            keys = np.stack([np.where(mask, symbols.astype(np.int64) | (np.int64(shape) << 32), -1)
                             for mask, (shape, symbols, _) in zip(unknown, slots, strict=True)], axis=1).ravel()
            keys = keys[keys >= 0]
            uniques, first = np.unique(keys, return_index=True)
            for key in uniques[np.argsort(first)].tolist():  # once per new text (a bounded variety)
                shape, symbol = bool(key >> 32), key & 0xFFFFFFFF
                (self._shape_sids if shape else self._symbol_sids)[symbol] = self._sid(self._symbol_text(symbol,
                                                                                                          shape))
            lookups = [(self._shape_sids if shape else self._symbol_sids)[symbols] for shape, symbols, _ in slots]
        return lookups

    # -- run-level tables ----------------------------------------------------------------------

    def _run_info(self, db: Writer, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        if not rows or not rows[0] or not isinstance(rows[0][0], dict):
            return
        self.info = info = RunInfo.from_row(rows[0][0])
        devices = sorted(info.devices.items())
        npus = [(device, str(facts.get("chip") or UNKNOWN_CHIP)) for device, facts in devices] or [(-1, UNKNOWN_CHIP)]
        self._replace(db, msdb.NPU_INFO, npus)
        # msprof's exporter maps every device to rank −1 (it does not read info.json's rank_id)
        self._replace(db, msdb.RANK_DEVICE_MAP, [(-1, device) for device, _ in npus])
        self._replace(db, msdb.HOST_INFO, [(info.host_uid, info.hostname)])
        self._aicore_freq.run_info(db, info)

    def _aicore_freq_changes(self, db: Writer, rows: list[list[Any]], meta: dict[str, Any]) -> None:
        self._aicore_freq.changes(db, rows)

    def _widen_span(self, start: int, end: int) -> None:
        if self._record_span is None:
            self._record_span = (start, end)
        else:
            low, high = self._record_span
            self._record_span = (min(low, start), max(high, end))

    def _widen_span_by(self, starts: pa.ChunkedArray, ends: pa.ChunkedArray) -> None:
        if len(starts):
            self._widen_span(pc.min(starts).as_py(), pc.max(ends).as_py())

    def _write_session_time(self, db: Writer) -> None:
        """SESSION_TIME_INFO from start_info / end_info, the records' span standing in for what is not known."""
        low, high = self._record_span or (0, 0)
        row = (self.info.start_ns or low, self.info.end_ns or high)
        if row != self._session_row and any(row):
            self._replace(db, msdb.SESSION_TIME_INFO, [row])
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

    def _tasks(self, db: Writer, table: pa.Table, meta: dict[str, Any]) -> None:
        na, no_attr = self._sid(NA), self._sid("")
        metrics = self._pmu_metrics(list(meta.get("pmu_columns") or []) + list(meta.get("hidden_pmu_columns") or []))
        count = table.num_rows
        if not count:
            return
        column = table.column
        context = pc.fill_null(column("context_id"), UINT32_NONE)
        context_np = _np(context)
        op_name, task_type = _np(column("op_name")), _np(column("task_type"))
        # msprof: the runtime's task type (KERNEL_AICORE …); an FFTS+ context's row, the op's core type
        kind = np.where(context_np == UINT32_NONE, _np(column("runtime_task_type")), task_type)
        named = op_name != 0
        schedule_ops = [symbol for symbol in np.unique(op_name[named]).tolist()
                        if self.symbols[symbol].endswith(SCHEDULE_OP_SUFFIX)]
        schedule = named & np.isin(op_name, schedule_ops) if schedule_ops else np.zeros(count, bool)
        compute = named & ~schedule
        texts = ("op_type", "input_formats", "input_dtypes", "input_shapes", "output_formats", "output_dtypes",
                 "output_shapes", "op_state", "hf32_eligible")
        sym = {name: _np(column(name)) for name in texts}
        (kind_ids, name_ids, type_ids, op_type_ids, in_formats, in_dtypes, in_shapes, out_formats, out_dtypes,
         out_shapes, op_states, hf32) = self._symbol_columns([
             (False, kind, None), (False, op_name, named), (False, task_type, named), (False, sym["op_type"], named),
             (False, sym["input_formats"], compute), (False, sym["input_dtypes"], compute),
             (True, sym["input_shapes"], compute), (False, sym["output_formats"], compute),
             (False, sym["output_dtypes"], compute), (True, sym["output_shapes"], compute),
             (False, sym["op_state"], compute), (False, sym["hf32_eligible"], compute)])
        first = self._next_task_id
        global_ids = np.arange(first, first + count, dtype=np.int64)
        self._widen_span_by(column("start_ns"), column("end_ns"))
        self._ingest(db, msdb.TASK, (column("start_ns"), column("end_ns"), column("device_id"),
                                     column("connection_id"), global_ids, self.info.pid, kind_ids, context,
                                     column("stream_id"), column("task_id"), column("model_id")))
        computed = self._ingest(db, msdb.COMPUTE_TASK_INFO, [
            name_ids[compute], global_ids[compute], pc.filter(column("block_dim"), compute),
            pc.filter(column("mix_block_dim"), compute), type_ids[compute], op_type_ids[compute],
            in_formats[compute], in_dtypes[compute], in_shapes[compute], out_formats[compute],
            out_dtypes[compute], out_shapes[compute], no_attr, op_states[compute], hf32[compute], na, na])
        scheduled = self._ingest(db, msdb.COMMUNICATION_SCHEDULE_TASK_INFO, [
            name_ids[schedule], global_ids[schedule], type_ids[schedule], op_type_ids[schedule]])
        pmu_rows = self._pmu_rows(db, column("pmu"), metrics, first)
        self._next_task_id = first + count
        self.counts["task_rows"] += count
        self.counts["compute_task_rows"] += computed
        self.counts["schedule_task_rows"] += scheduled
        self.counts["pmu_rows"] += pmu_rows

    def _pmu_rows(self, db: Writer, pmu: pa.ChunkedArray, metrics: list[tuple[int, float] | None], first: int) -> int:
        """TASK_PMU_INFO: a row per task and measured metric with a value, row by row, metrics in column order."""
        measured = [i for i, metric in enumerate(metrics) if metric is not None]
        if not measured:
            return 0
        lists = pmu.combine_chunks() if isinstance(pmu, pa.ChunkedArray) else pmu
        values = pc.list_flatten(lists)
        if not len(values):
            return 0
        parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
        lengths = _np(pc.list_value_length(lists)).astype(np.int64)  # a null list: no values
        starts = np.cumsum(lengths) - lengths  # where each task's values begin among all of them
        position = np.arange(len(parents)) - starts[parents]  # index in the task's list
        width = len(metrics)
        names = np.full(width, -1, np.int64)
        scales = np.zeros(width)
        for i in measured:
            names[i], scales[i] = metrics[i]  # type: ignore[misc]
        inside = position < width
        at = np.where(inside, position, 0)
        keep = inside & (names[at] >= 0) & ~values.is_null().to_numpy(zero_copy_only=False)
        numbers = values.to_numpy(zero_copy_only=False)
        return self._ingest(db, msdb.TASK_PMU_INFO, [first + parents[keep], names[at][keep],
                                                     numbers[keep] * scales[at][keep]])

    def _apis(self, db: Writer, table: pa.Table, meta: dict[str, Any]) -> None:
        count = table.num_rows
        if not count:
            return
        column = table.column
        given = column("connection_id")
        connection_ids = given
        if given.null_count:  # the primary key needs one: mint it far from the aggregator's
            missing = given.is_null().to_numpy(zero_copy_only=False)
            minted = self._orphan_connection_id + np.cumsum(missing)
            connection_ids = pa.array(np.where(missing, minted, _np(given)))
            self._orphan_connection_id = int(minted[-1])
        if given.null_count < count:
            self._api_max_connection_id = max(self._api_max_connection_id, pc.max(given).as_py())
        levels = column("level")  # codes (the schema's level column is an integer)
        pid = self.info.pid
        global_tids = pc.bit_wise_or(pc.cast(column("thread_id"), _I64), pa.scalar(pid << 32, _I64))
        (names,) = self._symbol_columns([(False, _np(column("name")), None)])
        self._widen_span_by(column("start_ns"), column("end_ns"))
        rows = _arrow(msdb.CANN_API, (column("start_ns"), column("end_ns"), levels, global_tids, connection_ids,
                                      names))
        self._create(db, msdb.CANN_API)
        try:
            db.execute("SAVEPOINT api")
            db.ingest(msdb.CANN_API.name, rows)
            inserted = count
        except sqlite3.IntegrityError:  # a connection id already there: INSERT OR IGNORE, through a temp table
            db.execute("ROLLBACK TO api")
            db.ingest(API_SCRATCH, rows, temporary=True)
            columns = ", ".join(msdb.CANN_API.column_names)
            db.execute(f"INSERT OR IGNORE INTO CANN_API ({columns}) SELECT {columns} FROM temp.{API_SCRATCH} "
                       "ORDER BY rowid")
            inserted = db.query("SELECT changes()")[0][0]
            db.execute(f"DROP TABLE temp.{API_SCRATCH}")
            self.counts["api_batches_with_duplicates"] += 1
        db.execute("RELEASE api")
        self.counts["api_rows"] += inserted
        self.counts["api_duplicate_connection_ids"] += count - inserted

    def _txs(self, db: Writer, table: pa.Table, meta: dict[str, Any]) -> None:
        count = table.num_rows
        if not count:
            return
        column = table.column
        # msprof joins the tid with the application's pid from info.json, as for CANN_API
        pids = pa.scalar(self.info.pid, _I64) if self.info.pid else pc.cast(column("process_id"), _I64)
        global_tids = pc.bit_wise_or(pc.shift_left(pids, 32), pc.cast(column("thread_id"), _I64))
        kinds = column("event_type")
        marker_ex = _np(kinds, -1) == MARKER_EX
        # its mark id links a marker_ex to a device task; the domain is a name hash here
        mark_ids = _np(column("mark_id")).astype(np.int64)
        connection_ids = np.where(marker_ex, MSTX_NO_CONNECTION + 1 + mark_ids, MSTX_NO_CONNECTION)
        # STRING_IDS of the message and of the domain ("" but for marker_ex), new texts in order of first cell
        messages = _array(pc.fill_null(column("message"), ""))
        domains = _array(pc.if_else(pa.array(marker_ex), pc.cast(column("domain"), pa.string()), ""))
        cells = pc.take(pa.concat_arrays([pc.binary_join_element_wise("m", messages, ""),
                                          pc.binary_join_element_wise("d", domains, "")]),
                        pa.array(np.stack([np.arange(count), np.arange(count, 2 * count)], axis=1).ravel()))
        texts = pc.unique(cells)  # in order of first appearance
        sids = pa.array([self._message_sid(text[1:]) if text[0] == "m" else self._sid(text[1:])
                         for text in texts.to_pylist()], _I64)  # once per distinct text in the batch
        cell_sids = pc.take(sids, pc.index_in(cells, value_set=texts)).to_numpy(zero_copy_only=False)
        message_sids, domain_sids = cell_sids[0::2], cell_sids[1::2]
        self._widen_span_by(column("start_ns"), column("end_ns"))
        self._ingest(db, msdb.MSTX_EVENTS, (column("start_ns"), column("end_ns"), kinds, UINT32_NONE,
                                            column("category"), message_sids, global_tids, global_tids,
                                            domain_sids, connection_ids))
        self.counts["tx_rows"] += count

    # -- statistics (ours) ----------------------------------------------------------------------

    def _op_statistic(self, db: Writer, table: pa.Table, meta: dict[str, Any]) -> None:
        column = table.column
        total = pc.cast(column("total_ns"), pa.float64())
        count = column("count")
        by_device = table.group_by("device_id").aggregate([("total_ns", "sum")])
        device_totals = pc.take(by_device.column("total_ns_sum"),
                                pc.index_in(column("device_id"), value_set=by_device.column("device_id")))
        percent = pc.cast(pc.multiply(column("total_ns"), 100), pa.float64())
        ratio = pc.if_else(pc.not_equal(device_totals, 0),
                           pc.divide(percent, pc.cast(device_totals, pa.float64())), 0.0)
        average = pc.if_else(pc.not_equal(count, 0),
                             pc.divide(pc.divide(total, pc.cast(count, pa.float64())), 1000.0), 0.0)
        rows = _arrow(msdb.OP_STATISTIC, (
            column("device_id"), pc.fill_null(column("op_type"), ""), pc.fill_null(column("core_type"), ""), count,
            pc.divide(total, 1000.0), pc.divide(pc.cast(column("min_ns"), pa.float64()), 1000.0), average,
            pc.divide(pc.cast(column("max_ns"), pa.float64()), 1000.0), ratio))
        self._replace(db, msdb.OP_STATISTIC, rows)
        self.counts["statistic_snapshots"] += 1

    def _api_statistic(self, db: Writer, table: pa.Table, meta: dict[str, Any]) -> None:
        column = table.column
        count = pc.cast(column("count"), pa.float64())
        counted = pc.not_equal(column("count"), 0)
        mean = pc.if_else(counted, pc.divide(pc.divide(pc.cast(column("total_ns"), pa.float64()), 1000.0), count),
                          0.0)
        spread = pc.subtract(pc.divide(column("sum_sq_us2"), count), pc.multiply(mean, mean))
        variance = pc.if_else(counted, pc.max_element_wise(spread, 0.0), 0.0)
        levels = pc.fill_null(column("level"), "")
        names = pc.unique(levels)
        level_names = pc.take(pa.array([_level_name(level) for level in names.to_pylist()], pa.string()),
                              pc.index_in(levels, value_set=names))
        rows = _arrow(msdb.API_STATISTIC, (
            "host", level_names, pc.fill_null(column("name"), ""),
            pc.divide(pc.cast(column("total_ns"), pa.float64()), 1000.0), column("count"), mean,
            pc.divide(pc.cast(column("min_ns"), pa.float64()), 1000.0),
            pc.divide(pc.cast(column("max_ns"), pa.float64()), 1000.0), variance))
        self._replace(db, msdb.API_STATISTIC, rows)
        self.counts["statistic_snapshots"] += 1


def _level_name(level: str) -> str:
    return level_name(level) if level else ""


def _names(names: Sequence[str]) -> set[str]:
    """Table names but SQLite's own (``sqlite_sequence``, ``sqlite_stat1`` …)."""
    return {name for name in names if not name.startswith("sqlite_")}


def _tables(db: Writer) -> set[str]:
    return _names([name for (name,) in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")])


def _typed_rows(db: Writer, name: str) -> list[tuple[Any, ...]]:
    """``rowid, *`` of a small table with every value's storage class kept (integer, real or text): each column
    read as three, one per class, since ADBC gives a result column one type."""
    columns = ("rowid", *msdb.TABLES[name].column_names)
    select = ", ".join(f"CASE typeof({column}) WHEN '{kind}' THEN {column} END"
                       for column in columns for kind in ("integer", "real", "text"))
    width = len(columns)
    return [tuple(next((value for value in row[i * 3:i * 3 + 3] if value is not None), None) for i in range(width))
            for row in db.query(f"SELECT {select} FROM {name}")]


def _open(path: Path) -> sqlite_utils.Database:
    """The database at ``path`` in WAL mode, ``synchronous=NORMAL``; sqlite-utils plugins found on the machine are
    not run on its connection."""
    db = _sqlite_utils().Database(path, execute_plugins=False)
    db.enable_wal()
    db.execute("PRAGMA synchronous=NORMAL")
    return db

