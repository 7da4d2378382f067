"""What the decoder accepts from its input, checked before anything is decoded.

A chunk is what a collector ships: a known raw kind, a device id that fits in 16 bits, a count that
matches its bytes (fixed records fill them exactly; TLV, text and mixed chunks frame again into the
same records). A control message names `host/…` or `device_N/…` and carries text. Control files hold
numbers the time base needs: values that are not numbers, or too large for 64-bit time arithmetic,
make that clock unknown (its chunks are then rejected at the end, as with missing control files)
instead of failing the stage. Reasons are fixed phrases, so a stream of forged messages adds counts,
not report rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pipeline.stage import Batch
from stages.decoder.timebase import Clock, TimeBase
from stages.formats import files, host_extra, legacy
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
