"""Operator records of the subscription source (stages/subscription) into op_statistic.

They carry their own durations and names, so they join nothing: each is one statistic entry of its device,
op type and core type. Symbol ids are the sending stage's, learnt from each batch's ``meta["symbols"]``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.stage import Batch
from stages.aggregator.stats import StatsBook
from stages.schema import SymbolTable
from stages.subscription import records


class SubscribedOps:
    def __init__(self) -> None:
        self.symbols: dict[str, SymbolTable] = {}
        self.count = 0

    def add(self, batch: Batch, stats: StatsBook, mine: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """``mine``: the records of this aggregator's devices (a partition of several: partition.py)."""
        table = self.symbols.setdefault(str(batch.meta.get("source", "")), SymbolTable())
        table.learn(batch.meta.get("symbols") or [])
        arr = records.from_batch(batch)
        if mine is not None:
            arr = mine(arr)
        for device, op_type, core, duration in zip(arr["device_id"].tolist(), arr["op_type"].tolist(),
                                                   arr["core_type"].tolist(), arr["duration_ns"].tolist(),
                                                   strict=True):
            stats.add_op(device, table[op_type], table[core], duration)
        self.count += len(arr)
