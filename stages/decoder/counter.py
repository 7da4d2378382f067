"""The 4-bit rolling counter of HWTS-class device records (byte 0 bits 4–7 of hwts.data and aicore.data).

The device numbers every record it writes to a stream modulo 16, so a jump in the sequence means
records were lost before they reached the file (spec §1.7). Chunks of one stream reach the decoder
in order, so the last counter of each stream is enough to carry the check across chunks. A gap of
k records shows as k mod 16: what is reported is a lower bound.
"""

from __future__ import annotations

import numpy as np

from stages.formats import raw


class RollingCounters:
    def __init__(self) -> None:
        self.last: dict[str, int] = {}

    def missing(self, stream: str, heads: np.ndarray) -> int:
        """Records missing before and between ``heads`` (byte 0 of each record, in file order)."""
        if not len(heads):
            return 0
        cnt = (heads >> raw.HWTS_CNT_SHIFT).astype(np.int64)
        previous = self.last.get(stream)
        sequence = cnt if previous is None else np.concatenate(([previous], cnt))
        self.last[stream] = int(cnt[-1])
        return int(((np.diff(sequence) - 1) % raw.HWTS_CNT_MODULO).sum())
