"""A deliberately slow third-party sink (loaded as `type: slow_sink:SlowSink`)."""

from __future__ import annotations

import json
import time

from pydantic import Field

from pipeline.stage import Batch, Sink, StageConfig


class SlowSink(Sink):
    class Config(StageConfig):
        delay_s: float = Field(0.02, ge=0)
        path: str = "slow_sink.json"

    def open(self) -> None:
        self.counts: dict[str, int] = {}

    def write_batch(self, batch: Batch) -> None:
        time.sleep(self.config.delay_s)  # backpressure must slow the pipeline, never drop
        self.counts[batch.kind] = self.counts.get(batch.kind, 0) + batch.count

    def close(self) -> None:
        self.ctx.resolve(self.config.path).write_text(json.dumps(self.counts))
