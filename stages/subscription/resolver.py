"""The board-side resolver: op names and types for the subscription records, standing in for pyACL's getters.

ProfOpDesc carries an ``op_index`` only; its op type and name live in the producing process, which hands each
out once (``acl.prof.get_op_type`` / ``get_op_name`` erase the entry after a successful get, per the pyACL
profiling API reference). The board side therefore writes what the getters return to a side channel, one JSON
object per line (ndjson), to a regular file or a FIFO:

    {"op_desc_size": 80}                                    acl.prof.get_op_desc_size(), before any record
    {"op_index": 17, "op_type": "Conv2D", "op_name": "conv2d_0/Conv2D", "core_type": "AI_CORE"}

``core_type`` is optional (the getters have none; "N/A" without it). A line for an op is written before its
record goes into the pipe. Each entry is used once, like the getters' table; entries never used are counted.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_LINE_BYTES = 64 << 10
MAX_ENTRIES = 1 << 20  # names waiting for their record; the oldest go first beyond this (counted)
READ_BYTES = 256 << 10
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class OpNames:
    op_type: str
    op_name: str
    core_type: str = "N/A"


class Resolver:
    """Follows the resolver channel; lines it cannot use go to ``reject`` with the reason."""

    def __init__(self, path: Path, reject: Callable[[str, int], None]) -> None:
        self.path = path
        self.reject = reject
        self.fd: int | None = None
        self.partial = b""
        self.names: dict[int, OpNames] = {}
        self.distinct: dict[tuple[str, str, str], OpNames] = {}  # one object per op, so users can cache by it
        self.op_desc_size: int | None = None
        self.evicted = 0
        self.lines = 0

    def poll(self, drain: bool = False) -> None:
        """Read and parse whatever was written since the last call (nothing if the channel is not there yet);
        a bounded amount unless ``drain``, so a fast writer cannot hold the reader here."""
        if self.fd is None and not self._open():
            return
        assert self.fd is not None
        reads = 0
        while drain or reads < 64:
            reads += 1
            try:
                data = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                return
            if not data:
                return
            self._lines(data)

    def take(self, op_index: int) -> OpNames | None:
        return self.names.pop(op_index, None)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _open(self) -> bool:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return False
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
            self._problem("resolver path is not a file or FIFO")
            return False
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        return True

    def _lines(self, data: bytes) -> None:
        text = self.partial + data
        *lines, self.partial = text.split(b"\n")
        if len(self.partial) > MAX_LINE_BYTES:
            self._problem("resolver line longer than 64 KiB")
            self.partial = b""
        for line in lines:
            if line.strip():
                self._parse(line)

    def _parse(self, line: bytes) -> None:
        self.lines += 1
        try:
            entry = _DECODER.decode(line.decode())
        except (ValueError, UnicodeDecodeError):
            self._problem("resolver line that is not JSON")
            return
        if not isinstance(entry, dict):
            self._problem("resolver line that is not a JSON object")
            return
        if "op_desc_size" in entry:
            size = entry["op_desc_size"]
            self.op_desc_size = size if isinstance(size, int) and not isinstance(size, bool) else -1
            return
        index, op_type, op_name = entry.get("op_index"), entry.get("op_type"), entry.get("op_name")
        core = entry.get("core_type", "N/A")
        if not (isinstance(index, int) and index >= 0 and isinstance(op_type, str) and isinstance(op_name, str)
                and isinstance(core, str)):
            self._problem("resolver line without an integer op_index and text op_type / op_name")
            return
        if len(self.names) >= MAX_ENTRIES:
            del self.names[next(iter(self.names))]
            self.evicted += 1
        key = (op_type, op_name, core)
        names = self.distinct.get(key)
        if names is None:
            if len(self.distinct) >= MAX_ENTRIES:
                self.distinct.clear()
            names = self.distinct[key] = OpNames(op_type, op_name, core)
        self.names[index] = names

    def _problem(self, reason: str) -> None:
        self.reject(reason, 1)
