"""The slowest operator types by total device time, rewritten as the run goes (an example plugin).

Input: the aggregator's ``stats`` port. It carries the whole op_statistic table again whenever
it changes, so the sink keeps only the newest table and rewrites its file atomically.
"""

from __future__ import annotations

import json
import os
from typing import Any

import polars as pl
from pydantic import Field

from pipeline.stage import Batch, Sink, StageConfig
from stages.tables import unpack_table


class SlowestOps(Sink):
    class Config(StageConfig):
        top: int = Field(5, ge=1, description="how many operator types to keep")
        path: str = Field("slowest_ops.json", description="output file, relative to run.output")

    def open(self) -> None:
        self.tables = 0
        self.rows: list[dict[str, Any]] = []

    def write_batch(self, batch: Batch) -> None:
        if batch.kind != "op_statistic":  # the stats port also carries api_statistic
            return
        self.tables += 1
        # one column batch: device_id, op_type, core_type, count, total_ns, min_ns, max_ns
        table = pl.from_arrow(unpack_table(batch))
        assert isinstance(table, pl.DataFrame)
        ranked = table.sort(["total_ns", "op_type"], descending=[True, False]).head(self.config.top)
        self.rows = ranked.select("op_type", "core_type", "count", total_us=pl.col("total_ns") / 1000).to_dicts()
        self.flush()

    def flush(self) -> None:
        target = self.ctx.resolve(self.config.path)
        partial = target.with_suffix(".tmp")
        partial.write_text(json.dumps({"top": self.rows}, indent=1) + "\n")
        os.replace(partial, target)  # readers never see half a file

    def accounting(self) -> dict[str, Any]:
        return {"tables_seen": self.tables}
