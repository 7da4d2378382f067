"""Cutting the subscription pipe's byte stream into ProfOpDesc records and checking their signatures.

The pipe has no framing: a read may end inside a record, so bytes are buffered until a whole record is
there. A record whose signature does not match is set aside (its bytes and a count); the records after
it are still read at their fixed positions, as pyACL's getters do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stages.formats import op_desc


@dataclass
class Taken:
    records: np.ndarray  # whole records whose signature matches, in stream order
    bad_count: int = 0  # whole records whose signature does not match
    bad_bytes: bytes = b""


class OpDescFramer:
    """Buffers bytes as they are read; hands out whole, checked records once the record size is known."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self.buffer = bytearray()

    @property
    def pending_bytes(self) -> int:
        return len(self.buffer)

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def take(self) -> Taken:
        """The whole records at the front of the buffer (none while the size is unknown)."""
        if self.size not in op_desc.LAYOUTS:
            return Taken(np.zeros(0, op_desc.OP_DESC_80))
        assert self.size is not None
        whole = len(self.buffer) - len(self.buffer) % self.size
        block = bytes(self.buffer[:whole])
        del self.buffer[:whole]
        records, good = op_desc.check(block, self.size)
        if good.all():
            return Taken(records.copy())
        bad = np.flatnonzero(~good)
        bad_bytes = b"".join(block[i * self.size:(i + 1) * self.size] for i in bad.tolist())
        return Taken(records[good].copy(), len(bad), bad_bytes)

    def rest(self) -> bytes:
        """Whatever is buffered and not handed out (a short read at the end of the stream); the buffer empties."""
        left, self.buffer = bytes(self.buffer), bytearray()
        return left
