"""The board-side collector: follows a PROF directory as ``stages.collector`` does and pushes the same
messages over tcp (CURVE) to the workstation's decoder.

    python -m pipeline_board.agent PROF_OR_OUTPUT_DIR --connect tcp://WORKSTATION:5701 \
        --secret-key board.key_secret --server-key workstation.key

Standard library, pyzmq and msgpack only; Python 3.7 syntax. It sends as stage ``collect`` (``--as``) on port
``out``, ends with an end-of-stream message carrying its totals, and prints one summary line on stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any, Dict, Iterator, Tuple

try:
    import zmq
    import zmq.auth

    from pipeline_board import framing, wire
except ImportError as missing:  # a board Python without pyzmq or msgpack: one line, not a traceback
    print(f"agent: error: Python module '{missing.name}' is missing for {sys.executable} (install pyzmq and "
          "msgpack for it, or point board.ini's python at an interpreter that has them)", file=sys.stderr)
    sys.exit(2)
from pipeline_board.kinds import StreamKind, device_stream_kind, host_stream_kind, split_slice_name
from pipeline_board.slices import (
    CONTROL_PREFIXES,
    GARBAGE,
    MAX_CONTROL_BYTES,
    MAX_DEVICE_ID,
    control_complete,
    device_id,
    frame_buffer,
    platform_version,
    read_slices,
)

SEND_POLL_MS = 200
STOP_GRACE_S = 5.0  # once asked to stop, how long a send may wait for a workstation that takes nothing
IDLE_POLLS_BEFORE_BACKOFF = 10  # passes that found nothing before the poll interval starts doubling
MAX_IDLE_POLL_S = 1.0
Chunk = Tuple[str, int, Dict[str, Any], bytes]  # (record kind, count, meta, body)


class AgentError(Exception):
    """Bad input or setup: printed as one line, exit status 2."""


class Stream:
    __slots__ = ("base", "kind", "device", "folder", "slice_index", "offset", "buffer", "buffer_origin", "sep",
                 "file_id", "abandoned", "last_index", "prefix", "rel_prefix")

    def __init__(self, base: str, kind: StreamKind, device: int | None, folder: str, sep: str,
                 last_index: int, root: str) -> None:
        self.base, self.kind, self.device, self.folder, self.sep = base, kind, device, folder, sep
        self.prefix = os.path.join(folder, base + sep)  # a slice's path is this and its index
        self.rel_prefix = os.path.relpath(self.prefix, root)  # the same, from the PROF directory
        self.slice_index = 0
        self.offset = 0
        self.buffer = b""
        self.buffer_origin = (0, 0)  # (slice, offset) of buffer[0]
        self.file_id: tuple[int, int] | None = None
        self.abandoned = False
        self.last_index = last_index

    def slice_path(self, index: int | None = None) -> str:
        return f"{self.prefix}{self.slice_index if index is None else index}"


class Follower:
    """The collector's reading rules (see ``stages/collector.py``), yielding chunks instead of stage batches."""

    def __init__(self, path: str, follow: bool = True, poll_ms: int = 20, wait_s: float = 60.0,
                 chunk_records: int = 1024, chunk_bytes: int = 1 << 20, quantum: int = 1 << 20,
                 end_marker: str | None = None, since: float | None = None) -> None:
        self.base = os.path.abspath(os.path.expanduser(path))
        self.follow, self.poll_s, self.wait_s = follow, poll_ms / 1000.0, wait_s
        self.chunk_records, self.chunk_bytes, self.quantum = chunk_records, chunk_bytes, quantum
        self.end_marker = end_marker
        # the job's start: a directory made before it is an earlier job's (the agent itself may start later)
        self.started = time.time() if since is None else min(since, time.time())
        self.root = ""
        self.stop = False
        self.control_sent: dict[str, int] = {}
        self.streams: dict[str, Stream] = {}
        self.platforms: dict[int, int] = {}
        self.rejected: dict[str, int] = {}
        self.seen: set[str] = set()  # files and families refused or reported, each counted once
        self.bytes_read = 0
        self.collected = 0
        self.backlog = False  # a stream had more than a quantum to read in the last pass
        self.idle_passes = 0
        self._slice_names: dict[str, tuple[str, int, str] | None] = {}  # file name → split_slice_name

    def reject(self, reason: str, count: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + count

    def _once(self, key: str, reason: str) -> None:
        if key not in self.seen:
            self.seen.add(key)
            self.reject(reason)

    # -- the directory ------------------------------------------------------------------------
    def _app_ended(self) -> bool:
        return self.end_marker is not None and os.path.exists(self.end_marker)

    def _find_root(self) -> Iterator[None]:
        deadline = time.monotonic() + (self.wait_s if self.follow else 0)
        old = _finished_children(self.base, self.started) if self.follow else set()
        while True:
            ended = self._app_ended()
            if self.end_marker is not None:
                old |= _children_before(self.base, self.started - 1.0)
            root = _prof_root(self.base, old)
            if root is not None:
                self.root = root
                return
            if ended:
                raise AgentError(f"the application ended without writing a PROF_… directory in {self.base}")
            if self.stop or (time.monotonic() >= deadline and self.end_marker is None):
                raise AgentError("{} {}".format(self.base, "does not exist" if not os.path.exists(self.base)
                                            else "holds no PROF_… directory"))
            yield None
            time.sleep(self.poll_s)

    def chunks(self) -> Iterator[Chunk | None]:
        """Chunks to send; None now and then while waiting."""
        if not self.root:
            for _ in self._find_root():
                yield None
        while True:
            finished = self._app_ended() or _is_finished(self.root)
            before = self.bytes_read
            self.backlog = False
            for chunk in self._pass(final=False):
                yield chunk
            if self.stop:
                return
            got_bytes = self.bytes_read > before
            if self.backlog or (got_bytes and (finished or not self.follow)):
                yield None  # read on at once: more is waiting, or the job is over
                continue
            if not got_bytes and (finished or not self.follow):
                for chunk in self._pass(final=True):
                    yield chunk
                return
            yield None
            time.sleep(self._poll_interval(got_bytes))

    def _poll_interval(self, got_bytes: bool) -> float:
        """The poll interval while bytes come; doubling (up to a second) once the files stay quiet."""
        self.idle_passes = 0 if got_bytes else self.idle_passes + 1
        extra = self.idle_passes - IDLE_POLLS_BEFORE_BACKOFF
        if extra <= 0:
            return self.poll_s
        return min(max(self.poll_s, MAX_IDLE_POLL_S), self.poll_s * 2.0 ** min(extra, 8))

    def _pass(self, final: bool) -> Iterator[Chunk]:
        """One look at the directory (one scandir per folder) and a quantum of bytes read per stream."""
        entries = _scan(self.root)
        for entry in entries:
            if (entry.name == "host" or device_id(entry.name) is not None) and entry.is_symlink():
                self._symlink(entry.path)
        folders = _folders(self.root, entries)
        listings = [(folder, name, _scan(folder)) for folder, name in folders]
        for chunk in self._control_files(listings):
            yield chunk
        for _, name, listing in listings:
            data = next((entry for entry in listing if entry.name == "data"), None)
            if data is not None and data.is_symlink():
                self._symlink(data.path)
            elif data is not None and data.is_dir():
                self._discover(name, data.path)
        for state in list(self.streams.values()):
            for chunk in self._read(state, final):
                yield chunk

    def _symlink(self, path: str) -> None:
        self._once(path, "symlink in the PROF directory not followed")

    def _control_files(self, listings: list[tuple[str, str, list[os.DirEntry[str]]]]) -> Iterator[Chunk]:
        for _, name, listing in listings:
            for entry in listing:
                base, path = entry.name, entry.path
                if not base.startswith(CONTROL_PREFIXES) or base.endswith(".done"):
                    continue
                if entry.is_symlink():
                    self._symlink(path)
                    continue
                rel = f"{name}/{base}"
                try:
                    size = entry.stat().st_size
                    if not entry.is_file() or size == 0 or self.control_sent.get(rel) == size:
                        continue
                    if size > MAX_CONTROL_BYTES:
                        self._once(path, f"control file larger than {MAX_CONTROL_BYTES >> 20} MiB not read")
                        continue
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        text = handle.read()
                except OSError:
                    continue
                if not control_complete(path, text):
                    continue
                self.control_sent[rel] = size
                if base.startswith("info.json") and name.startswith("device_"):
                    self._learn_platform(name, text)
                yield "control", 0, {"path": rel, "text": text}, b""

    def _learn_platform(self, folder: str, text: str) -> None:
        device = device_id(folder)
        if device is not None:
            self.platforms[device] = platform_version(text)

    def _discover(self, name: str, data: str) -> None:
        for entry in _scan(data):
            if entry.name not in self._slice_names:
                self._slice_names[entry.name] = split_slice_name(entry.name)
            parsed = self._slice_names[entry.name]
            if parsed is None:
                continue
            if entry.is_symlink():
                self._symlink(entry.path)
                continue
            base, index, sep = parsed
            key = f"{name}/data/{base}"
            if key in self.streams:
                self.streams[key].last_index = max(self.streams[key].last_index, index)
                continue
            kind: StreamKind | None
            device: int | None = None
            if name == "host":
                kind = host_stream_kind(base)
            else:
                dev = device_id(name)
                if dev not in self.platforms:
                    continue
                found = device_stream_kind(base, self.platforms[dev])
                kind, device = found if found and found[1] <= MAX_DEVICE_ID else (None, None)
            if kind is None:
                self._once("family:" + key, f"file family not decoded by this release: {key}")
                continue
            self.streams[key] = Stream(base, kind, device, data, sep, index, self.root)

    def _read(self, state: Stream, final: bool) -> Iterator[Chunk]:
        for step, value in read_slices(state, self.quantum, final):
            if step == "read":
                self.bytes_read += value
            elif step == "symlink":
                self._symlink(value)
            elif step == "abandon":
                self.reject(f"{state.kind.name}: a slice {value}; the rest of it is not read")
                yield from self._emit(state, True)
            elif step == "frame":
                yield from self._emit(state, value)
            else:
                self.backlog = True

    def _emit(self, state: Stream, final: bool) -> Iterator[Chunk]:
        for framed, slice_index, offset in frame_buffer(state, final):
            for run in framed.garbage:
                self.reject(f"{state.kind.name}: {GARBAGE}", len(run))
            if framed.count:
                self.collected += framed.count
                yield from self._cut(state, framed, slice_index, offset)

    def _cut(self, state: Stream, framed: framing.Framed, slice_index: int, offset: int) -> Iterator[Chunk]:
        meta = {"stream": state.base, "kind": state.kind.name, "device": state.device,
                "file": f"{state.rel_prefix}{slice_index}", "offset": offset}
        if state.kind.framing in ("text", "nul_text"):
            yield "raw", framed.count, meta, framed.records
            return
        if state.kind.framing == "tlv":
            yield "raw", framed.count, dict(meta, size=0), framed.records
            return
        size = state.kind.record_size
        per_chunk = max(1, min(self.chunk_records, self.chunk_bytes // size))
        for first in range(0, framed.count, per_chunk):
            n = min(per_chunk, framed.count - first)
            yield "raw", n, dict(meta, size=size, first=first), framed.records[first * size:(first + n) * size]


def _is_finished(prof: str) -> bool:
    folders = _folders(prof)
    return bool(folders) and all(os.path.exists(os.path.join(
        folder, "end_info" if name == "host" else "end_info." + name[len("device_"):])) for folder, name in folders)


def _prof_children(base: str) -> list[str]:
    if not os.path.isdir(base) or os.path.isdir(os.path.join(base, "host")):
        return []
    return [p for p in _listdir(base) if os.path.isdir(p) and os.path.basename(p).startswith(("PROF_", "JOB"))]


def _finished_children(base: str, before: float) -> set[str]:
    return {p for p in _prof_children(base) if _is_finished(p) and max(
        (os.stat(os.path.join(folder, f)).st_mtime for folder, _ in _folders(p) for f in os.listdir(folder)
         if f.startswith("end_info")), default=0.0) < before}


def _children_before(base: str, before: float) -> set[str]:
    return {p for p in _prof_children(base) if os.stat(p).st_mtime < before}


def _prof_root(base: str, skip: set[str]) -> str | None:
    if not os.path.isdir(base):
        return None
    if _is_prof_dir(base):
        return base
    for candidate in reversed([p for p in _prof_children(base) if p not in skip]):
        if _is_prof_dir(candidate):
            return candidate
    return None


def _is_prof_dir(path: str) -> bool:
    if os.path.isdir(os.path.join(path, "host")):
        return True
    if any(os.path.basename(p).startswith("device_") and os.path.isdir(p) for p in _listdir(path)):
        return True
    return os.path.isdir(os.path.join(path, "data")) and (os.path.basename(path).startswith("JOB")
                                                          or _job_device(path) is not None)


def _job_device(path: str) -> int | None:
    for child in _listdir(path):
        name = os.path.basename(child)
        if name.startswith("info.json."):
            device = device_id("device_" + name[len("info.json."):])
            if device is not None:
                return device
    return None




def _listdir(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, name) for name in sorted(os.listdir(folder))]
    except OSError:
        return []


def _scan(folder: str) -> list[os.DirEntry[str]]:
    """The folder's entries sorted by name (one scandir: their kinds come without a stat each)."""
    try:
        with os.scandir(folder) as found:
            return sorted(found, key=lambda entry: entry.name)
    except OSError:
        return []


def _folders(root: str, entries: list[os.DirEntry[str]] | None = None) -> list[tuple[str, str]]:
    """(path, name) of the host and device_N folders of a PROF directory (``entries``: its listing)."""
    folders = [(entry.path, entry.name) for entry in (_scan(root) if entries is None else entries)
               if entry.is_dir(follow_symlinks=False) and (entry.name == "host" or device_id(entry.name) is not None)]
    if folders or not os.path.isdir(os.path.join(root, "data")):
        return folders
    device = _job_device(root)
    return [] if device is None else [(root, f"device_{device}")]










# -- sending ------------------------------------------------------------------------------------
class Sender:
    """A PUSH socket to the decoder's endpoint: CURVE client on tcp, messages numbered per port."""

    def __init__(self, endpoint: str, producer: str, secret_key: str | None, server_key: str | None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PUSH)
        if secret_key:
            public, secret = _certificate(secret_key, need_secret=True)
            self.sock.curve_publickey, self.sock.curve_secretkey = public, secret
            if not server_key:
                raise AgentError("--server-key is needed with --secret-key (the workstation's public .key)")
            self.sock.curve_serverkey = _certificate(server_key)[0]
        elif endpoint.startswith("tcp://"):
            raise AgentError("tcp without CURVE keys: pass --secret-key and --server-key (or --insecure)")
        self.sock.setsockopt(zmq.SNDHWM, 256)
        self.sock.setsockopt(zmq.IMMEDIATE, 1)
        self.sock.setsockopt(zmq.SNDTIMEO, SEND_POLL_MS)
        self.sock.setsockopt(zmq.LINGER, 30000)
        self.sock.connect(endpoint)
        self.producer = producer
        self.seq = 0
        self.batches = 0
        self.records = 0
        self.stopping_since: float | None = None  # when a stop was asked for

    def _send(self, frames: list[bytes]) -> None:
        while True:
            try:
                self.sock.send_multipart(frames, copy=False)
                return
            except zmq.Again:
                if self.stopping_since is not None and time.monotonic() - self.stopping_since > STOP_GRACE_S:
                    raise AgentError("stopped while the workstation was not taking data") from None

    def send(self, chunk: Chunk) -> None:
        kind, count, meta, body = chunk
        self._send(wire.data(self.producer, "out", self.seq, kind, count, meta, body))
        self.seq += 1
        self.batches += 1
        self.records += count

    def close(self, eos: bool) -> None:
        if eos:
            self._send(wire.eos(self.producer, "out", self.seq, self.batches, self.records))
        self.sock.close(None if eos else 0)  # an aborted stream is not waited for
        self.ctx.term()


def _certificate(path: str, need_secret: bool = False) -> tuple[bytes, bytes | None]:
    if not os.path.isfile(path):
        raise AgentError(f"{path} does not exist (make a pair with `pipeline keys generate`)")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (ValueError, OSError) as exc:
        raise AgentError(f"{path} is not a zmq certificate ({exc})") from None
    if need_secret and secret is None:
        raise AgentError(f"{path} holds no secret key: point --secret-key at the .key_secret file")
    return public, secret


def run(args: argparse.Namespace) -> int:
    follower = Follower(args.path, follow=not args.once, poll_ms=args.poll_ms, wait_s=args.wait_s,
                        chunk_records=args.chunk_records, end_marker=args.end_marker, since=args.since)
    sender = Sender(args.connect, args.producer, None if args.insecure else args.secret_key,
                    None if args.insecure else args.server_key)

    def stop(signum: int, frame: Any) -> None:
        follower.stop = True  # what was read is sent, then the end of stream
        if sender.stopping_since is None:
            sender.stopping_since = time.monotonic()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, stop)  # the ssh session went away
    started = time.monotonic()
    finished = False
    try:
        for chunk in follower.chunks():
            if chunk is not None:
                sender.send(chunk)
        finished = True
    finally:
        sender.close(eos=finished)
    rejected = ", ".join(f"{reason}: {count}" for reason, count in sorted(follower.rejected.items())) or "none"
    print(f"agent: {sender.records} records in {sender.batches} messages from {follower.root} in "
          f"{time.monotonic() - started:.1f} s; rejected: {rejected}", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline_board.agent",
                                description="Follow a PROF directory on the board and push it to the pipeline.")
    p.add_argument("path", help="PROF_… directory, or the profiling output folder where one appears")
    p.add_argument("--connect", required=True, help="the decoder's endpoint, tcp://WORKSTATION:PORT")
    p.add_argument("--secret-key", help="this board's NAME.key_secret (CURVE)")
    p.add_argument("--server-key", help="the workstation's public NAME.key (CURVE)")
    p.add_argument("--insecure", action="store_true", help="tcp without CURVE (a network you trust)")
    p.add_argument("--as", dest="producer", default="collect", help="stage id the decoder takes as input")
    p.add_argument("--once", action="store_true", help="read what is there and end (do not follow)")
    p.add_argument("--end-marker", help="a file whose appearance ends the job (the application exited)")
    p.add_argument("--since", type=float, help="when the job started (seconds since the epoch): directories made "
                                               "before it are an earlier job's (default: when the agent starts)")
    p.add_argument("--wait-s", type=float, default=60.0, help="how long to wait for the directory")
    p.add_argument("--poll-ms", type=int, default=100, help="how often to look for new bytes (the board's CPU)")
    p.add_argument("--chunk-records", type=int, default=1024, help="records per message (the run's batch)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except AgentError as exc:
        print(f"agent: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
