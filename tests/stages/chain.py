"""Collector → decoder → aggregator in one process (no sockets), for stage-level tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.stage import Batch, StageContext
from stages.aggregator import AggregatorStage
from stages.collector import CollectorStage
from stages.decoder import DecoderStage


def make_ctx(stage_id: str, out: Path) -> StageContext:
    return StageContext(stage_id=stage_id, run_id="test", output_dir=out, aside_dir=out / "rejected")


def run_chain(prof_dir: Path, out: Path, **aggregator: Any) -> tuple[list[Batch], dict[str, Any]]:
    """Everything the aggregator emits for a finished directory, and each stage's figures."""
    collector = CollectorStage(CollectorStage.Config(path=str(prof_dir), follow=False), make_ctx("collect", out))
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", out))
    agg = AggregatorStage(AggregatorStage.Config(**aggregator), make_ctx("aggregate", out))
    emitted: list[Batch] = []
    for raw in collector.batches():
        if raw is None:
            continue
        for decoded in decoder.process(raw):
            emitted.extend(agg.process(decoded))
    for decoded in decoder.finish():
        emitted.extend(agg.process(decoded))
    emitted.extend(agg.finish())
    figures = {"collector": collector.accounting(), "decoder": decoder.accounting(),
               "aggregator": agg.accounting(), "rejected": {**collector.ctx.rejected, **decoder.ctx.rejected,
                                                            **agg.ctx.rejected}}
    return emitted, figures
