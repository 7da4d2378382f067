"""The collector: follows a PROF directory as the runtime writes it and ships raw chunks.

New slices are picked up as they appear and bytes as they are appended; a record split
across device slices is carried over, a partial record at the end of a growing file waits.
Each chunk is cut at record boundaries and names its stream, file, offset and count.

Layouts: `PROF_…/{host,device_N}/data/`, and the legacy `JOB…/` whose control files
and `data/` sit in the job folder itself; that folder is then named `device_N` (N from its
`info.json.N`) in everything the collector ships, as a PROF directory's device folder would be.

A slice is append-only: one that shrinks, is replaced (another inode), turns into a symlink or is not a
regular file is not read further (counted once; its next slice is read when it appears). Symlinks in the
tree are not followed, as msprof does not follow them; each is counted once in the run report.

Every loss is a line of the run report that fails the run (``input_problems``), naming the file and what it
cost: a slice or folder not read (missing, unreadable, a symlink, changed under the collector), a slice shorter
than its `.done` gives, a stream with more than MAX_GARBAGE_SHARE of its bytes not records. A host slice that
repeats an earlier one of its stream byte for byte is not read again: counted apart, said in a warning.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from pydantic import Field

from pipeline.errors import InputError
from pipeline.stage import Batch, Source, StageConfig
from pipeline_board import slices  # the reading rules, shared with the board agent

# The name rules and record sizes without numpy (the collector reads bytes; tests/test_board_agent.py checks them
# against stages.formats.files for every file name and platform)
from pipeline_board.kinds import SLICE_SEP, StreamKind, device_stream_kind, host_stream_kind, split_slice_name
from stages import framing
from stages.tx_inbox import RECORD_BYTES, SPOOL_FOLDER, STREAM_BASE, TxInbox

MIN_BUDGET_BYTES = 16 << 10  # the least a pass reads of a stream that has bytes left
RESCAN_S = 0.25  # how often a following collector lists the tree for new files (slices it reads on are probed)
SETTLE_S = 1.0  # ... but every pass until no new stream or control file has turned up for this long
CONTROL_GRACE_S = 2.0  # at the end of a followed job, how long a control file still being copied may take
WAIT_NOTICE_S = 1.0  # a directory not there after this long is shown on the terminal (the wait is wait_s)
STALE_SLACK_S = 1.0  # file times lag the clock by a tick: a directory this much older than the run is not its job
MAX_GARBAGE_SHARE = 0.01  # a stream with more of its bytes not whole records than this fails the run
HEAD_BYTES = 4096  # a host slice is told from the earlier ones of its stream by this many first bytes, then all
log = structlog.get_logger()


@dataclass
class StreamState:
    base: str
    kind: StreamKind
    device: int | None
    folder: Path
    slice_index: int = 0
    offset: int = 0  # bytes of the current slice already read
    buffer: bytes = b""  # read but not yet framed
    buffer_origin: tuple[int, int] = (0, 0)  # (slice, offset) of buffer[0]
    records: int = 0
    sep: str = SLICE_SEP  # between base and slice index: `.slice_`, or `.` in legacy "infer" names
    file_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the current slice once opened
    abandoned: bool = False  # the current slice changed under us: go on with the next one
    last_index: int = 0  # the highest slice index seen in the folder

    closed_sizes: dict[int, int] = field(default_factory=dict)  # slice index → size, once a later slice exists
    bytes_in: int = 0  # bytes read of the stream
    garbage: int = 0  # ... of which not whole records
    garbage_files: tuple[str, ...] = ()  # the slices that garbage was read from
    heads: dict[bytes, int] | None = None  # host slices: digest of the first HEAD_BYTES → slice index

    def slice_path(self, index: int | None = None) -> str:
        """A slice's path (text: a pass builds several per stream, and Path objects cost more than the stat)."""
        return f"{self.folder}{os.sep}{self.base}{self.sep}{self.slice_index if index is None else index}"


def _unread_bytes(state: StreamState) -> int:
    """Bytes on disk not read yet, over the current slice and every later one (an estimate: it only shares out
    a pass's bytes, so a slice missing before the last one seen counts as empty). Negative when the current
    slice is now shorter than what was read of it."""
    total, index = -state.offset, state.slice_index
    while True:
        size = state.closed_sizes.get(index)
        if size is None:
            try:
                size = os.lstat(state.slice_path(index)).st_size
            except OSError:
                if index >= state.last_index:
                    break
                size = 0
            if index < state.last_index or os.path.exists(state.slice_path(index + 1)):
                state.closed_sizes[index] = size  # a closed slice no longer grows
            else:
                total += size
                break  # the last slice: no later one to look for
        total += size
        index += 1
    for done in [i for i in state.closed_sizes if i < state.slice_index]:
        del state.closed_sizes[done]
    return total


@dataclass
class ProfTree:
    root: Path
    control_sent: dict[str, int] = field(default_factory=dict)  # relative path → size sent
    streams: dict[str, StreamState] = field(default_factory=dict)
    platforms: dict[int, int] = field(default_factory=dict)


class CollectorStage(Source):
    """Follows ``path`` (a PROF_… directory, or a folder where one will appear).

    Checkpoints: after each stream of a pass everything read has been shipped, so its state there (file
    offsets, the bytes of a record not yet whole) is where a restarted collector goes on reading.
    """

    checkpoints = True

    class Config(StageConfig):
        path: str = Field("board", description="PROF_… directory, or a folder in which one appears")
        follow: bool = Field(True, description="keep reading until the runtime marks the job finished")
        poll_ms: int = Field(20, ge=1, description="how often to look for new bytes")
        wait_s: float = Field(60.0, ge=0, description="how long to wait for the directory to appear")
        idle_notice_s: float = Field(30.0, gt=0, description="a followed job that writes nothing for this long is "
                                                             "shown on the terminal, with what the run waits for")
        chunk_records: int | None = Field(None, ge=1, description="records per message (default: run.batch)")
        chunk_bytes: int | None = Field(None, ge=4096, le=64 << 20,
                                        description="bytes per message (default: run.batch)")
        read_quantum_bytes: int = Field(256 << 10, ge=4096,
                                        description="bytes a pass reads per stream on average (shared by what "
                                                    "each has unread), so streams advance together in time")
        end_marker: str | None = Field(None, description="a file whose appearance ends the job even without "
                                                         "end_info (`pipeline run -- APP` writes it when APP exits)")
        tx_endpoint: str | None = Field(None, description="also take pipeline.tx annotations sent to this ZeroMQ "
                                                          "endpoint (ipc://…, or tcp://… with run.curve)")

    def __init__(self, config: Any, ctx: Any) -> None:
        super().__init__(config, ctx)
        self._stop = False
        self.tree: ProfTree | None = None
        self.collected = 0
        self.garbage_bytes = 0
        self.bytes_read = 0
        self.bytes_on_disk = 0  # read, and seen on disk not read yet (at the newest pass)
        self.notice: str | None = None  # shown on the terminal by the supervisor (the directory awaited, a quiet job)
        self.left_at_stop = 0
        self.symlinks: set[str] = set()
        self.refused: set[Path] = set()  # files not read (too large, not a regular file), each counted once
        self.unknown: set[str] = set()
        self.tx_inbox: TxInbox | None = None  # a socket and a file: not part of a checkpoint
        self.tx_socket_records = 0
        self._scanned_at = -RESCAN_S  # monotonic time of the last listing of the tree
        self._changed_at = 0.0  # ... and of the last listing that found a new stream or control file
        self.end_problems: list[str] = []  # what the end of the job left unread, for the run report
        self.losses: dict[str, str] = {}  # path → the line saying what was not read of it and what that cost
        self.repeats: dict[str, str] = {}  # path of a host slice not read twice → the line saying so
        self.repeated_records = 0
        self._read_at = time.monotonic()  # of the last pass that read something (following a job)
        self._idle_said = False  # a quiet job is said once a run, not at each quiet spell of a bursty job

    def stop(self) -> None:
        self._stop = True

    def snapshot(self) -> bytes:
        from pipeline.checkpoint import pickle_state
        return pickle_state(self, skip=("tx_inbox",))

    # -- locating the directory -----------------------------------------------------------
    def _find_root(self) -> Iterator[None]:
        base = self.ctx.resolve(self.config.path)
        deadline = time.monotonic() + (self.config.wait_s if self.config.follow else 0)
        # Following a folder: PROF_ directories that finished before this run started belong to earlier jobs.
        old = _finished_children(base, self._run_started()) if self.config.follow else set()
        said_waiting = False
        if base.exists() and not base.is_dir():  # it will not turn into a directory: no wait
            what = "is a file, not a directory" if base.is_file() else "is not a directory"
            raise InputError(f"collector: {base} {what}",
                             "point the collector's path (or PROF_DIR) at a CANN profiling output directory")
        while True:
            app_ended = self._app_ended()  # looked at first: a directory the app made before it ended is found
            if self.config.end_marker is not None:  # a launched app's job: only a directory made during this run
                old |= _children_before(base, self._run_started() - STALE_SLACK_S)
            root = _prof_root(base, skip=old)
            if root is not None:
                self.tree, self.notice = ProfTree(root), None
                return
            if app_ended:
                raise InputError(f"collector: the application ended without writing a PROF_… directory in {base}",
                                 "does it switch profiling on? pass $PIPELINE_ACL_JSON to acl.init, or read "
                                 "PROFILING_OPTIONS (docs/board.md)")
            if self._stop or (time.monotonic() >= deadline and self.config.end_marker is None):
                what = "does not exist" if not base.exists() else \
                    "holds no PROF_… directory (no host/ or device_N/, nor a JOB…/data/ folder)"
                raise InputError(f"collector: {base} {what}",
                                 "point the collector's path (or PROF_DIR) at a CANN profiling output directory")
            if not said_waiting and self.config.end_marker is None and time.monotonic() > deadline - \
                    self.config.wait_s + WAIT_NOTICE_S:
                said_waiting = True  # once: a typo in the path should not look like a hang
                self.notice = _waiting_notice(base, self.config.wait_s)
                log.warning("waiting for a PROF_… directory", stage=self.ctx.stage_id, path=str(base),
                            exists=base.exists(), gives_up_in_s=round(deadline - time.monotonic(), 1))
            yield None
            time.sleep(self.config.poll_ms / 1000)

    @classmethod
    def notice_at_start(cls, config: Any, output_dir: Path) -> str | None:
        """Said by the supervisor before the stages start: a followed path that is not there (the collector says
        it too, once it is up and has waited WAIT_NOTICE_S: the same words, said once)."""
        base = Path(config.path).expanduser()
        if not config.follow or config.end_marker is not None or not base.is_absolute():
            return None  # a folder in the run's own output folder is made by the run (a simulated board writes it)
        return None if base.exists() else _waiting_notice(base, config.wait_s)

    def _run_started(self) -> float:
        """Epoch seconds the run started (its output stamp, to the second); else now."""
        stamp = self.ctx.export_stamp
        if stamp:
            try:
                return time.mktime(time.strptime(stamp, "%Y%m%d%H%M%S"))
            except ValueError:
                pass
        return time.time()

    # -- the loop -------------------------------------------------------------------------
    def batches(self) -> Iterator[Batch | None]:
        if self.config.tx_endpoint and self.tx_inbox is None:  # bound first: the app may send before its job starts
            self.tx_inbox = TxInbox(self.ctx, self.config.tx_endpoint, self.ctx.curve, fresh=self.tree is None)
        try:
            yield from self._follow()
        finally:
            if self.tx_inbox is not None:
                self.tx_inbox.close()
                self.tx_inbox = None

    def _follow(self) -> Iterator[Batch | None]:
        if self.tree is None:  # else restored from a checkpoint
            yield from self._find_root()
        assert self.tree is not None
        while True:
            scan = self._scan_due()
            finished = scan and self._job_finished()  # looked at before reading, so no byte is missed
            before = self.bytes_read
            yield from self._pass(final=False, scan=scan)
            if self._stop:
                self.left_at_stop = sum(len(s.buffer) for s in self.tree.streams.values())
                return  # asked to stop: what is on disk stays there for a later import
            if self.bytes_read > before:
                self._read_at = time.monotonic()
                if self.notice is not None:
                    self.notice = None
                yield None
                continue  # more to read: keep going before deciding anything
            if finished or not self.config.follow:
                yield from self._end_of_job()
                return
            if not self._idle_said and time.monotonic() - self._read_at >= self.config.idle_notice_s:
                self.notice, self._idle_said = self._idle_notice(), True
            yield None
            time.sleep(self.config.poll_ms / 1000)

    def _idle_notice(self) -> str:
        """What a run following a job that has gone quiet waits for, and what to do when that job is gone."""
        assert self.tree is not None
        return (f"collector: nothing new in {self.tree.root} for {self.config.idle_notice_s:g} s: the run waits for "
                "the job to "
                "write more, or to end (its end_info files); a job that died writes none: Ctrl-C, then "
                f"`pipeline import {self.tree.root}` parses what it wrote")

    def _scan_due(self) -> bool:
        """The tree is listed (new files, control files, the end of the job) every RESCAN_S; in between a pass
        reads on in the slices it knows, probing each for its next slice (listing every poll cost a fifth of a
        core at 20 k records/s). While streams are still turning up (the job's start) it is listed every poll:
        a stream found a quarter second late would be read that far behind the others, and the aggregator would
        hold everything in between (at a million records/s, 60 MB more)."""
        now = time.monotonic()
        assert self.tree is not None
        settled = self.tree.streams and now - self._changed_at >= SETTLE_S
        if settled and now - self._scanned_at < RESCAN_S:
            return False
        self._scanned_at = now
        return True

    def _job_finished(self) -> bool:
        assert self.tree is not None
        return self._app_ended() or _is_finished(self.tree.root)

    def _app_ended(self) -> bool:
        """The launched application has exited (its end marker is there): what is on disk is all there will be."""
        return self.config.end_marker is not None and self.ctx.resolve(self.config.end_marker).exists()

    def _pass(self, final: bool, scan: bool) -> Iterator[Batch | None]:
        assert self.tree is not None
        if scan:
            known = (len(self.tree.streams), len(self.tree.control_sent))
            yield from self._control_files()
            self._refuse_linked_folders()
            self._discover_streams()
            if (len(self.tree.streams), len(self.tree.control_sent)) != known:
                self._changed_at = time.monotonic()
        self._take_tx(final)
        states = list(self.tree.streams.values())
        unread = [_unread_bytes(state) for state in states]
        self.bytes_on_disk = self.bytes_read + sum(max(left, 0) for left in unread)
        for state, left, budget in zip(states, unread, self._budgets(unread), strict=True):
            if left == 0 and not final and not state.buffer:
                continue  # nothing new on disk, nothing held back: opening the slice would find nothing
            yield from self._read_stream(state, final, budget)
            yield None  # all read so far is shipped: a safe point for a checkpoint, also while sends are slow

    def _budgets(self, unread: list[int]) -> list[int]:
        """Bytes to read per stream this pass (``unread``: each stream's bytes on disk not read yet): each stream
        advances by the same share of what it has unread, so streams stay together in time (a stream of large
        records, such as tensor_info, is not left behind by one of small records; the join would hold everything
        in between). A pass reads ``read_quantum_bytes`` per stream in all."""
        unread = [max(left, 0) for left in unread]
        total = sum(unread)
        quantum = self.config.read_quantum_bytes
        if total <= quantum * len(unread):
            return [max(left, quantum) for left in unread]  # everything there is, in one pass
        return [max(MIN_BUDGET_BYTES, quantum * len(unread) * left // total) for left in unread]

    # -- control files --------------------------------------------------------------------
    def _control_files(self) -> Iterator[Batch]:
        assert self.tree is not None
        for folder, name in _folders(self.tree.root):
            for path in _listdir(folder):
                if not path.name.startswith(slices.CONTROL_PREFIXES) or path.name.endswith(".done"):
                    continue
                if path.is_symlink():
                    self._refuse_symlink(path)
                    continue
                rel = f"{name}/{path.name}"
                try:
                    size = path.stat().st_size
                    if not path.is_file() or size == 0 or self.tree.control_sent.get(rel) == size:
                        continue
                    if size > slices.MAX_CONTROL_BYTES:
                        self._refuse(path, f"control file larger than {slices.MAX_CONTROL_BYTES >> 20} MiB not read")
                        continue
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:  # gone between listing and reading: the next pass sees
                    continue
                if not slices.control_complete(path, text):
                    continue  # being written: next pass
                self.tree.control_sent[rel] = size
                if path.name.startswith("info.json") and name.startswith("device_"):
                    self._learn_platform(name, text)
                yield Batch("control", 0, {"path": rel, "text": text})

    def _report_unknown(self, key: str) -> None:
        """Each raw file family the decoders do not know is named once in the run report."""
        if key not in self.unknown:
            self.unknown.add(key)
            self.ctx.reject(f"file family not decoded by this release: {key}", 1)

    def _refuse_symlink(self, path: Path | str) -> None:
        """Symlinks in a PROF tree are not followed (as msprof refuses them); each is counted once."""
        path = os.fspath(path)
        if path not in self.symlinks:
            self.symlinks.add(path)
            self.ctx.reject("symlink in the PROF directory not followed", 1)
            log.warning("symlink in the PROF directory not followed", stage=self.ctx.stage_id, path=str(path))
            self._lose(path, "is a symbolic link: not followed (msprof does not follow links in a PROF directory "
                             "either), so what it holds is missing from the outputs (copy it in with `cp -rL` in "
                             "place of the link and import again)")

    def _refuse(self, path: Path, reason: str) -> None:
        """A file the collector will not read, counted once under ``reason``."""
        if path not in self.refused:
            self.refused.add(path)
            self.ctx.reject(reason, 1)
            log.warning(reason, stage=self.ctx.stage_id, path=str(path))
            self._lose(os.fspath(path), f"was not read ({reason}), so what it describes is missing from the "
                                        "outputs (copy it again from the board's PROF_… directory)")

    def _lose(self, path: str, what: str) -> None:
        """A loss of the run, one line for ``path`` (the first said stands)."""
        self.losses.setdefault(path, f"collector: {path} {what}")

    def _refuse_linked_folders(self) -> None:
        """host/, device_N/ and data/ folders that are symlinks: not followed, counted."""
        assert self.tree is not None
        for path in _listdir(self.tree.root):
            if (path.name == "host" or slices.device_id(path.name) is not None) and path.is_symlink():
                self._refuse_symlink(path)
        for folder, _ in _folders(self.tree.root):
            if (folder / "data").is_symlink():
                self._refuse_symlink(folder / "data")

    def _learn_platform(self, folder: str, text: str) -> None:
        assert self.tree is not None
        device = slices.device_id(folder)
        if device is not None:
            self.tree.platforms[device] = slices.platform_version(text)

    # -- data streams ---------------------------------------------------------------------
    def _discover_streams(self) -> None:
        assert self.tree is not None
        for folder, name in _folders(self.tree.root):
            data = folder / "data"
            if data.is_symlink() or not data.is_dir():
                continue
            is_host = name == "host"
            for path in _listdir(data):  # a stable order: streams are read in it
                parsed = split_slice_name(path.name)
                if parsed is None:
                    continue
                if path.is_symlink():
                    self._refuse_symlink(path)
                    continue
                base, index, sep = parsed
                key = f"{name}/data/{base}"
                if key in self.tree.streams:
                    known = self.tree.streams[key]
                    known.last_index = max(known.last_index, index)
                    continue
                if is_host:
                    kind, device = host_stream_kind(base), None
                else:
                    dev = slices.device_id(name)
                    if dev not in self.tree.platforms:
                        continue  # wait for info.json.N: the chip decides the framing
                    found = device_stream_kind(base, self.tree.platforms[dev])
                    kind, device = found if found and found[1] <= slices.MAX_DEVICE_ID else (None, None)
                if kind is None:
                    self._report_unknown(key)  # a file family this release does not decode: said once
                    continue
                self.tree.streams[key] = StreamState(base, kind, device, data, sep=sep, last_index=index)

    def _take_tx(self, final: bool) -> None:
        """Annotations that came over the socket, spooled; the spool is read as one more host stream."""
        if self.tx_inbox is None:
            return
        assert self.tree is not None
        self.tx_socket_records += self.tx_inbox.take(until_quiet=final) // RECORD_BYTES
        key = f"{SPOOL_FOLDER}/data/{STREAM_BASE}"
        kind = host_stream_kind(STREAM_BASE)
        if key not in self.tree.streams and self.tx_socket_records and kind is not None:
            self.tree.streams[key] = StreamState(STREAM_BASE, kind, None, self.tx_inbox.data_dir)

    def _read_stream(self, state: StreamState, final: bool, budget: int) -> Iterator[Batch]:
        for step, value in slices.read_slices(state, budget, final):
            if step == "read":
                self.bytes_read += value
                state.bytes_in += value
                if state.offset == value and state.kind.whole_records_per_slice and state.kind.framing == "fixed":
                    self._skip_a_repeat(state, value)  # the first bytes of a host slice: read before?
            elif step == "symlink":
                self._refuse_symlink(value)
            elif step == "abandon":
                yield from self._abandon(state, value)
            elif step == "frame":
                yield from self._emit(state, final=value)

    def _skip_a_repeat(self, state: StreamState, read: int) -> None:
        """A host slice whose bytes repeat an earlier slice of its stream byte for byte (a copy under the next
        name) is not read: the bytes just read from its start leave the buffer, the slice is left, counted apart.
        Slices are told apart by their first HEAD_BYTES, then compared whole."""
        head = state.buffer[len(state.buffer) - read:][:HEAD_BYTES]
        key = hashlib.blake2b(head, digest_size=16).digest()
        if state.heads is None:
            state.heads = {}
        earlier = state.heads.get(key)
        path = state.slice_path()
        if earlier is None or earlier == state.slice_index or not _same_bytes(state.slice_path(earlier), path):
            state.heads.setdefault(key, state.slice_index)
            return
        state.buffer = state.buffer[:len(state.buffer) - read]
        state.abandoned = True
        size = _size(Path(path))
        records = size // state.kind.record_size
        self.repeated_records += records
        self.ctx.reject(f"{state.kind.name}: a slice that repeats an earlier one byte for byte (not read twice)", 1)
        log.warning("slice repeats an earlier one", stage=self.ctx.stage_id, path=path,
                    earlier=state.slice_path(earlier))
        self.repeats[path] = (f"collector: {path} repeats {state.base}{state.sep}{earlier} byte for byte: its "
                              f"{records:,} {state.kind.name} records ({size:,} bytes) are counted once, not twice "
                              "(a copy of a slice? remove it)")

    def _abandon(self, state: StreamState, problem: str) -> Iterator[Batch]:
        """The current slice is not read further (counted once, a loss of the run); what was read of it is framed
        to the end."""
        reason = f"{state.kind.name}: a slice {problem}; the rest of it is not read"
        self.ctx.reject(reason, 1)
        path = state.slice_path()
        log.warning(reason, stage=self.ctx.stage_id, path=path, offset=state.offset)
        self._lose(path, f"{problem}: {_slice_cost(state, problem)}")
        yield from self._emit(state, final=True)

    def _emit(self, state: StreamState, final: bool) -> Iterator[Batch]:
        """Frame the buffer until a call takes nothing more (one call frames one form of record only)."""
        for framed, slice_index, offset in slices.frame_buffer(state, final):
            for run in framed.garbage:
                self.garbage_bytes += len(run)
                state.garbage += len(run)
                self.ctx.reject(f"{state.kind.name}: {slices.GARBAGE}", len(run), run)
            if framed.garbage and state.slice_path(slice_index) not in state.garbage_files:
                state.garbage_files += (state.slice_path(slice_index),)
            if framed.count:
                state.records += framed.count
                self.collected += framed.count
                yield from self._chunks(state, framed, slice_index, offset)

    def _chunks(self, state: StreamState, framed: framing.Framed, slice_index: int, offset: int) -> Iterator[Batch]:
        meta = {"stream": state.base, "kind": state.kind.name, "device": state.device,
                "file": self._file_name(state.slice_path(slice_index)), "offset": offset}
        if state.kind.framing in ("text", "nul_text"):
            yield Batch("raw", framed.count, dict(meta), framed.records)
            return
        if state.kind.framing == "tlv":
            yield Batch("raw", framed.count, dict(meta, size=0), framed.records)
            return
        size = state.kind.record_size
        records = self.config.chunk_records or self.ctx.batch_records
        per_chunk = max(1, min(records, (self.config.chunk_bytes or self.ctx.batch_bytes) // size))
        for first in range(0, framed.count, per_chunk):
            n = min(per_chunk, framed.count - first)
            body = framed.records[first * size:(first + n) * size]
            yield Batch("raw", n, dict(meta, size=size, first=first), body)

    def _file_name(self, path: str) -> str:
        """A slice's path in the PROF directory; the tx spool's under its own folder name."""
        if self.tree is None:
            return ""
        root = f"{self.tree.root}{os.sep}"
        if path.startswith(root):
            return path[len(root):]
        folder, name = os.path.split(path)
        return f"{SPOOL_FOLDER}/{os.path.basename(folder)}/{name}"

    # -- report ---------------------------------------------------------------------------
    def _end_of_job(self) -> Iterator[Batch | None]:
        """The last passes: control files still being copied get CONTROL_GRACE_S (following a job), then the tree
        is read until a pass finds nothing new (a late info.json.N makes a device's streams readable, and a final
        pass reads only its budget of each), then once more framing what is left, then what stayed unread."""
        assert self.tree is not None
        deadline = time.monotonic() + (CONTROL_GRACE_S if self.config.follow else 0)
        while self._unsent_control_files() and time.monotonic() < deadline and not self._stop:
            yield None
            time.sleep(self.config.poll_ms / 1000)
            yield from self._pass(final=False, scan=True)
        while True:
            before = self.bytes_read
            yield from self._pass(final=False, scan=True)
            if self.bytes_read == before:
                break
        yield from self._pass(final=True, scan=True)
        self.end_problems = self._left_unread() + self._unreadable_folders() + self._short_slices() + \
            self._garbage_streams()

    def _unsent_control_files(self) -> list[Path]:
        """Control files on disk that never parsed (damaged, or still being written), not refused otherwise."""
        assert self.tree is not None
        return [path for folder, name in _folders(self.tree.root) for path in _listdir(folder)
                if path.name.startswith(slices.CONTROL_PREFIXES) and not path.name.endswith(".done")
                and path not in self.refused and f"{name}/{path.name}" not in self.tree.control_sent
                and not path.is_symlink() and path.is_file() and _size(path) > 0]

    def _left_unread(self) -> list[str]:
        """At the end of the job: control files that never parsed, and device data that waited for one in vain.
        Each is a problem of the run (a device or its PMU columns missing from every output), not a silence."""
        assert self.tree is not None
        problems = []
        for path in self._unsent_control_files():
            self.ctx.reject("control file damaged or cut short at the end of the job", _size(path))
            unreadable = _open_error(path)
            problems.append(f"collector: {path} " + (
                f"cannot be read ({unreadable}): what it describes is missing from the outputs (let the user "
                "running pipeline read it)" if unreadable else
                "is damaged or cut short (neither JSON nor whole lines, or not the size its .done gives): not "
                "read, so what it describes is missing from the outputs (copy it again from the board)"))
        folders: list[tuple[Path, int | str | None]] = [
            (folder, slices.device_id(name)) for folder, name in _folders(self.tree.root) if name != "host"]
        if not folders:
            folders = [(self.tree.root, "N")]  # a legacy JOB folder: named by its info.json.N, none found
        for folder, device in folders:
            data = folder / "data"
            if device is None or device in self.tree.platforms or not data.is_dir() or data.is_symlink():
                continue
            files = [path for path in _listdir(data) if split_slice_name(path.name) is not None]
            if files:
                unread = sum(_size(path) for path in files)
                self.ctx.reject("device data not read: no readable info.json.N", unread)
                problems.append(f"collector: {folder} has {len(files)} data files ({unread:,} bytes) but no readable "
                                f"info.json.{device}: the chip decides how they are read, so device {device} is "
                                "missing from the outputs (copy info.json.N from the board's PROF directory)")
        for problem in problems:
            log.warning("left unread at the end of the job", stage=self.ctx.stage_id, problem=problem)
        return problems

    def _unreadable_folders(self) -> list[str]:
        """host/, device_N/ and data/ folders that cannot be listed: nothing in them was read."""
        assert self.tree is not None
        problems = []
        for folder, _ in _folders(self.tree.root):
            for where in (folder, folder / "data"):
                try:
                    os.listdir(where)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    self.ctx.reject("folder in the PROF directory cannot be read", 1)
                    problems.append(f"collector: {where} cannot be read ({exc.strerror}): the files in it are "
                                    "missing from the outputs (let the user running pipeline read it)")
        return problems

    def _short_slices(self) -> list[str]:
        """Slices shorter than their `.done` gives: the bytes that never reached the file, by slice."""
        assert self.tree is not None
        streams = {(state.folder, state.base): state for state in self.tree.streams.values()}
        problems = []
        for folder in sorted({state.folder for state in streams.values()}):
            for path in _listdir(folder):
                parsed = split_slice_name(path.name)
                state = None if parsed is None else streams.get((folder, parsed[0]))
                done = None if state is None else slices.done_size(path)
                if state is None or done is None or str(path) in self.losses or path.is_symlink():
                    continue
                size = _size(path)
                if size < done:
                    self.ctx.reject(f"{state.kind.name}: a slice shorter than its .done gives", 1)
                    problems.append(f"collector: {path} holds {size:,} bytes but its .done gives {done:,}: "
                                    f"{_bytes_cost(done - size, state.kind)} never reached the file, so they are "
                                    "missing from the outputs (copy the slice again from the board's PROF_… "
                                    "directory and import again)")
        return problems

    def _garbage_streams(self) -> list[str]:
        """Streams with more than MAX_GARBAGE_SHARE of their bytes not whole records: a slice of another job or
        of random bytes, not a few damaged records."""
        assert self.tree is not None
        problems = []
        for state in self.tree.streams.values():
            if state.garbage <= MAX_GARBAGE_SHARE * state.bytes_in:
                continue
            files = ", ".join(state.garbage_files[:3]) + (
                f" and {len(state.garbage_files) - 3} more" if len(state.garbage_files) > 3 else "")
            problems.append(f"collector: {files}: {state.garbage:,} of the {state.bytes_in:,} bytes of "
                            f"{state.kind.name} read are not whole records (bad magic, unknown tag or truncated), "
                            f"more than {MAX_GARBAGE_SHARE:.0%}: {_bytes_cost(state.garbage, state.kind)} are missing "
                            "from the outputs (they are kept in the run's rejected/ folder; is the file from this "
                            "job? copy it again from the board's PROF_… directory)")
        return problems

    def input_problems(self) -> list[str]:
        return list(self.losses.values()) + self.end_problems

    def input_warnings(self) -> list[str]:
        return list(self.repeats.values())

    def progress(self) -> dict[str, Any]:
        streams = len(self.tree.streams) if self.tree else 0
        figures: dict[str, Any] = {"streams": streams, "records": self.collected,
                                   "MB_read": _megabytes(self.bytes_read), "MB_on_disk": _megabytes(self.bytes_on_disk)}
        return figures if self.notice is None else dict(figures, notice=self.notice)

    def accounting(self) -> dict[str, int]:
        figures = {"records_collected": self.collected, "garbage_bytes": self.garbage_bytes,
                   "repeated_records": self.repeated_records}
        if self.config.tx_endpoint:
            figures["tx_socket_records"] = self.tx_socket_records
        return figures


def _waiting_notice(base: Path, wait_s: float) -> str:
    what = "holds no PROF_… directory yet" if base.exists() else "does not exist"
    return (f"collector: {base} {what}: waiting up to {wait_s:.0f} s for a PROF_… directory there (a wrong path? "
            "Ctrl-C, then point PROF_DIR or the collector's path at a CANN profiling output directory)")


def _is_finished(prof: Path) -> bool:
    folders = _folders(prof)
    return bool(folders) and all(
        (folder / ("end_info" if name == "host" else f"end_info.{name.removeprefix('device_')}")).exists()
        for folder, name in folders)


def _finished_children(base: Path, before: float) -> set[Path]:
    """PROF_/JOB children whose job ended (every end_info written) before ``before`` (epoch s)."""
    if not base.is_dir() or (base / "host").is_dir():
        return set()
    return {p for p in base.iterdir() if p.is_dir() and p.name.startswith(("PROF_", "JOB")) and _is_finished(p)
            and _finished_at(p) < before}


def _children_before(base: Path, before: float) -> set[Path]:
    """PROF_/JOB children last changed before ``before`` (epoch s): an earlier job's, even one that crashed
    before its end_info."""
    if not base.is_dir() or (base / "host").is_dir():
        return set()
    return {p for p in base.iterdir() if p.is_dir() and p.name.startswith(("PROF_", "JOB"))
            and p.stat().st_mtime < before}


def _finished_at(prof: Path) -> float:
    return max((path.stat().st_mtime for folder, _ in _folders(prof) for path in folder.glob("end_info*")),
               default=0.0)


def _prof_root(base: Path, skip: set[Path] | None = None) -> Path | None:
    if not base.is_dir():
        return None
    if _is_prof_dir(base):
        return base
    candidates = sorted((p for p in base.iterdir() if p.is_dir() and p.name.startswith(("PROF_", "JOB"))
                         and p not in (skip or set())), key=lambda p: p.name)
    for candidate in reversed(candidates):
        if _is_prof_dir(candidate):
            return candidate
    return None


def _is_prof_dir(path: Path) -> bool:
    return (path / "host").is_dir() or any(p.name.startswith("device_") for p in path.iterdir() if p.is_dir()) \
        or _is_job_dir(path)


def _is_job_dir(path: Path) -> bool:
    """A legacy `JOB…` folder (or one device folder on its own): control files and data/ side by side."""
    return (path / "data").is_dir() and (path.name.startswith("JOB") or _job_device(path) is not None)


def _job_device(path: Path) -> int | None:
    """Device id of a job folder, from its `info.json.N`."""
    for child in _listdir(path):
        if child.name.startswith("info.json."):
            device = slices.device_id("device_" + child.name.removeprefix("info.json."))
            if device is not None:
                return device
    return None


def _slice_cost(state: StreamState, problem: str) -> str:
    """What an abandoned slice cost, as far as the disk tells: all of it when it was never opened (its size, or
    its .done's), else what it held past the offset read."""
    path = state.slice_path()
    if state.offset == 0 and state.file_id is None:
        size = _size(Path(path)) or slices.done_size(path)
        held = "what it held" if not size else f"its {_bytes_cost(size, state.kind)}"
        advice = ("let the user running pipeline read it" if problem.startswith("cannot be read")
                  else "copy it again from the board's PROF_… directory")
        return f"{held} {'is' if not size else 'are'} missing from the outputs ({advice} and import again)"
    return (f"what it held past byte {state.offset:,} is missing from the outputs (something other than the runtime "
            "changed it: import a complete copy of the PROF_… directory)")


def _bytes_cost(size: int, kind: StreamKind) -> str:
    """``size`` bytes of a stream, with the records they hold when its records have one size."""
    if kind.framing == "fixed" and kind.record_size:
        return f"{size:,} bytes (about {size // kind.record_size:,} {kind.name} records)"
    return f"{size:,} bytes of {kind.name}"


def _same_bytes(first: str, second: str) -> bool:
    """Two regular files (links not followed) of the same size and bytes."""
    try:
        with open(os.open(first, os.O_RDONLY | os.O_NOFOLLOW), "rb") as a, \
                open(os.open(second, os.O_RDONLY | os.O_NOFOLLOW), "rb") as b:
            if os.fstat(a.fileno()).st_size != os.fstat(b.fileno()).st_size:
                return False
            while True:
                block = a.read(1 << 20)
                if block != b.read(1 << 20):
                    return False
                if not block:
                    return True
    except OSError:
        return False


def _open_error(path: Path) -> str | None:
    """Why ``path`` cannot be opened for reading (None: it can)."""
    try:
        with open(path, "rb"):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _listdir(folder: Path) -> list[Path]:
    """Entries of ``folder`` in name order; none if it is gone or unreadable (the next pass looks again)."""
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _folders(root: Path) -> list[tuple[Path, str]]:
    """The folders holding control files and data/, each with the name it goes by: `host`, `device_N`."""
    folders = sorted((p, p.name) for p in _listdir(root) if p.is_dir() and not p.is_symlink()
                     and (p.name == "host" or slices.device_id(p.name) is not None))
    if folders or not (root / "data").is_dir():
        return folders
    device = _job_device(root)  # a JOB folder is named once its info.json.N is there
    return [] if device is None else [(root, f"device_{device}")]


def _megabytes(size: int) -> float:
    """A size in MB, to a tenth; under 0.1 MB to a thousandth (a small directory's progress is not 0.0 MB)."""
    return round(size / 1e6, 1 if size >= 100_000 else 3)
