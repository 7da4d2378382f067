"""Collector: follows a directory as it is written, holds partial records, waits for PROF_…."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from chain import make_ctx

from pipeline.errors import UserError
from pipeline.stage import Batch
from stages.collector import CollectorStage
from stages.formats import raw


def _api(n: int, first: int = 1) -> bytes:
    arr = np.zeros(n, raw.API_EVENT)
    arr["magic"] = raw.HOST_MAGIC
    arr["level"] = raw.LEVEL_ACL
    arr["begin"] = np.arange(first, first + n)
    arr["end"] = arr["begin"] + 1
    return arr.tobytes()


def _step(gen: Iterator[Batch | None], until_raw: bool = True, limit: int = 200) -> list[Batch]:
    """Advance the collector until it yields raw data (or is idle again)."""
    got: list[Batch] = []
    for _ in range(limit):
        item = next(gen, None)
        if item is None:
            if got or not until_raw:
                return got
            continue
        got.append(item)
    return got


def _collector(path: Path, tmp_path: Path, **config: object) -> CollectorStage:
    return CollectorStage(CollectorStage.Config(path=str(path), poll_ms=1, **config), make_ctx("collect", tmp_path))


def test_partial_record_waits_and_slices_are_followed(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP"
    data = prof / "host" / "data"
    data.mkdir(parents=True)
    (prof / "host" / "start_info").write_text('{"collectionTimeBegin": "1", "clockMonotonicRaw": "1"}')
    records = _api(5)
    slice0 = data / "unaging.api_event.data.slice_0"
    slice0.write_bytes(records[:100])  # two whole records and half of the third
    gen = _collector(tmp_path, tmp_path).batches()
    got = [b for b in _step(gen) if b.kind == "raw"]
    assert [b.count for b in got] == [2] and got[0].body == records[:80]
    with open(slice0, "ab") as handle:
        handle.write(records[100:120])  # the third is now whole
    (data / "unaging.api_event.data.slice_1").write_bytes(records[120:])  # a new slice appears
    got = [b for b in _step(gen) if b.kind == "raw"]
    assert sum(b.count for b in got) == 3 and b"".join(b.body for b in got) == records[80:]
    (prof / "host" / "end_info").write_text('{"collectionTimeEnd": "2", "clockMonotonicRaw": "2"}')
    rest = list(gen)  # the runtime marked the job finished: the collector ends by itself
    assert not [b for b in rest if b is not None and b.kind == "raw"]


def test_waits_for_a_prof_directory_to_appear(tmp_path: Path) -> None:
    gen = _collector(tmp_path / "later", tmp_path, wait_s=30).batches()
    assert [next(gen) for _ in range(3)] == [None, None, None]
    prof = tmp_path / "later" / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP" / "host" / "data"
    prof.mkdir(parents=True)
    (prof / "unaging.api_event.data.slice_0").write_bytes(_api(4))
    got = [b for b in _step(gen) if b.kind == "raw"]
    assert sum(b.count for b in got) == 4


def test_missing_directory_is_a_user_error(tmp_path: Path) -> None:
    gen = _collector(tmp_path / "nope", tmp_path, follow=False).batches()
    with pytest.raises(UserError, match="does not exist"):
        list(gen)


def test_symlinked_slices_are_not_followed(tmp_path: Path) -> None:
    data = tmp_path / "PROF_1" / "host" / "data"
    data.mkdir(parents=True)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(_api(3))
    (data / "unaging.api_event.data.slice_0").symlink_to(outside)
    batches = list(_collector(tmp_path / "PROF_1", tmp_path, follow=False).batches())
    assert not [b for b in batches if b is not None and b.kind == "raw"]


def test_finished_job_of_an_earlier_run_is_not_followed(tmp_path: Path) -> None:
    old = tmp_path / "PROF_000001_20260101000000000_AAAAAAAAAAAAAAAA" / "host"
    (old / "data").mkdir(parents=True)
    (old / "data" / "unaging.api_event.data.slice_0").write_bytes(_api(9))
    (old / "end_info").write_text("{}")
    gen = _collector(tmp_path, tmp_path, wait_s=30).batches()
    assert [next(gen) for _ in range(3)] == [None, None, None]  # waits for a new job
    new = tmp_path / "PROF_000002_20260101000100000_BBBBBBBBBBBBBBBB" / "host" / "data"
    new.mkdir(parents=True)
    (new / "unaging.api_event.data.slice_0").write_bytes(_api(2))
    got = [b for b in _step(gen) if b.kind == "raw"]
    assert sum(b.count for b in got) == 2


def test_unknown_file_family_is_reported_once(tmp_path: Path) -> None:
    data = tmp_path / "PROF_1" / "host" / "data"
    data.mkdir(parents=True)
    (data / "unaging.api_event.data.slice_0").write_bytes(_api(2))
    for index in range(3):
        (data / f"host_cpu.data.slice_{index}").write_bytes(b"\x01" * 64)
    collector = _collector(tmp_path / "PROF_1", tmp_path, follow=False)
    batches = [b for b in collector.batches() if b is not None and b.kind == "raw"]
    assert sum(b.count for b in batches) == 2
    assert collector.ctx.rejected == {"file family not decoded by this release: host/data/host_cpu.data": 1}


def test_a_launched_apps_collector_skips_an_earlier_job_that_crashed(tmp_path: Path) -> None:
    """With an end marker (`pipeline run -- APP`), a PROF_ directory older than the run is an earlier job's,
    even without end_info; the collector waits for the application's own."""
    stale = tmp_path / "PROF_000001_20260101000000000_AAAAAAAAAAAAAAAA"
    (stale / "host" / "data").mkdir(parents=True)
    (stale / "host" / "data" / "unaging.api_event.data.slice_0").write_bytes(_api(9))
    os.utime(stale, (time.time() - 600, time.time() - 600))
    collector = _collector(tmp_path, tmp_path, end_marker=str(tmp_path / "app_exit.json"), wait_s=0)
    collector.ctx.export_stamp = time.strftime("%Y%m%d%H%M%S")
    gen = collector.batches()
    assert [next(gen) for _ in range(3)] == [None, None, None]  # no deadline while the app runs
    fresh = tmp_path / "PROF_000002_20260101000100000_BBBBBBBBBBBBBBBB" / "host" / "data"
    fresh.mkdir(parents=True)
    (fresh / "unaging.api_event.data.slice_0").write_bytes(_api(2))
    got = [b for b in _step(gen) if b.kind == "raw"]
    assert sum(b.count for b in got) == 2
    (tmp_path / "app_exit.json").write_text("{}")  # the app exits: what is on disk is all, then the end
    rest = [b for b in gen if b is not None and b.kind == "raw"]
    assert rest == [] and collector.collected == 2


def test_an_app_that_ended_without_a_directory_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "app_exit.json").write_text("{}")
    collector = _collector(tmp_path / "profiling", tmp_path, end_marker="app_exit.json", wait_s=0)
    with pytest.raises(UserError, match="the application ended without writing a PROF_… directory"):
        list(collector.batches())
