"""Collection windows: a control file in the spirit of torch_npu's profiler_config.json (its dynamic_profile).

torch_npu's dynamic_profile lets a user edit ``profiler_config.json`` while training runs; the job
notices the change at its next step and collects for ``active`` steps. Here ``pipeline ctl`` edits
``control.json`` in the run's output folder, and the ``windows`` stage reads it while the job runs:

    {"version": 1,
     "windows": [{"id": 1, "start_ns": 1700000000123000000, "end_ns": 1700000004567000000, "schedule": null},
                 {"id": 2, "start_ns": 1700000009000000000, "end_ns": null,
                  "schedule": {"skip_first": 1, "wait": 1, "warmup": 1, "active": 2, "repeat": 2}}]}

* A window is opened by ``pipeline ctl start`` (or ``pipeline ctl schedule``) and closed by ``pipeline
  ctl stop``; times are local wall-clock ns, the time base of every output. A task or API call belongs
  to a window when it starts inside it.
* A window with a ``schedule`` keeps only the active steps of torch_npu's ``schedule(skip_first, wait,
  warmup, active, repeat)``, a step being one model execution (a task's iteration). Steps are counted
  from the first one that begins inside the window; each ``wait + warmup + active`` cycle's active
  steps are one cycle of the window, ``repeat`` cycles (0: until the window closes).

Writers take an exclusive lock on ``control.json.lock`` and replace the file atomically, so readers
never see half a file and two ``pipeline ctl`` calls never lose each other's change.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.errors import UserError

CONTROL_NAME = "control.json"
CONTROL_VERSION = 1
T = TypeVar("T")


@dataclass(frozen=True)
class Schedule:
    """torch_npu.profiler.schedule: after ``skip_first`` steps, cycles of wait → warmup → active steps."""

    wait: int
    active: int
    warmup: int = 0
    skip_first: int = 0
    repeat: int = 0  # cycles; 0 = until the window closes

    def __post_init__(self) -> None:
        for name in ("wait", "warmup", "skip_first", "repeat"):
            if getattr(self, name) < 0:
                raise UserError(f"schedule: {name} must be 0 or more, not {getattr(self, name)}")
        if self.active < 1:
            raise UserError(f"schedule: active must be 1 or more, not {self.active}")

    def phase(self, step: int) -> tuple[str, int]:
        """(``skip`` | ``wait`` | ``warmup`` | ``active`` | ``done``, cycle number from 1) of step ``step`` (from 0)."""
        if step < self.skip_first:
            return "skip", 0
        cycle, position = divmod(step - self.skip_first, self.wait + self.warmup + self.active)
        if self.repeat and cycle >= self.repeat:
            return "done", 0
        if position < self.wait:
            return "wait", cycle + 1
        if position < self.wait + self.warmup:
            return "warmup", cycle + 1
        return "active", cycle + 1

    def describe(self) -> str:
        repeat = str(self.repeat) if self.repeat else "until the end"
        return (f"skip_first={self.skip_first} wait={self.wait} warmup={self.warmup} active={self.active} "
                f"repeat={repeat}")


@dataclass
class Window:
    id: int
    start_ns: int
    end_ns: int | None = None
    schedule: Schedule | None = None

    @property
    def is_open(self) -> bool:
        return self.end_ns is None

    def contains(self, ns: int) -> bool:
        return self.start_ns <= ns and (self.end_ns is None or ns < self.end_ns)


@dataclass
class Control:
    windows: list[Window] = field(default_factory=list)

    def open_window(self, now_ns: int, schedule: Schedule | None = None) -> Window:
        """A new window from now; a second plain window while one is open is refused (a forgotten stop)."""
        if schedule is None:
            for window in self.windows:
                if window.is_open and window.schedule is None:
                    raise UserError(f"ctl start: window {window.id} is still open", "pipeline ctl stop closes it")
        window = Window(len(self.windows) + 1, now_ns, None, schedule)
        self.windows.append(window)
        return window

    def close_window(self, now_ns: int, window_id: int | None = None) -> Window:
        """Close window ``window_id``, else the newest open one."""
        open_windows = [w for w in self.windows if w.is_open and (window_id is None or w.id == window_id)]
        if not open_windows:
            which = f"window {window_id} is not open" if window_id is not None else "no window is open"
            raise UserError(f"ctl stop: {which}", "pipeline ctl status lists the windows")
        window = open_windows[-1]
        window.end_ns = max(now_ns, window.start_ns)
        return window

    def to_json(self) -> dict[str, Any]:
        return {"version": CONTROL_VERSION, "windows": [asdict(w) for w in self.windows]}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Control:
        try:
            if data.get("version", CONTROL_VERSION) != CONTROL_VERSION:
                raise UserError(f"{where}: control file version {data.get('version')!r}", "this release reads 1")
            windows = []
            for entry in data.get("windows") or []:
                schedule = Schedule(**{key: int(value) for key, value in entry["schedule"].items()}) \
                    if entry.get("schedule") else None
                end = entry.get("end_ns")
                windows.append(Window(int(entry["id"]), int(entry["start_ns"]), None if end is None else int(end),
                                      schedule))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{where}: not a control file ({type(exc).__name__}: {exc})",
                            "pipeline ctl writes it; remove it to start over") from None
        return cls(windows)


def read_control(path: Path) -> Control:
    """The control file's windows and schedule (a missing file: none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Control()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise UserError(f"{path}: not JSON", "pipeline ctl writes it; remove it to start over") from None
    return Control.from_json(data, str(path))


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update_control(path: Path, change: Callable[[Control], T]) -> T:
    """Apply ``change`` to the control file under its lock and replace the file atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        control = read_control(path)
        result = change(control)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(control.to_json(), indent=2) + "\n", encoding="utf-8")
        temporary.replace(path)
    return result
