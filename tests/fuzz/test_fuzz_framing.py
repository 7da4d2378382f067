"""Fuzzing the collector's framing: every stream kind, random bytes, damaged valid streams, bytes arriving in
random pieces. Nothing raises, every byte is a record or counted garbage, what is held back between reads
stays small, and the records the damage did not touch come through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fuzz_budget import budget
from fuzz_streams import (
    ANCHORED,
    KINDS,
    NUL_TEXT,
    TEXT,
    TLV,
    UNANCHORED,
    damage,
    feed,
    max_record,
    records,
    recoverable,
)
from hypothesis import given
from hypothesis import strategies as st

from pipeline_board import framing  # where the framer (and its MAX_LINE_BYTES) lives
from stages.framing import frame

CUTS = st.lists(st.integers(0, 8192), max_size=6)


def _carry_bound(name: str) -> int:
    """Bytes a framer may hold back for the next read: less than one record, or one text line."""
    kind = KINDS[name]
    if kind.framing in ("text", "nul_text"):
        return framing.MAX_LINE_BYTES
    return max_record(kind) - 1


@budget(scale=2)
@given(name=st.sampled_from(sorted(KINDS)), data=st.binary(max_size=4096), cuts=CUTS)
def test_random_bytes_are_records_or_garbage(tried: Callable[..., Any], name: str, data: bytes,
                                             cuts: list[int]) -> None:
    kind = KINDS[name]
    with tried():
        fed = feed(kind, data, cuts)
    assert fed.largest_carry <= _carry_bound(name)
    if kind.framing in ("fixed", "tlv"):
        assert len(fed.records) + len(fed.garbage) == len(data)  # every byte accounted for
    if kind.framing == "fixed":
        assert len(fed.records) == fed.count * kind.record_size
        size, offset, magic = kind.record_size, kind.magic_offset, kind.magic
        starts = [fed.records[i + offset:i + offset + len(magic)] for i in range(0, len(fed.records), size)]
        assert all(start == magic for start in starts)
    for call in fed.calls:  # what the framer ships, framed again, is the same records and no garbage
        again = frame(kind, call.records, final=True)
        assert (again.count, again.records, again.garbage) == (call.count, call.records, [])


@budget()
@given(data=st.data(), name=st.sampled_from(ANCHORED + TLV), cuts=CUTS)
def test_damaged_anchored_stream_keeps_the_untouched_records(tried: Callable[..., Any], data: st.DataObject,
                                                               name: str, cuts: list[int]) -> None:
    """Bit flips, cut records, junk, absurd TLV length fields and a truncated end: each record the damage
    did not touch, one record length past the damage, is framed as it was written."""
    kind = KINDS[name]
    recs = data.draw(records(kind))
    damaged = data.draw(damage(kind, recs))
    with tried():
        fed = feed(kind, damaged.data, cuts)
    assert len(fed.records) + len(fed.garbage) == len(damaged.data)
    must = recoverable(kind, damaged)
    size = max_record(kind)
    framed = _split_records(kind, fed.records)
    assert _is_subsequence(must, framed), f"lost untouched records (max record {size} B)"
    if not damaged.touched and len(damaged.intact) == len(recs):
        assert framed == recs and fed.garbage == b""


@budget()
@given(data=st.data(), name=st.sampled_from(UNANCHORED), cuts=CUTS)
def test_bit_flips_in_a_stream_without_magic_keep_every_record(tried: Callable[..., Any], data: st.DataObject,
                                                               name: str, cuts: list[int]) -> None:
    """Without magic bytes a stream is cut by length only: flipped bits never move a record boundary."""
    kind = KINDS[name]
    recs = data.draw(records(kind))
    damaged = data.draw(damage(kind, recs, length_preserving=True))
    with tried():
        fed = feed(kind, damaged.data, cuts)
    assert fed.count == len(recs) and fed.records == damaged.data and fed.garbage == b""


@budget()
@given(data=st.data(), name=st.sampled_from(TEXT), cuts=CUTS)
def test_damaged_text_stream_gives_its_lines(tried: Callable[..., Any], data: st.DataObject, name: str,
                                            cuts: list[int]) -> None:
    kind = KINDS[name]
    lines = data.draw(records(kind))
    damaged = data.draw(damage(kind, [line + b"\n" for line in lines]))
    with tried():
        fed = feed(kind, damaged.data, cuts)
    expected = [line for line in damaged.data.split(b"\n") if line.strip()]
    assert fed.count == len(expected)
    assert b"\n".join(call.records for call in fed.calls if call.count) == b"\n".join(expected)


@budget()
@given(data=st.data(), name=st.sampled_from(NUL_TEXT), cuts=CUTS)
def test_damaged_mixed_binary_and_text_stream_never_fails(tried: Callable[..., Any], data: st.DataObject,
                                                          name: str, cuts: list[int]) -> None:
    """DATA_PREPROCESS.AICPU: binary records or NUL-separated lines; each call is homogeneous."""
    kind = KINDS[name]
    recs = data.draw(records(kind))
    damaged = data.draw(damage(kind, [r if r.startswith(kind.magic) else r + b"\0" for r in recs]))
    with tried():
        fed = feed(kind, damaged.data, cuts)
    assert fed.largest_carry <= _carry_bound(name)
    for call in fed.calls:
        if call.records.startswith(kind.magic):
            assert len(call.records) == call.count * kind.record_size
        elif call.count:
            assert call.records.count(b"\0") == call.count - 1


@budget()
@given(name=st.sampled_from(TEXT + NUL_TEXT), size=st.integers(1, 6000), cuts=CUTS)
def test_a_text_line_without_end_is_not_held_forever(tried: Callable[..., Any], name: str, size: int,
                                                     cuts: list[int]) -> None:
    """A text file that never writes a newline (or NUL) must not make the collector buffer all of it."""
    kind = KINDS[name]
    data = bytes(b"abcdefgh"[i % 8] for i in range(size))
    original = framing.MAX_LINE_BYTES
    framing.MAX_LINE_BYTES = 512  # small, so a fuzz input can exceed it
    try:
        with tried():
            fed = feed(kind, data, cuts)
        assert fed.largest_carry <= framing.MAX_LINE_BYTES
    finally:
        framing.MAX_LINE_BYTES = original


def _split_records(kind: Any, body: bytes) -> list[bytes]:
    if kind.framing == "fixed":
        return [body[i:i + kind.record_size] for i in range(0, len(body), kind.record_size)]
    out, pos = [], 0
    while pos < len(body):  # TLV: the framer only ships records whose header is plausible
        size = int.from_bytes(body[pos + 2:pos + 4], "little")
        out.append(body[pos:pos + size])
        pos += size
    return out


def _is_subsequence(needles: list[bytes], haystack: list[bytes]) -> bool:
    it = iter(haystack)
    return all(any(item == needle for item in it) for needle in needles)
