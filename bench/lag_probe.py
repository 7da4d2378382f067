"""A sink for the lag benchmark: when did how many device tasks become visible downstream.

    probe_stats:   {type: "lag_probe:LagProbe", inputs: [aggregate.stats]}  # tasks in the live statistics
    probe_decoded: {type: "lag_probe:LagProbe", inputs: [decode]}           # device end logs decoded

On ``aggregate.stats`` it notes, for every op_statistic snapshot, the time it arrived and the task count it
holds (the sum of its Count column); on the decoder's output, the time each batch of task logs arrived
and the end logs seen so far. Times are ``time.monotonic()``, the clock the paced board logs its writes in.
The samples go to ``lag_probe_{stage id}.json`` in the run's output folder at close; ``….ready`` there
says the probe is running.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from pipeline.stage import Batch, Sink, StageContext
from stages.decoder import records
from stages.schema import unpack_rows

COUNT_AT = 3  # op_statistic: [device, op_type, core_type, count, total_ns, min_ns, max_ns]


class LagProbe(Sink):
    def __init__(self, config: Any, ctx: StageContext) -> None:
        super().__init__(config, ctx)
        self.samples: list[tuple[float, int]] = []
        self.ended = 0

    def open(self) -> None:
        self.ctx.resolve(f"lag_probe_{self.ctx.stage_id}.ready").touch()  # the board may start writing

    def write_batch(self, batch: Batch) -> None:
        if batch.kind == "op_statistic":
            self.samples.append((time.monotonic(), sum(row[COUNT_AT] for row in unpack_rows(batch))))
        elif batch.kind == "task_log":
            logs = records.from_batch(batch)
            self.ended += int(np.count_nonzero(logs["state"] == records.STATE_END))
            self.samples.append((time.monotonic(), self.ended))

    def close(self) -> None:
        path = self.ctx.resolve(f"lag_probe_{self.ctx.stage_id}.json")
        path.write_text(json.dumps(self.samples))
