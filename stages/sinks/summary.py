"""Summary sink: msprof's summary files: op_summary, op_statistic, api_statistic,
task_time, step_trace, msprof_tx, aicpu and l2_cache.

Example config::

    summary:
      type: summary
      inputs: [aggregate.tasks, aggregate.stats]
      directory: mindstudio_profiler_output   # under the run's output folder
      timestamp: "20240101120000"             # the {timestamp} of file names (default: when the sink opens)
      format: csv                             # or json: the same rows as an array of objects
      block_header: Block Dim                 # or "Block Num" (msprof after 2026-01)
      max_rows: 1000000                       # rows per file before slicing (every table)
      refresh_s: 1.0                          # at most one statistics rewrite per interval
      sort_chunk_rows: 50000                  # rows per table held in memory by the sort
      sort_chunk_bytes: 1048576               # ... and bytes of their lines

Files are ``{module}_{timestamp}.{csv|json}``, sliced past ``max_rows`` rows into
``{module}_slice_{k}_{timestamp}``; a table without rows has no file, as in msprof. op_summary grows as
task batches arrive and is sorted at close (see :mod:`._op_summary`); it lists device tasks that have host
task info (an op name), except task types msprof leaves out (WRITE_BACK, INVALID, HCCL_AI_CPU,
COMMUNICATION). task_time, step_trace, msprof_tx, aicpu and l2_cache grow the same way and are sorted at
close (:mod:`._summary_tables`, :mod:`._table`). The statistics files are rewritten atomically from the
latest snapshot.
"""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from pipeline.checkpoint import pickle_state, restore_state
from pipeline.checkpoint import write_atomic as write_checkpoint_file
from pipeline.output_guard import OutputGuard
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages.schema import CONTEXT_ID_NONE, SymbolTable, unpack_rows
from stages.sinks._format import (
    DEFAULT_OUTPUT_DIR,
    NA,
    export_timestamp,
    learn_symbols,
    level_name,
    num3,
    num3_rows,
    text_of,
    us,
    us_trimmed,
)
from stages.sinks._op_summary import OpSummaryWriter, op_summary_header
from stages.sinks._partitions import PartitionMerge
from stages.sinks._summary_tables import TABLES, TABLES_BY_KIND, TableSpec
from stages.sinks._table import Commit, SortedTable, csv_cell, write_atomic

if TYPE_CHECKING:
    import polars as pl

    from stages.sinks._summary_columns import SymbolForms

OP_STATISTIC_HEADER = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
                       "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
API_STATISTIC_HEADER = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)",
                        "Variance"]
SKIPPED_TASK_TYPES = frozenset({"WRITE_BACK", "INVALID", "HCCL_AI_CPU", "COMMUNICATION"})
STATISTICS = ("op_statistic", "api_statistic")


def op_statistic_rows(symbols: SymbolTable, rows: list[list[Any]]) -> list[list[str]]:
    """Snapshot rows -> cells, by total time descending; ratio within the device."""
    device_totals: dict[int, int] = {}
    decoded = []
    for device, op_type, core_type, count, total, low, high in rows:
        decoded.append((device, text_of(symbols, op_type), text_of(symbols, core_type), count, total, low, high))
        device_totals[device] = device_totals.get(device, 0) + total
    decoded.sort(key=lambda r: (-r[4], r[0], r[1], r[2]))
    return [
        [str(device), op_type or NA, core_type or NA, str(count), us_trimmed(total), us_trimmed(low),
         us_trimmed(total // count if count else 0), us_trimmed(high),  # msprof averages integer ns
         num3(total * 100 / device_totals[device] if device_totals[device] else 0)]
        for device, op_type, core_type, count, total, low, high in decoded
    ]


def api_statistic_rows(symbols: SymbolTable, rows: list[list[Any]]) -> list[list[str]]:
    """Snapshot rows -> cells, by (API name, level) as msprof orders them; population variance."""
    decoded = sorted(
        ((text_of(symbols, name), level_name(level), count, total, low, high, sum_sq)
         for level, name, count, total, low, high, sum_sq in rows),
        key=lambda r: (r[0], r[1]),
    )
    cells = []
    for name, level, count, total, low, high, sum_sq in decoded:
        mean = total / 1000 / count if count else 0.0
        rounded = round(mean, 3)  # msprof's C++ assembler takes deviations from the rounded mean
        variance = max(0.0, sum_sq / count - 2 * rounded * mean + rounded * rounded) if count else 0.0
        cells.append(["host", level, name, us_trimmed(total), str(count), num3(mean), us_trimmed(low),
                      us_trimmed(high), num3(variance)])
    return cells


def write_table(path: Path, header: list[str], rows: list[list[str]], fmt: str, guard: OutputGuard) -> None:
    """Replace ``path`` with the rows (temp file + rename); a full disk pauses here until it takes them."""
    if fmt == "csv":
        lines = (",".join(csv_cell(cell) for cell in row) + "\n" for row in rows)
        write_atomic(path, [",".join(header) + "\n", *lines], guard)
    else:
        objects = ",\n".join(json.dumps(dict(zip(header, row, strict=True)), ensure_ascii=False) for row in rows)
        write_atomic(path, ["[\n", objects, "\n]"], guard)


class SummarySink(Sink):
    """Writes msprof's summary files live from task batches and statistics snapshots."""

    class Config(StageConfig):
        directory: str = Field(DEFAULT_OUTPUT_DIR, description="output folder, relative to the run output")
        timestamp: str | None = Field(None, description="the {timestamp} of file names; default: open time")
        format: Literal["csv", "json"] = Field("csv", description="csv as msprof, or a JSON array of objects")
        block_header: Literal["Block Dim", "Block Num"] = Field("Block Dim", description="op_summary spelling")
        max_rows: int = Field(1_000_000, gt=0, description="rows per file before slicing (every table)")
        refresh_s: float = Field(1.0, ge=0, description="minimum seconds between statistics rewrites")
        sort_chunk_rows: int = Field(50_000, gt=0, description="rows per table in memory while sorting")
        sort_chunk_bytes: int = Field(1 << 20, ge=4096, description="bytes of rows per table in memory while sorting")

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, self.Config):
            config = self.Config.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: SummarySink.Config = config
        self.symbols = SymbolTable()
        self.timestamp = ""
        self.directory = Path()
        self.op_summary: OpSummaryWriter | None = None
        self.tables: dict[str, SortedTable] = {}
        self._pmu_columns: list[str] = []
        self._pending: dict[str, list[list[str]]] = {}
        self.partitions = PartitionMerge()  # a partitioned aggregator's snapshots, merged
        self._last_refresh = float("-inf")
        self.counts = {"tasks_skipped": 0, "op_statistic_writes": 0, "api_statistic_writes": 0,
                       "slow_path_rows": 0}  # rows formatted by per-row Python (JSON, step_trace, msgpack rows)
        self._forms: SymbolForms | None = None  # each symbol's cell forms (made again after a restore)
        self._closed: dict[str, int] | None = None  # restored after its outputs were final: their accounting

    # -- stage interface -------------------------------------------------------------------

    def open(self) -> None:
        # polars (~0.15 CPU s to import) comes in now, in this process only (not in a process that merely checks
        # the config), and not with the first rows, where it would hold up a live run's first statistics
        from stages.sinks import _summary_columns  # noqa: F401

        self.timestamp = export_timestamp(self.config.timestamp or self.ctx.export_stamp)
        self.directory = self.ctx.resolve(self.config.directory)
        self.ctx.output_guard.attempt(self.directory, lambda: self.directory.mkdir(parents=True, exist_ok=True))

    def write_batch(self, batch: Batch) -> None:
        if self._closed is not None:
            return  # a replayed batch its final files already hold
        if self._forms is not None:
            self._forms.learn(batch)
        learn_symbols(self.symbols, batch)
        if not self.timestamp:
            self.open()
        if batch.kind in TABLES_BY_KIND:
            frame = self._frame(batch) if self.config.format == "csv" else None
            if frame is not None:
                self._columns(batch, frame)
                return
            rows = unpack_rows(batch)  # JSON, or rows the typed schema does not take: one by one
            self.counts["slow_path_rows"] += len(rows)
            if batch.kind == "task":
                self._tasks(rows, batch.meta.get("pmu_columns") or [])
            for spec in TABLES_BY_KIND[batch.kind]:
                self._append(spec, rows)
        elif batch.kind in STATISTICS:
            batch = self.partitions.merged(batch)
            make = op_statistic_rows if batch.kind == "op_statistic" else api_statistic_rows
            self._pending[batch.kind] = make(self.symbols, unpack_rows(batch))
            self._refresh(force=bool(batch.meta.get("final")))

    def flush(self) -> None:
        if self._closed is None:
            self._refresh(force=False)

    def close(self) -> None:
        if self._closed is not None:
            return
        self._refresh(force=True)
        commit = self.op_summary.sorted_commit() if self.op_summary is not None else Commit()
        for table in self.tables.values():
            commit += table.sorted_commit()
        commit_file = self._commit_file()
        guard = self.ctx.output_guard
        if commit_file is not None:  # recorded first: a restart finishes this commit, never re-sorts
            record = pickle.dumps({"commit": commit, "accounting": self.accounting()})
            guard.attempt(commit_file, lambda: write_checkpoint_file(commit_file, record))
        guard.attempt(self.directory, commit.apply)  # a read-only disk: done again after

    def accounting(self) -> dict[str, int]:
        if self._closed is not None:
            return dict(self._closed)
        rows = self.op_summary.rows if self.op_summary is not None else 0
        tables = {f"{module}_rows": self.tables[module].rows if module in self.tables else 0 for module in TABLES}
        return {"op_summary_rows": rows, **tables, **self.counts}

    # -- crash recovery ---------------------------------------------------------------------

    def snapshot(self) -> bytes:
        writer = self.op_summary.checkpoint() if self.op_summary is not None else None
        tables = {module: table.checkpoint() for module, table in self.tables.items()}
        return pickle.dumps({"state": pickle_state(self, skip=("op_summary", "tables", "_forms")), "writer": writer,
                             "tables": tables})

    def restore(self, state: bytes) -> None:
        """Every table cut back to the checkpoint; or, when this sink had already closed (its files are final
        and hold everything), the commit finished and every replayed batch ignored."""
        saved = pickle.loads(state)
        restore_state(self, saved["state"])
        self._forms = None
        guard = self.ctx.output_guard
        guard.attempt(self.directory, lambda: self.directory.mkdir(parents=True, exist_ok=True))
        commit_file = self._commit_file()
        if commit_file is not None and commit_file.is_file():
            record = pickle.loads(commit_file.read_bytes())
            guard.attempt(self.directory, record["commit"].apply)
            self._closed = record["accounting"]
            return
        suffix = self.config.format
        if saved["writer"] is not None:
            self.op_summary = OpSummaryWriter.resume(saved["writer"], guard)
        else:
            for later in self.directory.glob(f"op_summary_*{self.timestamp}.{suffix}"):
                later.unlink()  # begun after the checkpoint
        self.tables = {module: SortedTable.resume(table, guard) for module, table in saved["tables"].items()}
        for module in set(TABLES) - set(self.tables):
            for later in [*self.directory.glob(f"{module}_*{self.timestamp}.{suffix}"),
                          *self.directory.glob(f".{module}_{self.timestamp}.run*")]:
                later.unlink()

    def _commit_file(self) -> Path | None:
        state_dir = self.ctx.state_dir
        return state_dir / f"{self.ctx.stage_id}.commit" if state_dir is not None else None

    # -- column batches (CSV) ----------------------------------------------------------------

    def _frame(self, batch: Batch) -> pl.DataFrame | None:
        """The batch's table as a polars frame; None: rows the typed schema does not take."""
        from stages.sinks import _summary_columns as columns  # polars: the summary sink's alone

        frame, converted = columns.frame_of(batch, self.symbols)
        self.counts["slow_path_rows"] += converted
        if frame is not None and self._forms is None:
            self._forms = columns.SymbolForms(self.symbols)
        return frame

    def _columns(self, batch: Batch, frame: pl.DataFrame) -> None:
        """A batch's rows of every table it feeds, each table's lines made column-wise."""
        from stages.sinks import _summary_columns as columns

        forms = self._forms
        assert forms is not None
        if batch.kind == "task":
            self._task_columns(frame, forms, batch.meta.get("pmu_columns") or [])
        for spec in TABLES_BY_KIND[batch.kind]:
            make = columns.BLOCKS.get(spec.module)
            if make is None:  # step_trace: a row per iteration, with its all-reduce pairs
                rows = [list(row) for row in frame.iter_rows()]
                self.counts["slow_path_rows"] += len(rows)
                self._append(spec, rows)
                continue
            block = make(frame, forms)
            if not block.lines:
                continue
            table = self._table(spec)
            made = block.rows(len(table.header))
            table.append_rows(made, block.lines, table.in_order and block.ordered(made))

    def _task_columns(self, frame: pl.DataFrame, forms: SymbolForms, pmu_columns: list[str]) -> None:
        from stages.sinks import _summary_columns as columns

        kept, skipped = columns.op_summary_rows(frame, forms)
        self.counts["tasks_skipped"] += skipped
        if not kept.height:
            return
        if self.op_summary is not None and pmu_columns != self._pmu_columns:
            added = [name for name in pmu_columns if name not in self._pmu_columns]
            if added:  # columns the header lacks: widen the header, earlier rows get N/A
                self.op_summary.add_columns(added)
                self._pmu_columns.extend(added)
            sources = columns.pmu_sources(pmu_columns, self._pmu_columns)
        else:
            sources = list(range(len(pmu_columns)))
        writer = self._writer(pmu_columns)
        block = columns.op_summary_block(kept, forms, sources, writer.last_rows, writer.in_order)
        writer.append_text(block.text, block.count, block.last, block.keys)

    # -- task_time, step_trace, msprof_tx, aicpu, l2_cache ----------------------------------

    def _table(self, spec: TableSpec) -> SortedTable:
        table = self.tables.get(spec.module)
        if table is None:
            table = self.tables[spec.module] = SortedTable(
                self.directory, spec.module, self.timestamp, self.config.format, list(spec.header),
                key_fields=spec.key_fields, max_rows=self.config.max_rows, chunk_rows=self.config.sort_chunk_rows,
                tab_columns=spec.time_points, guard=self.ctx.output_guard, chunk_bytes=self.config.sort_chunk_bytes)
        return table

    def _append(self, spec: TableSpec, rows: list[list[Any]]) -> None:
        keyed = list(spec.rows(self.symbols, rows))
        if not keyed:
            return
        table = self._table(spec)
        missing = max(len(cells) for _, cells in keyed) - len(table.header)
        if missing > 0 and spec.growth:  # more all-reduce pairs than earlier iterations had
            repeats = -(-missing // len(spec.growth))
            table.add_columns(list(spec.growth * repeats)[:missing])
        table.append(keyed)

    # -- op_summary -------------------------------------------------------------------------

    def _tasks(self, rows: list[list[Any]], pmu_columns: list[str]) -> None:
        sym = self.symbols.texts
        entries: list[tuple[int, int, int, list[str]]] = []
        pmus: list[list[float | None]] = []
        for row in rows:
            (device, model_id, _iteration, stream_id, task_id, _batch_id, start, end, op_name, op_type,
             task_type, op_state, block_dim, mix_block_dim, _connection_id, _thread_id, in_shapes,
             in_dtypes, in_formats, out_shapes, out_dtypes, out_formats, pmu, context_id, *_) = row
            hf32 = sym[row[26]] if len(row) > 26 and row[26] else NA  # GE's op flag: YES / NO
            name = sym[op_name]
            kind = sym[task_type]
            if not name or kind in SKIPPED_TASK_TYPES:
                self.counts["tasks_skipped"] += 1
                continue
            cells = [
                str(device), str(model_id), str(task_id), str(stream_id), name, sym[op_type] or NA,
                sym[op_state] or NA, kind or NA, us(start), us(end - start), "0",
                NA if block_dim is None else str(block_dim), NA if mix_block_dim is None else str(mix_block_dim),
                hf32, sym[in_shapes] or NA, sym[in_dtypes] or NA, sym[in_formats] or NA, sym[out_shapes] or NA,
                sym[out_dtypes] or NA, sym[out_formats] or NA,
                NA if context_id in (None, CONTEXT_ID_NONE) else str(context_id),
            ]
            pmus.append(pmu or [])
            entries.append((device, start, end, cells))
        if entries:
            for (_device, _start, _end, cells), pmu_cells in zip(entries, self._pmu_cells(pmus, pmu_columns),
                                                                   strict=True):
                cells += pmu_cells
            self._writer(pmu_columns).append(entries)

    def _writer(self, pmu_columns: list[str]) -> OpSummaryWriter:
        if self.op_summary is None:
            self._pmu_columns = list(pmu_columns)
            header = op_summary_header(self.config.block_header, pmu_columns)
            self.op_summary = OpSummaryWriter(self.directory, self.timestamp, self.config.format, header,
                                              self.config.max_rows, self.config.sort_chunk_rows,
                                              self.ctx.output_guard)
        return self.op_summary

    def _pmu_cells(self, rows: list[list[float | None]], columns: list[str]) -> list[list[str]]:
        """Each row's PMU cells under the header's PMU columns (all rows of a batch formatted at once)."""
        if self.op_summary is None or columns == self._pmu_columns:
            return num3_rows(rows, len(columns))
        added = [name for name in columns if name not in self._pmu_columns]
        if added:  # columns the header lacks: widen the header, earlier rows get N/A
            self.op_summary.add_columns(added)
            self._pmu_columns.extend(added)
        position = {name: i for i, name in enumerate(self._pmu_columns)}
        out = []
        for values in rows:
            cells = [NA] * len(self._pmu_columns)
            for name, value in zip(columns, values, strict=False):
                cells[position[name]] = num3(value)
            out.append(cells)
        return out

    # -- statistics -------------------------------------------------------------------------

    def _refresh(self, force: bool) -> None:
        if not self._pending:
            return
        now = time.monotonic()
        if not force and now - self._last_refresh < self.config.refresh_s:
            return
        self._last_refresh = now
        headers = {"op_statistic": OP_STATISTIC_HEADER, "api_statistic": API_STATISTIC_HEADER}
        for kind, rows in self._pending.items():
            path = self.directory / f"{kind}_{self.timestamp}.{self.config.format}"
            if not rows and not path.exists():
                continue  # a table without rows has no file, as in msprof (no device task read, say)
            write_table(path, headers[kind], rows, self.config.format, self.ctx.output_guard)
            self.counts[f"{kind}_writes"] += 1
        self._pending.clear()
