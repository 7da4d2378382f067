"""Cutting a raw byte stream into whole records, resynchronising past garbage.

A framer takes the bytes buffered for one stream and returns the whole records at its
front, the bytes it had to skip (garbage: counted and kept aside, never fatal) and how many
bytes it consumed; an incomplete record at the end stays for the next call.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from stages.formats import raw
from stages.formats.files import StreamKind

MAX_LINE_BYTES = 1 << 20  # a text line longer than this is garbage: the collector never holds more for one

@dataclass
class Framed:
    records: bytes = b""
    count: int = 0
    consumed: int = 0
    garbage: list[bytes] = field(default_factory=list)


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
    body = buf[:end]
    lines = [line for line in body.split(b"\n") if line.strip()]
    framed = Framed(b"\n".join(lines), len(lines), end)
    if len(buf) - end > MAX_LINE_BYTES:  # a line that does not end: garbage, not a reason to hold the file
        framed.garbage.append(buf[end:])
        framed.consumed = len(buf)
    return framed


def _close(out: Framed, pieces: list[bytes], buf: bytes, pos: int, final: bool) -> Framed:
    """Records found, and with ``final`` whatever is left after them counts as garbage."""
    if final and pos < len(buf):
        out.garbage.append(buf[pos:])
        pos = len(buf)
    out.records = b"".join(pieces)
    out.consumed = pos
    return out


def _magic_ok(kind: StreamKind, buf: bytes, start: int, n: int) -> np.ndarray:
    """Per candidate record (n of them, from ``start``): do its magic bytes match?"""
    size, offset, width = kind.record_size, kind.magic_offset, len(kind.magic)
    view = np.frombuffer(buf, dtype=np.uint8, count=n * size, offset=start).reshape(n, size)
    expected = np.frombuffer(kind.magic, dtype=np.uint8)
    ok: np.ndarray = np.all(view[:, offset:offset + width] == expected, axis=1)
    return ok


def _frame_fixed(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    size = kind.record_size
    out = Framed()
    pieces: list[bytes] = []
    pos = 0
    while True:
        n = (len(buf) - pos) // size
        if n == 0:
            break
        if not kind.magic:
            pieces.append(buf[pos:pos + n * size])
            out.count += n
            pos += n * size
            break
        ok = _magic_ok(kind, buf, pos, n)
        bad = np.flatnonzero(~ok)
        good = int(bad[0]) if bad.size else n
        if good:
            pieces.append(buf[pos:pos + good * size])
            out.count += good
            pos += good * size
        if good == n:
            break
        resync = _next_magic(kind, buf, pos + 1)
        if resync is None:  # no anchor in what we have: keep a record's worth for the next read
            keep_from = max(pos + 1, len(buf) - size + 1)
            out.garbage.append(buf[pos:keep_from])
            pos = keep_from
            break
        out.garbage.append(buf[pos:resync])
        pos = resync
    return _close(out, pieces, buf, pos, final)


def _next_magic(kind: StreamKind, buf: bytes, start: int) -> int | None:
    """Start of the next record whose magic bytes match, at or after ``start``."""
    found = buf.find(kind.magic, start + kind.magic_offset)
    while found != -1:
        candidate = found - kind.magic_offset
        if candidate >= start:
            return candidate
        found = buf.find(kind.magic, found + 1)
    return None


_TLV_HEADER = struct.Struct("<BBH")


def _tlv_ok(buf: bytes, pos: int) -> int:
    """Size of a plausible TLV record at ``pos`` (0 if not one, -1 if more bytes are needed)."""
    if len(buf) - pos < 4:
        return -1
    mode, tag, size = _TLV_HEADER.unpack_from(buf, pos)
    if mode > 1 or raw.MINI_TLV_TAG_SIZES.get(tag) != size:
        return 0
    return size if len(buf) - pos >= size else -1


def _frame_tlv(buf: bytes, final: bool) -> Framed:
    out = Framed()
    pieces: list[bytes] = []
    pos = 0
    garbage_from: int | None = None
    while pos < len(buf):
        size = _tlv_ok(buf, pos)
        if size == -1:
            break
        if size == 0:  # not a record start: skip a byte and look again
            if garbage_from is None:
                garbage_from = pos
            pos += 1
            continue
        if garbage_from is not None:
            out.garbage.append(buf[garbage_from:pos])
            garbage_from = None
        pieces.append(buf[pos:pos + size])
        out.count += 1
        pos += size
    if garbage_from is not None:  # a run of garbage reaching the end of what we have
        out.garbage.append(buf[garbage_from:pos])
    return _close(out, pieces, buf, pos, final)


def _frame_nul_text(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    """Binary records (``kind.magic`` at their start) or NUL-separated text lines, whichever comes first.

    One call returns records of one form only (the chunk stays homogeneous). A text line holds no
    NUL, so it never contains the binary magic: a line also ends where a magic begins.
    """
    if buf.startswith(kind.magic):
        return _frame_fixed(kind, buf, final)
    if not final and kind.magic.startswith(buf):
        return Framed()  # too short to tell
    lines: list[bytes] = []
    pos = 0
    while pos < len(buf) and not buf.startswith(kind.magic, pos):
        magic_at = buf.find(kind.magic, pos)
        limit = magic_at if magic_at != -1 else len(buf)
        end = buf.find(b"\0", pos, limit)
        if end == -1:
            if magic_at == -1 and not final:
                if len(buf) - pos > MAX_LINE_BYTES:  # a line that does not end: garbage
                    return Framed(b"\0".join(lines), len(lines), len(buf), [buf[pos:]])
                break  # the line may go on in the next read
            end = limit
        line = buf[pos:end].strip(b"\n\r ")
        if line:
            lines.append(line)
        pos = end + 1 if end < limit else end
    return Framed(b"\0".join(lines), len(lines), pos)
