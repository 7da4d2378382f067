"""The aggregator's part when it runs as partitions by device (``partitions: N``, pipeline/partitions.py).

Partition k gets the records of the devices d with d % N == k and all of the host's records: it needs the host's
APIs, node and tensor records to describe its tasks. It keeps the host task tracks of its own devices only (the
others are another partition's: counted, never rejected). What only the host makes (API rows, api_statistic, tx
rows) comes from partition 0, so the partitions' outputs together hold it once (the legacy layout's, in a device
folder, from the one partition of that device). Every partition sends its
op_statistic (its devices) and its run_info (the session, its devices); the sinks merge the partitions'
snapshots (stages/sinks/_partitions.py). Symbol ids of partition k are k modulo N, so the partitions' ids never
collide in a sink's table.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from pipeline.stage import StageContext
from stages.schema import SymbolTable

OTHER_DEVICE = "host task tracks of another partition's devices"
OTHER_DEVICE_OPS = "subscribed operator records of another partition's devices"
HOST_ONLY = "host records another partition writes ({kind})"


class PartitionSymbols(SymbolTable):
    """Interning whose ids are ``partition`` modulo ``partitions``; the ids between are left empty."""

    def __init__(self, partition: int, partitions: int) -> None:
        super().__init__()
        self.partition, self.partitions = partition, partitions

    def intern(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            texts = self._texts
            texts.extend([""] * ((self.partition - len(texts)) % self.partitions))
            found = len(texts)
            self._ids[text] = found
            texts.append(text)
            self._unsent.append([found, text])
        return found


class PartitionRole:
    """What one partition keeps and sends; with a single partition it keeps and sends everything."""

    def __init__(self, ctx: StageContext) -> None:
        self.partition, self.partitions = ctx.partition, ctx.partitions
        self.kept_out: Counter[str] = Counter()

    @property
    def host_outputs(self) -> bool:
        """Whether this partition sends what only the host makes (API and tx rows, api_statistic)."""
        return self.partition == 0

    def symbol_table(self) -> SymbolTable:
        return SymbolTable() if self.partitions == 1 else PartitionSymbols(self.partition, self.partitions)

    def own_devices(self, tracks: np.ndarray, what: str = OTHER_DEVICE) -> np.ndarray:
        """The records (``device_id`` column) of this partition's devices; the others counted as ``what``."""
        if self.partitions == 1 or not len(tracks):
            return tracks
        mine = tracks["device_id"].astype(np.int64) % self.partitions == self.partition
        others = len(tracks) - int(mine.sum())
        if others:
            self.kept_out[what] += others
        return tracks if not others else tracks[mine]

    def own_subscribed(self, ops: np.ndarray) -> np.ndarray:
        """Subscribed operator records (no device in their batch's meta: every partition gets them) of this
        partition's devices, so that each counts in one partition's op_statistic."""
        return self.own_devices(ops, OTHER_DEVICE_OPS)

    def sends_host_rows(self, kind: str, count: int, device: Any = None) -> bool:
        """Whether this partition makes rows of these host records: partition 0 does, and so does the one partition
        a batch of a device folder reaches (``device`` an int: the legacy layout keeps the host's records there);
        the others count them."""
        if self.host_outputs or not count or isinstance(device, int):
            return True
        self.kept_out[HOST_ONLY.format(kind=kind)] += count
        return False

    def meta(self) -> dict[str, Any]:
        """What a statistics snapshot or run_info batch says of its partition (nothing with one partition)."""
        return {} if self.partitions == 1 else {"partition": self.partition, "partitions": self.partitions}

    def accounting(self) -> dict[str, Any]:
        if self.partitions == 1:
            return {}
        return {"partition": {"index": self.partition, "of": self.partitions, "kept_out": dict(self.kept_out)}}
