"""Task rows the aggregator holds until it sends them: column blocks (a window of joined tasks built at once) and
row lists (the tasks the join handles one at a time), in the order the join made them.

A block's ``pmu`` values are one flat float array (NaN: no value) with each row's offsets; the AI Core PMU values
of its rows that have a PMU record are worked out later, with every other pending block's, one batch per device
(:func:`fill_blocks`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from stages.schema import TASK_COLUMNS
from stages.tables import SCHEMAS

PMU_AT = TASK_COLUMNS.index("pmu")
PmuRef = tuple[np.ndarray, int]  # a PMU record: its chunk and its row there
# rows as their columns but ``pmu`` (schema order), then ``pmu`` as offsets, values and which values are none
Piece = tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]


@dataclass
class PmuWork:
    """A block's rows whose AI Core PMU values are still to be computed: where each row's values start in the
    block's flat ``pmu`` array, its device, PMU record, block dim and duration."""

    starts: np.ndarray
    devices: np.ndarray
    records: list[PmuRef]
    block_dims: np.ndarray
    durations: np.ndarray


@dataclass
class TaskBlock:
    """Task rows as columns: every column but ``pmu`` (schema order), and ``pmu`` as offsets into flat values."""

    columns: list[np.ndarray]
    pmu_offsets: np.ndarray
    pmu_values: np.ndarray
    work: PmuWork | None = None
    taken: int = 0  # rows already sent

    def __len__(self) -> int:
        return len(self.columns[0]) - self.taken

    def take(self, count: int) -> Piece:
        """The next ``count`` rows (they count as sent)."""
        first, last = self.taken, self.taken + count
        self.taken = last
        offsets = self.pmu_offsets[first:last + 1]
        values = self.pmu_values[offsets[0]:offsets[-1]]
        return [column[first:last] for column in self.columns], offsets - offsets[0], values, np.isnan(values)


def rows_piece(rows: list[list[Any]]) -> Piece:
    """Row lists as a piece; their ``pmu`` values are lists (None: no value) or float arrays (NaN: no value)."""
    columns = list(zip(*rows, strict=True))
    cells = columns.pop(PMU_AT)
    values: list[np.ndarray] = []
    exact: list[tuple[int, list[Any]]] = []  # list cells holding a NaN value: their own nulls, by None
    offsets = np.zeros(len(cells) + 1, np.int64)
    at = 0
    for i, cell in enumerate(cells):
        if type(cell) is np.ndarray:
            values.append(cell)
        else:
            values.append(np.array(cell, np.float64))  # None → NaN
            if any(v != v for v in cell):
                exact.append((at, cell))
        at += len(cell)
        offsets[i + 1] = at
    flat = np.concatenate(values) if values else np.zeros(0)
    missing = np.isnan(flat)
    for start, cell in exact:
        missing[start:start + len(cell)] = [v is None for v in cell]
    return [np.array(column, np.int64) for column in columns], offsets, flat, missing


def piece_table(pieces: list[Piece]) -> pa.Table:
    """One table of pieces of task rows, in order."""
    arrow_schema = SCHEMAS["task"]
    fields = [f for f in arrow_schema if f.name != "pmu"]
    if len(pieces) == 1:
        columns, offsets, values, missing = pieces[0]
    else:
        columns = [np.concatenate(parts) for parts in zip(*(piece[0] for piece in pieces), strict=True)]
        ends = np.cumsum([len(piece[2]) for piece in pieces])
        offsets = np.concatenate([pieces[0][1]] + [piece[1][1:] + end for piece, end in
                                                   zip(pieces[1:], ends[:-1].tolist(), strict=True)])
        values = np.concatenate([piece[2] for piece in pieces])
        missing = np.concatenate([piece[3] for piece in pieces])
    pmu = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, mask=missing))
    arrays = [pa.array(column, type=f.type) for column, f in zip(columns, fields, strict=True)]
    arrays.insert(PMU_AT, pmu)
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


class TaskRowStore:
    """Blocks and row lists of task rows in order, taken out ``limit`` rows at a time as tables."""

    def __init__(self) -> None:
        self.segments: deque[TaskBlock | list[list[Any]]] = deque()
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add_row(self, row: list[Any]) -> None:
        last = self.segments[-1] if self.segments else None
        if isinstance(last, list):
            last.append(row)
        else:
            self.segments.append([row])
        self.count += 1

    def add_block(self, block: TaskBlock) -> None:
        if len(block):
            self.segments.append(block)
            self.count += len(block)

    def pending_blocks(self) -> list[TaskBlock]:
        return [s for s in self.segments if isinstance(s, TaskBlock) and s.work is not None]

    def table(self, limit: int) -> pa.Table:
        """The first ``limit`` rows (or all there are) as one table."""
        pieces: list[Piece] = []
        wanted = min(limit, self.count)
        self.count -= wanted
        while wanted:
            segment = self.segments[0]
            count = min(wanted, len(segment))
            if isinstance(segment, TaskBlock):
                pieces.append(segment.take(count))
                if not len(segment):
                    self.segments.popleft()
            else:
                pieces.append(rows_piece(segment[:count]))
                if count == len(segment):
                    self.segments.popleft()
                else:
                    self.segments[0] = segment[count:]
            wanted -= count
        return piece_table(pieces)


def record_rows(records: list[PmuRef]) -> np.ndarray:
    """PMU records (of one dtype) as one array, taken a run of records of one chunk at a time."""
    n = len(records)
    chunks = list(map(itemgetter(0), records))
    indices = np.fromiter(map(itemgetter(1), records), np.int64, n)
    owners = np.fromiter(map(id, chunks), np.int64, n)
    starts = np.flatnonzero(np.concatenate(([True], owners[1:] != owners[:-1]))).tolist()
    parts = [chunks[start][indices[start:end]] for start, end in zip(starts, starts[1:] + [n], strict=True)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def record_counts(records: list[PmuRef]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Total cycles, counters and blocks of PMU records."""
    found = record_rows(records)
    return found["total_cycle"], found["pmu"], found["block"].astype(np.int64)


def fill_blocks(blocks: list[TaskBlock], values_of: Callable[[int, list[PmuRef], np.ndarray, np.ndarray],
                                                                np.ndarray]) -> None:
    """The PMU values of the pending blocks' rows, one ``values_of(device, records, block dims, durations)``
    call per device (n × width, NaN: no value)."""
    works = [block.work for block in blocks if block.work is not None]
    if not works:
        return
    devices = np.concatenate([work.devices for work in works])
    owner = np.repeat(np.arange(len(works)), [len(work.devices) for work in works])
    starts = np.concatenate([work.starts for work in works])
    block_dims = np.concatenate([work.block_dims for work in works])
    durations = np.concatenate([work.durations for work in works])
    records = [record for work in works for record in work.records]
    flats = [block.pmu_values for block in blocks if block.work is not None]
    for device in np.unique(devices).tolist():
        chosen = np.flatnonzero(devices == device)
        values = values_of(device, [records[i] for i in chosen.tolist()], block_dims[chosen], durations[chosen])
        where = starts[chosen][:, None] + np.arange(values.shape[1])
        owners = owner[chosen]
        for at in np.unique(owners).tolist():
            mine = owners == at
            flats[at][where[mine]] = values[mine]
    for block in blocks:
        block.work = None
