"""ProfOpDesc signatures (CRC-32C) and framing the subscription pipe's bytes across arbitrary reads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.formats import op_desc
from stages.subscription.framing import OpDescFramer


def _crc32c_bitwise(data: bytes) -> int:
    """The standard CRC-32C, one bit at a time (independent of the table the module builds)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 * (crc & 1))
    return crc ^ 0xFFFFFFFF


def _records(n: int, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    recs = np.zeros(n, op_desc.LAYOUTS[size])
    raw = recs.view(np.uint8).reshape(n, size)
    raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
    recs["op_index"] = np.arange(n)  # tells records apart
    op_desc.sign(recs)
    return recs


def test_signature_is_the_standard_crc32c_without_its_final_xor() -> None:
    assert op_desc.CRC32C_TABLE[1] == 0xF26B8303  # CRC-32C (Castagnoli): the table starts 0, 0xF26B8303
    assert op_desc.signature(b"123456789") ^ 0xFFFFFFFF == 0xE3069283  # the CRC-32C check value


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=200))
def test_vectorised_signature_matches_a_bitwise_crc(data: bytes) -> None:
    assert op_desc.signature(data) == _crc32c_bitwise(data) ^ 0xFFFFFFFF


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from(op_desc.SIZES), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_a_flipped_bit_after_the_signature_is_caught(size: int, seed: int, data: st.DataObject) -> None:
    record = _records(1, size, seed)
    raw = bytearray(record.tobytes())
    bit = data.draw(st.integers(8 * op_desc.CHECKED_FROM, 8 * size - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    assert not op_desc.check(bytes(raw), size)[1][0]
    assert op_desc.check(record.tobytes(), size)[1][0]


@settings(max_examples=80, deadline=None)
@given(size=st.sampled_from(op_desc.SIZES), n=st.integers(0, 40), seed=st.integers(0, 2**32 - 1),
       data=st.data())
def test_records_come_out_whole_and_in_order_whatever_the_reads(size: int, n: int, seed: int,
                                                                  data: st.DataObject) -> None:
    recs = _records(n, size, seed)
    stream = recs.tobytes()
    corrupt = sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=n)) if n else set())
    spoilt = bytearray(stream)
    for i in corrupt:
        offset = i * size + data.draw(st.integers(op_desc.CHECKED_FROM, size - 1))
        spoilt[offset] ^= 0xFF
    tail = data.draw(st.integers(0, size - 1))  # a short read: the stream stops inside a record
    spoilt += bytes(range(tail))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(spoilt)), max_size=30)))
    framer = OpDescFramer(size)
    got, bad, bad_bytes = [], 0, b""
    for start, end in zip([0, *cuts], [*cuts, len(spoilt)], strict=True):
        framer.feed(bytes(spoilt[start:end]))
        taken = framer.take()
        got.extend(taken.records["op_index"].tolist())
        bad += taken.bad_count
        bad_bytes += taken.bad_bytes
        assert framer.pending_bytes < size
    assert got == [i for i in range(n) if i not in corrupt]
    assert bad == len(corrupt)
    assert bad_bytes == b"".join(bytes(spoilt[i * size:(i + 1) * size]) for i in corrupt)
    assert framer.rest() == bytes(range(tail))


def test_nothing_is_cut_while_the_size_is_unknown() -> None:
    framer = OpDescFramer()
    framer.feed(_records(3, 80, 1).tobytes())
    assert len(framer.take().records) == 0 and framer.pending_bytes == 240
    framer.size = 80
    assert framer.take().records["op_index"].tolist() == [0, 1, 2]
