"""Host records not covered by test_host_roundtrip.py: the compact/additional kinds the join does not use
yet, msproftx, and the hash_dic / type_info_dic dictionaries. Random field values are packed with the
format strings of msprof's parser (struct, not our dtypes), the bytes arrive in two reads cut anywhere,
and every decoded field must come back, times through a 19.2 MHz host counter."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from roundtrip import arrays, decode_in_two_reads, local_ns

from stages.decoder import host_records
from stages.formats import files, host_extra, raw

CNT0, MONO0, WALL0_US, FREQ_KHZ = 96_000_000, 5_000_000_000, 1_700_000_000_000_000, 19_200
OFFSET = WALL0_US * 1000 - MONO0
CONTROL = {
    "host/info.json": '{"CPU": [{"Frequency": "19.200000"}], "DeviceInfo": [], "devices": "64"}',
    "host/start_info": f'{{"collectionTimeBegin": "{WALL0_US}", "clockMonotonicRaw": "{MONO0}"}}',
    "host/host_start.log": f"[Host]\nclock_monotonic_raw: {MONO0}\ncntvct: {CNT0}\n",
}
TICKS = st.integers(CNT0, CNT0 + 2**44)  # up to ten days: later than a year after start_info is rejected
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def _host_ns(ticks: int) -> int:
    return local_ns(ticks, FREQ_KHZ, CNT0, MONO0, OFFSET)


def _items(fmt: str) -> list[str]:
    """One struct code per packed item: "=HH3IQ156s" → ['H', 'H', 'I', 'I', 'I', 'Q', '156s']."""
    out: list[str] = []
    for count, code in re.findall(r"(\d*)([a-zA-Z])", fmt):
        out += [count + code] if code == "s" else [code] * int(count or 1)
    return out


_VALUES: dict[str, Any] = {
    "B": st.integers(0, 2**8 - 1), "H": st.integers(0, 2**16 - 1), "I": st.integers(0, 2**32 - 1),
    "Q": st.integers(0, 2**64 - 1), "i": st.integers(-2**31, 2**31 - 1),
    "d": st.floats(allow_nan=False), "156s": st.binary(min_size=156, max_size=156),
}


def _records(fmt: str, named: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Rows of (thread id, ticks, the first ``named`` payload items at random, the rest 0)."""
    codes = _items(fmt)[6:]
    payload = st.tuples(*(_VALUES[code] for code in codes[:named]))
    return st.lists(st.tuples(st.integers(0, 2**32 - 1), TICKS, payload), min_size=1, max_size=12)


def _pack(fmt: str, level: int, data_len: int, rows: list[tuple[Any, ...]]) -> bytes:
    rest = len(_items(fmt)) - 6
    return b"".join(struct.pack(fmt, raw.HOST_MAGIC, level, 0, thread, data_len, ticks,
                                *payload, *[0] * (rest - len(payload)))
                    for thread, ticks, payload in rows)


# kind → (format string, report level, payload field names in format order, with their item counts).
# Each format is msprof's StructFmt string, except where CANN's aprof_pub.h names bytes msprof leaves
# as padding: memcpy_info (MsprofMemcpyInfo: bytes, copyKind, deviceId, streamId) and
# capture_stream_info (deviceId u16 at 32; msprof reads only its low byte).
EXTRA: dict[str, tuple[str, int, list[tuple[str, int]]]] = {
    "node_attr_info": ("=HHIIIQQIQIQQ", raw.LEVEL_NODE, [("op_name", 1), ("attr_type", 1), ("hash_id", 1)]),
    "memcpy_info": ("=HHIIIQQHHI24B", raw.LEVEL_RUNTIME,
                    [("data_size", 1), ("direction", 1), ("device_id", 1), ("stream_id", 1)]),
    "hccl_op_info": ("=HHIIIQBBQQQ14B", raw.LEVEL_NODE,
                     [("flags", 1), ("data_type", 1), ("alg_type", 1), ("count", 1), ("group_name", 1)]),
    "capture_stream_info": ("=HHIIIQHHHHH30B", raw.LEVEL_RUNTIME,
                            [("capture_status", 1), ("model_stream_id", 1), ("original_stream_id", 1),
                             ("model_id", 1), ("device_id", 1)]),
    "context_id_info": ("=HHIIIQQI55I", raw.LEVEL_NODE,
                        [("op_name", 1), ("ctx_id_num", 1), ("ctx_ids", host_extra.CTX_ID_MAX)]),
    "graph_id_map": ("=HHIIIQQ56I", raw.LEVEL_MODEL, [("model_name", 1), ("graph_id", 1), ("model_id", 1)]),
    "fusion_op_info": ("=HHIIIQQI13Q29I", raw.LEVEL_NODE,
                       [("op_name", 1), ("fusion_op_num", 1), ("input_mem", 1), ("output_mem", 1),
                        ("weight_mem", 1), ("workspace_mem", 1), ("total_mem", 1),
                        ("fusion_op_ids", host_extra.FUSION_OP_MAX)]),
    "hccl_info": ("=HHIII4Q6IQ2Id3Q6I112B", raw.LEVEL_HCCL,
                  [(name, 1) for name in ("item_id", "ccl_tag", "group_name", "local_rank", "remote_rank",
                                          "rank_size", "work_flow_mode", "plane_id", "ctx_id", "notify_id",
                                          "stage", "role", "duration_estimated", "src_addr", "dst_addr",
                                          "data_size", "op_type", "data_type", "link_type", "transport_type",
                                          "rdma_type")]),
    "multi_thread": ("=HHIIIQI25I16Q", raw.LEVEL_ACL, [("thread_num", 1),
                                                       ("thread_ids", host_extra.MULTI_THREAD_MAX)]),
}


def test_formats_have_the_record_sizes() -> None:
    for kind, (fmt, _, _) in EXTRA.items():
        assert struct.calcsize(fmt) == host_extra.LAYOUTS[kind].itemsize == host_extra.STREAM_KINDS[kind].record_size


@pytest.mark.parametrize("kind", sorted(EXTRA))
@SETTINGS
@given(data=st.data(), cut=st.integers(0, 12 * 256))
def test_extra_host_kind_round_trip(kind: str, data: st.DataObject, cut: int) -> None:
    fmt, level, fields = EXTRA[kind]
    rows = data.draw(_records(fmt, sum(n for _, n in fields)))
    data_len = host_extra.LAYOUTS[kind].itemsize - 24
    batches, accounting = decode_in_two_reads(CONTROL, host_extra.STREAM_KINDS[kind], _pack(fmt, level, data_len, rows),
                                              cut)
    got = arrays(batches)[host_records.EXTRA_KINDS[kind]]
    assert accounting["decoded"] == len(rows) and accounting["rejected"] == 0
    assert got["thread_id"].tolist() == [thread for thread, _, _ in rows]
    assert got["ts_ns"].tolist() == [_host_ns(ticks) for _, ticks, _ in rows]
    start = 0
    for name, count in fields:
        values = [list(payload[start:start + count]) if count > 1 else payload[start] for _, _, payload in rows]
        start += count
        if name == "flags":  # MsprofHCCLOPInfo bitfield: bit 0 relay, bit 1 retry
            assert got["relay"].tolist() == [flags & 1 for flags in values]
            assert got["retry"].tolist() == [flags >> 1 & 1 for flags in values]
        else:
            assert got[name].tolist() == values, name


# -- msproftx ----------------------------------------------------------------------------------------------

TX_FMT = "=HH3IQ2HI2H4Ii5Qi156s"
TX_FIELDS = ("info_type", "res0", "res1", "stamp_magic", "data_tag", "process_id", "tx_thread_id", "category",
             "event_type", "payload_type", "payload", "start_time", "end_time", "mark_id", "domain", "message_type",
             "message")
TX_ROW = st.tuples(st.integers(0, 2**32 - 1), TICKS, st.integers(0, 1), st.integers(0, 2**16 - 1),
                   st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
                   st.integers(0, 3), st.integers(-2**31, 2**31 - 1), st.integers(0, 2**64 - 1), TICKS,
                   st.one_of(st.just(0), TICKS), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
                   st.integers(-2**31, 2**31 - 1), st.binary(max_size=156))


@SETTINGS
@given(rows=st.lists(TX_ROW, min_size=1, max_size=12), cut=st.integers(0, 12 * 256))
def test_msproftx_round_trip(rows: list[tuple[Any, ...]], cut: int) -> None:
    rows = [(*row[:11], row[11] and max(row[10], row[11]), *row[12:]) for row in rows]  # no end before its start
    assert struct.calcsize(TX_FMT) == raw.MSPROFTX.itemsize == files.MSPROFTX.record_size
    body = b"".join(struct.pack(TX_FMT, raw.HOST_MAGIC, raw.LEVEL_MSPROFTX, 0, thread, 232, ticks, info, seg, 0,
                                raw.HOST_MAGIC, 120, pid, tid, category, event, payload_type, payload, start, end,
                                mark, domain, message_type, message)
                    for (thread, ticks, info, seg, pid, tid, category, event, payload_type, payload, start, end, mark,
                         domain, message_type, message) in rows)
    batches, accounting = decode_in_two_reads(CONTROL, files.MSPROFTX, body, cut)
    tx = arrays(batches)["tx"]
    assert accounting["decoded"] == len(rows) and accounting["rejected"] == 0
    columns = list(zip(*rows, strict=True))
    assert tx["thread_id"].tolist() == list(columns[0])
    assert tx["ts_ns"].tolist() == [_host_ns(t) for t in columns[1]]
    for name, index in (("process_id", 4), ("tx_thread_id", 5), ("category", 6), ("event_type", 7),
                        ("payload_type", 8), ("payload", 9), ("mark_id", 12), ("domain", 13), ("message_type", 14)):
        assert tx[name].tolist() == list(columns[index]), name
    assert tx["start_ns"].tolist() == [_host_ns(t) for t in columns[10]]
    # no end time (a marker): the record ends where it starts
    assert tx["end_ns"].tolist() == [_host_ns(end or start) for start, end in zip(columns[10], columns[11],
                                                                                  strict=True)]
    assert tx["message"].tolist() == [m.rstrip(b"\0") for m in columns[15]]  # char[156], NULs padding it dropped


# -- hash_dic / type_info_dic ------------------------------------------------------------------------------

NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=40)
ENDING = st.sampled_from(["\n", "\r\n"])


def _not_decimal(text: str) -> bool:
    """No ASCII digit at all, or a character besides ASCII digits, '_' and white space."""
    return not any(c in "0123456789" for c in text) or any(not (c.isspace() or c in "0123456789_") for c in text)


# Lines neither dictionary accepts: no colon, or a key that is not ASCII decimals or does not fit 64 bits.
NOT_A_KEY = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r:"), min_size=1,
            max_size=20).filter(_not_decimal),
    st.sampled_from(["²", "-5", "1e3", "0x1f", "18446744073709551616", "99999999999999999999999", "²_3",
                     "1_18446744073709551616", "\xa0", "\x1c"]))
BAD_LINE = st.tuples(NOT_A_KEY, st.booleans(), NAME).map(lambda t: t[0] + (":" + t[2] if t[1] else ""))


def _decode_lines(kind: files.StreamKind, entries: list[Any], line_of: Callable[[tuple[Any, ...]], str],
                  endings: list[str], cut: int) -> tuple[list[list[Any]], int, int]:
    """Good entries (tuples, written by ``line_of``) mixed with bad lines, decoded: the rows, how many lines
    were rejected, and how many should have been (a line of ASCII white space only is no record at all:
    the framer skips it)."""
    lines = [line_of(e) if isinstance(e, tuple) else e for e in entries]
    body = "".join(line + end for line, end in zip(lines, endings, strict=False)).encode()
    batches, accounting = decode_in_two_reads(CONTROL, kind, body, cut)
    rows = [row for batch in batches for row in msgpack.unpackb(batch.body, raw=False)]
    bad = [line for e, line in zip(entries, lines, strict=True) if not isinstance(e, tuple) and line.encode().strip()]
    return rows, accounting["rejected"], len(bad)


@SETTINGS
@given(entries=st.lists(st.one_of(st.tuples(st.integers(0, 2**64 - 1), NAME), BAD_LINE), min_size=1, max_size=30),
       endings=st.lists(ENDING, min_size=30, max_size=30), cut=st.integers(0, 3000))
def test_hash_dic_round_trip(entries: list[Any], endings: list[str], cut: int) -> None:
    rows, rejected, bad = _decode_lines(files.HASH_DIC, entries, lambda e: f"{e[0]}:{e[1]}", endings, cut)
    assert rows == [list(e) for e in entries if isinstance(e, tuple)]
    assert rejected == bad


@SETTINGS
@given(entries=st.lists(st.one_of(st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1), NAME), BAD_LINE),
                        min_size=1, max_size=30),
       endings=st.lists(ENDING, min_size=30, max_size=30), cut=st.integers(0, 3000))
def test_type_info_dic_round_trip(entries: list[Any], endings: list[str], cut: int) -> None:
    rows, rejected, bad = _decode_lines(files.TYPE_INFO_DIC, entries, lambda e: f"{e[0]}_{e[1]}:{e[2]}", endings,
                                        cut)
    assert rows == [list(e) for e in entries if isinstance(e, tuple)]
    assert rejected == bad
