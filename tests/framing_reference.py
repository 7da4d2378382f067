"""Plain record-by-record framers for fixed-size and TLV streams: the oracle the shared (column-wise) framer
``pipeline_board.framing`` is compared with. Slow on purpose: one record, one check."""

from __future__ import annotations

import struct

from pipeline_board.framing import Framed
from pipeline_board.kinds import MINI_TLV_TAG_SIZES
from stages.formats.files import StreamKind

_TLV_HEADER = struct.Struct("<BBH")


def _finish(out: Framed, pieces: list[bytes], buf: bytes, pos: int, final: bool) -> Framed:
    if final and pos < len(buf):
        out.garbage.append(buf[pos:])
        pos = len(buf)
    out.records, out.consumed = b"".join(pieces), pos
    return out


def _magic_at(kind: StreamKind, buf: bytes, pos: int) -> bool:
    start = pos + kind.magic_offset
    return buf[start:start + len(kind.magic)] == kind.magic


def frame_fixed(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    """Records of ``kind.record_size`` whose magic matches; a bad one starts garbage up to the next magic (or,
    with none in sight, up to the last record's worth of bytes, kept for the next read)."""
    size, out, pieces, pos = kind.record_size, Framed(), [], 0
    while len(buf) - pos >= size:
        if _magic_at(kind, buf, pos):
            pieces.append(buf[pos:pos + size])
            out.count += 1
            pos += size
            continue
        resync = next((p for p in range(pos + 1, len(buf) - kind.magic_offset - len(kind.magic) + 1)
                       if _magic_at(kind, buf, p)), None)
        if resync is None:
            keep_from = max(pos + 1, len(buf) - size + 1)
            out.garbage.append(buf[pos:keep_from])
            pos = keep_from
            break
        out.garbage.append(buf[pos:resync])
        pos = resync
    return _finish(out, pieces, buf, pos, final)


def frame_tlv(buf: bytes, final: bool) -> Framed:
    """Records whose 4-byte header has mode 0 or 1, a known tag and that tag's size; anything else is skipped
    a byte at a time as garbage."""
    out, pieces, pos = Framed(), [], 0
    garbage_from: int | None = None
    while len(buf) - pos >= 4:
        mode, tag, size = _TLV_HEADER.unpack_from(buf, pos)
        if mode > 1 or MINI_TLV_TAG_SIZES.get(tag) != size:
            garbage_from = pos if garbage_from is None else garbage_from
            pos += 1
            continue
        if len(buf) - pos < size:
            break
        if garbage_from is not None:
            out.garbage.append(buf[garbage_from:pos])
            garbage_from = None
        pieces.append(buf[pos:pos + size])
        out.count += 1
        pos += size
    if garbage_from is not None:
        out.garbage.append(buf[garbage_from:pos])
    return _finish(out, pieces, buf, pos, final)


def frame(kind: StreamKind, buf: bytes, final: bool) -> Framed:
    if kind.framing == "tlv":
        return frame_tlv(buf, final)
    assert kind.framing == "fixed", kind
    return frame_fixed(kind, buf, final)
