"""What the subscription source sends the aggregator: kind ``subscribed_op``, one numpy record per op.

Text columns (``op_type``, ``op_name``, ``core_type``) are symbol ids; each batch's ``meta["symbols"]`` lists
the ``[id, text]`` pairs not sent before and ``meta["source"]`` names the sending stage (its symbol table).
Times are the device-monotonic ns of ProfOpDesc, not converted to wall clock.
"""

from __future__ import annotations

import numpy as np

from pipeline.stage import Batch

KIND = "subscribed_op"
SUBSCRIBED_OP = np.dtype([("device_id", "<u4"), ("model_id", "<u4"), ("flag", "<u4"), ("thread_id", "<u4"),
                          ("op_index", "<u8"), ("start_ns", "<u8"), ("end_ns", "<u8"), ("duration_ns", "<u8"),
                          ("execution_ns", "<u8"), ("cube_fops", "<u8"), ("vector_fops", "<u8"),
                          ("op_type", "<u4"), ("op_name", "<u4"), ("core_type", "<u4")])


def from_batch(batch: Batch) -> np.ndarray:
    return np.frombuffer(batch.body, SUBSCRIBED_OP)
