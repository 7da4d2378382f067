"""The `live` sink: hands the newest statistics snapshot to the supervisor for `pipeline top`."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages.schema import unpack_rows
from stages.sinks._partitions import PartitionMerge


class LiveSink(Sink):
    """Keeps the latest op_statistic / api_statistic snapshot and reports it at most
    ``publish_s`` apart; the supervisor publishes it (PUB, lossy by design) to `pipeline top`."""

    class Config(StageConfig):
        publish_s: float = Field(0.5, gt=0, description="minimum seconds between two published views")

    def __init__(self, config: Any, ctx: StageContext) -> None:
        super().__init__(config, ctx)
        self.partitions = PartitionMerge()  # a partitioned aggregator's snapshots, merged

    def open(self) -> None:
        self.ops: list[list[Any]] = []
        self.apis: list[list[Any]] = []
        self.final = False
        self.last_publish = 0.0
        self.snapshots = 0

    def write_batch(self, batch: Batch) -> None:
        batch = self.partitions.merged(batch)
        if batch.kind == "op_statistic":
            self.ops = unpack_rows(batch)
        elif batch.kind == "api_statistic":
            self.apis = unpack_rows(batch)
        else:
            return
        self.snapshots += 1
        self.final = bool(batch.meta.get("final"))
        self._publish(force=self.final)

    def _publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.ctx.report_view is None or (not force and now - self.last_publish < self.config.publish_s):
            return
        self.last_publish = now
        self.ctx.report_view({"ops": self.ops, "apis": self.apis, "final": self.final})

    def flush(self) -> None:
        self._publish()

    def close(self) -> None:
        self._publish(force=True)

    def accounting(self) -> dict[str, int]:
        return {"snapshots": self.snapshots}
