"""Reading rules for one stream's slices and a PROF folder's control files, shared by the board agent and
``stages.collector`` (stdlib only, Python 3.7 syntax: the agent runs them on the board).

A stream ``state`` is duck-typed: anything with ``slice_index``, ``offset``, ``file_id`` and ``abandoned``
(the agent's ``Stream``, the collector's ``StreamState``).
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any, Union

CONTROL_PREFIXES = ("info.json", "sample.json", "start_info", "end_info", "host_start.log", "dev_start.log")
MAX_CONTROL_BYTES = 1 << 20  # control files are a few KiB: a bigger one is not read
MAX_DEVICE_ID = 0xFFFF  # device ids travel as u16
_DEVICE_FOLDER = re.compile(r"device_(\d{1,5})", re.ASCII)
PathLike = Union[str, "os.PathLike[str]"]


def device_id(folder: str) -> int | None:
    """N of a `device_N` folder name (ASCII digits, a u16), else None: not a device folder."""
    match = _DEVICE_FOLDER.fullmatch(folder)
    if match is None or int(match.group(1)) > MAX_DEVICE_ID:
        return None
    return int(match.group(1))


def next_slice(state: Any) -> None:
    """Move ``state`` to the start of its next slice."""
    state.slice_index += 1
    state.offset = 0
    state.file_id = None
    state.abandoned = False


def slice_problem(state: Any, info: os.stat_result) -> str | None:
    """Why an open slice (``info``: its fstat) cannot be read on from where the stream is (None: it can)."""
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if state.file_id is not None and state.file_id != (info.st_dev, info.st_ino):
        return "was replaced while being read (another file under its name)"
    if info.st_size < state.offset:
        return "shrank while being read"
    return None


def done_size(path: PathLike) -> int | None:
    """The size the runtime's ``PATH.done`` file gives for ``path`` (None: no such file, or none in it)."""
    try:
        with open(os.fspath(path) + ".done") as handle:
            for line in handle.read().splitlines():
                if line.startswith("filesize:"):
                    return int(line.split(":", 1)[1])
    except (OSError, ValueError):
        return None
    return None


def control_complete(path: PathLike, text: str) -> bool:
    """A control file is whole when its .done says so, else when it parses (JSON) or ends a line."""
    done = done_size(path)
    if done is not None:
        return done == len(text.encode("utf-8", errors="replace"))
    if os.path.basename(os.fspath(path)).startswith(("info.json", "sample.json", "start_info", "end_info")):
        try:
            json.loads(text)
        except ValueError:
            return False
        return True
    return text.endswith("\n")
