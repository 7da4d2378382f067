"""Reading rules for one stream's slices and a PROF folder's control files, shared by the board agent and
``stages.collector`` (stdlib only, Python 3.7 syntax: the agent runs them on the board).

A stream ``state`` is duck-typed: anything with ``slice_index``, ``offset``, ``file_id`` and ``abandoned``
(the agent's ``Stream``, the collector's ``StreamState``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from typing import Any, Iterator, Tuple, Union

from pipeline_board import framing, kinds

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


def platform_version(info_json: str) -> int:
    """The chip (``platform_version``) a device's info.json names; 1 when it names none or does not parse."""
    try:
        info = json.loads(info_json)
        return int(info.get("platform_version", 1)) if isinstance(info, dict) else 1
    except (ValueError, TypeError, OverflowError):
        return 1


def has_next(state: Any) -> bool:
    """A later slice exists: the next one, or one after a gap (a slice deleted or never written)."""
    return state.last_index > state.slice_index or os.path.exists(state.slice_path(state.slice_index + 1))


Step = Tuple[str, Any]


def read_slices(state: Any, budget: int, final: bool) -> Iterator[Step]:
    """Read up to ``budget`` bytes of a stream into ``state.buffer``, going on to the next slice once one is
    closed (a later slice exists, or its .done gives the size read) and wholly read.

    ``state`` also has ``slice_path(index=None)``, ``last_index``, ``buffer``, ``buffer_origin`` and ``kind``.
    What the caller does is said by the steps yielded: ``("read", n)`` bytes were added; ``("symlink", path)``
    the slice became one; ``("abandon", problem)`` the current slice is not read further (``state.abandoned``
    is set: frame the buffer to its end); ``("frame", final)`` frame the buffer; ``("spent", None)`` the budget
    ran out with bytes maybe left.
    """
    while budget > 0:
        path = state.slice_path()
        more = has_next(state)
        if state.abandoned:
            if not more:
                break
            next_slice(state)
            continue
        try:
            handle = open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the slice was made a symlink after it was found
                yield "symlink", path
                state.abandoned = True
                yield "abandon", "became a symlink"
                continue
            if more or (final and exc.errno != errno.ENOENT):  # gone or unreadable: go on with later slices
                state.abandoned = True
                yield "abandon", ("is missing (deleted, or never written)" if exc.errno == errno.ENOENT
                                  else f"cannot be read ({exc.strerror})")
                continue
            break
        with handle:
            info = os.fstat(handle.fileno())
            problem = slice_problem(state, info)
            if problem:
                state.abandoned = True
                yield "abandon", problem
                continue
            state.file_id = (info.st_dev, info.st_ino)
            read = 0
            if info.st_size > state.offset:
                handle.seek(state.offset)
                data = handle.read(min(info.st_size - state.offset, budget))
                if not state.buffer:
                    state.buffer_origin = (state.slice_index, state.offset)
                state.buffer += data
                read = len(data)
                state.offset += read
                budget -= read
            closed = has_next(state) or done_size(path) == state.offset
            at_end = state.offset >= os.fstat(handle.fileno()).st_size  # after `closed`: not grown since
        if read:
            yield "read", read
        # Host slices hold whole records: a closed slice's leftover is garbage, not a split record.
        yield "frame", final and at_end or (closed and at_end and state.kind.whole_records_per_slice)
        if closed and at_end and has_next(state):
            next_slice(state)
            continue
        if at_end:
            break
    if budget <= 0:
        yield "spent", None
    if final:
        yield "frame", True


GARBAGE = "bytes that are not a whole record (bad magic, unknown tag or truncated)"


def frame_buffer(state: Any, final: bool) -> Iterator[tuple[framing.Framed, int, int]]:
    """Frame ``state.buffer`` until a call takes nothing more (one call frames one form of record only): each
    result with the (slice, offset) its first byte was read from; the buffer and ``state.buffer_origin`` move
    past what it consumed."""
    settled = kinds.settle(state.kind, state.buffer, final)  # a training_trace's record size, from its bytes
    if settled is None:
        return
    state.kind = settled
    while state.buffer:
        framed = framing.frame(state.kind, state.buffer, final)
        origin_slice, origin_offset = state.buffer_origin
        state.buffer = state.buffer[framed.consumed:]
        state.buffer_origin = (state.slice_index, state.offset - len(state.buffer))
        yield framed, origin_slice, origin_offset
        if not framed.consumed:
            return
