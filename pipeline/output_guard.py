"""Output writes that pause on a full or read-only disk and go on when it is writable again.

Every write of a sink (and every byte kept aside for rejected records) goes through an
:class:`OutputGuard`. A write that fails with ENOSPC, EDQUOT, EROFS or EACCES (or SQLite's
"database or disk is full" / "readonly") is undone (the file truncated back to its size before
the write, a temp file removed, a transaction rolled back) and tried again every ``retry_s``
seconds with the same bytes. Meanwhile the stage reads no more input, so the sockets upstream
fill to their high-water marks and every stage up to the collector waits: nothing is dropped,
and the raw files are not touched. The guard logs one line when the output pauses, one per
``log_every_s`` while it stays paused, and one when it resumes.

Testing facility: when ``PIPELINE_FAULT_WRITE_CUE`` names a file, every guarded write fails
while that file exists, as if the disk were full (ENOSPC). The failure comes after half of
the bytes were written (or, in SQLite, just before the commit), so the undo is exercised too.
The file may hold the name of another errno (``EROFS``, ``EDQUOT``, ``EACCES``). A sink that
has nothing to write finds the cue on its idle tick (:meth:`OutputGuard.idle`), as its next
write would: which sinks pause does not depend on which still get a message once one paused.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog

FAULT_CUE_ENV = "PIPELINE_FAULT_WRITE_CUE"
DISK_FAULTS = {errno.ENOSPC: "disk full", errno.EDQUOT: "quota exceeded", errno.EROFS: "read-only file system",
               errno.EACCES: "permission denied"}
SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN = 13, 8, 10, 14
WAIT_STEP_S = 0.1

T = TypeVar("T")


@dataclass
class Pause:
    """One stretch of time during which a write could not be made."""

    reason: str  # "disk full", "read-only file system", ...
    path: str
    free: str | None  # free space when it started ("0 B"), for disk full / quota
    started: float  # time.monotonic()
    seconds: float = 0.0
    retries: int = 0

    def state(self) -> str:
        free = f" ({self.free} free)" if self.free is not None else ""
        return f"paused: {self.reason}: {self.path}{free}"

    def as_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "path": self.path, "free": self.free, "seconds": round(self.seconds, 3),
                "retries": self.retries}


class OutputGuard:
    """Retries a failed write until the disk takes it; the stage's runner plugs in ``on_wait``
    (heartbeat, abort check; called about every 0.1 s while paused and on :meth:`tick`) and
    ``on_state`` (the pause state changed: its text, or None when writes go through again)."""

    def __init__(self, retry_s: float = 2.0, log_every_s: float = 60.0) -> None:
        self.retry_s = retry_s
        self.log_every_s = log_every_s
        self.on_wait: Callable[[], None] | None = None
        self.on_state: Callable[[str | None], None] | None = None
        self.log: Any = structlog.get_logger()
        self.current: Pause | None = None
        self.pauses: list[Pause] = []
        self._last_log = 0.0
        self._last_output: Path | None = None  # what the stage last wrote, for the fault cue's idle pause

    def state(self) -> str | None:
        """``paused: disk full: PATH (0 B free)`` while paused, else None."""
        return self.current.state() if self.current is not None else None

    def tick(self) -> None:
        """Long work in progress (a sort at close): let the runner send its heartbeat."""
        if self.on_wait is not None:
            self.on_wait()

    def idle(self) -> None:
        """Testing: while the fault cue is set, a stage that has nothing to write pauses on the output it wrote
        last, as its next write would. A producer held by one paused consumer sends the others nothing more, and
        without this they never found the cue."""
        path = self._last_output
        if path is not None and cue_fault() is not None:
            self.attempt(path, lambda: check_fault_cue(path))

    def attempt(self, path: Path | str, write: Callable[[], T], undo: Callable[[], None] | None = None,
                output: bool = True) -> T:
        """``write()``; when the disk refuses it, ``undo()`` and try again until it succeeds. ``output=False``:
        the stage's own bookkeeping (a checkpoint), not what :meth:`idle` names."""
        if output:
            self._last_output = Path(path)
        while True:
            try:
                result = write()
            except (OSError, sqlite3.Error) as exc:
                reason = disk_fault(exc, Path(path))
                if reason is None:
                    raise
                if undo is not None:
                    try:
                        undo()
                    except (OSError, sqlite3.Error) as undo_exc:  # e.g. a read-only disk refuses the truncate
                        self.log.debug("undo of a failed write failed; the next attempt starts over",
                                       path=str(path), error=str(undo_exc))
                self._wait(reason, Path(path))
                continue
            if self.current is not None:
                self._resumed()
            return result

    # -- file helpers ---------------------------------------------------------------------

    def append(self, fd: int, data: bytes, path: Path) -> None:
        """Append ``data`` to an open file; a failed attempt is cut off again."""
        before = os.fstat(fd).st_size

        def write() -> None:
            if os.fstat(fd).st_size != before:
                os.ftruncate(fd, before)
            write_all(fd, data, path)

        self.attempt(path, write, lambda: os.ftruncate(fd, before))

    def pwrite(self, fd: int, data: bytes, offset: int, path: Path, restore: bytes = b"") -> None:
        """Write ``data`` at ``offset`` and end the file there; a failed attempt puts ``restore``
        (what was at ``offset`` before) back, so the file stays as it was."""

        def write() -> None:
            pwrite_all(fd, data, offset, path)
            if os.fstat(fd).st_size > offset + len(data):
                os.ftruncate(fd, offset + len(data))

        def undo() -> None:
            os.pwrite(fd, restore, offset)
            os.ftruncate(fd, offset + len(restore))

        self.attempt(path, write, undo)

    def replace(self, path: Path, parts: Callable[[], Iterable[str]]) -> None:
        """Write a text file under a temp name and rename it over ``path`` (readers never see half
        a file); ``parts`` is called again for every attempt."""
        temp = path.with_name(f".{path.name}.tmp")

        def write() -> None:
            with open(temp, "w", encoding="utf-8", newline="\n") as out:
                for part in parts():
                    out.write(part)
                check_fault_cue(temp)
            os.replace(temp, path)

        self.attempt(path, write, lambda: temp.unlink(missing_ok=True))

    # -- pausing --------------------------------------------------------------------------

    def _wait(self, reason: str, path: Path) -> None:
        now = time.monotonic()
        pause = self.current
        if pause is None:
            pause = self.current = Pause(reason, str(path), _free_text(path) if reason in _SPACE else None, now)
            self.pauses.append(pause)
            self._last_log = now
            self.log.error("output paused", reason=reason, path=str(path), free=pause.free, retry_s=self.retry_s,
                           hint="free space or make the disk writable: the stage goes on by itself")
            if self.on_state is not None:
                self.on_state(pause.state())
        elif pause.reason != reason or pause.path != str(path):  # the same stretch, another cause
            pause.reason, pause.path = reason, str(path)
            pause.free = _free_text(path) if reason in _SPACE else None
            if self.on_state is not None:
                self.on_state(pause.state())
        elif now - self._last_log >= self.log_every_s:
            self._last_log = now
            self.log.warning("output still paused", reason=reason, path=str(path), for_s=round(now - pause.started, 1),
                             free=_free_text(path) if reason in _SPACE else None)
        pause.retries += 1
        deadline = now + self.retry_s
        while True:
            self.tick()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(WAIT_STEP_S, left))

    def _resumed(self) -> None:
        pause = self.current
        assert pause is not None
        pause.seconds = time.monotonic() - pause.started
        self.current = None
        self.log.info(f"output resumed after {pause.seconds:.1f} s", reason=pause.reason, path=pause.path,
                      retries=pause.retries)
        if self.on_state is not None:
            self.on_state(None)

    def summary(self) -> list[dict[str, Any]]:
        """Every pause so far (the current one up to now), for the run report."""
        if self.current is not None:
            self.current.seconds = time.monotonic() - self.current.started
        return [pause.as_dict() for pause in self.pauses]


_SPACE = ("disk full", "quota exceeded")


def disk_fault(exc: BaseException, path: Path) -> str | None:
    """What about the output disk made this write fail, or None when it is another error."""
    if isinstance(exc, OSError):
        return DISK_FAULTS.get(exc.errno or 0)
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF
    if primary == SQLITE_FULL:
        return "disk full"
    if primary == SQLITE_READONLY:
        return "read-only file system"
    if primary in (SQLITE_IOERR, SQLITE_CANTOPEN):  # SQLite does not say why: look at the disk
        return _probe(path)
    return None


def _probe(path: Path) -> str | None:
    folder = _existing(path)
    try:
        info = os.statvfs(folder)
    except OSError:
        return None
    if info.f_flag & os.ST_RDONLY:
        return "read-only file system"
    if info.f_bavail * info.f_frsize < 64 * 1024:
        return "disk full"
    if not os.access(folder, os.W_OK):
        return "permission denied"
    return None


def _existing(path: Path) -> Path:
    """The nearest existing folder of ``path`` (a file that failed to be created has none)."""
    folder = path if path.is_dir() else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _free_text(path: Path) -> str:
    try:
        free = float(shutil.disk_usage(_existing(path)).free)
    except OSError:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if free < 1024 or unit == "GiB":
            return f"{free:.0f} {unit}" if unit == "B" else f"{free:.1f} {unit}"
        free /= 1024
    return "?"  # not reached


# -- fault cue (testing) ------------------------------------------------------------------

def cue_fault() -> int | None:
    """The errno the fault cue asks for, or None when no cue is set or its file is absent."""
    cue = os.environ.get(FAULT_CUE_ENV)
    if not cue:
        return None
    try:
        with open(cue, encoding="ascii", errors="replace") as text:
            name = text.read(32).strip()
    except FileNotFoundError:
        return None
    except OSError:
        return errno.ENOSPC
    code = getattr(errno, name, None) if name else errno.ENOSPC
    return code if code in DISK_FAULTS else errno.ENOSPC


def check_fault_cue(path: Path | str) -> None:
    code = cue_fault()
    if code is not None:
        raise OSError(code, f"{os.strerror(code)} ({FAULT_CUE_ENV})", str(path))


def write_all(fd: int, data: bytes, path: Path) -> None:
    view = memoryview(data)
    if cue_fault() is not None:
        view = view[os.write(fd, view[: len(view) // 2]) :] if len(view) > 1 else view
        check_fault_cue(path)
    while view:
        view = view[os.write(fd, view) :]


def pwrite_all(fd: int, data: bytes, offset: int, path: Path) -> None:
    view = memoryview(data)
    if cue_fault() is not None:
        os.pwrite(fd, view[: len(view) // 2], offset)
        check_fault_cue(path)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written

