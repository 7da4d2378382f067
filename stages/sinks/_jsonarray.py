"""A JSON array file that is complete after every append.

The file always ends with ``"\\n]"``. An append writes, with one ``pwrite`` at the offset of
that ending, ``",\\n" + elements + "\\n]"``, so whoever reads the file between appends (or after
the process is killed) sees valid JSON. Elements are pre-serialised JSON texts, one per line.
"""

from __future__ import annotations

import os
from pathlib import Path

_EMPTY = b"[\n]"
_END = b"\n]"


class JsonArrayFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._size = 0
        self.count = 0
        self._pwrite(_EMPTY, 0)
        self._size = len(_EMPTY)

    @classmethod
    def reopen(cls, path: Path, size: int, count: int) -> JsonArrayFile:
        """The file as it was when it held ``count`` elements in ``size`` bytes (crash recovery): what was
        appended later is cut off and the array closed again."""
        reopened = cls.__new__(cls)
        reopened.path = path
        reopened._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(reopened._fd, size)
        reopened._size = size
        reopened.count = count
        reopened._pwrite(_END if count else _EMPTY, size - (len(_END) if count else len(_EMPTY)))
        return reopened

    @property
    def size(self) -> int:
        return self._size

    def append(self, elements: list[str]) -> None:
        if not elements:
            return
        lead = "\n" if self.count == 0 else ",\n"
        data = (lead + ",\n".join(elements)).encode() + _END
        offset = self._size - len(_END)
        self._pwrite(data, offset)
        self._size = offset + len(data)
        self.count += len(elements)

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _pwrite(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view = view[written:]
            offset += written
