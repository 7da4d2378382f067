"""The row tables of msprof's summary export beyond op_summary: headers, cells, sort keys.

Each table turns the aggregator's rows (stages/schema.py) into (sort key, cells). Times are printed from
integer ns: time points and durations as µs with exactly three decimals (``us``); time points are
followed by a TAB in the CSV (:class:`._table.SortedTable` adds it). Missing values are ``N/A``.

| table | rows | sorted by (msprof's order) |
|---|---|---|
| task_time | every device task (an FFTS+ task: its context 0) | device, start |
| step_trace | every finished iteration | device, iteration end |
| msprof_tx | every msproftx record | start |
| aicpu | every AI CPU kernel record | device, timestamp (run start) |
| l2_cache | every L2 cache record | device, file order |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from stages.schema import CONTEXT_ID_NONE, SymbolTable
from stages.sinks._format import MSTX_EVENT_TYPES, NA, text_of, us

Keyed = tuple[tuple[int, ...], list[str]]


def num6(value: float | None) -> str:
    """A rate as msprof's l2_cache shows it: rounded to six decimals (trailing zeros dropped here)."""
    if value is None:
        return NA
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


_TRAILING_ZEROS = re.compile(r"\.?0+,")
_MINUS_ZERO = re.compile(r"(?<=,)-0(?=,)")


def num6_texts(numbers: list[float]) -> list[str]:
    """:func:`num6` of many rates at once (one ``%`` format, two regex passes over all of them): NaN stands for a
    missing value here and gives ``N/A``."""
    if not numbers:
        return []
    text = _TRAILING_ZEROS.sub(",", "," + ("%.6f," * len(numbers)) % tuple(numbers))
    return _MINUS_ZERO.sub("0", text).replace("nan", NA)[1:-1].split(",")


def _us_or_na(ns: int | None) -> str:
    return NA if ns is None else us(ns)


def task_time_rows(symbols: SymbolTable, rows: list[list[Any]]) -> Iterator[Keyed]:
    """The kernel name is the runtime's (task_track → hash_dic); without one (legacy data), the op name. An
    FFTS+ task is one row, its first context (msprof's task_time_assembler keeps context 0 of such a group)."""
    texts = symbols.texts
    for row in rows:
        if len(row) > 23 and row[23] not in (None, 0, CONTEXT_ID_NONE):
            continue  # a later context of an FFTS+ task
        device, stream, task, start, end = row[0], row[3], row[4], row[6], row[7]
        kernel = texts[row[24]] if len(row) > 24 else ""
        name = kernel or texts[row[8]] or NA
        yield (device, start, stream, task), [
            str(device), name, texts[row[10]] or NA, str(stream), str(task), us(end - start), us(start), us(end)]


def step_trace_rows(_symbols: SymbolTable, rows: list[list[Any]]) -> Iterator[Keyed]:
    for (device, model, iteration, fp, bp, end, duration, fp_bp, refresh, data_aug, reduces) in rows:
        cells = [str(device), str(iteration), _us_or_na(fp), _us_or_na(bp), us(end), us(duration),
                 _us_or_na(fp_bp), _us_or_na(refresh), _us_or_na(data_aug), str(model)]
        for start, stop in reduces:
            cells += [us(start), NA if stop is None else us(stop - start)]
        yield (device, end, model), cells


def msprof_tx_rows(symbols: SymbolTable, rows: list[list[Any]]) -> Iterator[Keyed]:
    """msproftx Mark records: no domain, and no device-side times (those come from MarkEx records)."""
    for (start, end, pid, tid, category, event_type, payload_type, payload_value, message_type, message,
         _domain, _mark_id) in rows:
        yield (start, end, pid, tid), [
            "host", str(pid), str(tid), str(category), MSTX_EVENT_TYPES.get(event_type, str(event_type)),
            str(payload_type), str(payload_value), us(start), us(end), str(message_type), text_of(symbols, message),
            NA, NA, NA]


def aicpu_rows(symbols: SymbolTable, rows: list[list[Any]]) -> Iterator[Keyed]:
    for device, start, node, compute, memcpy, task_ns, dispatch, total, stream, task in rows:
        yield (device, start, stream, task), [
            str(device), us(start), symbols[node] or NA, _us_or_na(compute), _us_or_na(memcpy),
            _us_or_na(task_ns), _us_or_na(dispatch), _us_or_na(total), str(stream), str(task)]


def l2_cache_rows(symbols: SymbolTable, rows: list[list[Any]]) -> Iterator[Keyed]:
    texts = symbols.texts
    for device, stream, task, hit, victim, op_name, sequence in rows:
        yield (device, sequence), [str(device), str(stream), str(task), num6(hit), num6(victim),
                                   texts[op_name] or NA]


@dataclass(frozen=True)
class TableSpec:
    """One summary table: its batch kind, header, time-point columns and row formatter."""

    module: str
    kind: str  # the batch kind that feeds it
    header: tuple[str, ...]
    time_points: tuple[str, ...]
    key_fields: int
    rows: Callable[[SymbolTable, list[list[Any]]], Iterator[Keyed]]
    growth: tuple[str, ...] = ()  # columns repeated when a row carries more than the header has


TABLES = {spec.module: spec for spec in (
    TableSpec("task_time", "task",
              ("Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)", "task_start(us)",
               "task_stop(us)"),
              ("task_start(us)", "task_stop(us)"), 4, task_time_rows),
    TableSpec("step_trace", "step_trace",
              ("Device_id", "Iteration ID", "FP Start(us)", "BP End(us)", "Iteration End(us)", "Iteration Time(us)",
               "FP to BP Time(us)", "Iteration Refresh(us)", "Data Aug Bound(us)", "Model ID"),
              ("FP Start(us)", "BP End(us)", "Iteration End(us)", "Reduce Start(us)"), 3, step_trace_rows,
              ("Reduce Start(us)", "Reduce Duration(us)")),
    TableSpec("msprof_tx", "tx",
              ("Device_id", "pid", "tid", "category", "event_type", "payload_type", "payload_value", "Start_time(us)",
               "End_time(us)", "message_type", "message", "domain", "Device Start_time(us)", "Device End_time(us)"),
              ("Start_time(us)", "End_time(us)", "Device Start_time(us)", "Device End_time(us)"), 4, msprof_tx_rows),
    TableSpec("aicpu", "aicpu",
              ("Device_id", "Timestamp(us)", "Node", "Compute_time(us)", "Memcpy_time(us)", "Task_time(us)",
               "Dispatch_time(us)", "Total_time(us)", "Stream ID", "Task ID"),
              ("Timestamp(us)",), 4, aicpu_rows),
    TableSpec("l2_cache", "l2_cache",
              ("Device_id", "Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"), (), 2, l2_cache_rows),
)}
TABLES_BY_KIND: dict[str, list[TableSpec]] = {}
for _spec in TABLES.values():
    TABLES_BY_KIND.setdefault(_spec.kind, []).append(_spec)
