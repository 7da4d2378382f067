"""One raw stream written as rotating `{base}.slice_{k}` files with `.done` markers, as CANN's collector writes them.

Host streams cut slices only at record ends (whole records: msprof's Python api_event reader drops a record
completed from a carried remainder); device streams fill each slice to exactly the size limit, so records
straddle slices like the real device channel.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np


def write_done(path: Path, size: int) -> None:
    """`{file}.done` holding `filesize:<bytes>`, as the collector writes it (whole when it appears)."""
    write_whole(Path(f"{path}.done"), f"filesize:{size}\n")


def write_whole(path: Path, text: str) -> None:
    """``text`` in ``path``, which appears with all of it: written under a hidden name, then renamed (a collector
    that lists the folder meanwhile sees the file whole or not at all)."""
    hidden = path.with_name(f".{path.name}.writing")
    hidden.write_text(text)
    hidden.replace(path)


class SliceStream:
    def __init__(self, directory: Path, base: str, limit: int, whole_records: bool) -> None:
        self.directory = directory
        self.base = base
        self.limit = limit
        self.whole_records = whole_records
        self.index = 0
        self.size = 0
        self.records = 0
        self._file: BinaryIO | None = None

    @property
    def path(self) -> Path:
        return self.directory / f"{self.base}.slice_{self.index}"

    @property
    def slices(self) -> int:
        """Slices created so far."""
        return self.index + (1 if self._file is not None else 0)

    def write(self, data: bytes, ends: np.ndarray) -> None:
        """Append records (`ends`: end offset of each record in `data`), rotating at the size limit."""
        self.records += len(ends)
        pos = 0
        while pos < len(data):
            room = self.limit - self.size
            if self.whole_records:
                k = int(np.searchsorted(ends, pos + room, side="right"))
                cut = int(ends[k - 1]) if k and ends[k - 1] > pos else 0
                if not cut:  # next record does not fit
                    if self.size:
                        self._rotate()
                        continue
                    cut = int(ends[np.searchsorted(ends, pos, side="right")])  # oversize record alone
            else:
                cut = min(len(data), pos + room)
            self._append(data[pos:cut])
            pos = cut
            if self.size >= self.limit:
                self._rotate()

    def close(self) -> None:
        """Finish the open slice (its `.done` marks it complete)."""
        if self._file is not None:
            self._rotate()

    def _append(self, data: bytes) -> None:
        if self._file is None:
            self._file = open(self.path, "ab", buffering=0)  # kept open across bursts
        self._file.write(data)
        self.size += len(data)

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            write_done(self.path, self.size)
        self.index += 1
        self.size = 0
