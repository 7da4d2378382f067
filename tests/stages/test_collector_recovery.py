"""A collector restored from a checkpoint goes on where the first one was: together they ship every record once,
in file order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chain import make_ctx

from pipeline.stage import Batch
from stages.collector import CollectorStage
from stages.simulator.writer import simulate

TEXT_KINDS = {"hash_dic": b"\n", "type_info_dic": b"\n"}  # the text streams of this board


def _collector(prof: Path, out: Path) -> CollectorStage:
    # a small read quantum: many passes, so checkpoints fall between records of one slice and between slices
    config = CollectorStage.Config(path=str(prof), follow=False, read_quantum_bytes=4096, chunk_records=50)
    return CollectorStage(config, make_ctx("collect", out))


def _shipped(batches: list[Batch]) -> dict[Any, Any]:
    """Per stream, its records' bytes in order and their count; the control files. (Where chunks are cut
    depends on when each read happened, which a restart changes.)"""
    streams: dict[Any, list[Any]] = {}
    for batch in batches:
        key = ("control", batch.meta["path"]) if batch.kind == "control" else batch.meta["stream"]
        shipped = streams.setdefault(key, [0, [], []])
        shipped[0] += batch.count
        if batch.kind == "control":
            shipped[1].append(batch.meta["text"])
        elif batch.meta["kind"] in TEXT_KINDS:  # records joined by a separator inside one batch
            shipped[1].extend(batch.body.split(TEXT_KINDS[batch.meta["kind"]]))
        else:  # fixed-size and TLV records delimit themselves
            shipped[1].append(batch.body)
            shipped[1] = [b"".join(shipped[1])]
        if batch.kind == "raw":
            shipped[2].append(batch.meta["file"])
    return {key: (count, records, sorted(set(files), key=files.index))  # slices in the order they were read
            for key, (count, records, files) in streams.items()}


@pytest.fixture(scope="module")
def prof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate(tmp_path_factory.mktemp("board"), iterations=6, rate="max", seed=5, slice_bytes=8192)


@pytest.mark.parametrize("share", [0.0, 0.3, 0.6, 0.9])
def test_restored_collector_ships_the_rest_once(prof: Path, tmp_path: Path, share: float) -> None:
    items = list(_collector(prof, tmp_path / "a").batches())
    whole = [b for b in items if b is not None]
    last_record = max(i for i, item in enumerate(items) if item is not None)
    # safe points while records remain (the passes after the last one only look for more)
    safe_point = 1 + int(share * (items[:last_record].count(None) - 1))

    first = _collector(prof, tmp_path / "b")
    before: list[Batch] = []
    saved, points = b"", 0
    for item in first.batches():
        if item is not None:
            before.append(item)
            continue
        points += 1
        if points == safe_point:  # where the runtime takes a checkpoint: between passes
            saved = first.snapshot()
            break
    assert saved, "the directory was read before the checkpoint"
    assert 0 < len(before) < len(whole)

    second = _collector(prof, tmp_path / "c")
    second.restore(saved)
    after = [b for b in second.batches() if b is not None]
    assert _shipped(before + after) == _shipped(whole)
    assert second.collected == first.collected + sum(b.count for b in after) == sum(b.count for b in whole)
