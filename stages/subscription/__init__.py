"""`subscription` source: operator records of aclprofModelSubscribe, read from a pipe or FIFO.

Example (YAML):

    subscribe: {type: subscription, path: ops.fifo, resolver: ops.fifo.ndjson, op_desc_size: null,
                device_id: 0, create: true, wait_s: 60, hold_s: 5, poll_ms: 20}

``path`` is a FIFO the board side writes raw ProfOpDesc records into (created when absent), or a regular
file holding a captured stream (read once to its end). Records are framed across short reads, their CRC-32C
signature is checked, and names come from the resolver channel (stages/subscription/resolver.py). Bad
signatures, a partial record at the end, an unknown record size and records no name arrives for are counted
per reason in the run report and kept aside, never fatal. The stream ends when the last writer closes the
FIFO. Out: ``subscribed_op`` records (stages/subscription/records.py) that the aggregator adds to op_statistic.
"""

from __future__ import annotations

import os
import select
import stat
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import structlog
from pydantic import Field

from pipeline.errors import InputError, UserError
from pipeline.stage import Batch, Source, StageConfig
from stages.formats import op_desc
from stages.schema import SymbolTable
from stages.subscription import records
from stages.subscription.framing import OpDescFramer
from stages.subscription.resolver import OpNames, Resolver

READ_BYTES = 256 << 10
MAX_NAME_IDS = 1 << 16  # distinct (type, name, core) triples whose symbol ids are at hand
MAX_UNSIZED_BYTES = 16 << 20  # bytes held while no record size is known; beyond this they are rejected
BAD_SIGNATURE = "ProfOpDesc with a bad signature (CRC-32C)"
SHORT_READ = "short read: a partial ProfOpDesc at the end of the stream"
NO_NAME = "ProfOpDesc whose op_index the resolver never named"
NO_SIZE = "ProfOpDesc bytes of unknown size (no op_desc_size configured or sent by the resolver)"
_COPIED = ("model_id", "flag", "thread_id", "op_index")
log = structlog.get_logger()


@dataclass
class Waiting:
    """Checked records waiting for their names, in stream order; ``position``: the first not yet resolved."""

    records: np.ndarray
    indexes: list[int]
    arrived: float
    position: int = 0


class SubscriptionStage(Source):
    class Config(StageConfig):
        path: str = Field("ops.fifo", description="FIFO (or file) of ProfOpDesc records; relative to the run output")
        resolver: str | None = Field(None, description="ndjson op names (file or FIFO); default: PATH.ndjson")
        op_desc_size: Literal[72, 80] | None = Field(
            None, description="record size (acl.prof.get_op_desc_size); None: from the resolver's op_desc_size line")
        device_id: int = Field(0, ge=0, description="device of 72-byte records (they carry no dev_id)")
        create: bool = Field(True, description="make the FIFO when the path is absent")
        wait_s: float | None = Field(60.0, ge=0, description="how long to wait for a writer; None: for ever")
        hold_s: float = Field(5.0, ge=0, description="how long a record waits for its name from the resolver")
        poll_ms: int = Field(20, ge=1, description="how often to look for new bytes when none are readable")

    def __init__(self, config: Any, ctx: Any) -> None:
        super().__init__(config, ctx)
        self.path = ctx.resolve(config.path)
        resolver = ctx.resolve(config.resolver) if config.resolver else Path(f"{self.path}.ndjson")
        self.resolver = Resolver(resolver, ctx.reject)
        self.framer = OpDescFramer(config.op_desc_size)
        self.symbols = SymbolTable()
        self.name_ids: dict[OpNames, tuple[int, int, int]] = {}
        self.waiting: deque[Waiting] = deque()
        self._stop = False
        self.fd: int | None = None
        self.poller: Any = None
        self.hangup = False
        self.bytes_read = 0
        self.records_read = 0
        self.ops_out = 0

    def stop(self) -> None:
        self._stop = True

    # -- the loop -------------------------------------------------------------------------
    def batches(self) -> Iterator[Batch | None]:
        yield from self._open()
        started = time.monotonic()
        while True:
            ended = self._read()
            self.resolver.poll()
            yield from self._emit(final=False)
            if ended or self._stop:
                break
            if self.bytes_read == 0 and self.config.wait_s is not None and \
                    time.monotonic() - started > self.config.wait_s:
                raise UserError(f"subscription: nothing was written to {self.path} within {self.config.wait_s:g} s",
                                "start the application (or `pipeline simulate --subscribe`) or raise wait_s")
            yield None
            self._wait()
        self.resolver.poll(drain=True)
        yield from self._emit(final=True)
        self._close()

    def _open(self) -> Iterator[None]:
        deadline = None if self.config.wait_s is None else time.monotonic() + self.config.wait_s
        while not self.path.exists():
            if self.config.create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.mkfifo(self.path, 0o600)
                except FileExistsError:
                    pass
                continue
            if self._stop or deadline is not None and time.monotonic() > deadline:
                raise InputError(f"subscription: {self.path} does not exist",
                                 "point path at the FIFO the board side writes, or set create: true")
            yield None
            time.sleep(self.config.poll_ms / 1000)
        mode = self.path.stat().st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
            raise InputError(f"subscription: {self.path} is neither a FIFO nor a regular file",
                             "point path at the FIFO aclprofModelSubscribe's records are forwarded to")
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        if stat.S_ISFIFO(mode):
            self.poller = select.poll()
            self.poller.register(self.fd, select.POLLIN)
        log.info("subscription reading", stage=self.ctx.stage_id, path=str(self.path),
                 fifo=stat.S_ISFIFO(mode), resolver=str(self.resolver.path))

    def _read(self) -> bool:
        """Read what is readable now; True once the stream has ended (the FIFO's last writer closed it, or
        a regular file's end)."""
        assert self.fd is not None
        for _ in range(64):  # bounded, so names and batches keep flowing while a fast writer writes
            try:
                data = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                return False
            if not data:  # a FIFO no writer has opened yet reads empty too: only a hangup ends it
                return self.poller is None or self.hangup
            self.bytes_read += len(data)
            self.framer.feed(data)
        return False

    def _wait(self) -> None:
        if self.poller is None:
            return
        for _, events in self.poller.poll(self.config.poll_ms):
            if events & select.POLLHUP:
                self.hangup = True

    def _close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.resolver.close()

    # -- records --------------------------------------------------------------------------
    def _emit(self, final: bool) -> Iterator[Batch]:
        self._settle_size(final)
        taken = self.framer.take()
        if taken.bad_count:
            self.ctx.reject(BAD_SIGNATURE, taken.bad_count, taken.bad_bytes)
        self.records_read += len(taken.records) + taken.bad_count
        if len(taken.records):
            self.waiting.append(Waiting(taken.records, taken.records["op_index"].tolist(), self.clock()))
        if final:
            rest = self.framer.rest()
            if rest:
                self.ctx.reject(SHORT_READ if self.framer.size else NO_SIZE, 1, rest)
        yield from self._named(final)

    def _settle_size(self, final: bool) -> None:
        """The record size, once configured or announced; bytes that cannot be cut are rejected."""
        if self.framer.size is None:
            self.framer.size = self.resolver.op_desc_size
        size = self.framer.size
        if size is not None and size not in op_desc.LAYOUTS:
            held = self.framer.rest()
            if held:
                self.ctx.reject(f"ProfOpDesc of unknown size {size} (72 or 80 expected)",
                                max(1, len(held) // size) if size > 0 else 1, held)
        elif size is None and (final or self.framer.pending_bytes > MAX_UNSIZED_BYTES):
            held = self.framer.rest()
            if held:
                self.ctx.reject(NO_SIZE, 1, held)

    def _named(self, final: bool) -> Iterator[Batch]:
        """Records whose names are in, oldest first; one still unnamed holds those after it until hold_s."""
        now = self.clock()
        limit = self.ctx.batch_records
        while self.waiting:
            head = self.waiting[0]
            expired = final or now - head.arrived >= self.config.hold_s
            keep: list[int] = []
            texts: list[tuple[int, int, int]] = []
            while head.position < len(head.indexes) and len(keep) < limit:
                names = self.resolver.take(head.indexes[head.position])
                if names is None:
                    if not expired:
                        break
                    self.ctx.reject(NO_NAME, 1, head.records[head.position].tobytes())
                else:
                    keep.append(head.position)
                    texts.append(self._symbol_ids(names))
                head.position += 1
            if keep:
                yield self._batch(head.records[keep], texts)
            if head.position < len(head.indexes) and not keep:
                return  # waiting for a name
            if head.position == len(head.indexes):
                self.waiting.popleft()

    def _symbol_ids(self, names: OpNames) -> tuple[int, int, int]:
        ids = self.name_ids.get(names)
        if ids is None:
            if len(self.name_ids) >= MAX_NAME_IDS:
                self.name_ids.clear()
            intern = self.symbols.intern
            ids = self.name_ids[names] = (intern(names.op_type), intern(names.op_name), intern(names.core_type))
        return ids

    def _batch(self, recs: np.ndarray, texts: list[tuple[int, int, int]]) -> Batch:
        out = np.zeros(len(recs), records.SUBSCRIBED_OP)
        for name in _COPIED:
            out[name] = recs[name]
        out["device_id"] = recs["dev_id"] if "dev_id" in (recs.dtype.names or ()) else self.config.device_id
        out["start_ns"], out["end_ns"] = recs["start"], recs["end"]
        out["duration_ns"], out["execution_ns"] = recs["duration"], recs["execution_time"]
        out["cube_fops"], out["vector_fops"] = recs["cube_fops"], recs["vector_fops"]
        ids = np.array(texts, np.uint32).reshape(-1, 3)
        out["op_type"], out["op_name"], out["core_type"] = ids[:, 0], ids[:, 1], ids[:, 2]
        self.ops_out += len(out)
        meta = {"symbols": self.symbols.take_unsent(), "source": self.ctx.stage_id}
        return Batch(records.KIND, len(out), meta, out.tobytes())

    def progress(self) -> dict[str, Any]:
        return {"ops": self.ops_out, "waiting_names": sum(len(w.indexes) - w.position for w in self.waiting)}

    def accounting(self) -> dict[str, Any]:
        return {"bytes_read": self.bytes_read, "records_read": self.records_read, "ops_out": self.ops_out,
                "op_desc_size": self.framer.size, "resolver_lines": self.resolver.lines,
                "resolver_names_unused": len(self.resolver.names) + self.resolver.evicted}
