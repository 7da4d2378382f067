"""The wire protocol between stages: a msgpack header frame plus an optional body frame.

Header = [version, kind, producer, port, seq, record_kind, count, meta]. ``seq`` counts the
messages one producer sent on one socket, so a receiver sees gaps; an EOS message carries
the totals that the receiver reconciles against what it got. A BARRIER message (checkpoint
epoch in the count field, ``{"final": bool}`` as meta) separates the records of one epoch from
the next (pipeline.checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

import msgpack

from pipeline.stage import Batch
from pipeline_board import wire as shared  # the header layout, also used by the board agent (no numpy there)
from pipeline_board.wire import KIND_BARRIER, KIND_DATA, KIND_EOS, VERSION

__all__ = ["KIND_BARRIER", "KIND_DATA", "KIND_EOS", "VERSION", "Message", "WireError", "decode", "encode_barrier",
           "encode_batch", "encode_eos"]
MAX_HEADER_BYTES = 1 << 20


class WireError(ValueError):
    """A message that is not ours or is malformed: counted and dropped, never fatal.

    ``reason`` is one of a few fixed phrases (what a run report counts, so forged messages add counts,
    not rows); the exception's text adds the detail for the log.
    """

    def __init__(self, reason: str, detail: object = None) -> None:
        super().__init__(reason if detail is None else f"{reason}: {_shown(detail)}")
        self.reason = reason


def _shown(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _is_count(value: object) -> TypeGuard[int]:
    """A non-negative int (msgpack's booleans are not counts)."""
    return type(value) is int and value >= 0


@dataclass
class Message:
    kind: int
    producer: str
    port: str
    seq: int
    batch: Batch | None = None
    sent_batches: int = 0
    sent_records: int = 0
    epoch: int = 0  # a barrier's checkpoint epoch
    final: bool = False  # the barrier sent just before end of stream


def encode_batch(producer: str, seq: int, batch: Batch) -> list[bytes]:
    return shared.data(producer, batch.port, seq, batch.kind, batch.count, batch.meta, batch.body)


def encode_eos(producer: str, port: str, seq: int, batches: int, records: int) -> list[bytes]:
    return shared.eos(producer, port, seq, batches, records)


def encode_barrier(producer: str, port: str, seq: int, epoch: int, final: bool) -> list[bytes]:
    return shared.barrier(producer, port, seq, epoch, final)


def decode(frames: list[bytes]) -> Message:
    if len(frames) != 2:
        raise WireError("not 2 frames", len(frames))
    header_bytes, body = frames
    if len(header_bytes) > MAX_HEADER_BYTES:
        raise WireError("header frame too large", len(header_bytes))
    try:
        header = msgpack.unpackb(header_bytes, raw=False)
    except Exception as exc:
        raise WireError("header is not msgpack", exc) from None
    if not isinstance(header, list) or len(header) != shared.HEADER_FIELDS:
        raise WireError("header is not an 8-field array", header)
    version, kind, producer, port, seq, record_kind, count, meta = header
    if version != VERSION:
        raise WireError(f"not protocol version {VERSION}", version)
    if not (isinstance(producer, str) and isinstance(port, str) and _is_count(seq)
            and _is_count(count) and isinstance(meta, dict) and isinstance(record_kind, str)):
        raise WireError("header fields have wrong types", header[2:7])
    if kind == KIND_EOS:
        batches = meta.get("batches")
        if not _is_count(batches):
            raise WireError("EOS without batch count", batches)
        return Message(KIND_EOS, producer, port, seq, sent_batches=batches, sent_records=count)
    if kind == KIND_BARRIER:
        if count < 1 or not isinstance(meta.get("final"), bool):
            raise WireError("barrier without an epoch or its final flag")
        return Message(KIND_BARRIER, producer, port, seq, epoch=count, final=meta["final"])
    if kind != KIND_DATA:
        raise WireError("unknown message kind", kind)
    meta_typed: dict[str, Any] = meta
    return Message(KIND_DATA, producer, port, seq, Batch(record_kind, count, meta_typed, bytes(body), port))
