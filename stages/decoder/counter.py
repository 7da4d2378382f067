"""The 4-bit rolling counter of HWTS-class device records (byte 0 bits 4–7 of hwts.data and aicore.data).

The device numbers every record it writes to a stream modulo 16, so a jump in the sequence means
records were lost before they reached the file. Chunks of one stream reach the decoder
in order, so the last counter of each stream is enough to carry the check across chunks. A gap of
k records shows as k mod 16: what is reported is a lower bound.
"""

from __future__ import annotations

import numpy as np

from stages.formats import raw

_MASK = raw.HWTS_CNT_MODULO - 1  # the modulus is a power of two: mod 16 = the low 4 bits, also of wrapped uint8s
_SHIFT = np.array(raw.HWTS_CNT_SHIFT, np.uint8)  # a 0-d array: numpy takes it in faster than a Python int


class RollingCounters:
    def __init__(self) -> None:
        self.last: dict[str, int] = {}

    def missing(self, stream: str, heads: np.ndarray) -> int:
        """Records missing before and between ``heads`` (byte 0 of each record, uint8, in file order)."""
        if not len(heads):
            return 0
        cnt = heads >> _SHIFT
        first = int(cnt[0])
        previous = self.last.get(stream)
        self.last[stream] = int(cnt[-1])
        missing = 0 if previous is None else (first - previous - 1) & _MASK
        if len(cnt) <= _RUN_LENGTH and cnt.tobytes() == _RUNS[first][:len(cnt)]:
            return missing  # the usual case: counting up from the first, no gap
        steps = cnt[1:] - cnt[:-1]  # uint8: wraps, and the low 4 bits stay right
        steps -= 1
        steps &= _MASK
        return missing + int(steps.sum())


_RUN_LENGTH = 4096  # covers a collector chunk (1024 records); longer runs take the general path
# The bytes of an unbroken counter run from each start: first, first + 1, … (mod 16).
_RUNS = [((first + np.arange(_RUN_LENGTH)) & _MASK).astype(np.uint8).tobytes() for first in range(16)]
