"""User-facing errors: one line naming what, where and what to do; never a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (path, config, data) rather than a bug."""

    def __init__(self, what: str, hint: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.hint = hint

    def line(self) -> str:
        return f"error: {self.what}" + (f" ({self.hint})" if self.hint else "")


class InputError(UserError):
    """The user's input, refused by a stage at run time (a collector path with no PROF_… directory): the run
    then exits 2, as for a bad config. Other errors a stage raises are the run's failures (exit 1)."""


def refused_path(exc: OSError) -> UserError:
    """One line for a path the system refused (an output folder that is a file, under /proc, read-only …)."""
    where = exc.filename if exc.filename2 is None else f"{exc.filename} → {exc.filename2}"
    reason = exc.strerror or type(exc).__name__
    if isinstance(exc, FileExistsError):
        hint = "a file of that name is in the way: choose another path or move the file"
    elif isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        hint = "check the path: an output goes where its folder exists or can be made"
    elif isinstance(exc, PermissionError):
        hint = "choose a path you can write to, or change its permissions"
    else:
        hint = "check the path and the disk, then run again"
    return UserError(f"{where}: {reason}", hint)
