"""msproftx annotations for your own code: the acl.prof extension API of the pyACL profiling API
reference, without CANN.

    from pipeline import tx

    stamp = tx.create_stamp()
    tx.set_stamp_trace_message(stamp, "model_load_mark")
    tx.mark(stamp)                        # an instant (event type marker)
    tx.push(stamp); work(); tx.pop()      # a span on this thread (push/pop)
    range_id, ret = tx.range_start(stamp) # a span that may end on another thread (start/end)
    tx.range_stop(range_id)
    with tx.range("preprocess"):          # the same, as a block
        ...

Every call returns ACL's status code as acl.prof does (0 = ACL_SUCCESS; 100000 = ACL_ERROR_INVALID_PARAM for a
pop without push or an unknown range id), so code written for ``acl.prof`` runs unchanged against ``tx``.

Records are the 256-byte msproftx records CANN writes (MsprofTxInfo, level 20500; msprof's msproftx_decoder.py),
appended to ``host/data/aging.additional.msproftx.slice_0`` of the PROF directory the runtime is writing. A call
only reads the clock and queues its fields; a daemon thread packs what is queued every FLUSH_S and
appends it with one ``os.write`` on an ``O_APPEND`` descriptor, so records stay whole whichever
threads and processes write. The collector follows that file like the runtime's own; the records
appear in the timeline's MsprofTx layer, the database's MSTX_EVENTS and the msprof_tx summary. Times
are converted to the directory's host clock (host/info.json CPU Frequency, host/host_start.log), as
msprof converts them back. Records made before the runtime has created its PROF directory wait (at
most MAX_PENDING; more are counted in ``dropped()``); what is queued at exit is written then, a crash
loses the last FLUSH_S of annotations as it loses the runtime's own buffers.

With ``$PIPELINE_TX_ENDPOINT`` set (``pipeline run CONFIG -- APP`` sets it when the config's collector has a
``tx_endpoint``), or ``tx.init(output_dir, endpoint=...)``, the packed records go to that collector over a
ZeroMQ PUSH socket instead of into the file (pyzmq is then imported; tcp endpoints need CURVE key files named
by ``$PIPELINE_TX_SECRET_KEY`` and ``$PIPELINE_TX_SERVER_KEY``). An endpoint that cannot be used is said once on
stderr and the records go to the file as before.

Profiling is on when ``$PIPELINE_ACL_JSON`` names an acl.json whose profiler switch is on (``pipeline run
CONFIG -- APP`` sets it), or ``PROFILING_MODE=true`` with ``PROFILING_OPTIONS`` naming an output, or after
``tx.init(output_dir)``. Otherwise every call is one flag test and returns 0.

Standard library only, and Python 3.7 syntax, so a board's old interpreter imports it quickly.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import struct
import sys
import threading
import time
from collections import deque
from types import TracebackType
from typing import Any

RECORD = struct.Struct("=HH3IQ2HI2H4Ii5Qi156s")  # additional header + MsprofStampInfo (prof_common.h), 256 bytes
MAGIC = 0x5A5A
LEVEL_MSPROFTX = 20500
TX_TYPE = 0
DATA_LEN = RECORD.size - 24  # payload bytes after the 24-byte additional header
DATA_TAG = 120  # MSPROF_MSPROFTX_DATA_TAG of the stamp
MESSAGE_BYTES = 155  # char[156], NUL-terminated
MARKER, PUSH_POP, START_END, MARKER_EX = 0, 1, 2, 3  # eventType (ENUM_MSTX_EVENT_TYPE)
INFO_MARK, INFO_MARK_EX = 0, 1  # infoType
ACL_SUCCESS, ACL_ERROR_INVALID_PARAM = 0, 100000
FILE_NAME = "aging.additional.msproftx.slice_0"
ACL_JSON_ENV = "PIPELINE_ACL_JSON"
ENDPOINT_ENV = "PIPELINE_TX_ENDPOINT"  # a collector's tx_endpoint: records go there instead of into the file
SECRET_KEY_ENV, SERVER_KEY_ENV = "PIPELINE_TX_SECRET_KEY", "PIPELINE_TX_SERVER_KEY"  # CURVE certificates (tcp)
SEND_HWM = 64  # messages queued in ZeroMQ for a collector not there yet (each at most WRITE_RECORDS records)
SEND_TIMEOUT_MS = 1000
LINGER_MS = 2000  # at exit, how long queued messages may take to reach the collector
SINCE_ENV = "PIPELINE_PROFILE_SINCE"  # epoch s (set by `pipeline run -- APP`): older PROF_ dirs are earlier jobs'
STALE_SLACK_S = 1.0
MAX_PENDING = 10000
FLUSH_S = 0.02  # how often queued records are written (and the PROF directory looked for)
WRITE_RECORDS = 4096  # records per os.write (1 MiB)
DEFAULT_HOST_MHZ = 1000.0  # a host counter of 1000 MHz (or none given) counts CLOCK_MONOTONIC_RAW ns

_enabled = False  # the one test every call makes when profiling is off
_writer: _Writer | None = None
_local = threading.local()
_range_ids = itertools.count(1)
_ranges: dict[int, tuple[Stamp, int, int]] = {}
_pid = os.getpid()

if hasattr(time, "CLOCK_MONOTONIC_RAW"):
    def _now() -> int:
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
else:  # not Linux: no CANN runtime either; keep the API working
    _now = time.monotonic_ns


class Stamp:
    """What ``create_stamp`` returns: the message and the category / payload a record carries."""

    __slots__ = ("message", "category", "payload_type", "payload")

    def __init__(self, message: str = "") -> None:
        self.message = message
        self.category = 0
        self.payload_type = 0
        self.payload = 0

    def __repr__(self) -> str:
        return f"Stamp({self.message!r})"


# -- the acl.prof extension API -------------------------------------------------------------------

def create_stamp() -> Stamp:
    return Stamp()


def destroy_stamp(stamp: Stamp) -> int:
    return ACL_SUCCESS


def set_stamp_trace_message(stamp: Stamp, message: str, msg_len: int | None = None) -> int:
    """The stamp's message (at most 155 bytes of UTF-8 reach the record); ``msg_len`` as acl.prof takes it."""
    if not isinstance(stamp, Stamp) or not isinstance(message, str):
        return ACL_ERROR_INVALID_PARAM
    stamp.message = message if msg_len is None else message[:msg_len]
    return ACL_SUCCESS


def set_stamp_category(stamp: Stamp, category: int) -> int:
    if not isinstance(stamp, Stamp):
        return ACL_ERROR_INVALID_PARAM
    stamp.category = int(category)
    return ACL_SUCCESS


def set_stamp_payload(stamp: Stamp, payload_type: int, payload: int) -> int:
    if not isinstance(stamp, Stamp):
        return ACL_ERROR_INVALID_PARAM
    stamp.payload_type, stamp.payload = int(payload_type), int(payload)
    return ACL_SUCCESS


def mark(stamp: Stamp | str) -> int:
    """An instant event (marker). A plain string works as a stamp carrying that message."""
    if not _enabled:
        return ACL_SUCCESS
    now = _now()
    return _emit(_as_stamp(stamp), MARKER, INFO_MARK, now, now, _thread_id())


def mark_ex(message: str, stream: Any = None) -> int:
    """acl.prof.mark_ex: an instant with a message (event type marker_ex). Only its host record is written:
    without a runtime there is no device-side marker task on ``stream``."""
    if not _enabled:
        return ACL_SUCCESS
    now = _now()
    return _emit(Stamp(message), MARKER_EX, INFO_MARK_EX, now, now, _thread_id())


def push(stamp: Stamp | str) -> int:
    """Open a span on this thread; ``pop`` closes the innermost one (single-thread use, as in the pyACL reference)."""
    if not _enabled:
        return ACL_SUCCESS
    _stack().append((_as_stamp(stamp), _now()))
    return ACL_SUCCESS


def pop(stamp: Stamp | None = None) -> int:
    """Close this thread's innermost ``push``; ACL_ERROR_INVALID_PARAM when there is none, or when ``stamp``
    is given and is not the one pushed last."""
    if not _enabled:
        return ACL_SUCCESS
    stack = _stack()
    if not stack or (stamp is not None and stack[-1][0] is not stamp):
        return ACL_ERROR_INVALID_PARAM
    pushed, start = stack.pop()
    return _emit(pushed, PUSH_POP, INFO_MARK, start, _now(), _thread_id())


def range_start(stamp: Stamp | str) -> tuple[int, int]:
    """Open a span that any thread may close with ``range_stop(range_id)``; returns (range_id, status)."""
    if not _enabled:
        return 0, ACL_SUCCESS
    range_id = next(_range_ids)
    _ranges[range_id] = (_as_stamp(stamp), _now(), _thread_id())
    return range_id, ACL_SUCCESS


def range_stop(range_id: int) -> int:
    if not _enabled:
        return ACL_SUCCESS
    opened = _ranges.pop(range_id, None)
    if opened is None:
        return ACL_ERROR_INVALID_PARAM
    stamp, start, thread_id = opened
    return _emit(stamp, START_END, INFO_MARK, start, _now(), thread_id)


class _Range:
    __slots__ = ("message", "range_id")

    def __init__(self, message: str) -> None:
        self.message = message
        self.range_id = 0

    def __enter__(self) -> None:
        self.range_id, _ = range_start(self.message)

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        range_stop(self.range_id)


class _NoRange:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        return None


_NO_RANGE = _NoRange()


def range(message: str) -> _Range | _NoRange:  # pyACL's name (shadows the builtin in this module only)
    """``with tx.range("preprocess"):`` — range_start / range_stop around the block."""
    return _Range(message) if _enabled else _NO_RANGE


# -- switching on and off -------------------------------------------------------------------------

def init(output_dir: str, since: float = 0.0, endpoint: str | None = None) -> None:
    """Write annotations into the PROF directory the runtime creates under ``output_dir`` (acl.json's output),
    or send them to a collector's ``endpoint``; directories last changed before ``since`` (epoch s) are an
    earlier job's, even without end_info (the directory's host clock converts the times either way)."""
    global _enabled, _writer
    with _switch_lock:
        if _writer is not None:
            _writer.flush()
            _writer.close()
        _writer = _Writer(os.path.abspath(output_dir), since, endpoint)
        _enabled = True


def finalize() -> None:
    """Write what waits, close the file and switch annotations off."""
    global _enabled, _writer
    with _switch_lock:
        _enabled = False
        if _writer is not None:
            _writer.flush()
            _writer.close()
        _writer = None


def enabled() -> bool:
    return _enabled


def flush() -> bool:
    """Write records that wait for the PROF directory; True when nothing waits any more."""
    writer = _writer
    return writer is None or writer.flush()


def dropped() -> int:
    """Records lost because the PROF directory did not appear (or the collector did not take them) while
    MAX_PENDING records waited."""
    writer = _writer
    return 0 if writer is None else writer.dropped


def prof_dir() -> str | None:
    """The PROF directory records go to, once found."""
    writer = _writer
    return None if writer is None else writer.prof_dir


# -- internals --------------------------------------------------------------------------------------

_switch_lock = threading.Lock()


def _as_stamp(stamp: Stamp | str) -> Stamp:
    return stamp if isinstance(stamp, Stamp) else Stamp(str(stamp))


def _stack() -> list[tuple[Stamp, int]]:
    try:
        stack: list[tuple[Stamp, int]] = _local.stack
        return stack
    except AttributeError:
        _local.stack = []
        return _local.stack  # type: ignore[no-any-return]


def _thread_id() -> int:
    try:
        return _local.tid  # type: ignore[no-any-return]
    except AttributeError:
        native = getattr(threading, "get_native_id", None)  # Python ≥ 3.8
        _local.tid = native() if native is not None else threading.get_ident() & 0xFFFFFFFF
        return _local.tid  # type: ignore[no-any-return]


def _emit(stamp: Stamp, event_type: int, info_type: int, start: int, end: int, thread_id: int) -> int:
    writer = _writer
    if writer is None:
        return ACL_SUCCESS
    writer.write((stamp.message, stamp.category, stamp.payload_type, stamp.payload, event_type, info_type,
                  start, end, thread_id, _pid))
    return ACL_SUCCESS


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()
    _local.__dict__.clear()
    if _writer is not None:
        _writer.after_fork()


class _HostClock:
    """CLOCK_MONOTONIC_RAW ns → the PROF directory's host counter ticks (the inverse of msprof's conversion)."""

    def __init__(self, host_folder: str) -> None:
        mhz = DEFAULT_HOST_MHZ
        with open(os.path.join(host_folder, "info.json"), encoding="utf-8") as handle:
            info = json.load(handle)
        cpus = info.get("CPU") or [{}]
        try:
            given = float(str(cpus[0].get("Frequency") or DEFAULT_HOST_MHZ))
            mhz = given if given > 0 else DEFAULT_HOST_MHZ
        except (AttributeError, ValueError, IndexError, TypeError):
            pass
        log: dict[str, int] = {}
        with open(os.path.join(host_folder, "host_start.log"), encoding="utf-8") as handle:
            for line in handle:
                key, _, number = line.partition(":")
                if number.strip().lstrip("-").isdigit():
                    log[key.strip().lower()] = int(number)
        self.khz = round(mhz * 1000)
        self.identity = self.khz == round(DEFAULT_HOST_MHZ * 1000)
        self.cnt0 = log.get("cntvct", 0)
        self.mono0 = log.get("clock_monotonic_raw", 0) + log.get("cntvct_diff", 0) * 1_000_000 // self.khz

    def ticks(self, raw_ns: int) -> int:
        if self.identity:
            return raw_ns
        return self.cnt0 + (raw_ns - self.mono0) * self.khz // 1_000_000


class _Writer:
    """Queues record fields; a daemon thread packs and appends them to the PROF directory's msproftx file."""

    def __init__(self, output_dir: str, since: float = 0.0, endpoint: str | None = None) -> None:
        self.output_dir = output_dir
        self.since = since
        self.endpoint = endpoint
        self.prof_dir: str | None = None
        self.fd: int | None = None
        self.socket: _Socket | None = None
        self.clock: _HostClock | None = None
        self.queue: deque[tuple[Any, ...]] = deque()  # append / popleft are atomic: no lock on the call path
        self.dropped = 0
        self.closed = False
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()
        self.lock = threading.Lock()  # one flush at a time

    def write(self, fields: tuple[Any, ...]) -> None:
        self.queue.append(fields)
        if self.thread is None:
            self._start()

    def _start(self) -> None:
        with self.lock:
            if self.thread is None and not self.closed:
                self.thread = threading.Thread(target=self._run, name="pipeline.tx", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while not self.closed:
            self.wake.wait(FLUSH_S)
            self.flush()

    def flush(self) -> bool:
        """Write what is queued (looking for the PROF directory first if needed); True when nothing waits."""
        with self.lock:
            if self.fd is None and self.socket is None:
                self._look()
            if self.fd is None and self.socket is None:
                while len(self.queue) > MAX_PENDING:
                    self.queue.popleft()
                    self.dropped += 1
                return not self.queue
            packed: list[bytes] = []
            while True:
                try:
                    packed.append(self._pack(self.queue.popleft()))
                except IndexError:
                    break
                if len(packed) == WRITE_RECORDS:
                    self._put(b"".join(packed))
                    packed.clear()
            if packed:
                self._put(b"".join(packed))
            return self.socket is None or self.socket.flush()

    def _put(self, data: bytes) -> None:
        if self.socket is not None:
            self.socket.send(data)
        else:
            assert self.fd is not None
            _write_all(self.fd, data)

    def close(self) -> None:
        self.closed = True
        self.wake.set()
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
            if self.socket is not None:
                self.dropped += self.socket.close()
            self.socket = None

    def after_fork(self) -> None:
        """In a forked child: the parent's queue is the parent's to write, and its thread is not here (nor may
        the parent's socket be used: the child opens its own)."""
        self.queue.clear()
        self.thread = None
        self.socket = None
        self.lock = threading.Lock()

    def _look(self) -> None:
        """Find the runtime's running PROF directory and open its msproftx file (lock held)."""
        found = _running_prof_dir(self.output_dir, self.since)
        if found is None:
            return
        host = os.path.join(found, "host")
        try:
            clock = _HostClock(host)
        except (OSError, ValueError):
            return  # control files still being written: next look
        if self.endpoint:
            try:
                self.clock, self.prof_dir, self.socket = clock, found, _Socket(self.endpoint)
                return
            except Exception as exc:  # noqa: BLE001 - no pyzmq, bad keys, bad endpoint: the file still works
                sys.stderr.write(f"pipeline.tx: cannot send annotations to {self.endpoint} ({exc}); writing them "
                                 f"to the PROF directory instead\n")
                self.endpoint = None
        try:
            os.makedirs(os.path.join(host, "data"), exist_ok=True)
            fd = os.open(os.path.join(host, "data", FILE_NAME), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        except OSError:
            return
        self.clock, self.prof_dir, self.fd = clock, found, fd

    def _pack(self, fields: tuple[Any, ...]) -> bytes:
        message, category, payload_type, payload, event_type, info_type, start, end, thread_id, pid = fields
        clock = self.clock
        assert clock is not None
        if not clock.identity:
            start, end = clock.ticks(start), clock.ticks(end)
        text = message.encode("utf-8")
        if len(text) > MESSAGE_BYTES:  # cut at a character boundary
            text = text[:MESSAGE_BYTES].decode("utf-8", "ignore").encode("utf-8")
        return RECORD.pack(MAGIC, LEVEL_MSPROFTX, TX_TYPE, thread_id, DATA_LEN, end, info_type, 0, 0,
                           MAGIC, DATA_TAG, pid, thread_id, category, event_type, payload_type, payload,
                           start, end, 0, 0, 0, text)


class _Socket:
    """A ZeroMQ PUSH to a collector's tx_endpoint; messages it does not take in time wait for the next flush."""

    def __init__(self, endpoint: str) -> None:
        import zmq  # only in this mode: the file mode stays standard library only
        import zmq.auth

        self.zmq = zmq
        self.context = zmq.Context()
        self.sock = self.context.socket(zmq.PUSH)
        self.unsent: deque[bytes] = deque()
        self.unsent_records = 0
        self.lost = 0  # records given up while the collector did not take them
        try:
            self.sock.setsockopt(zmq.SNDHWM, SEND_HWM)
            self.sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
            self.sock.setsockopt(zmq.LINGER, LINGER_MS)
            if endpoint.startswith("tcp://"):
                secret, server = os.environ.get(SECRET_KEY_ENV), os.environ.get(SERVER_KEY_ENV)
                if not secret or not server:
                    raise ValueError(f"a tcp endpoint needs ${SECRET_KEY_ENV} and ${SERVER_KEY_ENV}")
                public, secret_key = zmq.auth.load_certificate(secret)
                if secret_key is None:
                    raise ValueError(f"{secret} holds no secret key")
                self.sock.curve_publickey, self.sock.curve_secretkey = public, secret_key
                self.sock.curve_serverkey = zmq.auth.load_certificate(server)[0]
            self.sock.connect(endpoint)
        except Exception:
            self.sock.close(0)
            self.context.term()
            raise

    def send(self, data: bytes) -> None:
        self.unsent.append(data)
        self.unsent_records += len(data) // RECORD.size
        self.flush()

    def flush(self) -> bool:
        """Send what waits, oldest first; True when nothing waits."""
        while self.unsent:
            try:
                self.sock.send(self.unsent[0], copy=False)
            except self.zmq.Again:  # the collector is not there (yet) or not reading
                while self.unsent_records > MAX_PENDING and len(self.unsent) > 1:
                    self.lost += self._forget()
                return False
            self._forget()
        return True

    def _forget(self) -> int:
        records = len(self.unsent.popleft()) // RECORD.size
        self.unsent_records -= records
        return records

    def close(self) -> int:
        """Close (queued messages get LINGER_MS to leave); returns the records that never left."""
        self.flush()
        self.sock.close(LINGER_MS)
        self.context.term()
        return self.lost + self.unsent_records


def _write_all(fd: int, data: bytes) -> None:
    """One append (whole records stay whole beside other writers); the rest only if the kernel took less."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _running_prof_dir(output_dir: str, since: float = 0.0) -> str | None:
    """The newest PROF_… directory under ``output_dir`` whose host clock files are written and whose job has
    not ended (no host/end_info), made after ``since`` (epoch s; an earlier job may have crashed, no end_info)."""
    try:
        names = sorted((name for name in os.listdir(output_dir) if name.startswith("PROF_")), reverse=True)
    except OSError:
        return None
    for name in names:
        host = os.path.join(output_dir, name, "host")
        if os.path.exists(os.path.join(host, "end_info")):
            continue
        try:
            if since and os.stat(os.path.join(output_dir, name)).st_mtime < since - STALE_SLACK_S:
                continue
        except OSError:
            continue
        if os.path.isfile(os.path.join(host, "info.json")) and os.path.isfile(os.path.join(host, "host_start.log")):
            return os.path.join(output_dir, name)
    return None


def _output_from_environment(env: Any = os.environ) -> str | None:
    """acl.json's (or PROFILING_OPTIONS') output folder when profiling is switched on there, else None."""
    path = env.get(ACL_JSON_ENV)
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                profiler = json.load(handle).get("profiler") or {}
        except (OSError, ValueError, AttributeError):
            return None
        if str(profiler.get("switch", "")).lower() == "on" and profiler.get("output"):
            return str(profiler["output"])
        return None
    if str(env.get("PROFILING_MODE", "")).lower() == "true":
        try:
            options = json.loads(env.get("PROFILING_OPTIONS") or "{}")
        except ValueError:
            return None
        if isinstance(options, dict) and options.get("output"):
            return str(options["output"])
    return None


def _at_exit() -> None:
    writer = _writer
    if writer is not None:
        writer.flush()
        if writer.socket is not None:
            writer.close()  # a socket's queued messages leave now, not with the interpreter's teardown


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
atexit.register(_at_exit)
_configured = _output_from_environment()
if _configured is not None:
    try:
        _since = float(os.environ.get(SINCE_ENV) or 0)
    except ValueError:
        _since = 0.0
    init(_configured, _since, os.environ.get(ENDPOINT_ENV) or None)
