"""The stage contract: batch-shaped sources, transforms and sinks.

A stage class carries a nested pydantic ``Config`` (unknown keys rejected) and is registered
under the ``ascend_pipeline.stages`` entry-point group, or named as ``package.module:Class``.
The runtime (``pipeline.runner``) owns sockets, batching, end-of-stream and accounting; a
stage only sees batches. For crash recovery it asks a stage for ``snapshot()`` at checkpoint
barriers and hands the bytes back to ``restore()`` in the restarted process (pipeline.checkpoint).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from pipeline.output_guard import OutputGuard
from pipeline.security import CurveKeys


class StageConfig(BaseModel):
    """Base of every stage's config model: the keys common to all stages live in the YAML
    wrapper (type, inputs, endpoint, enabled, partitions); a stage's own keys go here."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Batch:
    """One message's worth of records of one kind.

    ``kind`` names the record schema (``raw``, ``api``, ``task``, ``op_statistic`` ...),
    ``count`` is the number of records it holds (what end-of-stream reconciles), ``meta`` is a
    small msgpack-able dict and ``body`` optional bytes (raw chunk, numpy block).
    """

    kind: str
    count: int
    meta: dict[str, Any] = field(default_factory=dict)
    body: bytes = b""
    port: str = "out"


def _monotonic() -> float:
    return time.monotonic()  # looked up on each call (tests may replace it)


@dataclass
class StageContext:
    """What a stage knows about the run it is part of."""

    stage_id: str
    run_id: str
    output_dir: Path
    upstream: tuple[str, ...] = ()
    rejected: Counter[str] = field(default_factory=Counter)
    aside_dir: Path | None = None
    report_view: Callable[[dict[str, Any]], None] | None = None  # live view → supervisor
    export_stamp: str | None = None  # the {timestamp} of output file names, one per run
    batch_records: int = 1024  # run.batch: records per message ...
    batch_bytes: int = 1 << 20  # ... and bytes per message, unless a stage sets its own
    output_guard: OutputGuard = field(default_factory=OutputGuard)  # writes pause on a full disk
    # Seconds for timeouts between records: the runner's clock leaves out the time this stage waited for
    # a consumer, so a paused sink does not cut such a wait short.
    clock: Callable[[], float] = _monotonic
    state_dir: Path | None = None  # where a stage may keep files of its own for crash recovery (None: off)
    curve: CurveKeys | None = None  # the run's CURVE keys, for a stage that binds a socket of its own
    # A stage entry with `partitions: N` runs as N processes: this one takes the devices d with d % N == partition,
    # and the host's records (pipeline/partitions.py)
    partition: int = 0
    partitions: int = 1

    def reject(self, reason: str, count: int = 1, data: bytes = b"") -> None:
        """Count records that could not be used, and keep their bytes aside for inspection."""
        self.rejected[reason] += count
        if data and self.aside_dir is not None:
            folder = self.aside_dir
            safe = "".join(c if c.isalnum() else "_" for c in reason)[:60]
            path = folder / f"{self.stage_id}.{safe}.bin"

            def keep_aside() -> None:
                folder.mkdir(parents=True, exist_ok=True)
                with open(path, "ab") as aside:
                    self.output_guard.append(aside.fileno(), data, path)

            self.output_guard.attempt(path, keep_aside)

    def resolve(self, path: str | Path) -> Path:
        """Relative paths in stage configs are relative to the run's output folder."""
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else self.output_dir / candidate


class Stage:
    """Common base. ``outputs`` lists the named output ports (``aggregate.tasks`` ...)."""

    Config: ClassVar[type[StageConfig]] = StageConfig
    outputs: ClassVar[tuple[str, ...]] = ("out",)
    role: ClassVar[str] = "stage"
    # May run as partitions by device (`partitions: N`): it keeps devices apart and needs no record of another
    # partition's devices. ``partition_fan_in``: its partitions' outputs together are the one stage's (the host's
    # records come from one partition), so a stage may read all of them; else only a paired partition reads one.
    partitionable: ClassVar[bool] = False
    partition_fan_in: ClassVar[bool] = False

    def __init__(self, config: Any, ctx: StageContext) -> None:
        self.config = config
        self.ctx = ctx

    def progress(self) -> dict[str, Any]:
        """Extra figures for `pipeline top` and progress lines (lag, backlog ...)."""
        return {}

    def accounting(self) -> dict[str, Any]:
        """Final figures the run report shows and checks (e.g. written vs collected)."""
        return {}

    def input_problems(self) -> list[str]:
        """At the end: what the input lacked that the outputs lack too (a damaged control file, a device whose data
        could not be read), one line each. The stage still ends well and the others drain; the run ends failed
        with these lines, so a script sees it."""
        return []

    def input_warnings(self) -> list[str]:
        """At the end: what the input lacked that the stage made up for (a missing control file whose facts
        another file gave), one line each. The run still completes; the lines are printed as warnings."""
        return []

    # -- crash recovery -------------------------------------------------------------------------
    # True when snapshot() reads only this process's memory (no file sizes, no queries): the runtime then takes
    # it in a forked child, so a large state costs the stage a fork instead of the time to pickle it.
    snapshot_in_child: ClassVar[bool] = False
    _clock_shift = 0.0

    def clock(self) -> float:
        """The context's clock (which leaves out waits for a consumer), standing still while the stage is down:
        join timeouts and waits measured with it are cut short neither by a paused sink nor by a restart."""
        return self.ctx.clock() + self._clock_shift

    def snapshot(self) -> bytes:
        """The stage's state at a checkpoint barrier (nothing arrives meanwhile). The default pickles every
        attribute but ``config`` and ``ctx``; a stage with state outside the process (files, connections)
        overrides it."""
        from pipeline.checkpoint import pickle_state

        self._saved_clock = self.clock()
        return pickle_state(self)

    def restore(self, state: bytes) -> None:
        """Take back what :meth:`snapshot` returned, in a new process, before any batch arrives."""
        from pipeline.checkpoint import restore_state

        restore_state(self, state)
        now = self.ctx.clock()
        self._clock_shift = getattr(self, "_saved_clock", now) - now


class Source(Stage):
    """Produces batches until exhausted or asked to stop."""

    role = "source"
    checkpoints: ClassVar[bool] = False  # cuts its output into checkpoint epochs at safe points (crash recovery)

    def batches(self) -> Iterator[Batch | None]:
        """Yield batches; yield None now and then while waiting, so the runtime stays responsive. A source with
        ``checkpoints`` yields None only where everything read so far has been yielded: the runtime snapshots it
        there."""
        raise NotImplementedError  # each concrete source implements its own loop

    def stop(self) -> None:
        """Ask the source to finish soon: drain what is readable, then end."""


class Transform(Stage):
    """Takes batches and yields batches; may hold state, flushed on ``tick`` and ``finish``."""

    role = "transform"

    def process(self, batch: Batch) -> Iterable[Batch]:
        raise NotImplementedError  # each concrete transform implements its own step

    def tick(self, now: float) -> Iterable[Batch]:
        """Called at least every flush interval, also when no input arrives."""
        return ()

    def finish(self) -> Iterable[Batch]:
        """All inputs ended: emit what is held."""
        return ()


class Sink(Stage):
    """Writes batches somewhere. ``close`` is not guaranteed after a crash, so a sink keeps its
    output valid as it goes.

    Crash recovery: ``snapshot`` makes what was written durable and records where the outputs end;
    ``restore`` (called instead of ``open`` in a restarted process) reopens them cut back to that
    point, so the batches replayed after it are written once. The default snapshot keeps only the
    sink's attributes: a sink that writes files must override both."""

    role = "sink"
    outputs = ()

    def open(self) -> None:
        """Acquire resources."""

    def write_batch(self, batch: Batch) -> None:
        raise NotImplementedError  # each concrete sink implements its own writer

    def flush(self) -> None:
        """Make everything written so far durable and visible."""

    def close(self) -> None:
        """All inputs ended."""
