"""The slowest operator types by total device time, rewritten as the run goes (an example plugin).

Input: the aggregator's ``stats`` port. It carries the whole op_statistic table again whenever
it changes, so the sink keeps only the newest table and rewrites its file atomically.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydantic import Field

from pipeline.stage import Batch, Sink, StageConfig
from stages.schema import unpack_rows


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
        # op_statistic rows: [device, op_type, core_type, count, total_ns, min_ns, max_ns]
        ranked = sorted(unpack_rows(batch), key=lambda row: (-row[4], row[1]))
        self.rows = [{"op_type": row[1], "core_type": row[2], "count": row[3], "total_us": row[4] / 1000}
                     for row in ranked[: self.config.top]]
        self.flush()

    def flush(self) -> None:
        target = self.ctx.resolve(self.config.path)
        partial = target.with_suffix(".tmp")
        partial.write_text(json.dumps({"top": self.rows}, indent=1) + "\n")
        os.replace(partial, target)  # readers never see half a file

    def accounting(self) -> dict[str, Any]:
        return {"tables_seen": self.tables}
