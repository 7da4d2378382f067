"""Crash recovery: checkpoint barriers, per-stage epoch files and the newest complete epoch.

The source cuts its output into epochs with barriers (pipeline.wire KIND_BARRIER). A stage that
has received barrier n on every input (alignment: an input that delivered n is held until the
others do) saves its state for n, forwards the barrier and acknowledges n to the supervisor.
Epoch n is complete once every stage saved it; after a crash every stage restarts from there.

Files under the run's output folder:

    checkpoints/epoch-{n:08d}/{stage}.ckpt   one stage's state at epoch n (runner counts + stage bytes)
    checkpoints/complete.json                the newest complete epoch (written by the supervisor)
    checkpoints/{stage}.commit               the summary sink's final files, recorded before they replace the live ones
    checkpoints/closed-{stage}.json          a sink that closed its outputs on a stream cut short (a stop, no final
                                             epoch): no epoch before it can be resumed, a rerun starts over

Stage state is pickled: resume only from output folders nobody else can write (they are created
with umask 0027, this folder 0700).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import time
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CHECKPOINT_DIR = "checkpoints"
COMPLETE_FILE = "complete.json"
_EPOCH_PREFIX = "epoch-"


def checkpoint_dir(out_dir: Path) -> Path:
    return out_dir / CHECKPOINT_DIR


def epoch_dir(out_dir: Path, epoch: int) -> Path:
    return checkpoint_dir(out_dir) / f"{_EPOCH_PREFIX}{epoch:08d}"


def stage_file(out_dir: Path, epoch: int, stage_id: str) -> Path:
    return epoch_dir(out_dir, epoch) / f"{stage_id}.ckpt"


def closed_marker(out_dir: Path, stage_id: str) -> Path:
    return checkpoint_dir(out_dir) / f"closed-{stage_id}.json"


def private_dir(folder: Path) -> None:
    """``folder`` and every missing parent made 0700 (``mkdir(parents=True, mode=…)`` gives the parents the
    umask's mode: ``checkpoints/`` came out 0750)."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for made in reversed(missing):
        made.mkdir(mode=0o700, exist_ok=True)


def write_atomic(path: Path, data: bytes) -> None:
    """Temp file, fsync, rename: a reader sees the old file or the whole new one. Folders it makes are 0700."""
    private_dir(path.parent)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # a disk that refused it keeps no half file
        raise


@dataclass
class CompleteEpoch:
    """The newest epoch every stage saved, and what a resumed run must keep from the first one."""

    epoch: int
    run_id: str
    stamp: str  # the {timestamp} of the run's output file names
    graph: list[list[str]]  # stage ids, types and inputs: a resumed config must have the same graph
    saved_at: float


@dataclass
class LeftBehind:
    """What a source that a resumed run does not start again (a simulated board: no outputs, no checkpoints) left
    in the output folder, from its stage class's ``left_behind(config, output_dir)``."""

    ended: bool  # its job ended: what it wrote is all there will be (else the rest never comes)
    line: str  # what became of its job, for the person
    cut_short: bool = False  # it ended before the job it was given was done: the run report says so
    salvage: str = ""  # how to parse what it wrote anyway (appended to the hint when the run is refused)


def read_complete(out_dir: Path) -> CompleteEpoch | None:
    try:
        data = json.loads((checkpoint_dir(out_dir) / COMPLETE_FILE).read_text())
        return CompleteEpoch(int(data["epoch"]), str(data["run_id"]), str(data["stamp"]),
                             [list(map(str, row)) for row in data["graph"]], float(data["saved_at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_complete(out_dir: Path, complete: CompleteEpoch) -> None:
    write_atomic(checkpoint_dir(out_dir) / COMPLETE_FILE, json.dumps(asdict(complete), indent=1).encode())


def saved_epochs(out_dir: Path) -> list[int]:
    found = []
    folder = checkpoint_dir(out_dir)
    if folder.is_dir():
        for path in folder.iterdir():
            suffix = path.name.removeprefix(_EPOCH_PREFIX)
            if path.name.startswith(_EPOCH_PREFIX) and suffix.isdigit():
                found.append(int(suffix))
    return sorted(found)


def prune_before(out_dir: Path, epoch: int) -> None:
    """Epochs older than a complete one are never resumed from: their files go (bounded disk)."""
    for old in saved_epochs(out_dir):
        if old < epoch:
            shutil.rmtree(epoch_dir(out_dir, old), ignore_errors=True)


def discard_after(out_dir: Path, epoch: int) -> None:
    """Epochs a failed attempt started but did not complete: a restart saves them again."""
    for newer in saved_epochs(out_dir):
        if newer > epoch:
            shutil.rmtree(epoch_dir(out_dir, newer), ignore_errors=True)


def remove_all(out_dir: Path) -> None:
    shutil.rmtree(checkpoint_dir(out_dir), ignore_errors=True)


def mark_closed_early(out_dir: Path, stage_id: str, epoch: int) -> None:
    """A sink is about to close its outputs on a stream that ended without a final epoch (the source was stopped):
    once closed (sorted, renamed) they cannot be cut back to an epoch, so no epoch of this run can be resumed."""
    write_atomic(closed_marker(out_dir, stage_id), json.dumps({"stage": stage_id, "epoch": epoch}).encode())


def closed_early(out_dir: Path) -> list[str]:
    """The sinks that closed their outputs on a stream cut short (see :func:`mark_closed_early`)."""
    folder = checkpoint_dir(out_dir)
    found = folder.glob("closed-*.json") if folder.is_dir() else []
    return sorted(path.name.removeprefix("closed-").removesuffix(".json") for path in found)


def graph_of(stages: Iterable[tuple[str, str, list[tuple[str, str]]]]) -> list[list[str]]:
    """(stage id, type, inputs) rows of the stages that take part in checkpoints."""
    return [[sid, type_name, *sorted(f"{p}.{port}" for p, port in inputs)] for sid, type_name, inputs in stages]


# -- stage state ----------------------------------------------------------------------------------------------


class _StatePickler(pickle.Pickler):
    """Pickles a stage's attributes; the stage itself, its context and config are named, not copied, so a
    bound method (a decoder's reject callback) comes back bound to the new stage.

    ``reducer_override`` rather than ``persistent_id``: the pickler skips it for ints, strs, lists, tuples and
    dicts, which are most of a state (3× faster on an aggregator's state)."""

    def __init__(self, file: io.BytesIO, anchors: dict[int, str]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.anchors = anchors

    def reducer_override(self, obj: Any) -> Any:
        name = self.anchors.get(id(obj))
        if name is None:
            return NotImplemented
        return _anchor, (name,)


_LOADING: list[dict[str, Any]] = []  # the anchors of the state being restored (a stack: restores do not nest)


def _anchor(name: str) -> Any:
    """An anchor named in a state, as the restoring process has it."""
    return _LOADING[-1][name]


class _StateUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, anchors: dict[str, Any]) -> None:
        super().__init__(file)
        self.anchors = anchors

    def persistent_load(self, pid: Any) -> Any:  # states saved before reducer_override named anchors this way
        return self.anchors[pid]


_SHARED = ("ctx", "config")


def _anchors(stage: Any) -> dict[str, Any]:
    """What a state names instead of copying: the stage, its ctx and config, and the ctx's output guard (whose
    callbacks reach the runner of the process that holds it)."""
    named = {"stage": stage, **{name: getattr(stage, name) for name in _SHARED if hasattr(stage, name)}}
    guard = getattr(getattr(stage, "ctx", None), "output_guard", None)
    if guard is not None:
        named["output_guard"] = guard
    return named


def pickle_state(stage: Any, skip: Iterable[str] = ()) -> bytes:
    """Every attribute of ``stage`` except its ctx, config and ``skip``."""
    anchors = {id(obj): name for name, obj in _anchors(stage).items()}
    state = {k: v for k, v in vars(stage).items() if k not in _SHARED and k not in set(skip)}
    buffer = io.BytesIO()
    _StatePickler(buffer, anchors).dump(state)
    return buffer.getvalue()


def restore_state(stage: Any, blob: bytes) -> None:
    anchors = _anchors(stage)
    _LOADING.append(anchors)
    try:
        state = _StateUnpickler(io.BytesIO(blob), anchors).load()
    finally:
        _LOADING.pop()
    vars(stage).update(state)


# -- alignment (in a stage) and completion (in the supervisor) -------------------------------------------------


class BarrierAligner:
    """Aligns the barriers of one epoch over a stage's inputs.

    Barrier n on one input blocks it: what that input delivers next is held until every input has
    delivered n. Then the stage saves epoch n and the held messages are delivered, in order.
    """

    def __init__(self, inputs: Iterable[Hashable]) -> None:
        self.inputs = set(inputs)
        self.epoch: int | None = None
        self.final = False
        self.blocked: set[Hashable] = set()
        self.held: deque[Any] = deque()

    def is_blocked(self, key: Hashable) -> bool:
        return key in self.blocked

    def hold(self, item: Any) -> None:
        self.held.append(item)

    def barrier(self, key: Hashable, epoch: int, final: bool) -> bool:
        """Barrier ``epoch`` arrived on ``key``; True when every input has delivered it."""
        if self.epoch is not None and epoch != self.epoch:
            raise ValueError(f"barrier of epoch {epoch} while aligning epoch {self.epoch}")
        self.epoch = epoch
        self.final = self.final or final
        self.blocked.add(key)
        return self.blocked >= self.inputs

    def release(self) -> list[Any]:
        """The epoch is saved: unblock every input and hand back what was held."""
        held = list(self.held)
        self.held.clear()
        self.blocked.clear()
        self.epoch = None
        self.final = False
        return held


class EpochBook:
    """Acknowledgements per epoch; an epoch is complete when every participating stage saved it."""

    def __init__(self, participants: Iterable[str], complete: int = 0) -> None:
        self.participants = set(participants)
        self.complete = complete
        self.acks: dict[int, set[str]] = {}
        self.completed_at = time.time()

    def ack(self, stage_id: str, epoch: int) -> bool:
        """Record that ``stage_id`` saved ``epoch``; True when that makes a newer epoch complete."""
        if epoch <= self.complete or stage_id not in self.participants:
            return False
        saved = self.acks.setdefault(epoch, set())
        saved.add(stage_id)
        if saved < self.participants:
            return False
        self.complete = epoch
        self.completed_at = time.time()
        self.acks = {n: s for n, s in self.acks.items() if n > epoch}
        return True

    def reset(self, complete: int) -> None:
        """After a restart from ``complete``: acknowledgements of the failed attempt no longer count."""
        self.complete = complete
        self.acks.clear()
