"""The summary sink's CSV lines made column-wise (polars), byte for byte those of the per-row formatters.

A batch's Arrow table (:func:`frame_of`) becomes whole CSV lines in a few polars expressions: µs text by
integer arithmetic (:mod:`._text_columns`), text cells looked up per symbol (:class:`SymbolForms`: each
symbol's quoted form is made once, then gathered by id), derived figures for the whole batch at once in
numpy (:mod:`._decimal_text`). Only the summary sink imports this module (and polars with it): the
sinks that share its helpers do not need polars.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.stage import Batch
from stages import tables
from stages.schema import CONTEXT_ID_NONE, SymbolTable, unpack_rows
from stages.sinks._decimal_text import decimal_rows
from stages.sinks._format import MSTX_EVENT_TYPES, NA, num3, num3_joined, text_of
from stages.sinks._op_summary import SortKey, csv_shape_cell, csv_tensor_cell
from stages.sinks._summary_tables import num6, num6_texts
from stages.sinks._table import csv_cell
from stages.sinks._text_columns import (
    csv_text,
    int_or_na,
    int_text,
    us_or_na,
    us_text,
)

SKIPPED_TASK_TYPES = frozenset({"WRITE_BACK", "INVALID", "HCCL_AI_CPU", "COMMUNICATION"})
_STRING_TEXT = frozenset({"op_type", "core_type", "name", "message"})  # statistics / tx texts: str, or a symbol id

# -- the batch as a frame -----------------------------------------------------------------------------------


def frame_of(batch: Batch, symbols: SymbolTable) -> tuple[pl.DataFrame | None, int]:
    """The batch's table as a polars frame, and how many rows were converted one by one to make it: a column
    batch is handed over whole; msgpack rows (tests, an older sender) are typed here first. None: rows the
    typed schema does not take (the caller formats those rows one by one)."""
    if tables.is_table(batch):
        return _frame(tables.unpack_table(batch)), 0
    rows = unpack_rows(batch)
    try:
        return _frame(_typed_table(batch.kind, rows, symbols)), len(rows)
    except (pa.ArrowException, TypeError, ValueError, OverflowError, IndexError):
        return None, len(rows)


def _frame(table: pa.Table) -> pl.DataFrame:
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _typed_table(kind: str, rows: list[list[Any]], symbols: SymbolTable) -> pa.Table:
    schema = tables.SCHEMAS[kind]
    if kind == "op_statistic" and any(isinstance(row[0], str) for row in rows):
        schema = tables.OP_STATISTIC_ALL_DEVICES
    width = len(schema)
    rows = [[*row[:width], *[None] * (width - len(row))] for row in rows]  # columns appended since: absent
    for at, field in enumerate(schema):
        if field.type == pa.string():
            text = (lambda value: value if value is None else str(value)) if field.name == "level" else (
                lambda value: text_of(symbols, value))
            for row in rows:
                row[at] = text(row[at])
    return tables.table_of_rows(kind, rows, schema)


# -- text cells by symbol ----------------------------------------------------------------------------------

FORMS: dict[str, Callable[[str], Any]] = {
    "text": str,  # as it is
    "csv": csv_cell,  # a text cell
    "csv_na": lambda text: csv_cell(text or NA),  # ... N/A when empty
    "shape_na": lambda text: csv_shape_cell(text or NA),
    "tensor_na": lambda text: csv_tensor_cell(text or NA),
    "filled": bool,
    "skipped": lambda text: text in SKIPPED_TASK_TYPES,
}


class SymbolForms:
    """Each symbol's cell forms (:data:`FORMS`) as polars series indexed by symbol id: made once per symbol (the
    same texts recur on every row), then gathered by a column of ids."""

    def __init__(self, symbols: SymbolTable) -> None:
        self.symbols = symbols
        self._forms: dict[str, pl.Series] = {}
        self._known: dict[str, int] = {}

    def learn(self, batch: Batch) -> None:
        """Before the symbol table learns the batch's pairs: a pair that renames a known id starts over."""
        pairs = batch.meta.get("symbols")
        if pairs and min(sym_id for sym_id, _ in pairs) < len(self.symbols.texts):
            self._forms.clear()
            self._known.clear()

    def form(self, name: str) -> pl.Series:
        texts = self.symbols.texts
        known = self._known.get(name, 0)
        if known < len(texts):
            convert = FORMS[name]
            added = pl.Series(name, [convert(text) for text in texts[known:]])
            self._forms[name] = self._forms[name].append(added) if known else added
            self._known[name] = len(texts)
        return self._forms[name]

    def gather(self, name: str, column: str) -> pl.Expr:
        """The form of each symbol id of ``column``, as an expression of the frame that holds it (null: id 0)."""
        return pl.lit(self.form(name)).gather(pl.col(column).fill_null(0))


# -- op_summary ---------------------------------------------------------------------------------------------


@dataclass
class OpSummaryBlock:
    """A batch's op_summary lines, joined, and what the writer keeps of them."""

    text: str
    count: int
    last: dict[int, tuple[int, int]]  # device -> (start, end) of its last row
    keys: list[SortKey] | None  # the sort keys, in order (None: not asked for)


def op_summary_rows(frame: pl.DataFrame, forms: SymbolForms) -> tuple[pl.DataFrame, int]:
    """The rows op_summary lists (an op name, a task type msprof keeps) and how many were left out."""
    kept = frame.filter(forms.gather("filled", "op_name") & ~forms.gather("skipped", "task_type"))
    return kept, frame.height - kept.height


def pmu_sources(columns: list[str], header_columns: list[str]) -> list[int | None]:
    """For each PMU column of the header, the index of the batch's value under it (None: N/A): the batch's
    columns in order, or, when they differ from the header's, matched by name (a later duplicate wins)."""
    if columns == header_columns:
        return list(range(len(columns)))
    position = {name: i for i, name in enumerate(header_columns)}
    sources: list[int | None] = [None] * len(header_columns)
    for index, name in enumerate(columns):
        sources[position[name]] = index
    return sources


def op_summary_block(frame: pl.DataFrame, forms: SymbolForms, sources: list[int | None],
                     last: dict[int, tuple[int, int]], want_keys: bool) -> OpSummaryBlock:
    """The CSV lines of rows :func:`op_summary_rows` kept, the wait after the previous task of the same device
    (``last``: each device's last row before) computed here."""
    device, start, end = pl.col("device_id"), pl.col("start_ns"), pl.col("end_ns")
    previous_end = end.shift(1).over("device_id")
    if last:
        before = device.replace_strict(list(last), [stop for _, stop in last.values()], default=None,
                                       return_dtype=pl.Int64)
        previous_end = previous_end.fill_null(before)
    wait = pl.when(previous_end.is_null()).then(pl.lit(0, pl.Int64)).otherwise(
        pl.max_horizontal(start - previous_end, pl.lit(0, pl.Int64)))
    pmu = pmu_cells(frame, sources)
    context = pl.col("context_id")
    hf32_cell = pl.when(pl.col("hf32_eligible").fill_null(0) == 0).then(pl.lit(NA)).otherwise(
        forms.gather("text", "hf32_eligible"))
    cells = [
        int_text(device), int_text(pl.col("model_id")), int_text(pl.col("task_id")), int_text(pl.col("stream_id")),
        forms.gather("csv", "op_name"), forms.gather("csv_na", "op_type"), forms.gather("csv_na", "op_state"),
        forms.gather("csv_na", "task_type"),
        us_text(start) + pl.lit("\t"), us_text(end - start), us_text(wait),
        int_or_na(pl.col("block_dim")), int_or_na(pl.col("mix_block_dim")), hf32_cell,
        forms.gather("shape_na", "input_shapes"), forms.gather("tensor_na", "input_dtypes"),
        forms.gather("tensor_na", "input_formats"), forms.gather("shape_na", "output_shapes"),
        forms.gather("tensor_na", "output_dtypes"), forms.gather("tensor_na", "output_formats"),
        pl.when(context.is_null() | (context == CONTEXT_ID_NONE)).then(pl.lit(NA)).otherwise(context.cast(pl.String)),
        *([] if pmu is None else [pl.lit(pmu)]),
    ]
    text = frame.select(pl.concat_str(cells, separator=",").str.join("\n")).item()
    ends = frame.group_by("device_id", maintain_order=True).agg(start.last(), end.last())
    keys = None
    if want_keys:
        stream, task = pl.col("stream_id"), pl.col("task_id")
        key_frame = frame.select(device, start, pl.when(stream >= 0).then(stream).otherwise(-1),
                                 pl.when(task >= 0).then(task).otherwise(-1), end - start)
        keys = list(zip(*(column.to_list() for column in key_frame.get_columns()), strict=True))
    return OpSummaryBlock(text=text, count=frame.height,
                          last={dev: (first, stop) for dev, first, stop in ends.iter_rows()}, keys=keys)


def pmu_cells(frame: pl.DataFrame, sources: list[int | None]) -> pl.Series | None:
    """Each row's PMU cells under the header's PMU columns, joined: ``num3`` of the value, N/A where none (all
    values of the batch at once, :func:`._decimal_text.decimal_rows`). None: no PMU column."""
    width = len(sources)
    if not width:
        return None
    flat = _pmu_values(frame, sources).cast(pl.Float64)
    values = flat.to_numpy()  # null: NaN
    if np.count_nonzero(np.isnan(values)) > flat.null_count():  # a NaN of its own (num3 prints "nan"): rare
        cells = [num3(value) for value in flat.to_list()]
        rows = [",".join(cells[i : i + width]) for i in range(0, len(cells), width)]
        return pl.Series("_pmu", rows, dtype=pl.String)
    texts = decimal_rows(values, 3, width)
    if texts is None:  # an infinite or huge value: one ``%`` format
        return pl.Series("_pmu", num3_joined(values.tolist(), width), dtype=pl.String)
    return pl.Series("_pmu", texts)


def _pmu_values(frame: pl.DataFrame, sources: list[int | None]) -> pl.Series:
    """The values under the header's PMU columns, row after row (null: none)."""
    column = frame["pmu"]
    if sources == list(range(len(sources))) and not column.has_nulls():
        lists = column.to_arrow()
        if pa.types.is_list(lists.type) or pa.types.is_large_list(lists.type):
            lengths = lists.value_lengths().to_numpy(zero_copy_only=False)
            if (lengths == len(sources)).all():  # every row holds a value per column
                flat = pl.from_arrow(lists.flatten())
                assert isinstance(flat, pl.Series)
                return flat
    if all(k is None for k in sources):  # none of the header's columns in this batch
        return pl.Series("pmu", [None] * (frame.height * len(sources)), dtype=pl.Float64)
    pmu = pl.col("pmu")
    return frame.select(pl.concat_list([
        pl.lit(None, pl.Float64) if k is None else pmu.list.get(k, null_on_oob=True) for k in sources
    ]).explode().alias("pmu"))["pmu"]


# -- task_time, msprof_tx, aicpu, l2_cache -----------------------------------------------------------------


@dataclass
class TableBlock:
    """A batch's rows of one table: each row's sort key fields (columns) and its CSV line."""

    keys: list[list[Any]]
    lines: list[str]

    def rows(self, width: int) -> list[tuple[Any, ...]]:
        """The rows as the table's chunk holds them: (*key, width, line)."""
        return list(zip(*self.keys, repeat(width, len(self.lines)), self.lines, strict=True))

    @staticmethod
    def ordered(rows: list[tuple[Any, ...]]) -> bool:
        return all(map(operator.le, rows, rows[1:]))


def _block(frame: pl.DataFrame, keys: list[pl.Expr], cells: list[pl.Expr]) -> TableBlock:
    out = frame.select(*[key.alias(f"k{i}") for i, key in enumerate(keys)],
                       pl.concat_str(cells, separator=",").alias("line"))
    columns = out.get_columns()
    return TableBlock([column.to_list() for column in columns[:-1]], columns[-1].to_list())


def _tab(text: pl.Expr) -> pl.Expr:
    """A time-point cell: msprof follows its value with a TAB (not an N/A)."""
    return pl.when(text == NA).then(text).otherwise(text + pl.lit("\t"))


def task_time_block(frame: pl.DataFrame, forms: SymbolForms) -> TableBlock:
    """Every task but the later contexts of an FFTS+ task; the runtime's kernel name, else the op name."""
    context = pl.col("context_id")
    frame = frame.filter(context.is_null() | context.is_in([0, CONTEXT_ID_NONE]))
    name = pl.when(forms.gather("filled", "kernel_name")).then(forms.gather("csv", "kernel_name")).otherwise(
        forms.gather("csv_na", "op_name"))
    device, stream, task, start, end = (pl.col(name) for name in ("device_id", "stream_id", "task_id", "start_ns",
                                                                    "end_ns"))
    return _block(frame, [device, start, stream, task], [
        int_text(device), name, forms.gather("csv_na", "task_type"), int_text(stream), int_text(task),
        us_text(end - start), _tab(us_text(start)), _tab(us_text(end))])


def msprof_tx_block(frame: pl.DataFrame) -> TableBlock:
    start, end, pid, tid = (pl.col(name) for name in ("start_ns", "end_ns", "process_id", "thread_id"))
    event = pl.col("event_type")
    event_text = event.replace_strict(list(MSTX_EVENT_TYPES), list(MSTX_EVENT_TYPES.values()), default=None,
                                      return_dtype=pl.String).fill_null(int_text(event))
    return _block(frame, [start, end, pid, tid], [
        pl.lit("host"), int_text(pid), int_text(tid), int_text(pl.col("category")), event_text,
        int_text(pl.col("payload_type")), int_text(pl.col("payload_value")), _tab(us_text(start)),
        _tab(us_text(end)), int_text(pl.col("message_type")), csv_text(pl.col("message").fill_null("")),
        pl.lit(NA), pl.lit(NA), pl.lit(NA)])


def aicpu_block(frame: pl.DataFrame, forms: SymbolForms) -> TableBlock:
    device, start, stream, task = (pl.col(name) for name in ("device_id", "start_ns", "stream_id", "task_id"))
    return _block(frame, [device, start, stream, task], [
        int_text(device), _tab(us_text(start)), forms.gather("csv_na", "node"),
        *(us_or_na(pl.col(name)) for name in ("compute_ns", "memcpy_ns", "task_ns", "dispatch_ns", "total_ns")),
        int_text(stream), int_text(task)])


def l2_cache_block(frame: pl.DataFrame, forms: SymbolForms) -> TableBlock:
    rates = [frame[name].cast(pl.Float64) for name in ("hit_rate", "victim_rate")]
    values = np.concatenate([rate.to_numpy() for rate in rates])  # null: NaN
    if np.count_nonzero(np.isnan(values)) > sum(rate.null_count() for rate in rates):
        texts: pa.LargeStringArray | list[str] = [num6(value) for rate in rates for value in rate.to_list()]
    else:  # the common case: no NaN of its own (num6 prints that "nan")
        texts = _num6_cells(values)
    cells = pl.Series(texts, dtype=pl.String)
    n = frame.height
    device = pl.col("device_id")
    return _block(frame, [device, pl.col("sequence")], [
        int_text(device), int_text(pl.col("stream_id")), int_text(pl.col("task_id")), pl.lit(cells.slice(0, n)),
        pl.lit(cells.slice(n, n)), forms.gather("csv_na", "op_name")])


def _num6_cells(rates: np.ndarray) -> pa.LargeStringArray | list[str]:
    """:func:`num6` of each rate (NaN: ``N/A``)."""
    texts = decimal_rows(rates, 6, 1)
    return num6_texts(rates.tolist()) if texts is None else texts


BLOCKS: dict[str, Callable[[pl.DataFrame, SymbolForms], TableBlock]] = {
    "task_time": task_time_block,
    "msprof_tx": lambda frame, _forms: msprof_tx_block(frame),
    "aicpu": aicpu_block,
    "l2_cache": l2_cache_block,
}
