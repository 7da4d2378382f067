"""What the decoder accepts from its input, checked before anything is decoded.

A chunk is what a collector ships: a known raw kind, a device id that fits in 16 bits, a count that
matches its bytes (fixed records fill them exactly; TLV, text and mixed chunks frame again into the
same records). A control message names `host/…` or `device_N/…` and carries text. Control files hold
numbers the time base needs: values that are not numbers, or too large for 64-bit time arithmetic,
make that clock unknown (its chunks are then rejected at the end, as with missing control files)
instead of failing the stage. Reasons are fixed phrases, so a stream of forged messages adds counts,
not report rows.

A record whose bytes frame well can still be damaged (bytes overwritten after its magic). Before a
chunk is decoded, ``Screen`` rejects the records whose fields are impossible: a report level CANN
does not define, an API whose end precedes its begin, a time outside the collection window (start_info
to end_info, with a margin; a generous bound while end_info has not come). Each check is a few numpy
comparisons over the chunk's raw fields.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.stage import Batch
from stages.decoder.timebase import Clock, TimeBase
from stages.formats import files, host_extra, legacy, raw
from stages.formats.files import StreamKind
from stages.framing import frame

MAX_DEVICE_ID = 0xFFFF
_INT64 = (-(2**63), 2**63 - 1)
_MAX_FREQ_KHZ = 10**9  # 1 THz: above any counter a board has
_CONTROL_PATH = re.compile(r"(?:host|device_(\d{1,5}))/[^/]+", re.ASCII)
_CLOCK_ERRORS = (ValueError, TypeError, OverflowError, ArithmeticError, AttributeError, KeyError, IndexError)


def _stream_kinds() -> dict[str, StreamKind]:
    found = {kind.name: kind for module in (files, legacy) for kind in vars(module).values()
             if isinstance(kind, StreamKind)}
    found.update((kind.name, kind) for kind in host_extra.STREAM_KINDS.values())
    return found


RAW_KINDS = _stream_kinds()


def control_problem(meta: dict[str, Any]) -> str | None:
    """Why a control message cannot be learned from (None: it can)."""
    path, text = meta.get("path"), meta.get("text")
    if not isinstance(path, str) or not isinstance(text, str):
        return "control message without a path and a text"
    match = _CONTROL_PATH.fullmatch(path)
    if match is None or (match.group(1) is not None and int(match.group(1)) > MAX_DEVICE_ID):
        return "control message for a file outside host/ and device_N/"
    return None


def raw_problem(batch: Batch) -> str | None:
    """Why a raw chunk cannot be decoded (None: it can). The reason names the kind only when it is one."""
    kind_name = batch.meta.get("kind")
    if not isinstance(kind_name, str) or kind_name not in RAW_KINDS:
        return "raw chunk of an unknown kind"
    device, stream = batch.meta.get("device"), batch.meta.get("stream", "")
    if device is not None and (type(device) is not int or not 0 <= device <= MAX_DEVICE_ID):
        return f"{kind_name}: malformed chunk (device id is not a number from 0 to {MAX_DEVICE_ID})"
    if not isinstance(stream, str):
        return f"{kind_name}: malformed chunk (stream name is not text)"
    kind = RAW_KINDS[kind_name]
    if batch.count < 0:
        return f"{kind_name}: malformed chunk (negative record count)"
    if kind.framing == "fixed":
        if len(batch.body) != batch.count * kind.record_size:
            return f"{kind_name}: malformed chunk (its bytes are not its count of {kind.record_size}-byte records)"
        return None
    framed = frame(kind, batch.body, final=True)
    if framed.count != batch.count or framed.garbage or framed.consumed != len(batch.body):
        return f"{kind_name}: malformed chunk (its bytes are not its count of whole records)"
    return None


def usable(clock: Clock | None) -> Clock | None:
    """The clock, if its integers fit the 64-bit arithmetic that converts times; else None (unknown)."""
    if clock is None:
        return None
    low, high = _INT64
    values = (clock.cnt0, clock.mono0, clock.local_offset, clock.mono0 + clock.local_offset)
    if not (isinstance(clock.freq_khz, int) and 1 <= clock.freq_khz <= _MAX_FREQ_KHZ) or \
            not all(isinstance(v, int) and low <= v <= high for v in values):
        return None
    return clock


def _checked(derive: Callable[[], Clock | None]) -> Clock | None:
    try:
        return usable(derive())
    except _CLOCK_ERRORS:  # a control file value that is not a number
        return None


class CheckedTimeBase(TimeBase):
    """The time base, with a clock that control files make unusable reported as unknown. The checks run
    where a clock is worked out, so once per control file learned (TimeBase keeps the result)."""

    def _host_clock(self) -> Clock | None:
        return _checked(lambda: super(CheckedTimeBase, self)._host_clock())

    def _legacy_host_clock(self, device: int) -> Clock | None:
        return _checked(lambda: super(CheckedTimeBase, self)._legacy_host_clock(device))

    def _device_clock(self, device: int) -> Clock | None:
        return _checked(lambda: super(CheckedTimeBase, self)._device_clock(device))

    def session(self) -> dict[str, Any]:
        """Run-level facts with every number in what a message carries (0 when a file's value is not)."""
        low, high = _INT64
        return {key: value if not isinstance(value, int) or low <= value <= high else 0
                for key, value in super().session().items()}

    def device_info(self, device: int) -> dict:
        try:
            return super().device_info(device)
        except _CLOCK_ERRORS:  # DeviceInfo that is not a list of objects
            return {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._windows: dict[tuple[str, int], TickWindow | None] = {}  # clock key → tick_window

    def learn(self, rel_path: str, text: str) -> None:
        super().learn(rel_path, text)
        self._windows.clear()

    def tick_window(self, key: tuple[str, int]) -> TickWindow | None:
        """The collection window of clock ``key`` in its ticks (None: the clock is not known).
        Asked for on every chunk: worked out once per control file learned."""
        if key not in self._windows:
            self._windows[key] = self._tick_window(key)
        return self._windows[key]

    def _tick_window(self, key: tuple[str, int]) -> TickWindow | None:
        kind, number = key
        clock = (self.host_clock() if kind == "host" else
                 self.legacy_host_clock(number) if kind == "legacy" else self.device_clock(number))
        start, end = self.collection_window(key)
        if clock is None:
            return None
        if start is None and end is None:  # a clock placed by a start_info without a usable begin: no window
            return TickWindow.between(0, raw.EVENT_FLAG)  # (an API's zero begin is still impossible)
        low = start - WINDOW_MARGIN_NS if start is not None else end - OPEN_WINDOW_NS  # type: ignore[operator]
        high = end + WINDOW_MARGIN_NS if end is not None else start + OPEN_WINDOW_NS  # type: ignore[operator]
        return TickWindow.between(clock.ticks_at(low), clock.ticks_at(high))


def as_int(value: object, default: int, high: int = 2**32 - 1) -> int:
    """A control file value as an int in 0..high (a number written as text too); else ``default``."""
    try:
        number = float(str(value).strip()) if not isinstance(value, int) else value
        result = int(number)
    except (ValueError, TypeError, OverflowError):
        return default
    return result if 0 <= result <= high else default


def as_float(value: object, default: float) -> float:
    """A control file value as a finite, positive float; else ``default``."""
    try:
        result = float(str(value).strip())
    except (ValueError, TypeError, OverflowError):
        return default
    return result if math.isfinite(result) and result > 0 else default


# Plausibility of records (see the module's docstring).
WINDOW_MARGIN_NS = 5 * 60 * 10**9  # clocks of a board disagree by far less; a damaged time is off by far more
OPEN_WINDOW_NS = 366 * 24 * 3600 * 10**9  # the other side of a window whose start or end is not known yet
# Report levels CANN defines (MSPROF_REPORT_*_LEVEL of its profiling header, aprof_pub.h).
REPORT_LEVELS = (3000, 4000, 4500, 5000, 5500, 6000, 10000, 15000, 20000, 20500, 25000, 30000)
_UNKNOWN_LEVEL = np.ones(1 << 16, bool)
_UNKNOWN_LEVEL[list(REPORT_LEVELS)] = False
_EVENT_FLAG = np.array(raw.EVENT_FLAG, np.uint64)
_NO_TIME = np.array(0, np.uint64)


@dataclass(frozen=True)
class TickWindow:
    """A collection window (margins included) in one clock's raw ticks. ``low`` and ``high`` are 0-d uint64
    arrays (numpy takes them in faster than Python ints as operands), the bounds reductions are compared with
    are ints. A test on a whole chunk is a reduction over one unsigned subtraction: a tick count below ``low``
    wraps around to above ``span``."""

    low: np.ndarray
    high: np.ndarray
    span: int  # high − low
    last: int  # high
    past_high: int  # high + 1: ``high − EVENT_FLAG`` wraps around to it (see ``_api_suspect``)
    low_above_zero: np.ndarray  # low, or 1 when it is 0 (a window that reaches the counter's start)
    span_above_zero: int

    @classmethod
    def between(cls, low: int, high: int) -> TickWindow:
        top = raw.EVENT_FLAG - 1  # the event flag stays outside every window
        low, high = min(max(low, 0), top), min(max(high, low, 1), top)
        return cls(np.array(low, np.uint64), np.array(high, np.uint64), high - low, high, high + 1,
                   np.array(max(low, 1), np.uint64), high - max(low, 1))

    def outside(self, ticks: np.ndarray) -> np.ndarray:
        """Which tick counts lie outside the window."""
        result: np.ndarray = (ticks - self.low) > self.span
        return result

    def any_outside(self, ticks: np.ndarray) -> bool:
        return bool(_largest(ticks - self.low) > self.span)

    def any_zero_or_outside(self, ticks: np.ndarray) -> bool:
        return bool(_largest(ticks - self.low_above_zero) > self.span_above_zero)


def _largest(values: np.ndarray) -> Any:
    return np.maximum.reduce(values)


def _any(which: np.ndarray) -> bool:
    return bool(np.count_nonzero(which))  # faster than ndarray.any() on a chunk


Problems = list[tuple[str, np.ndarray]]  # (reason, which records have it), in the order reasons are told
Check = Callable[[np.ndarray, TickWindow, str], Problems]


@dataclass(frozen=True)
class Rule:
    """What the records of one raw kind must satisfy: the fields read (a view of the raw record), a quick test
    whether any record of a chunk has a problem (a few reductions), and the problems record by record."""

    layout: np.dtype
    suspect: Callable[[np.ndarray, TickWindow, str], bool]
    problems: Check


def _view(size: int, **fields: tuple[str, int]) -> np.dtype:
    """A record of ``size`` bytes seen through the named fields only (name=(format, offset))."""
    spec: Any = {"names": list(fields), "formats": [f for f, _ in fields.values()],
                 "offsets": [o for _, o in fields.values()], "itemsize": size}
    return np.dtype(spec)


def _api_suspect(rows: np.ndarray, window: TickWindow, stream: str) -> bool:
    """Any of ``_api_event``'s problems. An end is right when it is at least the begin (the event flag is) and
    at most ``high`` or the flag: ``high − end`` is then at most ``high + 1`` (the flag wraps around to it)."""
    begin, end = rows["begin"], rows["end"]
    return (_any(_UNKNOWN_LEVEL[rows["level"]]) or window.any_zero_or_outside(begin) or _any(end < begin)
            or bool(_largest(window.high - end) > window.past_high))


def _api_event(rows: np.ndarray, window: TickWindow, stream: str) -> Problems:
    begin, end = rows["begin"], rows["end"]
    api = end != _EVENT_FLAG  # an event has no end
    return [("zero begin time", begin == _NO_TIME),
            ("level is not a report level (damaged record)", _UNKNOWN_LEVEL[rows["level"]]),
            ("begin time outside the collection window (damaged record)", window.outside(begin)),
            ("end time before its begin time (damaged record)", end < begin),
            ("end time outside the collection window (damaged record)", api & window.outside(end))]


def _registered_late(stamp: np.ndarray, window: TickWindow, stream: str) -> np.ndarray | None:
    """Compact and additional records whose time is impossible (their level is not read: the file names their
    kind). Those of `unaging.` streams may be registrations made before the collection began (a model loaded
    earlier reports its nodes and tasks with their load time): only a time after the window is impossible for
    them. None: no record's time is."""
    if stream.startswith("aging."):
        return window.outside(stamp) if window.any_outside(stamp) else None
    return stamp > window.high if _largest(stamp) > window.last else None


def _host_header_suspect(rows: np.ndarray, window: TickWindow, stream: str) -> bool:
    return _registered_late(rows["timestamp"], window, stream) is not None


def _host_header(rows: np.ndarray, window: TickWindow, stream: str) -> Problems:
    late = _registered_late(rows["timestamp"], window, stream)
    return [] if late is None else [("timestamp outside the collection window (damaged record)", late)]


def _tx_suspect(rows: np.ndarray, window: TickWindow, stream: str) -> bool:
    return _host_header_suspect(rows, window, stream) or _any(rows["end_time"] < rows["start_time"])


def _msproftx(rows: np.ndarray, window: TickWindow, stream: str) -> Problems:
    start, end = rows["start_time"], rows["end_time"]  # a mark has no end (0)
    return [*_host_header(rows, window, stream),
            ("end time before its start time (damaged record)", (end != _NO_TIME) & (end < start))]


def _device_time(field: str, told: str) -> tuple[Callable[[np.ndarray, TickWindow, str], bool], Check]:
    """A device log's time: inside the window."""
    def suspect(rows: np.ndarray, window: TickWindow, stream: str) -> bool:
        return window.any_outside(rows[field])

    def problems(rows: np.ndarray, window: TickWindow, stream: str) -> Problems:
        return [(f"{told} outside the collection window (damaged record)", window.outside(rows[field]))]
    return suspect, problems


def _rules() -> dict[str, Rule]:
    header = {"timestamp": ("<u8", 16)}
    rules = {"api_event": Rule(_view(raw.API_EVENT.itemsize, level=("<u2", 2), begin=("<u8", 16), end=("<u8", 24)),
                               _api_suspect, _api_event),
             "msproftx": Rule(_view(raw.MSPROFTX.itemsize, **header, start_time=("<u8", 64), end_time=("<u8", 72)),
                              _tx_suspect, _msproftx),
             "hwts": Rule(_view(raw.HWTS_LOG.itemsize, syscnt=("<u8", 8)), *_device_time("syscnt", "syscnt")),
             "ffts_profile": Rule(_view(raw.FFTS_PMU.itemsize, end_cnt=("<u8", 120)),
                                  *_device_time("end_cnt", "end count"))}
    for kind in ("ts_track", "stars_soc", "stars_soc_v6"):  # the time at byte 8 of every record of these
        rules[kind] = Rule(_view(RAW_KINDS[kind].record_size, timestamp=("<u8", 8)),
                           *_device_time("timestamp", "timestamp"))
    for kind in ("task_track", "node_basic_info", "tensor_info", *host_extra.STREAM_KINDS):
        rules[kind] = Rule(_view(RAW_KINDS[kind].record_size, **header), _host_header_suspect, _host_header)
    return rules


def _offsets_hold() -> bool:
    """The views read the fields where the raw layouts have them."""
    def at(dtype: np.dtype, name: str) -> int:
        fields: Any = dtype.fields
        return int(fields[name][1])
    pairs = [(raw.API_EVENT, "begin", 16), (raw.API_EVENT, "end", 24), (raw.MSPROFTX, "start_time", 64),
             (raw.MSPROFTX, "end_time", 72), (raw.HWTS_LOG, "syscnt", 8), (raw.FFTS_PMU, "end_cnt", 120),
             (raw.TS_STEP_TRACE, "timestamp", 8), (raw.ACSQ_LOG, "timestamp", 8), (raw.ACSQ_LOG_V6, "timestamp", 8),
             (raw.TASK_TRACK, "timestamp", 16), (raw.API_EVENT, "level", 2)]
    return all(at(dtype, name) == offset for dtype, name, offset in pairs)


assert _offsets_hold()
RULES = _rules()
SCREENED_BY_DECODER = frozenset({"hwts"})  # after its rolling counter is read: a rejected record is not also lost


class Screen:
    """Rejects the records of a raw chunk whose fields are impossible, each with its reason (the first that
    applies) and its bytes; what is left is decoded."""

    def __init__(self, timebase: CheckedTimeBase, reject: Callable[[str, int, bytes], None]) -> None:
        self.timebase = timebase
        self.reject = reject

    def __call__(self, kind: str, key: tuple[str, int] | None, stream: str, body: bytes) -> bytes | None:
        """The chunk's bytes without its impossible records; None when every record is plausible (or this kind
        has no checks, or its window is not known)."""
        rule = RULES.get(kind)
        window = None if rule is None or key is None else self.timebase.tick_window(key)
        if rule is None or window is None or not body:
            return None
        rows = np.frombuffer(body, rule.layout)
        if not rule.suspect(rows, window, stream):
            return None
        problems = rule.problems(rows, window, stream)
        bad = np.zeros(len(rows), bool)
        for _, which in problems:
            bad |= which
        if not _any(bad):
            return None
        whole = np.frombuffer(body, np.dtype((np.void, rule.layout.itemsize)))
        untold = bad.copy()
        for reason, which in problems:
            mine = which & untold
            count = int(np.count_nonzero(mine))
            if count:
                self.reject(f"{kind}: {reason}", count, whole[mine].tobytes())
                untold &= ~mine
        kept: bytes = whole[~bad].tobytes()
        return kept
