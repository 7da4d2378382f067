"""Compact and additional host records the join does not use yet: decoded, never rejected.

node_attr_info, memcpy_info, hccl_op_info, capture_stream_info (compact, 64 B); context_id_info,
graph_id_map, fusion_op_info, hccl_info, Multi_Thread (additional, 256 B). Fields keep their raw names.
"""

from __future__ import annotations

import numpy as np

from pipeline.stage import Batch
from stages.decoder import host_records, records
from stages.decoder.timebase import TimeBase
from stages.formats import host_extra

KINDS = frozenset(host_extra.LAYOUTS)
Output = list[tuple[str, "np.ndarray | Batch"]]


class ExtraHostDecoder:
    def __init__(self, timebase: TimeBase) -> None:
        self.timebase = timebase

    def decode(self, kind: str, batch: Batch) -> Output:
        clock = self.timebase.host_clock()
        assert clock is not None
        arr = np.frombuffer(batch.body, dtype=host_extra.LAYOUTS[kind])
        out_kind = host_records.EXTRA_KINDS[kind]
        out = np.zeros(len(arr), host_records.DTYPES[out_kind])
        records.copy_fields(out, arr, _SHARED[kind])
        if kind == "hccl_op_info":
            flags = np.ascontiguousarray(arr["flags"])
            out["relay"] = flags & 1
            out["retry"] = (flags >> 1) & 1
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return [(out_kind, out)]


# stream kind → the fields its raw layout and its decoded kind share (copied as they are)
_SHARED = {kind: tuple(name for name in host_records.DTYPES[host_records.EXTRA_KINDS[kind]].names or ()
                       if name in (layout.names or ())) for kind, layout in host_extra.LAYOUTS.items()}
