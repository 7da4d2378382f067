"""OutputGuard: which errors pause a write, what is undone, what is said, and a real full disk."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from disk import fill, small_disk

from pipeline.output_guard import FAULT_CUE_ENV, OutputGuard, disk_fault


class RecordingLog:
    """Stands in for the stage's structlog logger."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        return lambda event, **fields: self.lines.append((level, event, fields))


def guard_with(on_wait: Any = None) -> tuple[OutputGuard, list[str | None], RecordingLog]:
    guard = OutputGuard(retry_s=0.0)
    states: list[str | None] = []
    guard.on_state = states.append
    guard.on_wait = on_wait
    guard.log = log = RecordingLog()
    return guard, states, log


def sqlite_error(code: int) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError("from sqlite")
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(("exc", "reason"), [
    (OSError(errno.ENOSPC, "No space left on device"), "disk full"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "quota exceeded"),
    (OSError(errno.EROFS, "Read-only file system"), "read-only file system"),
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied"),
    (OSError(errno.EIO, "Input/output error"), None),
    (FileNotFoundError(errno.ENOENT, "No such file"), None),
    (sqlite_error(13), "disk full"),  # SQLITE_FULL
    (sqlite_error(8 | (1 << 8)), "read-only file system"),  # SQLITE_READONLY_RECOVERY
    (sqlite_error(19), None),  # SQLITE_CONSTRAINT: a bug, not the disk
    (sqlite3.IntegrityError("no code"), None),
])
def test_which_errors_are_the_disk(exc: BaseException, reason: str | None, tmp_path: Path) -> None:
    assert disk_fault(exc, tmp_path / "out.csv") == reason


def test_other_errors_are_raised_at_once(tmp_path: Path) -> None:
    guard, states, _ = guard_with()
    calls = []

    def write() -> None:
        calls.append(1)
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(OSError, match="Input/output"):
        guard.attempt(tmp_path / "x", write)
    assert calls == [1] and states == [] and guard.pauses == []


def test_pause_is_said_once_undone_each_time_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "op_summary.csv"
    path.write_bytes(b"header\nrow 1\n")
    waits: list[int] = []
    guard, states, log = guard_with(on_wait=lambda: waits.append(path.stat().st_size))
    failures = iter([True, True, True, False])
    with open(path, "ab") as out:
        def write() -> None:
            out.write(b"row 2 part")  # half a row reaches the disk, then the disk refuses
            out.flush()
            if next(failures):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            out.write(b" two\n")
            out.flush()

        guard.attempt(path, write, lambda: os.ftruncate(out.fileno(), 13))
    assert path.read_bytes() == b"header\nrow 1\nrow 2 part two\n"
    assert waits and set(waits) == {13}  # while paused the half row is gone: the CSV parses
    assert states[0] is not None and states[0].startswith(f"paused: disk full: {path} (") and states[0].endswith(
        " free)")
    assert states[1:] == [None]
    events = [(level, event) for level, event, _ in log.lines]
    assert events.count(("error", "output paused")) == 1  # not once per retry
    assert [e for e in events if e[1].startswith("output resumed after")] == [events[-1]]
    (pause,) = guard.summary()
    assert pause["reason"] == "disk full" and pause["retries"] == 3 and pause["path"] == str(path)
    assert guard.state() is None


def test_an_abort_while_paused_leaves_the_file_as_before(tmp_path: Path) -> None:
    path = tmp_path / "timeline.json"
    path.write_bytes(b"[\n]")

    def stop() -> None:
        raise RuntimeError("abort")

    guard, _, _ = guard_with(on_wait=stop)
    with open(path, "r+b") as out, mock.patch.dict(os.environ, {FAULT_CUE_ENV: str(tmp_path / "cue")}):
        (tmp_path / "cue").touch()
        with pytest.raises(RuntimeError, match="abort"):
            guard.pwrite(out.fileno(), b',\n{"ph":"X"}\n]', 1, path, restore=b"\n]")
    assert path.read_bytes() == b"[\n]"
    assert guard.state() is not None and guard.state().startswith("paused: disk full")  # type: ignore[union-attr]


def test_cue_names_the_errno(tmp_path: Path) -> None:
    cue = tmp_path / "cue"
    cue.write_text("EROFS\n")
    seen: list[str | None] = []

    def on_wait() -> None:
        seen.append(guard.state())
        cue.unlink()

    guard, _, _ = guard_with(on_wait)
    with mock.patch.dict(os.environ, {FAULT_CUE_ENV: str(cue)}):
        guard.replace(tmp_path / "op_statistic.csv", lambda: ["a,b\n", "1,2\n"])
    assert seen == [f"paused: read-only file system: {tmp_path / 'op_statistic.csv'}"]
    assert (tmp_path / "op_statistic.csv").read_text() == "a,b\n1,2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["op_statistic.csv"]  # no temp file left


def test_an_idle_stage_finds_the_cue_on_the_output_it_wrote_last(tmp_path: Path) -> None:
    cue, output = tmp_path / "cue", tmp_path / "msprof.db"
    guard, states, log = guard_with(on_wait=lambda: cue.unlink(missing_ok=True))
    with mock.patch.dict(os.environ, {FAULT_CUE_ENV: str(cue)}):
        guard.idle()  # nothing written yet: nothing to name
        guard.attempt(output, output.touch)
        guard.attempt(tmp_path / "checkpoint", lambda: None, output=False)
        guard.idle()  # no cue: goes on
        cue.touch()
        guard.idle()
    assert states == [f"paused: disk full: {output} ({guard.pauses[0].free} free)", None]
    assert [event for _, event, _ in log.lines][0] == "output paused"
    assert len(guard.pauses) == 1 and guard.pauses[0].retries == 1 and not cue.exists()


def test_a_real_full_disk_pauses_and_the_write_lands_whole(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", size_mb=1) as disk:
        path = disk / "op_summary.csv"
        path.write_bytes(b"header\n")
        filler = fill(disk, leave_bytes=4096)
        data = b"".join(b"%06d,row\n" % i for i in range(20_000))  # 220 kB: more than is left
        sizes: list[int] = []

        def free_space() -> None:
            sizes.append(path.stat().st_size)
            filler.unlink(missing_ok=True)

        guard, states, _ = guard_with(free_space)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            guard.append(fd, data, path)
        finally:
            os.close(fd)
        assert path.read_bytes() == b"header\n" + data
        assert sizes == [len(b"header\n")]  # the partial write was cut off while paused
        assert states[0] is not None and states[0].startswith(f"paused: disk full: {path} (")
        assert states[-1] is None

        full = fill(disk)
        seen: list[str | None] = []

        def free_again() -> None:
            seen.append(guard.state())
            full.unlink(missing_ok=True)

        guard.on_wait = free_again
        guard.replace(disk / "op_statistic.csv", lambda: ["x" * 100_000])
        assert seen and seen[0] is not None and seen[0].startswith("paused: disk full")
        assert (disk / "op_statistic.csv").stat().st_size == 100_000
        assert not list(disk.glob(".*.tmp"))
