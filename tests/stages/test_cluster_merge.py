"""cluster_merge: combining statistics parts equals computing over the pooled durations; parts seen again or
out of order change nothing."""

from __future__ import annotations

import random
from pathlib import Path

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stage import Batch, StageContext
from stages.cluster import ClusterMerge, merge_api_rows, merge_op_rows
from stages.nats.message import API_PART, OP_PART, decode, encode, part_batch, token
from stages.schema import unpack_rows

OPS = ["Conv2D", "Relu", "MatMul"]
durations = st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=20)
# per source: op type → durations (ns)
source_data = st.dictionaries(st.sampled_from(OPS), durations, min_size=1, max_size=3)


def _op_rows(device: int, data: dict[str, list[int]]) -> list[list[object]]:
    return [[device, op, "AI_CORE", len(ns), sum(ns), min(ns), max(ns)] for op, ns in data.items()]


def _api_rows(data: dict[str, list[int]]) -> list[list[object]]:
    return [["acl", op, len(ns), sum(ns), min(ns), max(ns), sum((n / 1000) ** 2 for n in ns)]
            for op, ns in data.items()]


@given(st.lists(source_data, min_size=1, max_size=4))
def test_merged_op_rows_equal_statistics_of_the_pooled_durations(sources: list[dict[str, list[int]]]) -> None:
    merged = {row[1]: row for row in merge_op_rows(_op_rows(0, data) for data in sources)}
    for op in {op for data in sources for op in data}:
        pooled = [n for data in sources for n in data.get(op, [])]
        assert merged[op][3:] == [len(pooled), sum(pooled), min(pooled), max(pooled)]


@given(st.lists(source_data, min_size=1, max_size=4))
def test_merged_api_rows_keep_what_the_variance_needs(sources: list[dict[str, list[int]]]) -> None:
    merged = {row[1]: row for row in merge_api_rows(_api_rows(data) for data in sources)}
    for op in {op for data in sources for op in data}:
        pooled = [n / 1000 for data in sources for n in data.get(op, [])]
        mean = sum(pooled) / len(pooled)
        variance = sum((x - mean) ** 2 for x in pooled) / len(pooled)
        count, total_ns, _, _, sum_sq = merged[op][2:]
        assert count == len(pooled)
        assert abs(sum_sq / count - (total_ns / 1000 / count) ** 2 - variance) <= 1e-6 * max(1.0, sum_sq / count)


def test_devices_all_folds_every_device_into_one_row() -> None:
    rows = merge_op_rows([_op_rows(0, {"Relu": [5, 7]}), _op_rows(3, {"Relu": [2]})], all_devices=True)
    assert rows == [["all", "Relu", "AI_CORE", 3, 14, 2, 7]]
    kept = merge_op_rows([_op_rows(0, {"Relu": [5, 7]}), _op_rows(3, {"Relu": [2]})])
    assert sorted(row[0] for row in kept) == [0, 3]


def _stage(tmp_path: Path) -> ClusterMerge:
    return ClusterMerge({"snapshot_every_s": 1000}, StageContext("merge", "run", tmp_path))


def _final_ops(stage: ClusterMerge) -> dict[str, list[object]]:
    batch = next(b for b in stage.finish() if b.kind == "op_statistic")
    return {row[1]: row for row in unpack_rows(batch)}


@settings(max_examples=30, deadline=None)
@given(st.lists(source_data, min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_replayed_and_reordered_parts_count_once(snapshots: list[dict[str, list[int]]], rng: random.Random) -> None:
    """One source's growing snapshots delivered several times and shuffled: the newest one wins."""
    import tempfile

    parts = [part_batch(OP_PART, _op_rows(0, data), "job.a.0", seq, False) for seq, data in enumerate(snapshots, 1)]
    other = part_batch(OP_PART, _op_rows(0, {"Relu": [9]}), "job.b.0", 1, False)
    deliveries = parts * 2 + [other, other]
    rng.shuffle(deliveries)
    with tempfile.TemporaryDirectory() as folder:
        stage = _stage(Path(folder))
        for batch in deliveries:
            list(stage.process(batch))
        expected = {row[1]: row for row in merge_op_rows([_op_rows(0, snapshots[-1]), _op_rows(0, {"Relu": [9]})])}
        assert _final_ops(stage) == expected
        assert stage.figures["parts_applied"] + stage.figures["parts_stale"] == len(deliveries)


def test_a_snapshot_is_emitted_once_per_interval_and_at_finish(tmp_path: Path) -> None:
    stage = ClusterMerge({"snapshot_every_s": 60}, StageContext("merge", "run", tmp_path))
    first = list(stage.process(part_batch(API_PART, _api_rows({"aclInit": [4]}), "job.a.host", 1, False)))
    assert [b.kind for b in first] == ["op_statistic", "api_statistic"]
    assert list(stage.process(part_batch(API_PART, _api_rows({"aclInit": [6]}), "job.a.host", 2, False))) == []
    final = list(stage.finish())
    assert [b.meta["final"] for b in final] == [True, True]
    assert unpack_rows(final[1])[0][2:6] == [1, 6, 6, 6]


def test_other_kinds_are_rejected_not_merged(tmp_path: Path) -> None:
    stage = _stage(tmp_path)
    assert list(stage.process(Batch("task", 3, {}, msgpack.packb([])))) == []
    assert sum(stage.ctx.rejected.values()) == 3


@given(st.text(max_size=20))
def test_subject_tokens_never_hold_nats_wildcards_or_separators(text: str) -> None:
    made = token(text)
    assert made and not any(ch in made for ch in ".*> \t\r\n")


def test_messages_round_trip_and_foreign_payloads_are_refused() -> None:
    batch = part_batch(OP_PART, _op_rows(2, {"Relu": [1, 2]}), "job.a.2", 7, True)
    back = decode(encode(batch))
    assert (back.kind, back.count, back.meta, unpack_rows(back)) == (OP_PART, 1, batch.meta, unpack_rows(batch))
    for junk in (b"", b"\x93\x01\x02\x03", msgpack.packb({"kind": "x"})):
        try:
            decode(junk)
        except ValueError:
            continue
        raise AssertionError(f"{junk!r} decoded")
