"""A sink that hangs on cue (loaded as `type: stall_sink:StallSink`): while the file named by
``cue`` exists, write_batch does not return, so the stage sends no heartbeat."""

from __future__ import annotations

import os
import time

from pipeline.stage import Batch, Sink, StageConfig


class StallSink(Sink):
    class Config(StageConfig):
        cue: str

    def open(self) -> None:
        self.records = 0

    def write_batch(self, batch: Batch) -> None:
        while os.path.exists(self.config.cue):
            time.sleep(0.05)  # stuck inside the stage: the runner's loop cannot report
        self.records += batch.count

    def accounting(self) -> dict[str, int]:
        return {"records": self.records}
