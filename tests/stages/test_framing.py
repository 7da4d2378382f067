"""Framing raw streams into whole records, with garbage counted and never fatal."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.formats import files, raw
from stages.framing import frame


def _api_records(n: int) -> bytes:
    arr = np.zeros(n, raw.API_EVENT)
    arr["magic"] = raw.HOST_MAGIC
    arr["level"] = raw.LEVEL_ACL
    arr["begin"] = np.arange(1, n + 1)
    return arr.tobytes()


def _timeline_records(n: int) -> bytes:
    arr = np.zeros(n, raw.MINI_TIMELINE)
    arr["mode"], arr["tag"], arr["buf_size"] = 1, raw.MINI_TAG_TIMELINE, 32
    arr["task_id"] = np.arange(n)
    return arr.tobytes()


def test_partial_record_waits_for_more_bytes() -> None:
    data = _api_records(3)
    framed = frame(files.API_EVENT, data[:100], final=False)
    assert (framed.count, framed.consumed, framed.garbage) == (2, 80, [])
    framed = frame(files.API_EVENT, data[:100], final=True)
    assert framed.count == 2 and framed.garbage == [data[80:100]]


def test_garbage_between_records_is_skipped_and_counted() -> None:
    garbage = b"\x01\x02\x03" * 7
    data = _api_records(4) + garbage + _api_records(5)
    framed = frame(files.API_EVENT, data, final=True)
    assert framed.count == 9
    assert b"".join(framed.garbage) == garbage
    assert framed.records == _api_records(4) + _api_records(5)


def test_tlv_stream_resyncs() -> None:
    data = _timeline_records(3) + b"\xff\xfe\x00" + _timeline_records(2)
    framed = frame(files.MINI_TS_TRACK, data, final=True)
    assert framed.count == 5 and b"".join(framed.garbage) == b"\xff\xfe\x00"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(prefix=st.integers(0, 20), junk=st.binary(max_size=300), suffix=st.integers(0, 20),
       cut=st.integers(0, 10_000))
def test_fixed_framing_accounts_for_every_byte(prefix: int, junk: bytes, suffix: int, cut: int) -> None:
    data = _api_records(prefix) + junk + _api_records(suffix)
    # Feed in two reads, as a growing file would arrive.
    cut = min(cut, len(data))
    first = frame(files.API_EVENT, data[:cut], final=False)
    rest = data[first.consumed:]
    second = frame(files.API_EVENT, rest, final=True)
    total = first.count + second.count
    framed_bytes = len(first.records) + len(second.records)
    garbage_bytes = sum(map(len, first.garbage + second.garbage))
    assert framed_bytes + garbage_bytes == len(data)
    assert framed_bytes == total * 40
    assert total >= prefix + suffix - 1  # at most one record can be swallowed by junk that mimics a header
