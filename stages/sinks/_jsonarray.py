"""A JSON array file that is complete after every append.

The file always ends with ``"\\n]"``. An append writes, with one ``pwrite`` at the offset of
that ending, ``",\\n" + elements + "\\n]"``, so whoever reads the file between appends (or after
the process is killed) sees valid JSON. Elements are pre-serialised JSON texts, one per line.
Writes go through an :class:`~pipeline.output_guard.OutputGuard`: on a full disk an append
is undone (the ending put back) and retried, so the file stays valid while the output is paused.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.output_guard import OutputGuard, pwrite_all

_EMPTY = b"[\n]"
_END = b"\n]"


class JsonArrayFile:
    def __init__(self, path: Path, guard: OutputGuard | None = None) -> None:
        self.path = path
        self.guard = guard or OutputGuard()
        self._fd = -1
        self._size = 0
        self.count = 0
        self.guard.attempt(path, self._create, self._discard)
        self._size = len(_EMPTY)

    @classmethod
    def reopen(cls, path: Path, size: int, count: int, guard: OutputGuard | None = None) -> JsonArrayFile:
        """The file as it was when it held ``count`` elements in ``size`` bytes (crash recovery): what was
        appended later is cut off and the array closed again (retried while the disk refuses it)."""
        reopened = cls.__new__(cls)
        reopened.path = path
        reopened.guard = guard or OutputGuard()
        reopened._fd = -1
        reopened._size = size
        reopened.count = count
        ending = _END if count else _EMPTY

        def cut_back() -> None:
            if reopened._fd < 0:
                reopened._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(reopened._fd, size)
            pwrite_all(reopened._fd, ending, size - len(ending), path)

        reopened.guard.attempt(path, cut_back)
        return reopened

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        pwrite_all(self._fd, _EMPTY, 0, self.path)

    def _discard(self) -> None:
        """No file rather than one that is not JSON, until the disk takes the first bytes."""
        self.close()
        self.path.unlink(missing_ok=True)

    @property
    def size(self) -> int:
        return self._size

    def append(self, elements: list[str]) -> None:
        if not elements:
            return
        lead = "\n" if self.count == 0 else ",\n"
        data = (lead + ",\n".join(elements)).encode() + _END
        offset = self._size - len(_END)
        self.guard.pwrite(self._fd, data, offset, self.path, restore=_END)
        self._size = offset + len(data)
        self.count += len(elements)

    def sync(self) -> None:
        self.guard.attempt(self.path, lambda: os.fsync(self._fd))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
