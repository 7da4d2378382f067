"""Column batches on the aggregator's ports: one Arrow IPC stream per message body.

Every row kind of ``tasks`` and both statistics kinds of ``stats`` travel as an Arrow table with the typed
schema below (the column order of :mod:`stages.schema`). A sink reads one with :func:`unpack_table` and hands
it to pyarrow or polars (``polars.from_arrow``) in one call; :func:`stages.schema.unpack_rows` still gives
the positional rows to code that wants them. Text columns of task, API, AI CPU and L2 rows are symbol ids
(uint32) resolved through the ``meta["symbols"]`` pairs (:class:`stages.schema.SymbolTable`,
:func:`resolve_symbols`); the statistics and tx rows carry their texts.

pyarrow is imported by the stages that send or read these ports only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from pipeline.stage import Batch
from stages import schema

ARROW_MAGIC = b"\xff\xff\xff\xff"  # every Arrow IPC stream opens with this continuation marker

_I64, _U64, _SYM, _F64, _STR = pa.int64(), pa.uint64(), pa.uint32(), pa.float64(), pa.string()


def _schema(columns: Sequence[str], types: dict[str, pa.DataType], default: pa.DataType = _I64) -> pa.Schema:
    return pa.schema([(name, types.get(name, default)) for name in columns])


SCHEMAS: dict[str, pa.Schema] = {
    "task": _schema(schema.TASK_COLUMNS, {**{name: _SYM for name in schema.TASK_TEXT_COLUMNS},
                                          "pmu": pa.list_(_F64)}),
    "api": _schema(schema.API_COLUMNS, {"struct_type": _SYM, "name": _SYM, "item_id": _U64}),
    "tx": _schema(schema.TX_COLUMNS, {"payload_value": _U64, "message": _STR, "domain": _U64, "mark_id": _U64}),
    "step_trace": _schema(schema.STEP_TRACE_COLUMNS, {"reduces": pa.list_(pa.list_(_I64))}),
    "aicpu": _schema(schema.AICPU_COLUMNS, {"node": _SYM}),
    "l2_cache": _schema(schema.L2_CACHE_COLUMNS, {"hit_rate": _F64, "victim_rate": _F64, "op_name": _SYM}),
    "aicore_freq": _schema(schema.AICORE_FREQ_COLUMNS, {}),
    "op_statistic": _schema(schema.OP_STATISTIC_COLUMNS, {"op_type": _STR, "core_type": _STR}),
    "api_statistic": _schema(schema.API_STATISTIC_COLUMNS, {"level": _STR, "name": _STR, "sum_sq_us2": _F64}),
}
SYMBOL_COLUMNS: dict[str, tuple[str, ...]] = {
    "task": schema.TASK_TEXT_COLUMNS, "api": schema.API_TEXT_COLUMNS, "aicpu": schema.AICPU_TEXT_COLUMNS,
    "l2_cache": schema.L2_CACHE_TEXT_COLUMNS,
}


# A cluster merge over every device names them "all": its op_statistic device column is text
OP_STATISTIC_ALL_DEVICES = SCHEMAS["op_statistic"].set(0, pa.field("device_id", _STR))


def table_of_rows(kind: str, rows: Sequence[Sequence[Any]], arrow_schema: pa.Schema | None = None) -> pa.Table:
    """The typed table of positional rows of ``kind`` (columns transposed once, in C)."""
    arrow_schema = arrow_schema or SCHEMAS[kind]
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(arrow_schema)
    arrays = [pa.array(values, type=field.type) for values, field in zip(columns, arrow_schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


def pack_table(kind: str, table: pa.Table, port: str, meta: dict[str, Any] | None = None) -> Batch:
    """A batch whose body is ``table`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return Batch(kind=kind, count=table.num_rows, meta=meta or {}, body=sink.getvalue().to_pybytes(), port=port)


def pack_columns(kind: str, rows: Sequence[Sequence[Any]], port: str, meta: dict[str, Any] | None = None,
                 arrow_schema: pa.Schema | None = None) -> Batch:
    """A column batch of positional rows of ``kind`` (``arrow_schema``: other than the kind's own)."""
    return pack_table(kind, table_of_rows(kind, rows, arrow_schema), port, meta)


def is_table(batch: Batch) -> bool:
    return batch.body[:4] == ARROW_MAGIC


def unpack_table(batch: Batch) -> pa.Table:
    """The Arrow table a column batch carries (its buffers point into the message: no copy)."""
    return pa.ipc.open_stream(pa.py_buffer(batch.body)).read_all()


def rows_of_table(table: pa.Table) -> list[list[Any]]:
    """Positional rows, as :func:`stages.schema.unpack_rows` gives them (for code that is not columnar)."""
    if table.num_rows == 0:
        return []
    return [list(row) for row in zip(*(column.to_pylist() for column in table.columns), strict=True)]


def resolve_symbols(table: pa.Table, kind: str, symbols: schema.SymbolTable) -> pa.Table:
    """``table`` with its symbol-id columns replaced by their texts (string columns), for sinks that want text."""
    import pyarrow.compute as pc  # ~0.04 CPU s to import: not for a process that only packs or reads tables

    texts = pa.array(symbols.texts, type=_STR)
    for name in SYMBOL_COLUMNS.get(kind, ()):
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, pc.take(texts, table.column(at)))
    return table
