"""Fuzzing the collector on a PROF tree that misbehaves while it is followed: slices written in odd pieces,
garbage, slices that shrink, are replaced (another inode), vanish or turn into symlinks, and symlinks
placed all over the tree. The collector never raises or hangs, ships no record twice and nothing from
behind a symlink, counts every symlink once, and loses no record without saying why."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from chain import make_ctx
from fuzz_budget import budget
from fuzz_streams import SAFE
from hypothesis import given
from hypothesis import strategies as st

from pipeline.stage import Batch
from stages.collector import CollectorStage, StreamState
from stages.formats import raw

STREAM = "unaging.api_event.data"
OUTSIDE = 0x5EC0_11AB_0000_0001  # item id of the records written behind symlinks: never shipped
SYMLINK_REASON = "symlink in the PROF directory not followed"
SYMLINK_PLACES = ("slice", "device_folder", "data_folder", "control_file")

OPS = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 200)),  # bytes of the record stream, any cut
    st.tuples(st.just("rotate"), st.just(0)),  # the record being written is finished, then a new slice
    st.tuples(st.just("garbage"), st.integers(1, 90)),
    st.tuples(st.just("pass"), st.integers(1, 3)),
    st.tuples(st.just("shrink"), st.integers(0, 99)),  # below what the collector read, which then looks
    st.tuples(st.just("replace"), st.integers(0, 1)),  # 0: a copy of the slice, 1: other records
    st.tuples(st.just("delete"), st.just(0)),
    st.tuples(st.just("symlink_slice"), st.just(0)),  # the slice being written becomes a symlink
    st.tuples(st.just("symlink"), st.sampled_from(SYMLINK_PLACES)),
)


def _api(begins: list[int], item_id: int = 0) -> bytes:
    arr = np.zeros(len(begins), raw.API_EVENT)
    arr["magic"] = raw.HOST_MAGIC
    arr["level"] = raw.LEVEL_ACL
    arr["begin"] = begins
    arr["end"] = np.array(begins, np.uint64) + 1
    arr["item_id"] = item_id
    return arr.tobytes()


class Board:
    """A runtime writing one host stream, and the mischief done to its tree.

    Each file written under a slice name is a generation; a record belongs to the generation it was
    written to. Replacing, deleting or symlinking a slice (or shrinking it) disturbs its generation: its
    records may be lost, and when the collector had that very file open, the loss must be counted."""

    def __init__(self, root: Path) -> None:
        self.prof = root / "PROF_000001_20260101000000000_FUZZFUZZFUZZFUZZ"
        self.data = self.prof / "host" / "data"
        self.data.mkdir(parents=True)
        self.outside = root / "outside"
        self.outside.mkdir()
        self.slice = 0
        self.generation = 0
        self.next_begin = 1000
        self.pending = b""  # generated records not yet written (the first one perhaps in part)
        self.pending_begins: list[int] = []
        self.written: dict[int, int] = {}  # begin → generation (regular files only)
        self.disturbed: set[int] = set()  # generations whose records may be lost ...
        self.noticed: set[int] = set()  # ... and those whose loss the collector can see (it had them open)
        self.symlinks: set[Path] = set()
        self.junk = 0
        self.dangling = False  # the file ends with the start of a record that will never be finished
        self.given_up: set[int] = set()  # slices the collector stopped reading (after counting why)
        self._new_file(b"")

    @property
    def path(self) -> Path:
        return self.data / f"{STREAM}.slice_{self.slice}"

    def _new_file(self, content: bytes) -> None:
        if self.path.is_file() and not self.path.is_symlink():  # kept, so no later file reuses its inode
            os.link(self.path, self.outside / f"generation_{self.generation}")
        self.generation += 1
        fresh = self.path.with_name("next.tmp")
        fresh.write_bytes(content)
        fresh.replace(self.path)
        self.dangling = False
        if self.slice in self.given_up:
            self.collector_gave_up()

    def _fresh(self, n: int) -> list[int]:
        begins = list(range(self.next_begin, self.next_begin + n))
        self.next_begin += n
        return begins

    def collector_gave_up(self) -> None:
        """The collector stopped reading the current slice: nothing written to it from now on is read."""
        self.given_up.add(self.slice)
        self.disturbed.add(self.generation)
        self.noticed.add(self.generation)

    def append(self, nbytes: int) -> None:
        if self.dangling:  # what follows the start of a record never finished may be misframed
            self.disturbed.add(self.generation)
        if len(self.pending) < nbytes:
            begins = self._fresh(nbytes // 40 + 1)
            for begin in begins:
                self.written[begin] = self.generation
            self.pending += _api(begins)
            self.pending_begins += begins
        with open(self.path, "ab") as handle:
            handle.write(self.pending[:nbytes])
        self.pending = self.pending[nbytes:]
        self.pending_begins = self.pending_begins[len(self.pending_begins) - (len(self.pending) + 39) // 40:]

    def finish_record(self) -> None:
        """Write the rest of a record written in part."""
        if len(self.pending) % 40:
            self.append(len(self.pending) % 40)

    def _drop_pending(self) -> None:
        """Records generated but never written whole: not expected."""
        self.dangling = self.dangling or len(self.pending) % 40 != 0
        for begin in self.pending_begins:
            self.written.pop(begin, None)
        self.pending, self.pending_begins = b"", []

    def disturb(self, collector_on_it: bool) -> bool:
        """The current file is replaced, deleted, shrunk or linked away. A collector that has opened this
        slice sees it the next time it looks (another inode, no file, a smaller one, a symlink)."""
        self.disturbed.add(self.generation)
        noticed = collector_on_it
        if noticed:
            self.noticed.add(self.generation)
        self._drop_pending()
        return noticed

    def rotate(self) -> None:
        self.finish_record()
        self._drop_pending()
        self.slice += 1
        self._new_file(b"")

    def garbage(self, n: int) -> None:
        self.finish_record()
        self._drop_pending()
        junk = bytes(SAFE[(self.junk + i) % len(SAFE)] for i in range(n))
        if self.dangling:
            self.disturbed.add(self.generation)
        with open(self.path, "ab") as handle:
            handle.write(junk)
        self.junk += n

    def shrink(self, percent: int, read: int, collector_on_it: bool) -> bool:
        if read <= 0:
            return False
        self.disturb(collector_on_it)
        os.truncate(self.path, read * percent // 100)
        return True

    def replace(self, other: bool, collector_on_it: bool) -> None:
        """A new file under the slice's name. A collector that had the old one open reads neither on."""
        noticed = self.disturb(collector_on_it)
        dangling = self.dangling
        content = self.path.read_bytes()
        if other:
            begins = self._fresh(3)
            content = _api(begins)
        self._new_file(content)
        if other:
            self.written.update((begin, self.generation) for begin in begins)
        else:
            self.written.update((begin, self.generation) for begin in _begins(content))
        self.dangling = dangling and not other  # a copy keeps the start of a record never finished
        if noticed:
            self.disturbed.add(self.generation)
        if noticed:
            self.noticed.add(self.generation)

    def delete(self, collector_on_it: bool) -> None:
        self.disturb(collector_on_it)
        self.path.unlink()
        self.slice += 1
        self._new_file(b"")

    def symlink_slice(self, collector_on_it: bool) -> None:
        self.disturb(collector_on_it)
        target = self.outside / f"slice_{self.slice}"
        target.write_bytes(_api([1, 2, 3], OUTSIDE))
        self.path.unlink()
        self.path.symlink_to(target)
        self.symlinks.add(self.path)
        self.slice += 1
        self._new_file(b"")

    def symlink(self, place: str) -> None:
        target = self.outside / place
        if place == "slice":
            link = self.data / "unaging.api_event.data.slice_999"  # a later slice of the stream
            target.write_bytes(_api([4, 5], OUTSIDE))
        elif place == "device_folder":
            link = self.prof / "device_0"
            (target / "data").mkdir(parents=True, exist_ok=True)
            (target / "data" / "unaging.api_event.data.slice_0").write_bytes(_api([6, 7], OUTSIDE))
        elif place == "data_folder":
            (self.prof / "device_1").mkdir(exist_ok=True)
            link = self.prof / "device_1" / "data"
            target.mkdir(exist_ok=True)
            (target / "hwts.data.1.slice_0").write_bytes(b"\x00" * 64)
        else:
            link = self.prof / "host" / "sample.json"
            target.write_text('{"ai_core_metrics": "PipeUtilization"}')
        if link not in self.symlinks and not link.exists():
            link.symlink_to(target)
            self.symlinks.add(link)

    def end(self) -> None:
        self.finish_record()
        self._drop_pending()
        (self.prof / "host" / "end_info").write_text("{}")
        if (self.prof / "device_1").is_dir():
            (self.prof / "device_1" / "end_info.1").write_text("{}")


def _begins(body: bytes) -> list[int]:
    whole = len(body) // 40 * 40
    arr = np.frombuffer(body[:whole], raw.API_EVENT)
    return arr["begin"][arr["magic"] == raw.HOST_MAGIC].tolist()


def _follow(board: Board, collector: CollectorStage) -> StreamState | None:
    """The collector's state of the stream; tells the board when it gave up the slice being written."""
    state = collector.tree.streams.get(f"host/data/{STREAM}") if collector.tree else None
    if state is not None and state.slice_index == board.slice and state.abandoned:
        board.collector_gave_up()
    return state


def _counting_passes(collector: CollectorStage) -> list[int]:
    """Count the collector's finished passes over the tree (a pass pauses after each stream it reads, so a None is
    not a pass's end; and a stream with nothing new on disk is not read at all)."""
    passes = [0]
    run_pass = collector._pass

    def counted(final: bool, scan: bool) -> Iterator[Batch | None]:
        yield from run_pass(final, scan)
        passes[0] += 1

    collector._pass = counted  # type: ignore[method-assign]
    return passes


def _one_pass(gen: Iterator[Batch | None], shipped: list[Batch], passes: list[int]) -> None:
    """Run the collector until it has finished one more pass (it has looked at the stream again) and paused."""
    target = passes[0] + 1
    for _ in range(10_000):
        item = next(gen, None)
        if item is not None:
            shipped.append(item)
        elif passes[0] >= target:
            return


@budget()
@given(ops=st.lists(OPS, max_size=25))
def test_collector_survives_a_misbehaving_tree(tried: Callable[..., Any], ops: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder, tried():
        board = Board(Path(folder))
        collector = CollectorStage(CollectorStage.Config(path=str(board.prof), poll_ms=1, wait_s=5),
                                   make_ctx("collect", Path(folder) / "out"))
        passes = _counting_passes(collector)
        gen = collector.batches()
        shipped: list[Batch] = []
        for op, arg in ops:
            state = _follow(board, collector)
            reading = state is not None and state.slice_index == board.slice and not state.abandoned
            opened = reading and state is not None and state.file_id is not None
            if op == "pass":
                for _ in range(arg):
                    _one_pass(gen, shipped, passes)
            elif op == "shrink":
                if board.shrink(arg, state.offset if reading and state is not None else 0, opened):
                    _one_pass(gen, shipped, passes)  # the collector looks before anything more is written
            elif op in ("replace", "delete", "symlink_slice"):
                getattr(board, op)(*([bool(arg)] if op == "replace" else []), opened)
            elif op == "rotate":
                board.rotate()
            else:
                getattr(board, op)(arg)
        _follow(board, collector)
        board.end()
        shipped.extend(item for item in gen if item is not None)  # the job ended: the collector drains

    raw_chunks = [b for b in shipped if b.kind == "raw" and b.meta["kind"] == "api_event"]
    assert all(len(b.body) == b.count * 40 for b in raw_chunks)
    got = [begin for b in raw_chunks for begin in _begins(b.body)]
    assert len(got) == len(set(got)), "a record was shipped twice"
    items = [item for b in raw_chunks for item in np.frombuffer(b.body, raw.API_EVENT)["item_id"].tolist()]
    assert OUTSIDE not in items, "a record from behind a symlink was shipped"
    assert collector.ctx.rejected.get(SYMLINK_REASON, 0) == len(board.symlinks)
    missing = set(board.written) - set(got)
    undisturbed = {begin for begin in missing if board.written[begin] not in board.disturbed}
    assert not undisturbed, "records of a slice nothing happened to were lost"
    other_reasons = sum(count for reason, count in collector.ctx.rejected.items() if reason != SYMLINK_REASON)
    seen_lost = {begin for begin in missing if board.written[begin] in board.noticed}
    assert not seen_lost or other_reasons, "records were lost and nothing was counted"
