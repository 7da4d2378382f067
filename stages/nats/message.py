"""What travels through JetStream: one pipeline batch per message, and the subjects it goes to.

Payload: msgpack ``[kind, count, meta, body]``, the fields of :class:`pipeline.stage.Batch`. Statistics
snapshots travel as *parts* (kinds ``op_statistic_part`` and ``api_statistic_part``): one message per
device (op_statistic) or per host (api_statistic), names as text so no symbol table is needed to read
one, and ``meta`` = ``{"source", "seq", "final"}``. A part replaces the previous part of its source
(a full snapshot, not a delta), and ``seq`` grows with every snapshot, so a consumer that sees a part
twice, or an older one after a newer, keeps the newer (:mod:`stages.cluster`). Other kinds (records)
travel as they are, with their symbol pairs in ``meta``.

Subjects: ``{prefix}.{cluster}.{host}.{device}.stats`` for op_statistic parts, ``{…}.{host}.host.stats`` for
api_statistic parts, ``{…}.{host}.all.{kind}`` for records and ``{…}.{host}.eos`` for a publisher's end.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

from pipeline.stage import Batch

OP_PART = "op_statistic_part"
API_PART = "api_statistic_part"
EOS = "nats_eos"  # a publisher closed: meta {"source": host subject, "seq"}
PART_KINDS = (OP_PART, API_PART)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_PAYLOAD = 1 << 20  # nats-server's default max_payload


def token(text: str) -> str:
    """One subject token: characters NATS treats specially ('.', '*', '>', spaces) become '_'."""
    return _UNSAFE.sub("_", text) or "_"


def encode(batch: Batch) -> bytes:
    return msgpack.packb([batch.kind, batch.count, batch.meta, batch.body], use_bin_type=True)


def decode(payload: bytes) -> Batch:
    """The batch a message holds; ValueError when it is not one of ours."""
    try:
        kind, count, meta, body = msgpack.unpackb(payload, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ValueError(f"not a pipeline batch message: {exc}") from None
    if not (isinstance(kind, str) and isinstance(count, int) and isinstance(meta, dict) and isinstance(body, bytes)):
        raise ValueError("not a pipeline batch message: wrong field types")
    return Batch(kind=kind, count=count, meta=meta, body=body)


def part_batch(kind: str, rows: list[list[Any]], source: str, seq: int, final: bool) -> Batch:
    body = msgpack.packb(rows, use_bin_type=True)
    return Batch(kind=kind, count=len(rows), meta={"source": source, "seq": seq, "final": final}, body=body)
