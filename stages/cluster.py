"""``cluster_merge``: cluster-wide op_statistic and api_statistic from the statistics parts of many devices.

Example config (after a ``nats_source``; a ``summary`` sink writes the CSVs)::

    merge:
      type: cluster_merge
      inputs: [consume]
      devices: keep           # or "all": one row per operator type over every device
      snapshot_every_s: 1.0

Each part (stages/nats/message.py) is the full, mergeable state of one source: per key a count, a sum, a
minimum, a maximum and (api_statistic) the sum of squares that the variance needs. The stage keeps the
newest part of every source, by its ``seq``, and the cluster table is their combination: counts, sums and
sums of squares add, minima and maxima take the least and the greatest. A part seen again, or one older
than what the stage holds, changes nothing, so redelivery after a restart double-counts nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import msgpack
from pydantic import Field

from pipeline.stage import Batch, StageConfig, StageContext, Transform
from stages.nats.message import API_PART, OP_PART, PART_KINDS
from stages.schema import unpack_rows
from stages.tables import OP_STATISTIC_ALL_DEVICES, pack_columns

ALL_DEVICES = "all"
Row = list[Any]


def _combine(into: Row | None, row: Row, first: int) -> Row:
    """Add ``row``'s figures (count, total, min, max[, sum of squares] from column ``first``) to ``into``."""
    count, total, low, high, *rest = row[first:]
    if into is None:
        return [*row[:first], count, total, low, high, *rest]
    into[first] += count
    into[first + 1] += total
    into[first + 2] = min(into[first + 2], low)
    into[first + 3] = max(into[first + 3], high)
    if rest:
        into[first + 4] += rest[0]
    return into


def merge_op_rows(parts: Iterable[list[Row]], all_devices: bool = False) -> list[Row]:
    """op_statistic rows ``[device, op_type, core_type, count, total_ns, min_ns, max_ns]`` of many sources,
    combined per (device, op type, core type); with ``all_devices`` per (op type, core type), device "all"."""
    merged: dict[tuple[Any, ...], Row] = {}
    for rows in parts:
        for row in rows:
            if all_devices:
                row = [ALL_DEVICES, *row[1:]]
            key = (row[0], row[1], row[2])
            merged[key] = _combine(merged.get(key), row, 3)
    return list(merged.values())


def merge_api_rows(parts: Iterable[list[Row]]) -> list[Row]:
    """api_statistic rows ``[level, name, count, total_ns, min_ns, max_ns, sum_sq_us2]`` combined per
    (level, name)."""
    merged: dict[tuple[Any, ...], Row] = {}
    for rows in parts:
        for row in rows:
            key = (row[0], row[1])
            merged[key] = _combine(merged.get(key), row, 2)
    return list(merged.values())


class ClusterMergeConfig(StageConfig):
    devices: Literal["keep", "all"] = Field("keep", description="rows per device id, or one over all devices")
    snapshot_every_s: float = Field(1.0, gt=0, description="at most one merged snapshot per interval")


class ClusterMerge(Transform):
    Config = ClusterMergeConfig
    outputs = ("out",)

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, ClusterMergeConfig):
            config = ClusterMergeConfig.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: ClusterMergeConfig = config
        self.parts: dict[tuple[str, str], tuple[int, list[Row]]] = {}  # (kind, source) → (seq, rows)
        self.figures = {"parts_applied": 0, "parts_stale": 0, "snapshots": 0}
        self.changed = False
        self.last_emit = float("-inf")

    def process(self, batch: Batch) -> Iterable[Batch]:
        if batch.kind not in PART_KINDS:
            self.ctx.reject(f"not a statistics part: {batch.kind}"[:80], batch.count)
            return ()
        source, seq = str(batch.meta.get("source")), int(batch.meta.get("seq", 0))
        held = self.parts.get((batch.kind, source))
        if held is not None and held[0] >= seq:
            self.figures["parts_stale"] += 1
            return ()
        try:
            rows = unpack_rows(batch)
        except (ValueError, msgpack.UnpackException):
            self.ctx.reject("statistics part: bad body", batch.count, batch.body)
            return ()
        self.parts[(batch.kind, source)] = (seq, rows)
        self.figures["parts_applied"] += 1
        self.changed = True
        return self.tick(self.clock())

    def tick(self, now: float) -> Iterable[Batch]:
        if not self.changed or now - self.last_emit < self.config.snapshot_every_s:
            return ()
        self.last_emit = now
        return self._snapshot(final=False)

    def finish(self) -> Iterable[Batch]:
        return self._snapshot(final=True)

    def progress(self) -> dict[str, Any]:
        return {"sources": len(self.parts), **self.figures}

    def accounting(self) -> dict[str, Any]:
        return {"sources": sorted(f"{kind}:{source}" for kind, source in self.parts), **self.figures}

    def _snapshot(self, final: bool) -> list[Batch]:
        self.changed = False
        self.figures["snapshots"] += 1
        ops = merge_op_rows((rows for (kind, _), (_, rows) in sorted(self.parts.items()) if kind == OP_PART),
                            all_devices=self.config.devices == "all")
        apis = merge_api_rows(rows for (kind, _), (_, rows) in sorted(self.parts.items()) if kind == API_PART)
        meta = {"final": final}
        devices = OP_STATISTIC_ALL_DEVICES if self.config.devices == "all" else None
        return [pack_columns("op_statistic", ops, "out", dict(meta), devices),
                pack_columns("api_statistic", apis, "out", dict(meta))]
