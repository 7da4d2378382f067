"""The header frame every stage message starts with (msgpack), shared by the pipeline and the board agent.

Header = [version, kind, producer, port, seq, record_kind, count, meta]; the body is a second frame.
``pipeline.wire`` decodes and checks it; this module only builds it, with msgpack alone.
"""

from __future__ import annotations

from typing import Any

import msgpack

VERSION = 1
KIND_DATA = 0
KIND_EOS = 1
KIND_BARRIER = 2
HEADER_FIELDS = 8


def header(kind: int, producer: str, port: str, seq: int, record_kind: str, count: int,
           meta: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb([VERSION, kind, producer, port, seq, record_kind, count, meta], use_bin_type=True)
    return packed


def data(producer: str, port: str, seq: int, record_kind: str, count: int, meta: dict[str, Any],
         body: bytes) -> list[bytes]:
    return [header(KIND_DATA, producer, port, seq, record_kind, count, meta), body]


def eos(producer: str, port: str, seq: int, batches: int, records: int) -> list[bytes]:
    return [header(KIND_EOS, producer, port, seq, "eos", records, {"batches": batches}), b""]


def barrier(producer: str, port: str, seq: int, epoch: int, final: bool) -> list[bytes]:
    return [header(KIND_BARRIER, producer, port, seq, "barrier", epoch, {"final": final}), b""]
