"""A small real filesystem for disk-full tests: a tmpfs of a few MB, where this machine allows mounting one."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(folder: Path, size_mb: int) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size_mb`` MB (unmounted afterwards), or a skip that says why not."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0750", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here ({mounted.stderr.strip() or 'mount failed'}): "
                    "needs root or CAP_SYS_ADMIN; the fault-cue tests cover the same paths")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave_bytes: int = 0) -> Path:
    """Write a filler file until the disk is full (less ``leave_bytes``); delete it to free the space."""
    filler = folder / "filler.bin"
    chunk = b"\0" * (64 * 1024)
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
                if free <= leave_bytes:
                    break
                out.write(chunk[: max(1, min(len(chunk), free - leave_bytes))])
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler
