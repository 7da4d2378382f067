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
