"""Raw streams for the fuzzers: every stream kind the collector frames, valid records of each, damage to
apply to them, and the collector's way of feeding a growing file to the framer.

Synthetic record bodies use bytes that never form a resync anchor (no magic byte, no TLV header byte), so
the only anchors in an undamaged stretch are the true record starts: what the framer must recover after
damage is then exactly known.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from pipeline.stage import Batch
from stages.formats import files, host_extra, legacy, raw
from stages.formats.files import StreamKind
from stages.framing import Framed, frame

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def all_kinds() -> dict[str, StreamKind]:
    """Every stream kind a raw file can be framed as (files, legacy and extra host families)."""
    found: dict[str, StreamKind] = {}
    for module in (files, legacy):
        found.update((v.name, v) for v in vars(module).values() if isinstance(v, StreamKind))
    found.update((kind.name, kind) for kind in host_extra.STREAM_KINDS.values())
    return dict(sorted(found.items()))


KINDS = all_kinds()
FIXED = sorted(name for name, kind in KINDS.items() if kind.framing == "fixed")
ANCHORED = sorted(name for name in FIXED if KINDS[name].magic)  # fixed size, magic bytes: resyncs after damage
UNANCHORED = sorted(name for name in FIXED if not KINDS[name].magic)  # fixed size, no magic: cut by length only
TLV = sorted(name for name, kind in KINDS.items() if kind.framing == "tlv")
TEXT = sorted(name for name, kind in KINDS.items() if kind.framing == "text")
NUL_TEXT = sorted(name for name, kind in KINDS.items() if kind.framing == "nul_text")
MAX_TLV = max(raw.MINI_TLV_TAG_SIZES.values())

# Bytes of synthetic record bodies: printable ASCII without the magic bytes ('Z' 0x5A, 'k' 0x6B, '<' 0x3C);
# no 0x00/0x01 either, so no TLV header can start inside a body.
SAFE = bytes(b for b in range(0x20, 0x7F) if b not in b"Zk<")


def max_record(kind: StreamKind) -> int:
    return MAX_TLV if kind.framing == "tlv" else kind.record_size


def _body(n: int, seed: int) -> bytearray:
    return bytearray(SAFE[(seed * 7919 + i * 31) % len(SAFE)] for i in range(n))


def record(kind: StreamKind, seed: int, tag: int = raw.MINI_TAG_TIMELINE) -> bytes:
    """One well-formed record of ``kind`` (a line for text kinds); ``seed`` varies its body."""
    if kind.framing == "text":
        return f"{seed}:name_{seed}".encode()
    if kind.framing == "tlv":
        size = raw.MINI_TLV_TAG_SIZES[tag]
        body = _body(size, seed)
        struct.pack_into("<BBH", body, 0, seed & 1, tag, size)
        return bytes(body)
    if kind.framing == "nul_text" and seed % 2:
        return f"Node:op_{seed}, Run start:1 {seed}, Run end:2 {seed + 1}".encode()
    body = _body(kind.record_size, seed)
    body[kind.magic_offset:kind.magic_offset + len(kind.magic)] = kind.magic
    return bytes(body)


@st.composite
def records(draw: st.DrawFn, kind: StreamKind, max_records: int = 24) -> list[bytes]:
    n = draw(st.integers(1, max_records))
    first = draw(st.integers(0, 10_000))
    tags = sorted(raw.MINI_TLV_TAG_SIZES)
    return [record(kind, first + i, tags[draw(st.integers(0, len(tags) - 1))] if kind.framing == "tlv" else 0)
            for i in range(n)]


# -- damage ---------------------------------------------------------------------------------------------

@dataclass
class Damaged:
    """A stream after damage: its bytes, where each record that was left intact starts, and the
    [start, end) byte ranges that were touched (a changed record, inserted junk)."""

    data: bytes
    intact: list[tuple[int, bytes]] = field(default_factory=list)
    touched: list[tuple[int, int]] = field(default_factory=list)


@st.composite
def damage(draw: st.DrawFn, kind: StreamKind, recs: Sequence[bytes], length_preserving: bool = False) -> Damaged:
    """Bit flips inside records, cut record tails, junk between records, absurd TLV length fields, and a
    truncated end; ``length_preserving`` allows bit flips only (what an unanchored stream can survive)."""
    out = bytearray()
    result = Damaged(b"")
    ops = ("keep", "flip") if length_preserving else ("keep", "flip", "cut", "junk", "length")
    for rec in recs:
        op = draw(st.sampled_from(ops))
        start = len(out)
        if op == "keep":
            out += rec
            result.intact.append((start, rec))
            continue
        changed = bytearray(rec)
        if op == "flip":
            for bit in draw(st.lists(st.integers(0, len(rec) * 8 - 1), min_size=1, max_size=4)):
                changed[bit // 8] ^= 1 << (bit % 8)
        elif op == "cut":
            changed = changed[:draw(st.integers(0, len(rec) - 1))]
        elif op == "junk":
            changed += draw(st.binary(min_size=1, max_size=3 * max(max_record(kind), 32)))
        elif kind.framing == "tlv":  # "length": a header claiming a size the tag does not have
            claimed = draw(st.integers(0, 0xFFFE))
            struct.pack_into("<H", changed, 2, claimed + (claimed >= len(rec)))  # any size but its own
        else:  # "length": the host header's data_len / any u32 at byte 12 set huge (framing must not care)
            if len(changed) >= 16:
                struct.pack_into("<I", changed, 12, draw(st.integers(0, 0xFFFF_FFFF)))
        out += changed
        if bytes(changed) != rec:
            result.touched.append((start, len(out)))
        else:
            result.intact.append((start, rec))
    if not length_preserving and draw(st.booleans()):
        end = draw(st.integers(0, len(out)))
        del out[end:]
        result.intact = [(s, r) for s, r in result.intact if s + len(r) <= end]
    result.data = bytes(out)
    return result


def recoverable(kind: StreamKind, damaged: Damaged) -> list[bytes]:
    """The intact records the framer must find: those starting at least one maximum record length after
    the end of the last touched range before them (the framer resyncs within that distance)."""
    must: list[bytes] = []
    for start, rec in damaged.intact:
        before = [end for s, end in damaged.touched if s < start]
        if not before or start >= max(before) + max_record(kind):
            must.append(rec)
    return must


# -- feeding the framer as the collector does ------------------------------------------------------------

@dataclass
class Feed:
    """What framing a stream in pieces gave: the records of each call, garbage, and the largest carry."""

    calls: list[Framed] = field(default_factory=list)
    largest_carry: int = 0

    @property
    def records(self) -> bytes:
        return b"".join(call.records for call in self.calls)

    @property
    def count(self) -> int:
        return sum(call.count for call in self.calls)

    @property
    def garbage(self) -> bytes:
        return b"".join(b"".join(call.garbage) for call in self.calls)


def feed(kind: StreamKind, data: bytes, cuts: Sequence[int]) -> Feed:
    """Frame ``data`` arriving in pieces ending at ``cuts``, then once more with ``final``, as the collector's
    buffer does for a growing file."""
    result = Feed()
    buffer = b""
    previous = 0
    ends = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    for i, end in enumerate(ends):
        buffer += data[previous:end]
        previous = end
        while buffer:  # as the collector's _emit: frame until a call takes nothing more
            framed = frame(kind, buffer, final=i == len(ends) - 1)
            result.calls.append(framed)
            buffer = buffer[framed.consumed:]
            if not framed.consumed:
                break
        result.largest_carry = max(result.largest_carry, len(buffer))
    assert buffer == b"", "a final frame call leaves nothing behind"
    return result


def raw_batch(kind: StreamKind, framed: Framed, device: int | None, stream: str | None = None) -> Batch:
    """The chunk the collector ships for one frame call."""
    meta = {"stream": stream or kind.name, "kind": kind.name, "device": device, "file": "data/x.slice_0",
            "offset": 0}
    if kind.framing == "fixed":
        meta["size"] = kind.record_size
    elif kind.framing == "tlv":
        meta["size"] = 0
    return Batch("raw", framed.count, meta, framed.records)
