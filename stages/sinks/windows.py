"""Windows sink: op_statistic and api_statistic per collection window, beside the running totals.

Example config::

    windows:
      type: windows
      inputs: [aggregate.tasks]
      control: control.json          # the control file `pipeline ctl` edits (relative to the run output)
      directory: windows             # per-window files under the run output
      schedule: {skip_first: 1, wait: 1, warmup: 1, active: 2, repeat: 2}   # optional: from the first step
      refresh_s: 1.0

Windows come from the control file (pipeline/windows.py), which this stage looks at before every
batch, so a window opened by ``pipeline ctl start`` is known before any task that starts after it can
arrive. A task belongs to a window when it starts inside it, whenever its row arrives (the live lag
does not matter). Window ``k`` writes ``{directory}/{k}/op_statistic_{timestamp}.csv`` and
``api_statistic_{timestamp}.csv``; a window with a schedule counts the tasks of its active steps only,
writes op_statistic for all of them and per cycle in ``{k}/cycle_{c}/`` (API calls carry no step, so
no api_statistic there). The ``schedule`` key is such a window over the whole job, written to
``{directory}/schedule/``; cycles past ``max_cycles`` count in their window's files only.
``{directory}/windows.json`` lists every window with its bounds, steps and counts (``pipeline ctl
status`` shows it). Files are rewritten atomically, at most every refresh_s, only when changed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from pipeline.errors import UserError
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from pipeline.windows import Control, Schedule, Window, read_control, update_control
from stages.aggregator.stats import StatsBook
from stages.formats import raw
from stages.schema import SymbolTable
from stages.sinks._format import export_timestamp, learn_symbols
from stages.sinks._op_summary import write_atomic
from stages.sinks.summary import (
    API_STATISTIC_HEADER,
    OP_STATISTIC_HEADER,
    api_statistic_rows,
    op_statistic_rows,
    write_table,
)
from stages.tables import unpack_table

JOB_SCHEDULE_ID = "schedule"  # the folder of the config's schedule window
TASK_READS = ("device_id", "iteration", "start_ns", "end_ns", "op_type", "task_type")  # the task columns it reads
API_READS = ("start_ns", "end_ns", "level", "name")
STATUS_FILE = "windows.json"


class ScheduleSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wait: int = Field(ge=0)
    active: int = Field(ge=1)
    warmup: int = Field(0, ge=0)
    skip_first: int = Field(0, ge=0)
    repeat: int = Field(0, ge=0)


@dataclass
class WindowBook:
    """One window's statistics; a scheduled window also per cycle, and the step that starts its count."""

    name: str
    window: Window
    ops: StatsBook = field(default_factory=StatsBook)
    apis: StatsBook = field(default_factory=StatsBook)
    cycles: dict[int, StatsBook] = field(default_factory=dict)
    cycle_steps: dict[int, list[int]] = field(default_factory=dict)  # cycle → [first step, last step]
    first_step: int | None = None  # the iteration counted as step 0
    last_step_before: int = 0  # the highest iteration seen starting before the window
    tasks: int = 0
    api_calls: int = 0
    cycles_beyond: int = 0  # tasks of cycles past max_cycles: in the window's totals, not in a cycle folder
    dirty: bool = True
    dirty_cycles: set[int] = field(default_factory=set)

    def step_of(self, iteration: int, start_ns: int) -> int | None:
        """Step number of a task's iteration. A window over the whole job counts the job's iterations from 1, as
        CANN numbers them; a window opened later counts from the first iteration that starts inside it, decided
        when its first task arrives (tasks arrive in about the order they ran)."""
        if self.window.start_ns == 0:
            self.first_step = 1
        elif start_ns < self.window.start_ns:
            self.last_step_before = max(self.last_step_before, iteration)
            return None
        elif self.first_step is None:
            self.first_step = iteration if iteration > self.last_step_before else self.last_step_before + 1
        assert self.first_step is not None
        return iteration - self.first_step if iteration >= self.first_step else None

    def status(self) -> dict[str, Any]:
        window = self.window
        entry: dict[str, Any] = {"id": self.name, "start_ns": window.start_ns, "end_ns": window.end_ns,
                                 "open": window.is_open, "tasks": self.tasks}
        if window.schedule is None:
            entry["api_calls"] = self.api_calls
        else:
            entry["schedule"] = window.schedule.describe()
            entry["first_step"] = self.first_step
            entry["cycles"] = {str(c): {"steps": steps, "tasks": sum(s.count for s in self.cycles[c].ops.values())}
                               for c, steps in sorted(self.cycle_steps.items())}
            if self.cycles_beyond:
                entry["tasks_in_cycles_beyond_max_cycles"] = self.cycles_beyond
        return entry


class WindowsSink(Sink):
    """Per-window statistics files from ``aggregate.tasks`` and the control file."""

    class Config(StageConfig):
        control: str = Field("control.json", description="the control file (relative to the run output)")
        directory: str = Field("windows", description="per-window output folder (relative to the run output)")
        schedule: ScheduleSettings | None = Field(None, description="a step schedule over the whole job")
        timestamp: str | None = Field(None, description="the {timestamp} of file names; default: open time")
        format: Literal["csv", "json"] = Field("csv", description="csv as msprof, or a JSON array of objects")
        refresh_s: float = Field(1.0, ge=0, description="minimum seconds between rewrites of a window's files")
        max_cycles: int = Field(1000, ge=1, description="schedule cycles per window with files of their own")

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, self.Config):
            config = self.Config.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: WindowsSink.Config = config
        self.symbols = SymbolTable()
        self.control_path = ctx.resolve(config.control)
        self.directory = Path()
        self.timestamp = ""
        self.books: dict[str, WindowBook] = {}
        if config.schedule is not None:
            schedule = Schedule(**config.schedule.model_dump())
            self.books[JOB_SCHEDULE_ID] = WindowBook(JOB_SCHEDULE_ID, Window(0, 0, None, schedule))
        self._control_seen: tuple[int, int, int] | None = None
        self._last_refresh = float("-inf")
        self.counts = {"control_reads": 0, "files_written": 0}

    # -- stage interface -------------------------------------------------------------------

    def open(self) -> None:
        self.timestamp = export_timestamp(self.config.timestamp or self.ctx.export_stamp)
        self.directory = self.ctx.resolve(self.config.directory)
        self.ctx.output_guard.attempt(self.directory, lambda: self.directory.mkdir(parents=True, exist_ok=True))

    def write_batch(self, batch: Batch) -> None:
        learn_symbols(self.symbols, batch)
        if not self.timestamp:
            self.open()
        self._read_control()
        if not self.books:
            return
        if batch.kind == "task":
            self._tasks(_rows(unpack_table(batch), TASK_READS))
        elif batch.kind == "api":
            self._apis(_rows(unpack_table(batch), API_READS))

    def flush(self) -> None:
        self._read_control()
        self._refresh(force=False)

    def close(self) -> None:
        if not self.timestamp:
            self.open()
        self._read_control()
        self._close_open_windows()
        self._refresh(force=True)

    def accounting(self) -> dict[str, Any]:
        return {"windows": len(self.books), **self.counts}

    # -- windows ------------------------------------------------------------------------------

    def _read_control(self) -> None:
        """Take the control file's windows when it has changed (a stat per call)."""
        try:
            info = os.stat(self.control_path)
        except FileNotFoundError:
            return
        seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        if seen == self._control_seen:
            return
        self._control_seen = seen
        try:
            control: Control = read_control(self.control_path)
        except UserError as exc:
            self.ctx.reject(f"control file unreadable: {exc.what}", 1)
            return
        self.counts["control_reads"] += 1
        for window in control.windows:
            name = str(window.id)
            book = self.books.get(name)
            if book is None:
                self.books[name] = WindowBook(name, window)
            elif book.window != window:  # closed since, or edited by hand
                book.window, book.dirty = window, True

    def _tasks(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """``rows``: the TASK_READS columns of a task batch (each task checked against every open window)."""
        texts = self.symbols.texts
        for device, iteration, start, end, type_id, core_id in rows:
            op_type, core_type = texts[type_id], texts[core_id]
            for book in self.books.values():
                window = book.window
                if window.end_ns is not None and start >= window.end_ns:
                    continue
                if window.schedule is None:
                    if start >= window.start_ns:
                        book.ops.add_op(device, op_type, core_type, end - start)
                        book.tasks += 1
                        book.dirty = True
                    continue
                step = book.step_of(iteration or 0, start) if iteration else None
                if step is None:
                    continue
                phase, cycle = window.schedule.phase(step)
                if phase != "active":
                    continue
                book.ops.add_op(device, op_type, core_type, end - start)
                book.tasks += 1
                book.dirty = True
                if cycle > self.config.max_cycles:  # memory and files stay bounded on an endless schedule
                    book.cycles_beyond += 1
                    continue
                book.cycles.setdefault(cycle, StatsBook()).add_op(device, op_type, core_type, end - start)
                steps = book.cycle_steps.setdefault(cycle, [iteration, iteration])
                steps[0], steps[1] = min(steps[0], iteration), max(steps[1], iteration)
                book.dirty_cycles.add(cycle)

    def _apis(self, rows: Iterable[tuple[Any, ...]]) -> None:
        """``rows``: the API_READS columns of an api batch."""
        texts = self.symbols.texts
        for start, end, level, name_id in rows:
            name = texts[name_id]
            for book in self.books.values():
                if book.window.schedule is None and book.window.contains(start):
                    book.apis.add_api(raw.LEVEL_NAMES.get(level, str(level)), name, end - start)
                    book.api_calls += 1
                    book.dirty = True

    def _close_open_windows(self) -> None:
        """The job has ended: a window still open closes with it (a schedule's too), as torch_npu's collection
        ends with its job. Left open, it would count every task of the next run into this folder."""
        if not any(book.window.is_open for book in self.books.values()):
            return
        now = time.time_ns()  # later than every record of this run: the windows keep what they counted

        def close_all(control: Control) -> None:
            for window in control.windows:
                if window.is_open:
                    window.end_ns = max(now, window.start_ns)
        try:
            update_control(self.control_path, close_all)
        except (OSError, UserError) as exc:
            self.ctx.reject(f"control file not updated at the end: {exc}", 1)
            return
        self._read_control()

    # -- files --------------------------------------------------------------------------------

    def _refresh(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last_refresh < self.config.refresh_s:
            return
        self._last_refresh = now
        changed = [book for book in self.books.values() if book.dirty]
        for book in changed:
            self._write_window(book)
            book.dirty = False
        if changed or force:
            status = {"control": str(self.control_path), "timestamp": self.timestamp,
                      "windows": [book.status() for book in self.books.values()]}
            write_atomic(self.directory / STATUS_FILE, [json.dumps(status, indent=2) + "\n"], self.ctx.output_guard)

    def _write_window(self, book: WindowBook) -> None:
        folder = self.directory / book.name
        self.ctx.output_guard.attempt(folder, lambda: folder.mkdir(parents=True, exist_ok=True))
        self._table(folder, "op_statistic", op_statistic_rows(self.symbols, book.ops.op_rows()))
        if book.window.schedule is None:
            self._table(folder, "api_statistic", api_statistic_rows(self.symbols, book.apis.api_rows()))
            return
        for cycle in sorted(book.dirty_cycles):
            cycle_folder = folder / f"cycle_{cycle}"
            self.ctx.output_guard.attempt(cycle_folder, lambda: cycle_folder.mkdir(exist_ok=True))  # noqa: B023
            self._table(cycle_folder, "op_statistic", op_statistic_rows(self.symbols, book.cycles[cycle].op_rows()))
        book.dirty_cycles.clear()

    def _table(self, folder: Path, kind: str, rows: list[list[str]]) -> None:
        header = OP_STATISTIC_HEADER if kind == "op_statistic" else API_STATISTIC_HEADER
        path = folder / f"{kind}_{self.timestamp}.{self.config.format}"
        if not rows and not path.exists():
            return  # a table without rows has no file (an earlier run's window, closed before this run's data)
        write_table(path, header, rows, self.config.format, self.ctx.output_guard)
        self.counts["files_written"] += 1


def _rows(table: pa.Table, names: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    """The rows of a few columns of a column batch."""
    return zip(*(table.column(name).to_pylist() for name in names), strict=True)
