"""Cutting a raw byte stream into whole records, resynchronising past garbage: the one framer of the board
agent and of ``stages.collector`` (which imports it through ``stages.framing``). Stdlib only, Python 3.7.

A framer takes the bytes buffered for one stream and returns the whole records at its front, the bytes it had
to skip (garbage: counted and kept aside, never fatal) and how many bytes it consumed; an incomplete record at
the end stays for the next call. Magic bytes and TLV headers are compared column-wise with stride slices (C
loops, no numpy: faster than the numpy version it replaced, see ``tests/framing_reference.py``).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from pipeline_board.kinds import MINI_TLV_TAG_SIZES

if TYPE_CHECKING:  # typing.Protocol is not in Python 3.7
    from typing import Protocol

    class StreamKind(Protocol):
        """What framing reads of a kind: ``pipeline_board.kinds.StreamKind`` or ``stages.formats.files``'."""

        @property
        def framing(self) -> str: ...
        @property
        def record_size(self) -> int: ...
        @property
        def magic(self) -> bytes: ...
        @property
        def magic_offset(self) -> int: ...

MAX_LINE_BYTES = 1 << 20  # a text line longer than this is garbage: the collector never holds more for one


class Framed:
    __slots__ = ("records", "count", "consumed", "garbage")

    def __init__(self, records: bytes = b"", count: int = 0, consumed: int = 0,
                 garbage: list[bytes] | None = None) -> None:
        self.records = records
        self.count = count
        self.consumed = consumed
        self.garbage = garbage if garbage is not None else []


def frame(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    """Whole records at the front of ``buf``; with ``final`` the tail is garbage too."""
    if kind.framing == "text":
        return _frame_text(buf, final)
    if kind.framing == "tlv":
        return _frame_tlv(buf, final)
    if kind.framing == "nul_text":
        return _frame_nul_text(kind, buf, final)
    return _frame_fixed(kind, buf, final)


def _frame_text(buf: bytes, final: bool) -> Framed:
    end = len(buf) if final else buf.rfind(b"\n") + 1
    lines = [line for line in buf[:end].split(b"\n") if line.strip()]
    framed = Framed(b"\n".join(lines), len(lines), end)
    if len(buf) - end > MAX_LINE_BYTES:
        framed.garbage.append(buf[end:])
        framed.consumed = len(buf)
    return framed


def _close(out: Framed, pieces: list[bytes], buf: bytes, pos: int, final: bool) -> Framed:
    if final and pos < len(buf):
        out.garbage.append(buf[pos:])
        pos = len(buf)
    out.records = b"".join(pieces)
    out.consumed = pos
    return out


def _good_run(kind: StreamKind, buf: bytes, start: int, n: int) -> int:
    """How many of the n records from ``start`` have their magic, before the first that has not.

    Each magic byte is compared for all records at once: a stride slice holds that byte of every record.
    """
    size, good = kind.record_size, n
    for i, byte in enumerate(kind.magic):
        column = buf[start + kind.magic_offset + i:start + n * size:size]
        good = min(good, n - len(column.lstrip(bytes((byte,)))))
    return good


def _frame_fixed(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    size = kind.record_size
    out = Framed()
    pieces: list[bytes] = []
    pos = 0
    while True:
        n = (len(buf) - pos) // size
        if n == 0:
            break
        good = _good_run(kind, buf, pos, n) if kind.magic else n
        if good:
            pieces.append(buf[pos:pos + good * size])
            out.count += good
            pos += good * size
        if good == n:
            break
        resync = _next_magic(kind, buf, pos + 1)
        if resync is None:
            keep_from = max(pos + 1, len(buf) - size + 1)
            out.garbage.append(buf[pos:keep_from])
            pos = keep_from
            break
        out.garbage.append(buf[pos:resync])
        pos = resync
    return _close(out, pieces, buf, pos, final)


def _next_magic(kind: StreamKind, buf: bytes, start: int) -> int | None:
    found = buf.find(kind.magic, start + kind.magic_offset)
    while found != -1:
        candidate = found - kind.magic_offset
        if candidate >= start:
            return candidate
        found = buf.find(kind.magic, found + 1)
    return None


# Every valid 4-byte TLV header (mode 0 or 1, a known tag, that tag's size) → the record's size.
_TLV_SIZES = {struct.pack("<BBH", mode, tag, size): size for mode in (0, 1) for tag, size in MINI_TLV_TAG_SIZES.items()}


_TLV_MODES = b"\x00\x01"
_STREAK = 8  # records with one header in a row before runs of them are checked column-wise
_PROBE = 64  # records in the first column-wise probe; doubled while whole probes hold one header


def _same_header_run(buf: bytes, pos: int, header: bytes, size: int, n: int) -> int:
    """How many of the n records of ``size`` bytes from ``pos`` start with a header of mode 0 or 1 and the tag
    and size of ``header``: each header byte is compared for all of them at once, as in ``_good_run``."""
    stop = pos + n * size
    good = n - len(buf[pos:stop:size].lstrip(_TLV_MODES))
    for i in (1, 2, 3):
        if good:
            good = min(good, n - len(buf[pos + i:stop:size].lstrip(header[i:i + 1])))
    return good


def _frame_tlv(buf: bytes, final: bool) -> Framed:
    """One dict lookup per record, until a few in a row share a tag: then runs of that tag are measured in
    C (stride slices), so a stream of one tag costs a handful of calls per probe, not one per record."""
    out = Framed()
    pieces: list[bytes] = []
    pos = run_from = 0
    end = len(buf)
    garbage_from: int | None = None
    last_tag, streak, probe = b"", 0, _PROBE
    while end - pos >= 4:
        header = buf[pos:pos + 4]
        size = _TLV_SIZES.get(header)
        if size is None:  # not a record start: skip a byte and look again
            if garbage_from is None:
                if pos > run_from:
                    pieces.append(buf[run_from:pos])
                garbage_from = pos
            pos += 1
            streak = 0
            continue
        if end - pos < size:
            break  # more bytes are needed
        if garbage_from is not None:
            out.garbage.append(buf[garbage_from:pos])
            garbage_from = None
            run_from = pos
        tag = header[1:]
        streak = streak + 1 if tag == last_tag else 0
        last_tag = tag
        if streak >= _STREAK:
            n = min(probe, (end - pos) // size)
            good = _same_header_run(buf, pos, header, size, n)
            out.count += good
            pos += good * size
            probe = probe * 2 if good == n else _PROBE
            if good < n:
                streak = 0
            continue
        out.count += 1
        pos += size
    if garbage_from is not None:  # a run of garbage reaching the end of what we have
        out.garbage.append(buf[garbage_from:pos])
    elif pos > run_from:
        pieces.append(buf[run_from:pos])
    return _close(out, pieces, buf, pos, final)


def _frame_nul_text(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    if buf.startswith(kind.magic):
        return _frame_fixed(kind, buf, final)
    if not final and kind.magic.startswith(buf):
        return Framed()
    lines: list[bytes] = []
    pos = 0
    while pos < len(buf) and not buf.startswith(kind.magic, pos):
        magic_at = buf.find(kind.magic, pos)
        limit = magic_at if magic_at != -1 else len(buf)
        end = buf.find(b"\0", pos, limit)
        if end == -1:
            if magic_at == -1 and not final:
                if len(buf) - pos > MAX_LINE_BYTES:
                    return Framed(b"\0".join(lines), len(lines), len(buf), [buf[pos:]])
                break
            end = limit
        line = buf[pos:end].strip(b"\n\r ")
        if line:
            lines.append(line)
        pos = end + 1 if end < limit else end
    return Framed(b"\0".join(lines), len(lines), pos)
