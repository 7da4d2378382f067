"""Rows the aggregator holds as numpy columns until it sends them (the API rows)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class ColumnRows:
    """Blocks of equal-length numpy columns, in arrival order, taken out a number of rows at a time."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.blocks: list[list[np.ndarray]] = []
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def add(self, columns: list[np.ndarray]) -> None:
        if columns and len(columns[0]):
            assert len(columns) == self.width
            self.blocks.append(columns)
            self.count += len(columns[0])

    def take(self, limit: int) -> list[np.ndarray]:
        """The first ``limit`` rows (or all there are), as columns; the rest stay."""
        taken: list[list[np.ndarray]] = []
        wanted = limit
        while self.blocks and wanted > 0:
            block = self.blocks[0]
            size = len(block[0])
            if size <= wanted:
                taken.append(self.blocks.pop(0))
                wanted -= size
            else:
                taken.append([column[:wanted] for column in block])
                self.blocks[0] = [column[wanted:] for column in block]
                wanted = 0
        self.count -= limit - wanted
        if not taken:
            return [np.empty(0, np.int64) for _ in range(self.width)]
        if len(taken) == 1:
            return taken[0]
        return [np.concatenate([block[i] for block in taken]) for i in range(self.width)]

    def table(self, limit: int, schema: pa.Schema) -> pa.Table:
        """:meth:`take` as a table of ``schema`` (its columns in the same order)."""
        columns = self.take(limit)
        arrays = [pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)]
        return pa.Table.from_arrays(arrays, schema=schema)
