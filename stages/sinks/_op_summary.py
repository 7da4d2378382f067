"""op_summary files: live append, then a sorted rewrite at close, with msprof's names and headers.

While the run goes, rows are appended in arrival order to ``op_summary_{ts}.csv`` (further
``op_summary_slice_{k}_{ts}.csv`` past ``max_rows``), whole lines per write, so the file parses
at every moment. ``Task Wait Time(us)`` is computed per device from the previous row written.

At close the rows are sorted by (Device_id, start) with an external merge sort (bounded
memory: ``chunk_rows`` rows at a time), the wait time is recomputed over the sorted order, and
every output file is replaced atomically (temp file + ``os.replace``); more than ``max_rows``
rows become ``op_summary_slice_{k}_{ts}``, k from 0, as msprof names them. Crash recovery works as
for the other tables (:mod:`._table`: checkpoint, resume, a commit of the sorted files).

Writes go through the stage's :class:`~pipeline.output_guard.OutputGuard`, as in :mod:`._table`: a
full or read-only disk pauses them, and the sort at close starts over once it takes writes again.
"""

from __future__ import annotations

import json
import operator
import os
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import Any

from pipeline.output_guard import OutputGuard
from stages.sinks._format import NA, us, us_to_ns
from stages.sinks._jsonarray import JsonArrayFile
from stages.sinks._table import (
    MERGE_FAN_IN,
    TICK_ROWS,
    AtomicText,
    Commit,
    Memo,
    SlicedOutput,
    commit_of,
    csv_cell,
    cut_back,
    live_end,
    merge_runs,
    remove,
    remove_temporaries,
    remove_unlisted,
    slice_name,
    write_atomic,
    write_run,
    write_sorted_files,
)

BASE_HEADER = [
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)",
]
START, DURATION, WAIT = 8, 9, 10
KEY_FIELDS = 5

SortKey = tuple[int, int, int, int, int]  # device, start ns, stream, task, duration ns
Row = tuple[int, int, int, int, int, str]  # sort key + the line as written


def op_summary_header(block_header: str, pmu_columns: Iterable[str]) -> list[str]:
    return [*BASE_HEADER, block_header, f"Mix {block_header}", "HF32 Eligible", "Input Shapes",
            "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
            "Context ID", *pmu_columns]


def csv_shape_cell(text: str) -> str:
    """msprof wraps every shape list in literal double quotes, with or without a comma (``AddQuotation``): a CSV
    reader yields ``"10"`` for a one-dimensional shape, ``"4096,512"`` for two dimensions; N/A stays bare."""
    if text != NA and not (len(text) > 1 and text[0] == '"' and text[-1] == '"'):
        text = f'"{text}"'
    return csv_cell(text)


def csv_tensor_cell(text: str) -> str:
    """msprof writes ``"81920,4096;8192,512"`` (quotes included) as ``\"\"\"81920,4096;8192,512\"\"\"``."""
    if "," in text and not (len(text) > 1 and text[0] == '"' and text[-1] == '"'):
        text = f'"{text}"'
    return csv_cell(text)


_TEXT_CELLS = Memo(csv_cell)  # the CSV form of each text cell, looked up: the same texts recur on every row
_SHAPE_CELLS = Memo(csv_shape_cell)
_TENSOR_CELLS = Memo(csv_tensor_cell)


class CsvCodec:
    suffix = "csv"

    def __init__(self, header: list[str]) -> None:
        self.header = header

    def header_text(self) -> str:
        return ",".join(self.header) + "\n"

    def line(self, cells: list[str]) -> str:
        """Text cells (4-7: op name, op type, op state, task type) CSV-quoted, shapes (14, 17), data types and
        formats (15, 16, 18, 19) in msprof's quoted form; the other cells are numbers or N/A, written by the
        summary sink: nothing to quote."""
        text, shape, tensor = _TEXT_CELLS, _SHAPE_CELLS, _TENSOR_CELLS
        return ",".join((*cells[:4], text[cells[4]], text[cells[5]], text[cells[6]], text[cells[7]],
                         cells[START] + "\t",  # msprof's spreadsheet guard
                         *cells[9:14], shape[cells[14]], tensor[cells[15]], tensor[cells[16]], shape[cells[17]],
                         tensor[cells[18]], tensor[cells[19]], *cells[20:]))

    @staticmethod
    def key(line: str) -> SortKey:
        """(device, start ns, stream, task, duration ns) of a line: the TAB occurs only after the start."""
        device, _model, task, stream, _rest = line.split(",", 4)
        tab = line.index("\t")
        start_at = line.rindex(",", 0, tab) + 1
        dur_end = line.index(",", tab + 2)
        return int(device), us_to_ns(line[start_at:tab]), _int(stream), _int(task), us_to_ns(line[tab + 2 : dur_end])

    @staticmethod
    def with_wait(line: str, wait: str) -> str:
        dur_end = line.index(",", line.index("\t") + 2)
        wait_end = line.index(",", dur_end + 1)
        return f"{line[: dur_end + 1]}{wait}{line[wait_end:]}"

    def read(self, path: Path) -> Iterator[str]:
        with open(path, encoding="utf-8", newline="\n") as lines:
            next(lines, None)  # header
            for line in lines:
                if line.endswith("\n"):
                    yield line[:-1]


class JsonCodec:
    suffix = "json"

    def __init__(self, header: list[str]) -> None:
        self.header = header

    def line(self, cells: list[str]) -> str:
        return json.dumps(dict(zip(self.header, cells, strict=True)), ensure_ascii=False)

    def key(self, line: str) -> SortKey:
        row = json.loads(line)
        name = self.header
        return (int(row[name[0]]), us_to_ns(row[name[START]]), _int(row[name[3]]), _int(row[name[2]]),
                us_to_ns(row[name[DURATION]]))

    def with_wait(self, line: str, wait: str) -> str:
        row = json.loads(line)
        row[self.header[WAIT]] = wait
        return json.dumps({name: row.get(name, NA) for name in self.header}, ensure_ascii=False)

    @staticmethod
    def read(path: Path) -> Iterator[str]:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                line = line.strip().strip(",")
                if line not in ("[", "]", ""):
                    yield line


class OpSummaryWriter(SlicedOutput):
    """Appends op_summary rows live and rewrites them sorted at :meth:`finish`."""

    def __init__(self, directory: Path, timestamp: str, fmt: str, header: list[str], max_rows: int,
                 chunk_rows: int, guard: OutputGuard | None = None) -> None:
        self.directory = directory
        self.guard = guard or OutputGuard()
        self.timestamp = timestamp
        self.codec: CsvCodec | JsonCodec = CsvCodec(header) if fmt == "csv" else JsonCodec(header)
        self.max_rows = max_rows
        self.chunk_rows = chunk_rows
        self.files: list[Path] = []
        self.rows = 0
        self._rows_in_file = 0
        self._fd = -1
        self._json: JsonArrayFile | None = None
        self._last: dict[int, tuple[int, int]] = {}  # device -> (start, end) of the previous row
        self._runs_made = 0
        self._in_order = True  # rows arrived sorted (by the key finish() sorts them by)
        self._last_key: SortKey | None = None
        self.guard.attempt(directory, lambda: directory.mkdir(parents=True, exist_ok=True))

    @property
    def header(self) -> list[str]:
        return self.codec.header

    def name(self, index: int, sliced: bool) -> Path:
        return slice_name(self.directory, "op_summary", self.timestamp, self.codec.suffix, index, sliced)

    def append(self, rows: list[tuple[int, int, int, list[str]]]) -> None:
        """Rows as (device, start ns, end ns, cells); the wait cell is filled in here."""
        lines: list[str] = []
        for device, start, end, cells in rows:
            previous = self._last.get(device)
            cells[WAIT] = us(max(0, start - previous[1]) if previous else 0)
            self._last[device] = (start, end)
            lines.append(self.codec.line(cells))
            if self._in_order:
                key = (device, start, _int(cells[3]), _int(cells[2]), end - start)
                self._in_order = self._last_key is None or self._last_key < key  # a tie sorts by line text
                self._last_key = key
        self._write_lines(lines)

    @property
    def last_rows(self) -> dict[int, tuple[int, int]]:
        """Each device's last row so far: (start, end) ns."""
        return self._last

    @property
    def in_order(self) -> bool:
        """Every row so far arrived in the order :meth:`finish` sorts them in."""
        return self._in_order

    def append_text(self, text: str, count: int, last: dict[int, tuple[int, int]],
                    keys: list[SortKey] | None) -> None:
        """``count`` CSV lines, joined by newlines, their wait cells filled in already (each after the previous
        row of its device: ``last`` holds each device's last row of them); ``keys``: their sort keys, in order,
        while :attr:`in_order` (then None)."""
        if not count:
            return
        self._last.update(last)
        if self._in_order and keys:
            previous = self._last_key
            self._in_order = (previous is None or previous < keys[0]) and all(map(operator.lt, keys, keys[1:]))
            self._last_key = keys[-1]
        if self._fd >= 0 and self._rows_in_file + count <= self.max_rows:  # one write: the batch fits the file
            self.guard.append(self._fd, (text + "\n").encode(), self.files[-1])
            self._rows_in_file += count
            self.rows += count
        else:
            self._write_lines(text.split("\n"))

    def _write_lines(self, lines: list[str]) -> None:
        while lines:
            if self._fd < 0 and self._json is None or self._rows_in_file >= self.max_rows:
                self._next_file()
            room = self.max_rows - self._rows_in_file
            part, lines = lines[:room], lines[room:]
            if self._json is not None:
                self._json.append(part)
            else:
                self.guard.append(self._fd, ("\n".join(part) + "\n").encode(), self.files[-1])
            self._rows_in_file += len(part)
            self.rows += len(part)

    def add_columns(self, names: list[str]) -> None:
        """New PMU columns after rows were written: rows written so far get N/A there."""
        self.codec.header.extend(names)
        if not self.files or isinstance(self.codec, JsonCodec):
            return  # JSON objects are completed at finish()
        pad = ",N/A" * len(names)
        self._close_current()
        header = self.codec.header_text()
        for path in self.files:
            write_atomic(path, lambda path=path: chain(  # type: ignore[misc]
                [header], (f"{line}{pad}\n" for line in self.codec.read(path))), self.guard)
        self._fd = self.guard.attempt(self.files[-1], lambda: os.open(self.files[-1], os.O_WRONLY | os.O_APPEND))

    def finish(self) -> list[Path]:
        """Sort, recompute wait times, replace the live files; returns the final files."""
        self.guard.attempt(self.directory, self.sorted_commit().apply)  # applied again after a pause
        return self.files

    def sorted_commit(self) -> Commit:
        """Sort and recompute wait times into temp files; applying the commit replaces the live files."""
        self._close_current()
        if not self.rows:
            return Commit()
        if self._in_order and len(self.files) == 1 and isinstance(self.codec, CsvCodec):
            return Commit()  # already sorted, its wait times those of the sorted order: final as it is
        written = self.guard.attempt(self.directory, self._sort_files,
                                     lambda: remove_temporaries(self.directory, "op_summary", self.timestamp, "run"))
        commit = commit_of(written, self.files)
        self.files = [path for _, path in written]
        return commit

    def _sort_files(self) -> list[tuple[Path, Path]]:
        """The live files are re-read every time, so a sort the disk interrupted starts over from them."""
        runs: list[Path] = []
        try:
            runs, tail = self._sorted_runs(runs)
            while len(runs) > MERGE_FAN_IN:
                groups = [runs[i : i + MERGE_FAN_IN] for i in range(0, len(runs), MERGE_FAN_IN)]
                runs = [self._write_run(merge_runs(group, KEY_FIELDS)) for group in groups]
                for group in groups:
                    remove(group)
            merged = merge_runs(runs, KEY_FIELDS) if runs else iter(tail)
            return self._write_sorted(merged)
        finally:
            remove(runs)  # also the runs of an attempt that failed half-way

    # -- crash recovery ---------------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """The writer's state and where the current file ends."""
        state = {key: value for key, value in vars(self).items() if key not in ("_fd", "_json", "guard")}
        return {"state": state, "end": live_end(self._fd, self._json)}

    @classmethod
    def resume(cls, saved: dict[str, Any], guard: OutputGuard | None = None) -> OpSummaryWriter:
        """The writer at its checkpoint: files begun later removed, the current one cut back to its end then."""
        writer = cls.__new__(cls)
        vars(writer).update(saved["state"])
        writer.guard = guard or OutputGuard()
        remove_unlisted(writer.directory.glob(f"op_summary_*{writer.timestamp}.{writer.codec.suffix}"), writer.files)
        header = writer.codec.header_text() if isinstance(writer.codec, CsvCodec) else None
        writer._fd, writer._json = cut_back(writer.files, saved["end"], header, writer._rows_in_file,
                                            writer.max_rows, writer.guard)
        return writer

    # -- internals --------------------------------------------------------------------------

    def _slice_path(self, index: int, sliced: bool) -> Path:
        return self.name(index, sliced)

    def _csv_header(self) -> str | None:
        return self.codec.header_text() if isinstance(self.codec, CsvCodec) else None

    def _sorted_runs(self, runs: list[Path]) -> tuple[list[Path], list[Row]]:
        """Sorted chunks as run files (added to ``runs``); a single chunk stays in memory (the tail)."""
        chunk: list[Row] = []
        for path in self.files:
            for count, line in enumerate(self.codec.read(path)):
                chunk.append((*self.codec.key(line), line))
                if count % TICK_ROWS == 0:
                    self.guard.tick()
                if len(chunk) >= self.chunk_rows:
                    chunk.sort()
                    runs.append(self._write_run(chunk))
                    chunk = []
        chunk.sort()
        if runs and chunk:
            runs.append(self._write_run(chunk))
            chunk = []
        return runs, chunk

    def _write_run(self, rows: Iterable[Row]) -> Path:
        self._runs_made += 1
        return write_run(self.directory / f".op_summary_{self.timestamp}.run{self._runs_made}", rows)

    def _write_sorted(self, rows: Iterator[Row]) -> list[tuple[Path, Path]]:
        """Stream sorted rows into temp files, ``max_rows`` per file: (temp, final name) of each."""
        return write_sorted_files(lambda done: self._write_sorted_rows(rows, done))

    def _write_sorted_rows(self, rows: Iterator[Row], done: list[AtomicText]) -> None:
        sliced = self.rows > self.max_rows
        is_csv = isinstance(self.codec, CsvCodec)
        out: AtomicText | None = None
        previous: tuple[int, int, int] | None = None  # device, start, duration
        count = 0
        for device, start, _stream, _task, dur, line in rows:
            if out is None:
                out = AtomicText(self.name(len(done), sliced))
                done.append(out)
                out.write(self.codec.header_text() if isinstance(self.codec, CsvCodec) else "[\n")
                count = 0
            same_device = previous is not None and previous[0] == device
            wait = max(0, start - previous[1] - previous[2]) if previous is not None and same_device else 0
            previous = (device, start, dur)
            text = self.codec.with_wait(line, us(wait))
            out.write(f"{text}\n" if is_csv else f"{',' if count else ''}{text}\n")
            count += 1
            if count % TICK_ROWS == 0:
                self.guard.tick()
            if count >= self.max_rows:
                out.complete("" if is_csv else "]")
                out = None
        if out is not None:
            out.complete("" if is_csv else "]")


def _int(text: str) -> int:
    """Stream / task ids; N/A (communication ops) sorts first."""
    return int(text) if text.isdigit() else -1
