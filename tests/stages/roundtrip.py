"""Round-trip helpers: bytes framed as the collector frames them (two reads, cut anywhere), then decoded."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from chain import make_ctx

from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.formats.files import StreamKind
from stages.framing import frame


def local_ns(ticks: int, freq_khz: int, cnt0: int, mono0: int, offset: int) -> int:
    """msprof's time conversion, in integers: mono0 + (ticks − cnt0) / freq, floored to whole ns, + local offset."""
    return mono0 + (ticks - cnt0) * 1_000_000 // freq_khz + offset


def decode_in_two_reads(control: dict[str, str], kind: StreamKind, body: bytes, cut: int,
                        device: int | None = None) -> tuple[list[Batch], dict[str, int]]:
    """The first ``cut`` bytes arrive in one read, the rest in the next; every decoded batch, and the
    decoder's accounting (checked to balance)."""
    with tempfile.TemporaryDirectory() as folder:
        decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", Path(folder)))
        for path, text in control.items():
            list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
        first = frame(kind, body[:cut], final=False)
        second = frame(kind, body[first.consumed:], final=True)
        assert first.garbage == [] and second.garbage == []
        out: list[Batch] = []
        for framed in (first, second):
            if framed.count:
                meta = {"kind": kind.name, "stream": kind.name, "device": device, "size": kind.record_size}
                out.extend(decoder.process(Batch("raw", framed.count, meta, framed.records)))
        assert decoder.check() == []
        return out, decoder.accounting()


def arrays(batches: list[Batch]) -> dict[str, np.ndarray]:
    """Decoded record arrays by kind, in arrival order."""
    parts: dict[str, list[np.ndarray]] = {}
    for batch in batches:
        parts.setdefault(batch.kind, []).append(records.from_batch(batch))
    return {kind: np.concatenate(found) for kind, found in parts.items()}
