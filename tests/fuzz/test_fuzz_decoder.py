"""Fuzzing the decoder through DecoderStage.process, as the collector's chunks reach it: damaged real
streams (the golden directories), damaged synthetic streams of every other kind, forged chunks that no
collector would send, and control files with odd values. Nothing raises or hangs; every record that
comes in is decoded or rejected; everything sent on is a well-formed message; and the records the damage
did not touch still decode."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from chain import make_ctx
from fuzz_budget import budget
from fuzz_streams import DATA, KINDS, damage, feed, raw_batch, records, recoverable
from hypothesis import given
from hypothesis import strategies as st

from pipeline import wire
from pipeline.stage import Batch
from stages.collector import CollectorStage
from stages.decoder import DecoderStage
from stages.decoder import records as decoded_records
from stages.formats.files import StreamKind
from stages.framing import frame

SCENARIOS = ("mini", "cloud", "910b", "legacy")
CUTS = st.lists(st.integers(0, 4096), max_size=4)


@cache
def golden(scenario: str) -> tuple[tuple[Batch, ...], tuple[tuple[str, str, int | None, bytes], ...]]:
    """A golden directory as the collector ships it: its control batches, and per stream
    (stream, kind, device, every record's bytes in file order)."""
    root = next((DATA / scenario).iterdir())
    with tempfile.TemporaryDirectory() as out:
        collector = CollectorStage(CollectorStage.Config(path=str(root), follow=False), make_ctx("c", Path(out)))
        shipped = [b for b in collector.batches() if b is not None]
    streams: dict[tuple[str, str, int | None], bytes] = {}
    for batch in shipped:
        if batch.kind == "raw":
            key = (batch.meta["stream"], batch.meta["kind"], batch.meta["device"])
            joiner = b"\n" if KINDS[key[1]].framing == "text" and key in streams else b""
            streams[key] = streams.get(key, b"") + joiner + batch.body
    controls = tuple(b for b in shipped if b.kind == "control")
    return controls, tuple((*key, body) for key, body in sorted(streams.items(), key=str))


GOLDEN = [(scenario, i) for scenario in SCENARIOS for i in range(len(golden(scenario)[1]))]
GOLDEN_KINDS = {stream[1] for scenario in SCENARIOS for stream in golden(scenario)[1]}
SYNTHETIC = sorted(set(KINDS) - GOLDEN_KINDS - {"aicpu_preprocess"}) + ["aicpu_preprocess"]


def _decoder(folder: Path, controls: tuple[Batch, ...]) -> DecoderStage:
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", folder))
    for control in controls:
        _check_output(decoder.process(control))
    return decoder


def _check_output(batches: Any) -> list[Batch]:
    """What the decoder sends on: numpy records of the right size, and meta that travels on the wire."""
    out = list(batches)
    for batch in out:
        if batch.kind in decoded_records.DTYPES:
            assert len(batch.body) == batch.count * decoded_records.DTYPES[batch.kind].itemsize, batch.kind
        message = wire.decode(wire.encode_batch("decode", 0, batch))
        assert message.batch is not None and message.batch.count == batch.count
    return out


def _split(kind: StreamKind, body: bytes) -> list[bytes]:
    """The records of a stream the collector framed (text: lines)."""
    if kind.framing == "text":
        return [line + b"\n" for line in body.split(b"\n")]
    if kind.framing == "fixed":
        return [body[i:i + kind.record_size] for i in range(0, len(body), kind.record_size)]
    out, pos = [], 0
    while pos < len(body):
        size = int.from_bytes(body[pos + 2:pos + 4], "little")
        out.append(body[pos:pos + size])
        pos += size
    return out


def _run(kind: StreamKind, device: int | None, stream: str, data: bytes, cuts: list[int],
         controls: tuple[Batch, ...]) -> tuple[DecoderStage, int, int]:
    """Frame ``data`` as the collector would, decode every chunk; (decoder, records framed, garbage bytes)."""
    fed = feed(kind, data, cuts)
    with tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder), controls)
        for call in fed.calls:
            if call.count:
                _check_output(decoder.process(raw_batch(kind, call, device, stream)))
        _check_output(decoder.finish())
    return decoder, fed.count, len(fed.garbage)


@budget()
@given(data=st.data(), which=st.sampled_from(GOLDEN), cuts=CUTS)
def test_damaged_golden_streams_decode_or_reject_every_record(tried: Callable[..., Any], data: st.DataObject,
                                                             which: tuple[str, int], cuts: list[int]) -> None:
    scenario, index = which
    controls, streams = golden(scenario)
    stream, name, device, body = streams[index]
    kind = KINDS[name]
    recs = _split(kind, body)
    damaged = data.draw(damage(kind, recs))
    with tried():
        decoder, framed, garbage = _run(kind, device, stream, damaged.data, cuts, controls)
        untouched = b"".join(recoverable(kind, damaged)) if kind.framing != "text" else b""
        baseline, _, _ = _run(kind, device, stream, untouched, [], controls)
    figures = decoder.accounting()
    assert figures["records_in"] == framed
    assert figures["decoded"] + figures["rejected"] == framed and decoder.check() == []
    if kind.framing == "fixed":  # every byte is a decoded record, a rejected one, or counted garbage
        assert (figures["decoded"] + figures["rejected"]) * kind.record_size + garbage == len(damaged.data)
    assert figures["decoded"] >= baseline.accounting()["decoded"], "untouched records no longer decode"


@budget()
@given(data=st.data(), name=st.sampled_from(SYNTHETIC), cuts=CUTS)
def test_damaged_streams_of_every_other_kind_decode_or_reject(tried: Callable[..., Any], data: st.DataObject,
                                                              name: str, cuts: list[int]) -> None:
    kind = KINDS[name]
    recs = data.draw(records(kind))
    damaged = data.draw(damage(kind, recs))
    controls, _ = golden("cloud")
    with tried():
        decoder, framed, garbage = _run(kind, 0, name, damaged.data, cuts, controls)
    figures = decoder.accounting()
    assert figures["records_in"] == framed
    assert figures["decoded"] + figures["rejected"] == framed and decoder.check() == []
    if kind.framing == "fixed":
        assert (figures["decoded"] + figures["rejected"]) * kind.record_size + garbage == len(damaged.data)


# -- chunks no collector sends ---------------------------------------------------------------------------

WIRE_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(),
                         st.text(max_size=20), st.binary(max_size=20))
WIRE_VALUES = st.recursive(WIRE_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
KIND_NAMES = st.one_of(st.sampled_from(sorted(KINDS)), WIRE_VALUES)
DEVICES = st.one_of(st.none(), st.integers(-3, 3), st.integers(2**16 - 2, 2**64 - 1), WIRE_VALUES)


@st.composite
def forged_meta(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = draw(st.dictionaries(st.text(max_size=8), WIRE_VALUES, max_size=3))
    for key, values in (("kind", KIND_NAMES), ("device", DEVICES), ("stream", WIRE_VALUES),
                        ("size", st.one_of(st.integers(-2, 300), WIRE_VALUES))):
        if draw(st.integers(0, 9)):  # mostly present
            meta[key] = draw(values)
    return meta


@budget(scale=2)
@given(meta=forged_meta(), count=st.integers(0, 2**20), body=st.binary(max_size=1024),
       valid_body=st.booleans(), batch_kind=st.sampled_from(["raw", "raw", "control", "other"]),
       control=st.dictionaries(st.sampled_from(["path", "text"]), WIRE_VALUES, max_size=2))
def test_forged_chunks_are_rejected_not_fatal(tried: Callable[..., Any], meta: dict[str, Any], count: int,
                                              body: bytes, valid_body: bool, batch_kind: str,
                                              control: dict[str, Any]) -> None:
    """Chunks with any meta a msgpack header can carry, any count and any body."""
    controls, streams = golden("cloud")
    if valid_body and isinstance(meta.get("kind"), str) and meta["kind"] in KINDS:
        matching = [s for s in streams if s[1] == meta["kind"]]
        if matching:
            body = matching[0][3]
    batch = Batch(batch_kind, count if batch_kind != "control" else 0, control if batch_kind == "control" else meta,
                  body)
    with tried(), tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder), controls)
        _check_output(decoder.process(batch))
        _check_output(decoder.finish())
    figures = decoder.accounting()
    assert figures["decoded"] + figures["rejected"] == figures["records_in"] == batch.count
    assert decoder.check() == []


# -- control files with odd values -----------------------------------------------------------------------

ODD_VALUES = st.one_of(
    st.sampled_from(["", "abc", "0", "-1", "1e400", "inf", "nan", "0x10", "99999999999999999999999999",
                     "100.5", " 7 "]),
    st.integers(-(2**70), 2**70), st.floats(), st.none(), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.text(max_size=12))


# Keys whose values the decoder turns into numbers: picked three times in four
NUMERIC_KEYS = {"pid", "platform_version", "hwts_frequency", "aic_frequency", "ai_core_num", "aiv_num", "Frequency",
                "collectionTimeBegin", "collectionTimeEnd", "clockMonotonicRaw", "ai_core_profiling_events",
                "aiv_profiling_events", "l2CacheTaskProfilingEvents", "DeviceInfo", "CPU"}


def _keys(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document a value sits."""
    if isinstance(value, dict):
        return [path] + [p for k, v in value.items() for p in _keys(v, path + (k,))]
    if isinstance(value, list):
        return [path] + [p for i, v in enumerate(value) for p in _keys(v, path + (i,))]
    return [path]


def _set(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    document[path[0]] = _set(document[path[0]], path[1:], value)
    return document


@st.composite
def odd_control(draw: st.DrawFn, controls: tuple[Batch, ...]) -> tuple[Batch, ...]:
    """The same control files, one of them changed: a JSON value replaced, a log number made absurd, or
    the whole text replaced."""
    index = draw(st.integers(0, len(controls) - 1))
    target = controls[index]
    text: str = target.meta["text"]
    how = draw(st.sampled_from(["value", "value", "log", "text"]))
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if how == "value" and document is not None:
        places = _keys(document)
        numeric = [place for place in places if place and place[-1] in NUMERIC_KEYS]
        place = draw(st.sampled_from(numeric if numeric and draw(st.integers(0, 3)) else places))
        text = json.dumps(_set(document, place, draw(ODD_VALUES)))
    elif how == "log" or (how == "value" and document is None):
        number = draw(st.sampled_from(["-1", "0", "99999999999999999999999999999", "-99999999999999999999999"]))
        lines = text.splitlines() or [""]
        line = draw(st.integers(0, len(lines) - 1))
        lines[line] = lines[line].split(":")[0] + ": " + number
        text = "\n".join(lines)
    else:
        text = draw(st.text(max_size=200))
    changed = Batch("control", 0, {"path": target.meta["path"], "text": text})
    return controls[:index] + (changed,) + controls[index + 1:]


@budget(scale=3)
@given(data=st.data(), scenario=st.sampled_from(SCENARIOS))
def test_control_files_with_odd_values_never_crash(tried: Callable[..., Any], data: st.DataObject,
                                                    scenario: str) -> None:
    controls, streams = golden(scenario)
    changed = data.draw(odd_control(controls))
    with tried(), tempfile.TemporaryDirectory() as folder:
        decoder = _decoder(Path(folder), changed)
        for stream, name, device, body in streams:
            framed = frame(KINDS[name], body, final=True)
            _check_output(decoder.process(raw_batch(KINDS[name], framed, device, stream)))
        _check_output(decoder.finish())
    figures = decoder.accounting()
    assert figures["decoded"] + figures["rejected"] == figures["records_in"] and decoder.check() == []
