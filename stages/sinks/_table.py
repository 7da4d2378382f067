"""Summary tables written live and rewritten sorted at close, with msprof's names and quirks.

A :class:`SortedTable` appends rows in arrival order to ``{module}_{ts}.csv`` (past ``max_rows`` rows,
``{module}_slice_{k}_{ts}.csv`` as well), whole lines per write, so the file parses at every moment.
Each row comes with an integer sort key. At most ``chunk_rows`` rows, and ``chunk_bytes`` bytes of their
lines, are held in memory: a full chunk is sorted and spilled to a hidden run file (the byte bound keeps
a slowly growing table, such as msprof_tx, from holding a large chunk for much of the run). At close the
runs are merged (bounded fan-in), and the final files, sorted by key and sliced at ``max_rows`` rows as
msprof names them, replace the live ones
atomically.

The helpers below (cell quoting, atomic files, run files) are shared with op_summary's writer.

Every write goes through the sink's :class:`~pipeline.output_guard.OutputGuard`: on a full or
read-only disk a live append is cut back and retried, a spilled run is written again, and the sort at
close starts over (its temp files removed; the live files are replaced only once every sorted file is
complete), so a pause never leaves a row twice, half a row, or a row lost.

Crash recovery: :meth:`SortedTable.checkpoint` records where the live files end, :meth:`SortedTable.resume`
cuts them back there (:func:`cut_back`). The sorted files are all written under temp names before any
replaces a live file (a :class:`Commit`), so a sink that records the commit first can finish it after a
crash instead of sorting files that are half replaced.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import Any

from pipeline.output_guard import OutputGuard, check_fault_cue, write_all
from stages.sinks._format import NA
from stages.sinks._jsonarray import JsonArrayFile

MERGE_FAN_IN = 64
TICK_ROWS = 8192  # rows between two heartbeats while sorting at close
SPECIAL = re.compile(r'[,"\t\n\r]')
SPECIAL_BUT_COMMA = re.compile(r'["\t\n\r]')
_BLANKS = str.maketrans({"\t": " ", "\n": " ", "\r": " "})

RunRow = tuple  # (*int key, line): a row of a run file


def csv_cell(text: str) -> str:
    """A text cell: never a TAB or newline (the TAB marks time points), quoted when needed."""
    if not SPECIAL.search(text):
        return text
    text = text.translate(_BLANKS)
    if "," in text or '"' in text:
        return '"' + text.replace('"', '""') + '"'
    return text


class Memo(dict[str, str]):
    """``memo[text]``: ``convert(text)``, remembered (a symbol's text recurs on every row); forgets all past
    ``cap`` entries. A hit is a plain dict lookup."""

    def __init__(self, convert: Callable[[str], str], cap: int = 1 << 16) -> None:
        super().__init__()
        self.convert = convert
        self.cap = cap

    def __missing__(self, text: str) -> str:
        if len(self) >= self.cap:
            self.clear()
        converted = self[text] = self.convert(text)
        return converted


def csv_line(cells: list[str]) -> str:
    """The cells quoted as :func:`csv_cell` does, joined: one scan of the joined line when no cell needs it."""
    line = ",".join(cells)
    if line.count(",") == len(cells) - 1 and not SPECIAL_BUT_COMMA.search(line):
        return line
    return ",".join([csv_cell(cell) for cell in cells])


def slice_name(directory: Path, module: str, timestamp: str, suffix: str, index: int, sliced: bool) -> Path:
    """``{module}_{ts}.{suffix}``, or ``{module}_slice_{k}_{ts}.{suffix}`` when the table is sliced."""
    if not sliced:
        return directory / f"{module}_{timestamp}.{suffix}"
    return directory / f"{module}_slice_{index}_{timestamp}.{suffix}"


def write_atomic(path: Path, parts: Iterable[str] | Callable[[], Iterable[str]],
                 guard: OutputGuard | None = None) -> None:
    """Write to a temp file next to ``path`` and rename over it: readers never see half a file. A full
    disk pauses here until it takes the file; ``parts`` may be a callable, called again for each attempt."""
    if callable(parts):
        make = parts
    else:
        fixed = list(parts)
        make = lambda: fixed  # noqa: E731
    (guard or OutputGuard()).replace(path, make)


def create_with_header(guard: OutputGuard, path: Path, header: bytes) -> int:
    """A new live file holding ``header``; its descriptor (append mode). Until the disk takes the
    header there is no file rather than half a header."""
    fd = -1

    def create() -> int:
        nonlocal fd
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        write_all(fd, header, path)
        return fd

    def discard() -> None:
        nonlocal fd
        if fd >= 0:
            os.close(fd)
            fd = -1
        path.unlink(missing_ok=True)

    return guard.attempt(path, create, discard)


class AtomicText:
    """A text file written under a temp name; :meth:`commit` renames it into place once complete."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temp = path.with_name(f".{path.name}.tmp")
        self._out = open(self.temp, "w", encoding="utf-8", newline="\n")
        self.write = self._out.write

    def complete(self, ending: str) -> tuple[Path, Path]:
        """Complete the temp file and leave it there: (temp, final name), for a :class:`Commit`."""
        self._out.write(ending)
        check_fault_cue(self.temp)
        self._out.close()
        return self.temp, self.path

    def close(self) -> None:
        self._out.close()


@dataclass
class Commit:
    """Sorted files under temp names and the live files they replace; applying it twice is harmless."""

    renames: list[tuple[str, str]] = field(default_factory=list)  # (temp, final)
    stale: list[str] = field(default_factory=list)  # live files no sorted file replaces, spilled runs

    def apply(self) -> None:
        for temp, final in self.renames:
            if os.path.exists(temp):
                os.replace(temp, final)
        for path in self.stale:
            Path(path).unlink(missing_ok=True)

    def __add__(self, other: Commit) -> Commit:
        return Commit(self.renames + other.renames, self.stale + other.stale)


def commit_of(written: list[tuple[Path, Path]], live: list[Path], spilled: Iterable[Path] = ()) -> Commit:
    final = {path for _, path in written}
    return Commit([(str(temp), str(path)) for temp, path in written],
                  [str(old) for old in live if old not in final] + [str(run) for run in spilled])


def remove_unlisted(found: Iterable[Path], keep: Collection[Path]) -> None:
    """Files a table began after its checkpoint."""
    for path in found:
        if path not in keep:
            path.unlink(missing_ok=True)


def cut_back(files: list[Path], end: int | tuple[int, int] | None, header: str | None, rows_in_file: int,
             max_rows: int, guard: OutputGuard) -> tuple[int, JsonArrayFile | None]:
    """A live table's files as they were at a checkpoint, the current one reopened: (fd, JSON file).

    ``header`` is the CSV header line then (None: JSON arrays, cut to ``end`` = (size, count) and closed
    again). A CSV file is truncated to ``end``; when columns were added since (every file rewritten with
    ``N/A`` cells appended), each file is cut back to its rows then and those cells dropped. A disk that
    refuses it pauses here."""
    if end is None or not files:
        return -1, None
    current = files[-1]
    if header is None:
        assert isinstance(end, tuple)
        size, count = end
        return -1, JsonArrayFile.reopen(current, size, count, guard)
    with open(current, encoding="utf-8", newline="\n") as live:
        on_disk = live.readline()
    if on_disk == header:
        assert isinstance(end, int)
        guard.attempt(current, lambda: os.truncate(current, end))
    else:
        pad = ",N/A" * (on_disk.count(",") - header.count(","))
        for index, path in enumerate(files):
            keep = rows_in_file if index == len(files) - 1 else max_rows
            lines: list[str] = []
            for line in _csv_lines(path):
                if len(lines) == keep:
                    break
                lines.append((line[: -len(pad)] if pad and line.endswith(pad) else line) + "\n")
            write_atomic(path, chain([header], lines), guard)
    return guard.attempt(current, lambda: os.open(current, os.O_WRONLY | os.O_APPEND)), None


def live_end(fd: int, json_file: JsonArrayFile | None) -> int | tuple[int, int] | None:
    """Where the current live file ends (a checkpoint's position)."""
    if json_file is not None:
        return json_file.size, json_file.count
    return os.fstat(fd).st_size if fd >= 0 else None


def write_sorted_files(write: Callable[[list[AtomicText]], None]) -> list[tuple[Path, Path]]:
    """Run ``write`` (which opens, fills and completes AtomicTexts into the list it gets): (temp, final name)
    of each, for a :class:`Commit`. A failed write closes them and leaves the live files as they were."""
    done: list[AtomicText] = []
    try:
        write(done)
    except BaseException:
        for text in done:
            try:
                text.close()  # the flush of a full disk fails again; the file is closed anyway
            except OSError:
                pass
        raise
    return [(text.temp, text.path) for text in done]


def remove_temporaries(directory: Path, module: str, timestamp: str, runs: str) -> None:
    """What an interrupted sort left: unfinished sorted files, and its run files (``runs``: their suffix)."""
    for pattern in (f".{module}*_{timestamp}*.tmp", f".{module}_{timestamp}.{runs}*"):
        remove(directory.glob(pattern))


_RUN_BATCH = 4096  # rows of a run file formatted together


def write_run(path: Path, rows: Iterable[RunRow]) -> Path:
    """A run file: one row per line, the integer key fields then the line, TAB-separated (a batch of rows of
    the same length by one ``%`` format)."""
    pending = iter(rows)
    with open(path, "w", encoding="utf-8", newline="\n") as run:
        while batch := list(islice(pending, _RUN_BATCH)):
            fields = len(batch[0])
            if fields > 1 and all(len(row) == fields for row in batch):
                run.write(("%s\t" * (fields - 1) + "%s\n") * len(batch) % tuple(chain.from_iterable(batch)))
                continue
            for *key, line in batch:
                run.write("\t".join(map(str, key)) + f"\t{line}\n")
        check_fault_cue(path)
    return path


def read_run(path: Path, key_fields: int) -> Iterator[RunRow]:
    with open(path, encoding="utf-8", newline="\n") as run:
        for text in run:
            *key, line = text[:-1].split("\t", key_fields)
            yield (*map(int, key), line)


def merge_runs(runs: list[Path], key_fields: int) -> Iterator[RunRow]:
    return heapq.merge(*(read_run(path, key_fields) for path in runs))


def remove(paths: Iterable[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


class SlicedOutput(ABC):
    """The file a row table writes now: a CSV kept open by descriptor, or a JSON array; a new one per slice."""

    guard: OutputGuard
    files: list[Path]
    _fd: int
    _json: JsonArrayFile | None
    _rows_in_file: int

    @abstractmethod
    def _slice_path(self, index: int, sliced: bool) -> Path:
        """The name of the table's file number ``index``."""

    @abstractmethod
    def _csv_header(self) -> str | None:
        """The CSV header line (None: the table writes JSON)."""

    def _next_file(self) -> None:
        self._close_current()
        path = self._slice_path(len(self.files), sliced=bool(self.files))
        header = self._csv_header()
        if header is not None:
            self._fd = create_with_header(self.guard, path, header.encode())
        else:
            self._json = JsonArrayFile(path, self.guard)
        self.files.append(path)
        self._rows_in_file = 0

    def _close_current(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._json is not None:
            self._json.close()
            self._json = None


class SortedTable(SlicedOutput):
    """One summary table: rows appended live, sorted by their integer key and sliced at :meth:`finish`.

    ``tab_columns`` name the time-point columns: msprof follows their values with a TAB (its guard against
    spreadsheets reformatting them), except where the cell is ``N/A``. Rows shorter than the header are
    padded with ``N/A``; :meth:`add_columns` widens the header (earlier rows get ``N/A`` there).
    """

    def __init__(self, directory: Path, module: str, timestamp: str, fmt: str, header: list[str], *,
                 key_fields: int, max_rows: int, chunk_rows: int, tab_columns: Collection[str] = (),
                 guard: OutputGuard | None = None, chunk_bytes: int = 1 << 20) -> None:
        self.directory = directory
        self.guard = guard or OutputGuard()
        self.module = module
        self.timestamp = timestamp
        self.csv = fmt == "csv"
        self.suffix = "csv" if self.csv else "json"
        self.header = list(header)
        self.key_fields = key_fields
        self.max_rows = max_rows
        self.chunk_rows = chunk_rows
        self.tab_names = frozenset(tab_columns)
        self._tabs = [i for i, name in enumerate(self.header) if name in self.tab_names]
        self.files: list[Path] = []
        self.rows = 0
        self._chunk: list[RunRow] = []  # (*key, width, line)
        self.chunk_bytes = chunk_bytes
        self._chunk_bytes = 0  # of the chunk's lines
        self._runs: list[Path] = []
        self._in_order = True  # every row so far arrived in the order the sort puts them in
        self._last_row: RunRow | None = None
        self._rows_in_file = 0
        self._fd = -1
        self._json: JsonArrayFile | None = None
        self.guard.attempt(directory, lambda: directory.mkdir(parents=True, exist_ok=True))

    def append(self, rows: Iterable[tuple[tuple[int, ...], list[str]]]) -> None:
        """Rows as (sort key, cells)."""
        width = len(self.header)
        lines: list[str] = []
        chunk = self._chunk
        for key, cells in rows:
            if len(cells) < width:
                cells = cells + [NA] * (width - len(cells))
            line = self._line(cells)
            chunk.append((*key, width, line))
            lines.append(line)
        if self._in_order and lines:
            added = chunk[-len(lines):]
            previous = self._last_row
            self._in_order = (previous is None or previous <= added[0]) and all(
                earlier <= later for earlier, later in zip(added, added[1:], strict=False))
            self._last_row = added[-1]
        self._write_live(lines)
        self._chunk_bytes += sum(map(len, lines))
        if len(self._chunk) >= self.chunk_rows or self._chunk_bytes >= self.chunk_bytes:
            self._spill()

    @property
    def in_order(self) -> bool:
        """Every row so far arrived in the order the sort puts them in."""
        return self._in_order

    def append_rows(self, rows: list[RunRow], lines: list[str], ordered: bool) -> None:
        """Rows made column-wise, as the chunk holds them: (*key, width of the header, CSV line) with every cell
        of the header's; ``lines``: their lines; ``ordered``: each row sorts at or after the one before it."""
        if not rows:
            return
        self._chunk += rows
        if self._in_order:
            previous = self._last_row
            self._in_order = ordered and (previous is None or previous <= rows[0])
            self._last_row = rows[-1]
        self._write_live(lines)
        self._chunk_bytes += sum(map(len, lines))
        if len(self._chunk) >= self.chunk_rows or self._chunk_bytes >= self.chunk_bytes:
            self._spill()

    def add_columns(self, names: list[str]) -> None:
        """Widen the header: rows written so far get ``N/A`` in the new columns."""
        self.header.extend(names)
        self._tabs = [i for i, name in enumerate(self.header) if name in self.tab_names]
        self._in_order = False  # the sorted files widen the rows written so far
        if not self.files or not self.csv:
            return  # JSON objects are completed at finish()
        pad = ",N/A" * len(names)
        self._close_current()
        header = self._header_text()
        for path in self.files:
            write_atomic(path, lambda path=path: chain(  # type: ignore[misc]
                [header], (f"{line}{pad}\n" for line in _csv_lines(path))), self.guard)
        self._fd = self.guard.attempt(self.files[-1], lambda: os.open(self.files[-1], os.O_WRONLY | os.O_APPEND))

    def finish(self) -> list[Path]:
        """Sort, replace the live files with the final ones; returns them."""
        self.guard.attempt(self.directory, self.sorted_commit().apply)  # applied again after a pause
        return self.files

    def sorted_commit(self) -> Commit:
        """Sort into temp files; applying the commit replaces the live files and removes the spilled runs
        (kept until then: a restart from a checkpoint needs them). A full disk pauses the sort, which then
        starts over from the same runs."""
        self._close_current()
        if not self.rows:
            return Commit()
        spilled = list(self._runs)
        if self._in_order and self.csv and len(self.files) == 1 and self.rows <= self.max_rows:
            self._runs, self._chunk, self._chunk_bytes = [], [], 0  # the live file is the sorted one already
            return commit_of([], [], spilled)
        written = self.guard.attempt(self.directory, self._sort_files,
                                     lambda: remove_temporaries(self.directory, self.module, self.timestamp, "merge"))
        commit = commit_of(written, self.files, spilled)
        self.files = [path for _, path in written]
        self._runs, self._chunk, self._chunk_bytes = [], [], 0
        return commit

    # -- crash recovery ---------------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """The table's state (rows not yet spilled, the runs spilled) and where the current file ends."""
        state = {key: value for key, value in vars(self).items() if key not in ("_fd", "_json", "guard")}
        return {"state": state, "end": live_end(self._fd, self._json)}

    @classmethod
    def resume(cls, saved: dict[str, Any], guard: OutputGuard | None = None) -> SortedTable:
        """The table at its checkpoint: files and runs begun later removed, the current file cut back."""
        table = cls.__new__(cls)
        vars(table).update(saved["state"])
        table.guard = guard or OutputGuard()
        remove_unlisted(table.directory.glob(f"{table.module}_*{table.timestamp}.{table.suffix}"), table.files)
        remove_unlisted(table.directory.glob(f".{table.module}_{table.timestamp}.run*"), table._runs)
        table._fd, table._json = cut_back(table.files, saved["end"], table._header_text() if table.csv else None,
                                          table._rows_in_file, table.max_rows, table.guard)
        return table

    # -- internals --------------------------------------------------------------------------

    def _line(self, cells: list[str]) -> str:
        if not self.csv:
            return json.dumps(dict(zip(self.header, cells, strict=False)), ensure_ascii=False)
        if not self._tabs:
            return csv_line(cells)
        out = [csv_cell(cell) for cell in cells] if SPECIAL.search("".join(cells)) else cells[:]  # one scan
        for i in self._tabs:
            if out[i] != NA:
                out[i] += "\t"
        return ",".join(out)

    def _header_text(self) -> str:
        return ",".join(self.header) + "\n"

    def _name(self, index: int, sliced: bool) -> Path:
        return slice_name(self.directory, self.module, self.timestamp, self.suffix, index, sliced)

    def _sort_files(self) -> list[tuple[Path, Path]]:
        """The sorted files under temp names. The spilled runs stay (a restart needs them, and a sort the disk
        refused starts over from them); merges of runs are temporary, each level removed once merged again."""
        fields = self.key_fields + 1  # the key, then the row's width
        if not self._runs:
            return self._write_sorted(sorted(self._chunk))
        runs = [*self._runs, *([write_run(self._run_path("merge"), sorted(self._chunk))] if self._chunk else [])]
        try:
            while len(runs) > MERGE_FAN_IN:
                groups = [runs[i : i + MERGE_FAN_IN] for i in range(0, len(runs), MERGE_FAN_IN)]
                merged = [write_run(self._run_path("merge"), merge_runs(group, fields)) for group in groups]
                remove(run for run in runs if run not in self._runs)
                runs = merged
            return self._write_sorted(merge_runs(runs, fields))
        finally:
            remove(run for run in runs if run not in self._runs)

    def _write_live(self, lines: list[str]) -> None:
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

    def _slice_path(self, index: int, sliced: bool) -> Path:
        return self._name(index, sliced)

    def _csv_header(self) -> str | None:
        return self._header_text() if self.csv else None

    def _run_path(self, kind: str = "run") -> Path:
        """A spilled chunk (``run``, kept until the sort succeeds) or a merge of runs (``merge``, one sort's)."""
        return self.directory / f".{self.module}_{self.timestamp}.{kind}{len(self._runs)}_{os.urandom(4).hex()}"

    def _spill(self) -> None:
        self._chunk.sort()
        path, chunk = self._run_path(), self._chunk
        self._runs.append(self.guard.attempt(path, lambda: write_run(path, chunk), lambda: remove([path])))
        self._chunk, self._chunk_bytes = [], 0

    def _complete(self, width: int, line: str) -> str:
        """A line written under a narrower header, padded to the final one."""
        missing = len(self.header) - width
        if self.csv:
            return line + ",N/A" * missing
        row = json.loads(line)
        return json.dumps({name: row.get(name, NA) for name in self.header}, ensure_ascii=False)

    def _write_sorted(self, rows: Iterable[RunRow]) -> list[tuple[Path, Path]]:
        return write_sorted_files(lambda done: self._write_sorted_rows(rows, done))

    def _write_sorted_rows(self, rows: Iterable[RunRow], done: list[AtomicText]) -> None:
        sliced = self.rows > self.max_rows
        width = len(self.header)
        out: AtomicText | None = None
        count = 0
        for *_key, row_width, line in rows:
            if out is None:
                out = AtomicText(self._name(len(done), sliced))
                done.append(out)
                out.write(self._header_text() if self.csv else "[\n")
                count = 0
            if row_width != width:
                line = self._complete(row_width, line)
            out.write(f"{line}\n" if self.csv else f"{',' if count else ''}{line}\n")
            count += 1
            if count % TICK_ROWS == 0:
                self.guard.tick()
            if count >= self.max_rows:
                out.complete("" if self.csv else "]")
                out = None
        if out is not None:
            out.complete("" if self.csv else "]")


def _csv_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="\n") as lines:
        next(lines, None)  # header
        for line in lines:
            if line.endswith("\n"):
                yield line[:-1]
