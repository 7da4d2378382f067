"""Fuzzing the wire protocol: random frames, random msgpack headers, bit flips of real headers, and a
stage's receiving end fed a stream of malformed and foreign messages. A message is decoded or refused
with one of a few fixed reasons; a stage counts and logs what it refuses (once per reason) and goes on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import structlog
from fuzz_budget import budget
from hypothesis import given
from hypothesis import strategies as st

from pipeline import wire
from pipeline.config import parse_config
from pipeline.runner import StageRunner
from pipeline.stage import Batch

REASONS = {"not 2 frames", "header frame too large", "header is not msgpack", "header is not an 8-field array",
           f"not protocol version {wire.VERSION}", "header fields have wrong types", "EOS without batch count",
           "barrier without an epoch or its final flag", "unknown message kind"}
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), st.text(max_size=12),
                    st.binary(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
METAS = st.dictionaries(st.text(max_size=8), VALUES, max_size=4)


@st.composite
def headers(draw: st.DrawFn) -> list[Any]:
    """Mostly well-formed headers with one field or more swapped for anything msgpack carries."""
    header: list[Any] = [wire.VERSION, draw(st.sampled_from([wire.KIND_DATA, wire.KIND_EOS])),
                         draw(st.text(max_size=10)), draw(st.text(max_size=6)), draw(st.integers(0, 2**32)),
                         draw(st.text(max_size=10)), draw(st.integers(0, 2**32)), draw(METAS)]
    for index in draw(st.lists(st.integers(0, 7), max_size=3)):
        header[index] = draw(VALUES)
    if draw(st.booleans()):
        header = header[:draw(st.integers(0, 9))] + draw(st.lists(VALUES, max_size=2))
    return header


def _decode_or_refuse(frames: list[bytes]) -> wire.Message | None:
    try:
        message = wire.decode(frames)
    except wire.WireError as exc:
        assert exc.reason in REASONS, exc.reason
        return None
    assert isinstance(message.producer, str) and isinstance(message.port, str)
    assert type(message.seq) is int and message.seq >= 0
    if message.kind == wire.KIND_EOS:
        assert type(message.sent_batches) is int and message.sent_batches >= 0 and message.sent_records >= 0
    elif message.kind == wire.KIND_BARRIER:  # a checkpoint barrier: an epoch and whether it is the last
        assert type(message.epoch) is int and message.epoch >= 1 and type(message.final) is bool
    else:
        assert message.batch is not None and message.batch.count >= 0 and isinstance(message.batch.meta, dict)
    return message


@budget()
@given(frames=st.lists(st.binary(max_size=200), max_size=4))
def test_random_frames_are_refused_or_well_formed(tried: Callable[..., Any], frames: list[bytes]) -> None:
    with tried():
        _decode_or_refuse(frames)


@budget(scale=2)
@given(header=headers(), body=st.binary(max_size=64))
def test_random_headers_are_refused_or_well_formed(tried: Callable[..., Any], header: list[Any], body: bytes) -> None:
    with tried():
        _decode_or_refuse([msgpack.packb(header, use_bin_type=True), body])


@budget()
@given(meta=st.dictionaries(st.text(max_size=8), st.integers(0, 2**32) | st.text(max_size=8), max_size=3),
       count=st.integers(0, 2**32), seq=st.integers(0, 2**32), body=st.binary(max_size=64),
       flips=st.lists(st.integers(0, 10_000), min_size=1, max_size=4))
def test_bit_flips_of_real_headers_are_refused_or_well_formed(tried: Callable[..., Any], meta: dict[str, Any],
                                                              count: int, seq: int, body: bytes,
                                                              flips: list[int]) -> None:
    frames = wire.encode_batch("collect", seq, Batch("raw", count, meta, body))
    assert wire.decode(frames).batch == Batch("raw", count, meta, body)  # unflipped: the same batch back
    header = bytearray(frames[0])
    for bit in flips:
        header[bit // 8 % len(header)] ^= 1 << (bit % 8)
    with tried():
        _decode_or_refuse([bytes(header), body])


def _runner(tmp: Path) -> StageRunner:
    raw = {"run": {"name": "fuzz", "output": str(tmp)},
           "stages": {"collect": {"type": "collector", "path": str(tmp)},
                      "decode": {"type": "decoder", "inputs": ["collect"]}}}
    return StageRunner(parse_config(raw, tmp / "fuzz.yaml"), "decode", "fuzz-run", None)


@budget(scale=0.25)
@given(messages=st.lists(st.one_of(headers().map(lambda h: [msgpack.packb(h, use_bin_type=True), b""]),
                                   st.lists(st.binary(max_size=40), max_size=3)), min_size=1, max_size=40))
def test_a_stage_counts_and_logs_what_it_refuses(tried: Callable[..., Any], tmp_path_factory: Any,
                                                 messages: list[list[bytes]]) -> None:
    runner = _runner(tmp_path_factory.mktemp("wire"))
    try:
        with tried(len(messages)), structlog.testing.capture_logs() as logs:  # an input: one message
            accepted = []
            for frames in messages:
                runner._receive(frames)
                accepted.append(runner._next_batch())
    finally:
        runner.zctx.term()
    refused = sum(runner.wire_rejected.values())
    expected_refusals = sum(1 for frames in messages if _refused_by_stage(frames))
    assert refused == expected_refusals
    assert set(runner.wire_rejected) <= {f"malformed message: {r}" for r in REASONS} | {
        "message from an unexpected producer"}  # fixed reasons: forged messages add counts, not rows
    warnings = [entry["reason"] for entry in logs if entry.get("event") == "message rejected"]
    assert sorted(warnings) == sorted(runner.wire_rejected)  # each reason logged once
    assert all(batch is None or isinstance(batch, Batch) for batch in accepted)


def _refused_by_stage(frames: list[bytes]) -> bool:
    try:
        message = wire.decode(frames)
    except wire.WireError:
        return True
    return (message.producer, message.port) != ("collect", "out")
