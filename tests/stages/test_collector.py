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
from stages.collector import CollectorStage, StreamState, _unread_bytes
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


def test_a_finished_directory_is_read_with_its_streams_together_in_time(tmp_path: Path) -> None:
    """tensor_info records are 4× the bytes of task_track records over the same time: read by the byte, the
    task tracks would run far ahead and the join would hold (or give up on) every task in between. Each pass
    advances every stream by the same share of what it has left, so no stream gets ahead by more than a pass."""
    from stages.simulator.run import simulate

    prof = simulate(tmp_path / "board", chip="cloud", iterations=60, rate="max", seed=2, slice_bytes=64 << 10)
    quantum = 16 << 10
    collector = _collector(prof, tmp_path, follow=False, read_quantum_bytes=quantum)
    read: dict[str, int] = {}
    progress: list[dict[str, int]] = []
    for batch in collector.batches():
        if batch is not None and batch.kind == "raw":
            read[batch.meta["stream"]] = read.get(batch.meta["stream"], 0) + len(batch.body)
            progress.append(dict(read))
    total = {stream: size for stream, size in read.items() if size >= 8 * quantum}  # streams of many passes
    assert {"unaging.additional.tensor_info", "unaging.compact.task_track", "hwts.data.0"} <= set(total)
    pass_share = quantum * len(read) / sum(read.values())  # what one pass reads of the whole directory
    skew = max(max(done.get(s, 0) / total[s] for s in total) - min(done.get(s, 0) / total[s] for s in total)
               for done in progress)
    assert skew <= 2 * pass_share + 0.05, (skew, pass_share)


def test_what_a_stream_has_unread_spans_its_later_slices_and_their_gaps(tmp_path: Path) -> None:
    """A pass shares its bytes by this: a slice missing before the last one seen counts as empty, not as the end."""
    from stages.formats.files import host_stream_kind

    kind = host_stream_kind("unaging.api_event.data")
    assert kind is not None
    for index, size in ((0, 1000), (2, 300), (3, 40)):  # slice_1 was deleted
        (tmp_path / f"unaging.api_event.data.slice_{index}").write_bytes(b"x" * size)
    state = StreamState("unaging.api_event.data", kind, None, tmp_path, offset=600, last_index=3)
    assert _unread_bytes(state) == 400 + 300 + 40
    (tmp_path / "unaging.api_event.data.slice_3").write_bytes(b"x" * 90)  # the last slice still grows
    assert _unread_bytes(state) == 400 + 300 + 90


def test_a_stream_with_nothing_new_is_not_opened_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A followed job that writes nothing costs a stat or two per stream and pass (an idle live run's collector
    took 14 % of a core opening every slice and its .done file 50 times a second); it reads on once it grows."""
    from stages import collector as collector_module

    data = tmp_path / "PROF_1" / "host" / "data"
    data.mkdir(parents=True)
    slice0 = data / "unaging.api_event.data.slice_0"
    slice0.write_bytes(_api(3))
    (data / "unaging.api_event.data.slice_0.done").write_text(f"filesize:{len(_api(3))}\n")
    reads: list[str] = []
    real_read_slices = collector_module.slices.read_slices

    def counting(state: StreamState, budget: int, final: bool) -> Iterator[tuple[str, object]]:
        reads.append(state.base)
        return real_read_slices(state, budget, final)

    monkeypatch.setattr(collector_module.slices, "read_slices", counting)
    gen = _collector(tmp_path / "PROF_1", tmp_path).batches()
    assert sum(b.count for b in _step(gen) if b.kind == "raw") == 3
    opened = len(reads)
    for _ in range(10):
        assert _step(gen, until_raw=False) == []
    assert len(reads) == opened  # ten idle passes, no slice opened
    (data / "unaging.api_event.data.slice_1").write_bytes(_api(2, first=10))
    assert [b.body for b in _step(gen) if b.kind == "raw"] == [_api(2, first=10)]
    assert len(reads) > opened


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


SYMLINK = "symlink in the PROF directory not followed"


def _raw(batches: list[Batch | None]) -> list[Batch]:
    return [b for b in batches if b is not None and b.kind == "raw"]


def test_symlinked_folders_and_control_files_are_counted_not_followed(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_1"
    (prof / "host" / "data").mkdir(parents=True)
    (prof / "host" / "data" / "unaging.api_event.data.slice_0").write_bytes(_api(2))
    outside = tmp_path / "outside"
    (outside / "data").mkdir(parents=True)
    (outside / "data" / "unaging.api_event.data.slice_0").write_bytes(_api(5, first=100))
    (outside / "sample.json").write_text("{}")
    (prof / "device_0").symlink_to(outside)  # a device folder
    (prof / "device_1").mkdir()
    (prof / "device_1" / "data").symlink_to(outside / "data")  # a data folder
    (prof / "host" / "sample.json").symlink_to(outside / "sample.json")  # a control file
    collector = _collector(prof, tmp_path, follow=False)
    batches = list(collector.batches())
    assert sum(b.count for b in _raw(batches)) == 2
    assert not [b for b in batches if b is not None and b.kind == "control" and "sample.json" in b.meta["path"]]
    assert collector.ctx.rejected == {SYMLINK: 3}


def test_a_slice_made_a_symlink_while_followed_is_not_read(tmp_path: Path) -> None:
    data = tmp_path / "PROF_1" / "host" / "data"
    data.mkdir(parents=True)
    slice0 = data / "unaging.api_event.data.slice_0"
    slice0.write_bytes(_api(2))
    gen = _collector(tmp_path / "PROF_1", tmp_path).batches()
    assert sum(b.count for b in _step(gen)) == 2
    (tmp_path / "outside").write_bytes(_api(2) + _api(3, first=100))
    slice0.unlink()
    slice0.symlink_to(tmp_path / "outside")  # same name, now a link to more records
    (data / "unaging.api_event.data.slice_1").write_bytes(_api(1, first=50))
    (tmp_path / "PROF_1" / "host" / "end_info").write_text("{}")
    rest = _raw(list(gen))
    assert [b.body for b in rest] == [_api(1, first=50)]


@pytest.mark.parametrize("change", ["shrink", "replace"])
def test_a_slice_that_shrinks_or_is_replaced_is_counted_and_left(tmp_path: Path, change: str) -> None:
    data = tmp_path / "PROF_1" / "host" / "data"
    data.mkdir(parents=True)
    slice0 = data / "unaging.api_event.data.slice_0"
    slice0.write_bytes(_api(4))
    collector = _collector(tmp_path / "PROF_1", tmp_path)
    gen = collector.batches()
    assert sum(b.count for b in _step(gen)) == 4
    if change == "shrink":
        with open(slice0, "r+b") as handle:
            handle.truncate(40)
    else:
        (data / "new").write_bytes(_api(4) + _api(2, first=20))  # a copy with more: must not be shipped again
        (data / "new").replace(slice0)
    reason = "shrank while being read" if change == "shrink" else "was replaced while being read"
    # The collector looks (a whole pass: it also pauses after each stream) before the slice grows again; a slice
    # that shrinks and grows back past the offset read between two looks cannot be told from one that grew.
    for _ in range(20):
        assert _step(gen, until_raw=False) == []
        if any(reason in r for r in collector.ctx.rejected):
            break
    with open(slice0, "ab") as handle:
        handle.write(_api(6, first=30))
    (data / "unaging.api_event.data.slice_1").write_bytes(_api(1, first=50))
    (tmp_path / "PROF_1" / "host" / "end_info").write_text("{}")
    rest = _raw(list(gen))
    assert [b.body for b in rest] == [_api(1, first=50)]  # the next slice only: nothing twice
    assert [(r, n) for r, n in collector.ctx.rejected.items() if reason in r] == [
        (f"api_event: a slice {reason}{'' if change == 'shrink' else ' (another file under its name)'}; "
         "the rest of it is not read", 1)]


def test_a_missing_slice_does_not_stop_the_stream(tmp_path: Path) -> None:
    data = tmp_path / "PROF_1" / "host" / "data"
    data.mkdir(parents=True)
    (data / "unaging.api_event.data.slice_0").write_bytes(_api(2))
    (data / "unaging.api_event.data.slice_2").write_bytes(_api(3, first=10))  # slice_1 was deleted
    collector = _collector(tmp_path / "PROF_1", tmp_path, follow=False)
    assert sum(b.count for b in _raw(list(collector.batches()))) == 5
    assert collector.ctx.rejected == {
        "api_event: a slice is missing (deleted, or never written); the rest of it is not read": 1}


def test_text_then_binary_aicpu_records_all_reach_the_end(tmp_path: Path) -> None:
    """DATA_PREPROCESS.AICPU holds text lines or binary records; one frame call returns one form only, so the
    collector frames until a call takes nothing more."""
    device = tmp_path / "PROF_1" / "device_0"
    (device / "data").mkdir(parents=True)
    (device / "info.json.0").write_text('{"platform_version": "1"}')
    binary = np.zeros(1, raw.AICPU_PROF)
    binary["magic"], binary["data_tag"] = raw.HOST_MAGIC, raw.AICPU_DATA_TAG
    line = b"Node:op_1, Run start:1 1, Run end:2 2"
    (device / "data" / "DATA_PREPROCESS.AICPU.0.slice_0").write_bytes(line + b"\0" + binary.tobytes() * 2)
    batches = _raw(list(_collector(tmp_path / "PROF_1", tmp_path, follow=False).batches()))
    assert [(b.count, b.body) for b in batches] == [(1, line), (2, binary.tobytes() * 2)]


def test_folders_that_are_not_device_folders_are_left_alone(tmp_path: Path) -> None:
    prof = tmp_path / "PROF_1"
    (prof / "host" / "data").mkdir(parents=True)
    (prof / "host" / "data" / "unaging.api_event.data.slice_0").write_bytes(_api(2))
    for name in ("device_abc", "device_99999", "device_²"):
        (prof / name / "data").mkdir(parents=True)
        (prof / name / "info.json.0").write_text('{"platform_version": "1"}')
        (prof / name / "data" / "hwts.data.0.slice_0").write_bytes(b"\0" * 64)
    (prof / "host" / "info.json").write_text("[1, 2]")  # JSON, but not an object
    collector = _collector(prof, tmp_path, follow=False)
    assert sum(b.count for b in _raw(list(collector.batches()))) == 2


class _FakeClock:
    """The collector module's `time`, with monotonic time that moves only when the collector sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.time, self.mktime, self.strptime = time.time, time.mktime, time.strptime

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_following_collector_lists_the_tree_every_pass_until_it_settles_then_every_quarter_second(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import stages.collector as collector_module

    clock = _FakeClock()
    monkeypatch.setattr(collector_module, "time", clock)
    prof = tmp_path / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP"
    data = prof / "host" / "data"
    data.mkdir(parents=True)
    (prof / "host" / "start_info").write_text('{"collectionTimeBegin": "1", "clockMonotonicRaw": "1"}')
    (data / "unaging.api_event.data.slice_0").write_bytes(_api(3))
    collector = CollectorStage(CollectorStage.Config(path=str(prof), poll_ms=20), make_ctx("collect", tmp_path))
    listings: list[float] = []
    discover = collector._discover_streams

    def counted() -> None:
        listings.append(clock.now)
        discover()

    monkeypatch.setattr(collector, "_discover_streams", counted)
    gen = collector.batches()

    def run_for(seconds: float) -> list[Batch]:
        got, until = [], clock.now + seconds
        while clock.now < until:
            item = next(gen)
            if item is not None:
                got.append(item)
        return got

    assert sum(b.count for b in run_for(0.9) if b.kind == "raw") == 3
    assert len(listings) >= 40  # every 20 ms pass while the tree may still be filling up
    run_for(2.0)
    settled = [at for at in listings if at >= 1001.0]  # a second after the last new file (at the start)
    gaps = [later - earlier for earlier, later in zip(settled, settled[1:], strict=False)]
    assert len(settled) >= 6 and all(0.25 <= gap < 0.3 for gap in gaps), gaps  # every 0.25 s, not every pass
    with open(data / "unaging.api_event.data.slice_0", "ab") as handle:
        handle.write(_api(2, first=4))  # a slice it reads on: no listing needed
    (data / "aging.api_event.data.slice_0").write_bytes(_api(4, first=10))  # a new stream: the next listing
    got = run_for(0.3)
    assert {b.meta["stream"]: b.count for b in got if b.kind == "raw"} == {
        "unaging.api_event.data": 2, "aging.api_event.data": 4}
    assert len([at for at in listings if at > settled[-1]]) >= 10  # a new stream: every pass again for a while
    collector.stop()
