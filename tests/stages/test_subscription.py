"""The subscription source in-process: names from the resolver, rejects counted per reason, FIFO end of
stream, and the aggregator turning its records into op_statistic."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.errors import UserError
from pipeline.stage import Batch, StageContext
from stages.aggregator import AggregatorStage
from stages.formats import op_desc
from stages.schema import SymbolTable, unpack_rows
from stages.sinks._partitions import PartitionMerge
from stages.subscription import (
    BAD_SIGNATURE,
    NO_NAME,
    NO_SIZE,
    SHORT_READ,
    SubscriptionStage,
    records,
)

OPS = [("Conv2D", "conv_0", "AI_CORE"), ("Relu", "relu_0", "AI_CORE"), ("NonMaxSuppressionV3", "nms", "AI_CPU")]


def _records(durations: list[int], size: int = 80, device: int = 0, first_index: int = 100) -> np.ndarray:
    recs = np.zeros(len(durations), op_desc.LAYOUTS[size])
    recs["op_index"] = np.arange(first_index, first_index + len(durations))
    recs["start"] = 1_000_000 + np.arange(len(durations)) * 10_000
    recs["duration"] = durations
    recs["end"] = recs["start"] + recs["duration"]
    recs["model_id"] = 1
    if size == 80:
        recs["dev_id"] = device
    op_desc.sign(recs)
    return recs


def _names(recs: np.ndarray, size: int | None = 80) -> str:
    lines = [json.dumps({"op_desc_size": size})] if size else []
    for i, index in enumerate(recs["op_index"].tolist()):
        op_type, name, core = OPS[i % len(OPS)]
        lines.append(json.dumps({"op_index": index, "op_type": op_type, "op_name": name, "core_type": core}))
    return "\n".join(lines) + "\n"


def _stage(tmp_path: Path, **config: Any) -> SubscriptionStage:
    ctx = StageContext(stage_id="subscribe", run_id="t", output_dir=tmp_path, aside_dir=tmp_path / "rejected")
    settings = {"path": "ops.bin", "wait_s": 5, "hold_s": 0.2, "poll_ms": 5, **config}
    return SubscriptionStage(SubscriptionStage.Config.model_validate(settings), ctx)


def _run(stage: SubscriptionStage) -> list[Batch]:
    return [batch for batch in stage.batches() if batch is not None]


def _ops(batches: list[Batch]) -> list[tuple[int, int, str, str, str, int]]:
    """(device, op_index, op_type, op_name, core_type, duration) of every record sent, in order."""
    symbols = SymbolTable()
    out = []
    for batch in batches:
        assert batch.kind == records.KIND and batch.meta["source"] == "subscribe"
        symbols.learn(batch.meta["symbols"])
        for r in records.from_batch(batch):
            out.append((int(r["device_id"]), int(r["op_index"]), symbols[int(r["op_type"])],
                        symbols[int(r["op_name"])], symbols[int(r["core_type"])], int(r["duration_ns"])))
    return out


def test_a_captured_stream_gives_named_ops_and_counts_each_reject_reason(tmp_path: Path) -> None:
    recs = _records([5000, 7000, 9000, 11000, 13000, 15000], device=3)
    data = bytearray(recs.tobytes())
    data[2 * 80 + 40] ^= 0x10  # record 2: a bit flipped in its start time
    data += recs[:1].tobytes()[:30]  # the writer stopped inside a record
    (tmp_path / "ops.bin").write_bytes(bytes(data))
    names = _names(recs).splitlines()
    del names[5]  # record 4 is never named
    names.insert(1, "not json")
    (tmp_path / "ops.bin.ndjson").write_text("\n".join(names) + "\n")
    stage = _stage(tmp_path)
    ops = _ops(_run(stage))
    assert ops == [(3, 100, "Conv2D", "conv_0", "AI_CORE", 5000), (3, 101, "Relu", "relu_0", "AI_CORE", 7000),
                   (3, 103, "Conv2D", "conv_0", "AI_CORE", 11000),
                   (3, 105, "NonMaxSuppressionV3", "nms", "AI_CPU", 15000)]
    assert dict(stage.ctx.rejected) == {BAD_SIGNATURE: 1, NO_NAME: 1, SHORT_READ: 1,
                                        "resolver line that is not JSON": 1}
    aside = sorted(p.name for p in (tmp_path / "rejected").iterdir())
    assert len(aside) == 3  # the bytes of the bad record, the unnamed one and the short read
    assert stage.accounting()["resolver_names_unused"] == 1  # record 2's name: its record was rejected


def test_72_byte_records_take_the_configured_device(tmp_path: Path) -> None:
    recs = _records([100, 200, 300], size=72)
    (tmp_path / "ops.bin").write_bytes(recs.tobytes())
    (tmp_path / "names.ndjson").write_text(_names(recs, size=None))
    ops = _ops(_run(_stage(tmp_path, resolver="names.ndjson", op_desc_size=72, device_id=5)))
    assert [(d, duration) for d, _, _, _, _, duration in ops] == [(5, 100), (5, 200), (5, 300)]


@pytest.mark.parametrize(("announced", "reason"), [(88, "ProfOpDesc of unknown size 88 (72 or 80 expected)"),
                                                   (None, NO_SIZE)])
def test_records_of_an_unknown_size_are_rejected_not_fatal(tmp_path: Path, announced: int | None,
                                                           reason: str) -> None:
    recs = _records([100] * 11)
    (tmp_path / "ops.bin").write_bytes(recs.tobytes())
    (tmp_path / "ops.bin.ndjson").write_text(_names(recs, size=announced))
    stage = _stage(tmp_path)
    assert _run(stage) == []
    assert dict(stage.ctx.rejected) == {reason: 10 if announced else 1}  # 880 bytes: ten 88-byte records


def test_a_fifo_is_made_read_across_short_writes_and_ends_when_its_writer_closes(tmp_path: Path) -> None:
    recs = _records(list(range(1000, 1000 + 300 * 7, 7)))
    names = _names(recs).splitlines(keepends=True)
    stage = _stage(tmp_path, path="sub/ops.fifo", hold_s=5)
    fifo = tmp_path / "sub" / "ops.fifo"

    def board() -> None:
        while not fifo.exists():
            time.sleep(0.01)
        with open(fifo, "wb", buffering=0) as pipe, open(f"{fifo}.ndjson", "w") as resolver:
            resolver.write(names[0])
            data, rng = recs.tobytes(), np.random.default_rng(7)
            for i in range(len(recs)):
                resolver.write(names[i + 1])
                resolver.flush()
                if i % 50 == 0:
                    time.sleep(0.02)  # let the reader wait on an empty pipe now and then
            at = 0
            while at < len(data):
                step = int(rng.integers(1, 200))
                at += pipe.write(data[at:at + step]) or 0

    writer = threading.Thread(target=board)
    writer.start()
    ops = _ops(_run(stage))
    writer.join()
    assert os.path.exists(fifo) and stage.poller is not None
    assert [op[1] for op in ops] == recs["op_index"].tolist()
    assert [op[5] for op in ops] == recs["duration"].tolist()
    assert not stage.ctx.rejected


def test_no_writer_within_wait_s_is_one_clear_error(tmp_path: Path) -> None:
    stage = _stage(tmp_path, path="ops.fifo", wait_s=0.1)
    with pytest.raises(UserError, match="nothing was written to .*ops.fifo within 0.1 s"):
        _run(stage)


def test_the_aggregator_adds_subscribed_ops_to_op_statistic(tmp_path: Path) -> None:
    recs = _records([4000, 6000, 500_000, 2000, 8000, 400_000])
    (tmp_path / "ops.bin").write_bytes(recs.tobytes())
    (tmp_path / "ops.bin.ndjson").write_text(_names(recs))
    batches = _run(_stage(tmp_path))
    ctx = StageContext(stage_id="aggregate", run_id="t", output_dir=tmp_path, batch_records=2)
    aggregator = AggregatorStage(AggregatorStage.Config(), ctx)
    for batch in batches:
        list(aggregator.process(batch))
    stats = [b for b in aggregator.finish() if b.kind == "op_statistic"]
    rows = sorted(tuple(row) for row in unpack_rows(stats[-1]))
    assert rows == [(0, "Conv2D", "AI_CORE", 2, 6000, 2000, 4000), (0, "NonMaxSuppressionV3", "AI_CPU", 2, 900_000,
                                                                      400_000, 500_000),
                    (0, "Relu", "AI_CORE", 2, 14000, 6000, 8000)]
    assert aggregator.accounting()["subscribed_ops"] == 6


def test_aggregator_partitions_count_each_subscribed_op_once(tmp_path: Path) -> None:
    """Subscribed batches name no device, so every partition gets them: each counts only its devices' ops."""
    recs = _records([4000, 6000, 500_000, 2000, 8000, 400_000])
    (tmp_path / "ops.bin").write_bytes(recs.tobytes())
    (tmp_path / "ops.bin.ndjson").write_text(_names(recs))
    batches = _run(_stage(tmp_path))
    merge, finals = PartitionMerge(), []
    for partition in (0, 1):
        ctx = StageContext(stage_id=f"aggregate-{partition}", run_id="t", output_dir=tmp_path, batch_records=2,
                           partition=partition, partitions=2)
        aggregator = AggregatorStage(AggregatorStage.Config(), ctx)
        for batch in batches:
            list(aggregator.process(batch))
        finals = [merge.merged(b) for b in aggregator.finish() if b.kind == "op_statistic"]
        kept_out = aggregator.accounting()["partition"]["kept_out"]
        assert kept_out.get("subscribed operator records of another partition's devices", 0) == 6 * partition
    rows = sorted(tuple(row) for row in unpack_rows(finals[-1]))
    assert finals[-1].meta["final"] and [row[:4] for row in rows] == [
        (0, "Conv2D", "AI_CORE", 2), (0, "NonMaxSuppressionV3", "AI_CPU", 2), (0, "Relu", "AI_CORE", 2)]
