"""Collector → decoder → aggregator in one process (no sockets), for stage-level tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipeline.stage import Batch, StageContext
from stages.aggregator import AggregatorStage
from stages.collector import CollectorStage
from stages.decoder import DecoderStage, records


def make_ctx(stage_id: str, out: Path) -> StageContext:
    return StageContext(stage_id=stage_id, run_id="test", output_dir=out, aside_dir=out / "rejected")


def decoded_batch(kind: str, rows: list[dict[str, Any]], stream: str, device: int = 0) -> Batch:
    """A decoder batch of ``kind`` records with the given fields (the others 0), from ``stream``."""
    arr = np.zeros(len(rows), records.DTYPES[kind])
    for i, row in enumerate(rows):
        for name, value in row.items():
            arr[name][i] = value
    return records.to_batch(kind, arr, {"stream": stream, "device": device})


def decode_dir(prof_dir: Path, out: Path) -> tuple[list[Batch], CollectorStage, DecoderStage]:
    """Every decoded batch of a finished directory, in the order the decoder emits them."""
    collector = CollectorStage(CollectorStage.Config(path=str(prof_dir), follow=False), make_ctx("collect", out))
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", out))
    decoded: list[Batch] = []
    for raw in collector.batches():
        if raw is not None:
            decoded.extend(decoder.process(raw))
    decoded.extend(decoder.finish())
    return decoded, collector, decoder


def aggregate(decoded: list[Batch], out: Path, **aggregator: Any) -> tuple[list[Batch], AggregatorStage]:
    """Everything the aggregator emits for these decoded batches."""
    agg = AggregatorStage(AggregatorStage.Config(**aggregator), make_ctx("aggregate", out))
    emitted: list[Batch] = []
    for batch in decoded:
        emitted.extend(agg.process(batch))
    emitted.extend(agg.finish())
    return emitted, agg


def run_chain(prof_dir: Path, out: Path, **aggregator: Any) -> tuple[list[Batch], dict[str, Any]]:
    """Everything the aggregator emits for a finished directory, and each stage's figures."""
    decoded, collector, decoder = decode_dir(prof_dir, out)
    emitted, agg = aggregate(decoded, out, **aggregator)
    figures = {"collector": collector.accounting(), "decoder": decoder.accounting(),
               "aggregator": agg.accounting(), "rejected": {**collector.ctx.rejected, **decoder.ctx.rejected,
                                                            **agg.ctx.rejected}}
    return emitted, figures
