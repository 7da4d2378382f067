"""Task-id wraps as a real runtime reports them: kernel task_tracks with batchId 0, the batch in the FLIP
task_tracks (host) and the tag-14 flips (device), as msprof's flip calculator takes them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from chain import run_chain

from stages.aggregator.join import HostBatches
from stages.formats import raw
from stages.schema import unpack_rows
from stages.simulator import names
from stages.simulator.run import simulate

FIRST_TASK_ID = 65_500  # the face-mask model's AI Core stream takes 67 ids per image: a wrap in the first one
STREAM_DESTROY_FLIP = 65_535  # the flip number of a destroyed stream's FLIP task (task id 0xFFFFFFFF)
TWO_WRAPS = 1_000  # images past a second wrap of that stream (65,536 / 67 ≈ 978 images after the first)


def _task_tracks(prof: Path) -> np.ndarray:
    files = [f for f in (prof / "host" / "data").glob("unaging.compact.task_track.slice_*")
             if not f.name.endswith(".done")]
    data = b"".join(f.read_bytes() for f in sorted(files, key=lambda f: int(f.name.rsplit("_", 1)[1])))
    return np.frombuffer(data, raw.TASK_TRACK)


@pytest.mark.parametrize("iterations, wraps", [(12, 1), (TWO_WRAPS, 2)], ids=["one_wrap", "two_wraps"])
@pytest.mark.parametrize("chip", ["cloud", "910b"])
def test_batch_ids_come_from_the_flips_not_the_kernels_task_tracks(tmp_path: Path, chip: str, iterations: int,
                                                                   wraps: int) -> None:
    prof = simulate(tmp_path / "board", chip=chip, iterations=iterations, rate="max", seed=7,
                    first_task_id=FIRST_TASK_ID)
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    assert truth["task_flips"] >= wraps
    tracks = _task_tracks(prof)
    flips = tracks[tracks["task_type"] == names.TASK_FLIP]
    kernels = tracks[tracks["task_type"] != names.TASK_FLIP]
    assert (kernels["batch_id"] == 0).all()  # as a real runtime may write them: the batch is in the FLIP tasks
    assert sorted(set(flips["batch_id"].tolist())) == list(range(1, wraps + 1))

    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {}  # no "host task without a device task log" / "device task without …"
    final = next(b for b in batches if b.kind == "op_statistic" and b.meta.get("final"))
    ours = {(op, core): (count, total) for _, op, core, count, total, _, _ in unpack_rows(final)}
    assert ours == {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"]) for t in truth["op_statistic"]}
    rows = [row for batch in batches if batch.kind == "task" for row in unpack_rows(batch)]
    assert {row[5] for row in rows} == set(range(wraps + 1))  # batch ids 0 … wraps
    per_task = Counter((row[3], row[4], row[5], row[23]) for row in rows)  # stream, task, batch, context
    assert max(per_task.values()) == 1  # every task once: none taken for an earlier one of the same id


@pytest.mark.parametrize("chip", ["cloud", "910b"])
def test_written_batch_ids_give_the_same_join(tmp_path: Path, chip: str) -> None:
    """A runtime that writes the batch in the kernels' task_tracks too: the same rows (the flips decide)."""
    prof = simulate(tmp_path / "board", chip=chip, iterations=12, rate="max", seed=7, first_task_id=FIRST_TASK_ID,
                    batch_ids=True)
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    assert _task_tracks(prof)["batch_id"].max() == 1
    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {}
    final = next(b for b in batches if b.kind == "op_statistic" and b.meta.get("final"))
    ours = {(op, core): (count, total) for _, op, core, count, total, _, _ in unpack_rows(final)}
    assert ours == {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"]) for t in truth["op_statistic"]}


def test_host_batches_follow_the_flip_tasks() -> None:
    batches = HostBatches()
    assert [batches.batch_of(0, 2, task, ts) for task, ts in ((65_534, 10), (65_535, 11))] == [0, 0]
    batches.add_flip(0, 2, 12, 1)  # the flip took id 0: tasks from its time on are in batch 1
    assert [batches.batch_of(0, 2, task, ts) for task, ts in ((1, 12), (2, 13))] == [1, 1]
    assert batches.batch_of(0, 3, 7, 13) == 0  # another stream has its own flips
    # another thread took the first ids of batch 2 before the flip task got id 3 (msprof's calibration)
    assert [batches.batch_of(0, 2, task, ts) for task, ts in ((65_535, 20), (0, 21), (1, 22))] == [1, 2, 2]
    batches.add_flip(0, 2, 23, 2)
    assert [batches.batch_of(0, 2, task, ts) for task, ts in ((4, 24), (5, 25))] == [2, 2]
    batches.add_flip(0, 2, 30, STREAM_DESTROY_FLIP)  # stream destroyed: its id may come back with new tasks
    assert batches.batch_of(0, 2, 0, 31) == STREAM_DESTROY_FLIP  # as the device's flip of it names them


def test_the_simulate_command_starts_task_ids_where_asked(tmp_path: Path) -> None:
    from pipeline.cli import build_parser  # noqa: PLC0415
    from pipeline.errors import UserError  # noqa: PLC0415

    args = build_parser().parse_args(["simulate", str(tmp_path), "--chip", "910", "--iterations", "1",
                                      "--first-task-id", "65500"])
    assert args.func(args) == 0
    tracks = _task_tracks(next(tmp_path.glob("PROF_*")))
    assert list(tracks[tracks["task_type"] == names.TASK_FLIP]["batch_id"]) == [1]
    beyond = build_parser().parse_args(["simulate", str(tmp_path), "--first-task-id", "65536"])
    with pytest.raises(UserError, match="--first-task-id must be from 0 to 65535"):
        beyond.func(beyond)
