"""One stage as one OS process: sockets, the poll loop, end-of-stream, checkpoints and the stage's report."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import sys
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import msgpack
import zmq

from pipeline import checkpoint, partitions, transport, wire
from pipeline.config import PipelineConfig, StageSpec
from pipeline.errors import InputError, UserError
from pipeline.heap import collect_young_less_often, return_large_buffers
from pipeline.logs import configure_logging
from pipeline.peers import PeerWatch
from pipeline.security import stop_authenticators
from pipeline.stage import Batch, Sink, Source, StageContext, Transform

METRICS_INTERVAL_S = 0.5
SINK_FLUSH_INTERVAL_S = 0.5
LOG_INTERVAL_S = 5.0
ACK_RETRY_S = 0.05
SAVE_WAIT_S = 60.0  # at the end, how long a stage waits for a checkpoint still being written by its child
# After Ctrl-C (SIGINT): a stage takes input in while it arrives, until it is quiet for INTERRUPT_GRACE_S or for
# at most INTERRUPT_DRAIN_S, and waits at most INTERRUPT_GRACE_S for a consumer that takes nothing.
INTERRUPT_GRACE_S = 2.0
INTERRUPT_DRAIN_S = 10.0
EXIT_INTERRUPTED = 130
CONTROL_LINGER_MS = 5000  # how long a stage's last reports may take to reach the supervisor


@dataclass
class InputTally:
    batches: int = 0
    records: int = 0
    last_seq: int = -1
    gaps: int = 0
    eos_batches: int | None = None
    eos_records: int | None = None


class Control:
    """Reports to the supervisor, when there is one (a stage started alone has none). Its socket has a ZeroMQ
    context of its own, so that :meth:`close` waits for what was sent to it and for nothing else."""

    def __init__(self, endpoint: str | None, stage_id: str) -> None:
        self.stage_id = stage_id
        self.zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = None
        if endpoint:
            self.sock = self.zctx.socket(zmq.PUSH)
            self.sock.setsockopt(zmq.LINGER, CONTROL_LINGER_MS)
            self.sock.setsockopt(zmq.SNDHWM, 64)
            self.sock.connect(endpoint)

    def send(self, message: dict[str, Any], must_arrive: bool = False) -> None:
        if self.sock is None:
            return
        message["stage"] = self.stage_id
        message["pid"] = os.getpid()  # the supervisor ignores a stage process it has replaced
        payload = msgpack.packb(message, use_bin_type=True)
        try:
            if must_arrive:
                self.sock.send(payload)
            else:
                self.sock.send(payload, zmq.NOBLOCK)
        except zmq.Again:
            pass  # a busy supervisor misses a metrics tick, never data

    def close(self) -> None:
        """Return once what was sent has left this process (CONTROL_LINGER_MS at most, when nobody reads it).
        send() only queues a message for ZeroMQ's I/O thread: a stage killed just after it lost its report."""
        if self.sock is not None:
            self.sock.close(linger=CONTROL_LINGER_MS)
            self.sock = None
        self.zctx.term()


class StageRunner:
    def __init__(self, config: PipelineConfig, stage_id: str, run_id: str, control: str | None,
                 export_stamp: str | None = None, early_signals: list[int] | None = None,
                 resume: int | None = None) -> None:
        if stage_id not in config.stages:
            raise UserError(f"{config.path}: no stage '{stage_id}'", f"stages: {', '.join(config.stages)}")
        self.config = config
        self.spec: StageSpec = config.stages[stage_id]
        self.stage_id = stage_id
        self.run_id = run_id
        self.log = configure_logging(stage_id, run_id)
        return_large_buffers()  # RSS stays flat over a long run (pipeline/heap.py)
        collect_young_less_often()  # every stage makes rows by the thousand per batch (pipeline/heap.py)
        self.zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.curve = config.curve_keys()
        self.control = Control(control, stage_id)
        out_dir = config.output_dir
        # Checkpoints need a supervisor to say when an epoch is complete: a stage run alone keeps none.
        self.checkpointing = control is not None and config.run.checkpoint_s > 0
        self.ctx = StageContext(stage_id=stage_id, run_id=run_id, output_dir=out_dir,
                                upstream=tuple(f"{p}.{port}" for p, port in self.spec.inputs),
                                aside_dir=out_dir / "rejected", export_stamp=export_stamp,
                                batch_records=config.run.batch.max_records,
                                batch_bytes=config.run.batch.max_bytes,
                                state_dir=checkpoint.checkpoint_dir(out_dir) if self.checkpointing else None,
                                partition=self.spec.partition, partitions=self.spec.partitions)
        self.ctx.report_view = self._report_view
        self.ctx.clock = self.stage_clock
        self.ctx.curve = self.curve
        guard = self.ctx.output_guard  # a full or read-only disk pauses this stage's writes
        guard.retry_s, guard.log = config.run.write_retry_s, self.log
        guard.on_wait, guard.on_state = self._keep_alive, lambda state: self._metrics(force=True)
        self.stage = self.spec.cls(self.spec.config, self.ctx)
        self.stop_requested = False
        self.abort = False
        self.stopped_by_supervisor = False
        self.interrupted_at: float | None = None  # Ctrl-C (SIGINT): finish quickly with what has arrived
        self.input_error = False  # it ended on the user's input (InputError): the run exits 2, as for a bad config
        self.early_signals = early_signals if early_signals is not None else []
        self.outputs: dict[str, list[tuple[str, zmq.Socket[bytes]]]] = {}
        self.out_seq: Counter[tuple[str, str]] = Counter()
        self.out_batches: Counter[str] = Counter()
        self.out_records: Counter[str] = Counter()
        # per (port, consumer): what was sent on that link, which its end of stream carries (a routed link, to one
        # partition of a partitioned consumer, carries only that partition's devices: pipeline/partitions.py)
        self.link_records: Counter[tuple[str, str]] = Counter()
        self.link_batches: Counter[tuple[str, str]] = Counter()
        self.routes: dict[str, tuple[int, int] | None] = {}
        self.inputs: dict[tuple[str, str], InputTally] = {key: InputTally() for key in self.spec.inputs}
        self.wire_rejected: Counter[str] = Counter()
        self.started = time.monotonic()
        self.parent = os.getppid() if control else None
        self._last_metrics = 0.0
        self.heartbeat: Path | None = None
        self._last_log = time.monotonic()
        self.waiting_for: tuple[str, float] | None = None  # a consumer this stage's send waits for, since
        self.waited_s: dict[str, float] = {}  # per consumer: seconds sends waited (backpressure)
        self.waited_total = 0.0
        self.input_peers: PeerWatch | None = None  # tcp input: who is connected
        self.output_peers: dict[str, PeerWatch] = {}  # tcp outputs, per consumer: shown and reported
        self.output_watches: list[PeerWatch] = []  # every output socket: the end waits for its consumer to leave
        self.eos_sent = False
        self.resume_epoch = resume  # None: a first start; 0: a restart with no complete epoch; n: restore n
        self.epoch = 0  # the newest epoch this stage saved (a source: emitted)
        self.finished = False  # a transform's finish() ran (at the final barrier, or at end of stream)
        self.final_epoch = False  # the final barrier came: the streams run to the source's end, not to a stop
        self.aligner = checkpoint.BarrierAligner(self.inputs)
        self._arrived: deque[tuple[tuple[str, str], wire.Message]] = deque()
        self.checkpoint_error: str | None = None
        # checkpoints written; seconds the stage's own loop spent on them (a forked child's pickling not counted)
        self.checkpoint_cost = {"saved": 0, "stalled_s": 0.0, "slowest_stall_s": 0.0, "child_cpu_s": 0.0,
                                "largest_bytes": 0}
        self._saving: dict[int, dict[str, Any]] = {}  # child pid → its acknowledgement
        self._restored = False  # the stage took back a checkpoint's state (a sink then reopens instead of open())
        self._reaping = False

    # -- plumbing -------------------------------------------------------------------------
    def _report_view(self, view: dict[str, Any]) -> None:
        self.control.send({"type": "view", "view": view})

    def _open_outputs(self) -> None:
        for port in self.spec.cls.outputs:
            sockets = []
            for consumer in self.config.consumers(self.stage_id, port):
                self.routes[consumer] = self.config.route(self.stage_id, consumer)
                endpoint = transport.input_endpoint(self.config, consumer)
                sockets.append((consumer, self._connect_output(consumer, endpoint)))
            self.outputs[port] = sockets

    def _connect_output(self, consumer: str, endpoint: str) -> zmq.Socket[bytes]:
        """A PUSH to ``consumer``, watched from before it connects (no connection goes unseen)."""

        def watch(sock: zmq.Socket[bytes]) -> None:
            peers = PeerWatch(sock, endpoint, f"consumer '{consumer}'")
            self.output_watches.append(peers)
            if endpoint.startswith("tcp://"):
                self.output_peers.setdefault(consumer, peers)

        return transport.make_push(self.zctx, endpoint, curve=self.curve, before=watch)

    def _send_frames(self, sock: zmq.Socket[bytes], frames: list[bytes], consumer: str) -> None:
        blocked_since: float | None = None
        try:
            while True:
                try:
                    sock.send_multipart(frames, copy=len(frames[1]) < 65536)
                    return
                except zmq.Again:  # the consumer is not reading (slow, paused, or not connected)
                    if blocked_since is None:
                        blocked_since = time.monotonic()
                        self.waiting_for = (consumer, blocked_since)
                    self._metrics()  # heartbeat while blocked: waiting is not being stuck
                    if self._supervisor_gone():
                        self.abort = True
                    if self.abort:
                        raise UserError(f"stage '{self.stage_id}': aborted while a consumer was not reading") from None
                    if self._grace_over(blocked_since):
                        raise UserError(f"stage '{self.stage_id}': interrupted, and consumer '{consumer}' took "
                                        f"nothing for {INTERRUPT_GRACE_S:g} s") from None
        finally:
            if blocked_since is not None:
                waited = time.monotonic() - blocked_since
                self.waited_s[consumer] = self.waited_s.get(consumer, 0.0) + waited
                self.waited_total += waited
                self.waiting_for = None

    def send(self, batch: Batch) -> None:
        self._metrics()  # a long run of sends (a transform's finish) keeps the heartbeat going
        self.out_batches[batch.port] += 1
        self.out_records[batch.port] += batch.count
        for consumer, sock in self.outputs.get(batch.port, []):
            if not partitions.takes(self.routes.get(consumer), batch.meta):
                continue  # another partition's device
            link = (batch.port, consumer)
            seq = self.out_seq[link]
            self.out_seq[link] = seq + 1
            self.link_batches[link] += 1
            self.link_records[link] += batch.count
            self._send_frames(sock, wire.encode_batch(self.stage_id, seq, batch), consumer)

    def send_barrier(self, epoch: int, final: bool) -> None:
        for port, sockets in self.outputs.items():
            for consumer, sock in sockets:
                seq = self.out_seq[(port, consumer)]
                self.out_seq[(port, consumer)] = seq + 1
                self._send_frames(sock, wire.encode_barrier(self.stage_id, port, seq, epoch, final), consumer)

    def send_eos(self) -> None:
        self._watch_peers()
        self.eos_sent = True  # consumers may go now
        for port, sockets in self.outputs.items():
            for consumer, sock in sockets:
                link = (port, consumer)
                frames = wire.encode_eos(self.stage_id, port, self.out_seq[link], self.link_batches[link],
                                         self.link_records[link])
                self._send_frames(sock, frames, consumer)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_requested:
            self.abort = True
        self.stop_requested = True
        if isinstance(self.stage, Source):
            self.stage.stop()

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        """Ctrl-C: a source stops reading and ends its stream; a consumer takes in what arrives for a moment more,
        then finishes with what it has. Nothing waits long for a consumer that takes nothing. A second one aborts."""
        if self.interrupted_at is None:
            self.interrupted_at = time.monotonic()
        self._on_signal(signum, frame)

    def _grace_over(self, since: float) -> bool:
        """Interrupted, and INTERRUPT_GRACE_S have passed since ``since`` (or since the interrupt, if later)."""
        if self.interrupted_at is None:
            return False
        return time.monotonic() - max(since, self.interrupted_at) >= INTERRUPT_GRACE_S

    def _drained(self, last_arrival: float) -> bool:
        """Interrupted, and the input has been quiet for INTERRUPT_GRACE_S, or INTERRUPT_DRAIN_S have passed."""
        if self.interrupted_at is None:
            return False
        return self._grace_over(last_arrival) or time.monotonic() - self.interrupted_at >= INTERRUPT_DRAIN_S

    def _on_abort(self, signum: int, frame: FrameType | None) -> None:
        """The supervisor stops this stage because another one failed."""
        self.abort = True
        self.stopped_by_supervisor = True
        if isinstance(self.stage, Source):
            self.stage.stop()

    def _supervisor_gone(self) -> bool:
        return self.parent is not None and os.getppid() != self.parent

    def stage_clock(self) -> float:
        """time.monotonic() less the time spent waiting for consumers (a pause downstream)."""
        now = time.monotonic()
        waiting = now - self.waiting_for[1] if self.waiting_for is not None else 0.0
        return now - self.waited_total - waiting

    def _keep_alive(self) -> None:
        """Called while a write waits for the disk and during long work at close."""
        self._metrics()
        if self.abort:
            raise UserError(f"stage '{self.stage_id}' aborted while writing its outputs")

    def state(self) -> str | None:
        """What holds this stage up, for `pipeline top` (None: running freely)."""
        paused = self.ctx.output_guard.state()
        if paused is not None:
            return paused
        if self.waiting_for is not None:
            consumer, since = self.waiting_for
            peers = self.output_peers.get(consumer)
            gone = peers.waiting_state(1) if peers is not None else None
            return gone or f"waiting for '{consumer}' to read ({time.monotonic() - since:.0f} s)"
        if self.input_peers is not None:
            return self.input_peers.waiting_state(sum(t.eos_batches is None for t in self.inputs.values()))
        return None

    def _watch_peers(self) -> None:
        watches = [(watch, 0 if self.eos_sent else 1) for watch in self.output_watches]
        if self.input_peers is not None:
            watches.append((self.input_peers, sum(t.eos_batches is None for t in self.inputs.values())))
        for watch, expected in watches:
            for change in watch.poll(expected):
                log = self.log.warning if change == "disconnected" else self.log.info
                log(f"peer {change}", peer=watch.role, endpoint=watch.endpoint, connected=watch.connected)

    def _close_peer_watches(self) -> None:
        for watch in [*self.output_watches, *([self.input_peers] if self.input_peers else [])]:
            watch.close()

    def _wait_for_consumers(self) -> None:
        """After the end of stream: stay connected until every consumer has closed its input.

        ZeroMQ drops what a consumer has not read yet when the producer's connection goes away while that
        consumer is behind (its receive queue full: a slow or paused sink): the tail of the stream and its
        end-of-stream were lost and the consumer waited for ever. A consumer closes its input only after it
        received every end-of-stream, so once all have left, everything sent has arrived.
        """
        waiting_since = time.monotonic()
        while not self.abort and not self._supervisor_gone():
            self._watch_peers()
            if all(watch.idle() for watch in self.output_watches):
                return
            if self._grace_over(waiting_since):
                self.log.warning("interrupted: not waiting longer for consumers to leave")
                return
            time.sleep(0.05)

    def _metrics(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_metrics < METRICS_INTERVAL_S:
            return
        self._last_metrics = now
        if self.heartbeat is not None:
            self.heartbeat.touch()  # for container health checks: the loop is alive
        if self._saving:
            self._reap_saves()
        if self._supervisor_gone() and not self.abort:
            self.log.error("supervisor is gone: stopping")
            self.abort = True
            if isinstance(self.stage, Source):
                self.stage.stop()
        self._watch_peers()
        received = sum(t.records for t in self.inputs.values())
        self.control.send({"type": "metrics", "t": time.time(), "in": received,
                           "out": dict(self.out_records), "rejected": sum(self.ctx.rejected.values()),
                           "progress": self.stage.progress(), "rss_mb": _rss_mb(), "state": self.state(),
                           "awaiting_end": self._awaiting_end(), **self._routed_counts()})
        if now - self._last_log >= LOG_INTERVAL_S:
            self._last_log = now
            self.log.info("stage stats", records_in=received, records_out=dict(self.out_records),
                          rejected=dict(self.ctx.rejected))

    def _routed_counts(self) -> dict[str, Any]:
        """Records sent per link, when some links carry only a partition's devices (the view's backlog needs them)."""
        if not any(self.routes.values()):
            return {}
        return {"out_links": {f"{port}>{consumer}": n for (port, consumer), n in self.link_records.items()}}

    # -- loops ----------------------------------------------------------------------------
    def _run_source(self, source: Source) -> None:
        barriers = self.checkpointing and source.checkpoints and bool(self.outputs)
        every = self.config.run.checkpoint_s
        next_barrier = time.monotonic() + every
        sent_since_barrier = False
        for batch in source.batches():
            if batch is not None:
                self.send(batch)
                sent_since_barrier = True
            elif barriers and sent_since_barrier and time.monotonic() >= next_barrier:
                self._checkpoint(self.epoch + 1, final=False)  # a safe point: all that was read is sent
                next_barrier = time.monotonic() + every
                sent_since_barrier = False
            self._metrics()
        if self.abort:  # stopped because another stage failed: no final barrier, no end of stream
            raise UserError(f"stage '{self.stage_id}' aborted")
        if barriers:
            self._checkpoint(self.epoch + 1, final=True)
        self.send_eos()

    def _receive(self, frames: list[bytes]) -> None:
        """Queue one message; an input blocked by checkpoint alignment keeps its messages until it is released."""
        try:
            message = wire.decode(frames)
        except wire.WireError as exc:
            self._wire_reject(f"malformed message: {exc.reason}", str(exc))
            return
        key = (message.producer, message.port)
        if key not in self.inputs:
            self._wire_reject("message from an unexpected producer", f"{message.producer}.{message.port}"[:120])
            return
        self._arrived.append((key, message))

    def _next_batch(self) -> Batch | None:
        """The next data batch to hand to the stage, handling end-of-stream and barriers on the way."""
        while self._arrived:
            key, message = self._arrived.popleft()
            if self.aligner.is_blocked(key):
                self.aligner.hold((key, message))
                continue
            tally = self.inputs[key]
            if message.seq != tally.last_seq + 1:
                tally.gaps += 1
            tally.last_seq = message.seq
            if message.kind == wire.KIND_EOS:
                tally.eos_batches, tally.eos_records = message.sent_batches, message.sent_records
            elif message.kind == wire.KIND_BARRIER:
                if self.aligner.barrier(key, message.epoch, message.final):
                    self._checkpoint(message.epoch, self.aligner.final)
                    self._arrived.extendleft(reversed(self.aligner.release()))
            else:
                assert message.batch is not None
                tally.batches += 1
                tally.records += message.batch.count
                return message.batch
        return None

    def _wire_reject(self, reason: str, detail: str) -> None:
        """A message dropped: counted under a fixed reason, the first of each reason logged with its detail."""
        self.wire_rejected[reason] += 1
        if self.wire_rejected[reason] == 1:
            self.log.warning("message rejected", reason=reason, detail=detail)

    def _awaiting_end(self) -> dict[str, int]:
        """Inputs whose end of stream has not arrived yet, with the records received from each."""
        return {f"{producer}.{port}": tally.records for (producer, port), tally in self.inputs.items()
                if tally.eos_batches is None}

    def _inputs_done(self) -> bool:
        return all(t.eos_batches is not None for t in self.inputs.values())

    def _run_consumer(self) -> None:
        endpoint = transport.input_endpoint(self.config, self.stage_id)
        def watch(sock: zmq.Socket[bytes]) -> None:
            self.input_peers = PeerWatch(sock, endpoint, "producers")

        pull = transport.make_pull(self.zctx, endpoint, curve=self.curve,
                                   before=watch if endpoint.startswith("tcp://") else None)
        bound = transport.bound_ipc_file(endpoint)
        try:
            self._consume(pull)
        finally:  # on every path: a socket left open holds the context's term() for ever; its ipc file goes
            if self.input_peers is not None:
                self._watch_peers()
                self.input_peers.close()
            transport.close_bound(pull, bound)

    def _consume(self, pull: zmq.Socket[bytes]) -> None:
        poller = zmq.Poller()
        poller.register(pull, zmq.POLLIN)
        flush_s = self.config.run.batch.flush_ms / 1000
        next_tick = time.monotonic() + flush_s
        last_flush = last_arrival = time.monotonic()
        sink = self.stage if isinstance(self.stage, Sink) else None
        transform = self.stage if isinstance(self.stage, Transform) else None
        if sink is not None and not self._restored:
            sink.open()
        while not self._inputs_done():
            if self.abort:
                raise UserError(f"stage '{self.stage_id}' aborted before its inputs ended")
            if self._drained(last_arrival):
                break  # Ctrl-C: what has arrived is handled below; what has not is not waited for
            events = dict(poller.poll(int(flush_s * 1000)))
            if pull in events:
                for _ in range(256):
                    if self.abort:
                        break  # stopped for a restart: take nothing more in
                    try:
                        self._receive(pull.recv_multipart(zmq.NOBLOCK))
                    except zmq.Again:
                        break
                    while (batch := self._next_batch()) is not None:
                        if sink is not None:
                            sink.write_batch(batch)
                        elif transform is not None:
                            for out in transform.process(batch):
                                self.send(out)
                        self._metrics()  # heartbeat between messages of a backlog
                last_arrival = time.monotonic()  # quiet counts from here: handling a backlog takes a while
            now = time.monotonic()
            if now >= next_tick:
                next_tick = now + flush_s
                if transform is not None and not self.finished:
                    for out in transform.tick(transform.clock()):
                        self.send(out)
            if sink is not None and now - last_flush >= SINK_FLUSH_INTERVAL_S:
                last_flush = now
                sink.flush()
                if now - last_arrival >= SINK_FLUSH_INTERVAL_S:  # nothing came: the fault cue is found all the same
                    self.ctx.output_guard.idle()
            self._metrics()
        if transform is not None:
            self._finish_transform()
            self.send_eos()
        if sink is not None:
            sink.flush()
            self._metrics(force=True)
            self._mark_closing_early()
            sink.close()
        if not self._inputs_done():
            raise UserError(f"stage '{self.stage_id}' interrupted before its inputs ended",
                            f"its outputs hold the {self._received():,} records it received")

    def _finish_transform(self) -> None:
        if isinstance(self.stage, Transform) and not self.finished:
            self.finished = True
            self._metrics(force=True)  # the silence of a long finish counts from here
            for out in self.stage.finish():
                self.send(out)

    # -- checkpoints ----------------------------------------------------------------------
    def _mark_closing_early(self) -> None:
        """A sink closing on streams that ended without the final epoch (the source was stopped) says so first:
        its closed outputs cannot be cut back to an epoch, so a rerun must start over rather than resume."""
        if not self.checkpointing or self.final_epoch:
            return
        out_dir = self.config.output_dir
        path = checkpoint.closed_marker(out_dir, self.stage_id)
        self.ctx.output_guard.attempt(path, lambda: checkpoint.mark_closed_early(out_dir, self.stage_id, self.epoch),
                                      output=False)

    def _checkpoint(self, epoch: int, final: bool) -> None:
        """Every input delivered barrier ``epoch`` (a source: a safe point): save, forward it, acknowledge.

        At the final barrier nothing more can arrive, so a transform emits what it holds first: the final
        epoch then covers the whole run, and a restart from it only has to end the streams. A source cuts no
        epoch once it has been asked to stop: its state would say "stopped", and a run resumed from it would
        stop reading at once; nor a final one, since its stream then ends short of the job's end."""
        if self.abort:
            return  # being stopped: an epoch this stage can no longer pass on is not saved either
        if final:
            self._finish_transform()
            self.final_epoch = True
        if not self.checkpointing or self.checkpoint_error is not None:
            if not (isinstance(self.stage, Source) and self.stop_requested):
                self.epoch = epoch
                self.send_barrier(epoch, final)
            return
        ack = {"type": "checkpoint", "epoch": epoch, "final": final, "in": self._received(),
               "out": sum(self.out_records.values())}
        if self.stage.snapshot_in_child and hasattr(os, "fork"):
            self._reap_saves(wait_s=None)  # one at a time, in epoch order (before the signals are held)
            with self._source_signals_held():
                if self._stop_asked():
                    return
                child = self._save_in_child(epoch, final, ack)
                if self._stop_asked():  # handled meanwhile (a signal taken by another thread): the child may have it
                    self._drop_save(child)
                    return
                self.epoch = epoch
            self.send_barrier(epoch, final)
            return
        started = time.perf_counter()
        try:
            with self._source_signals_held():
                if self._stop_asked():
                    return
                saved = self._saved_state(epoch, final)
                if self._stop_asked():  # handled meanwhile (a signal taken by another thread): the state may have it
                    return
                self.epoch = epoch
        except Exception as exc:  # e.g. a plugin whose state does not pickle: recovery is off for this run
            self.epoch = epoch
            self._checkpoint_failed(epoch, f"{type(exc).__name__}: {exc}", traceback.format_exc())
            self.send_barrier(epoch, final)
            return
        self.send_barrier(epoch, final)  # downstream aligns while this stage writes
        self._write_checkpoint(epoch, saved)
        self._count_stall(started)
        self._count_saved(len(saved))
        self._acknowledge(ack)

    def _stop_asked(self) -> bool:
        """A source asked to stop (or aborted): it saves no more epochs. Checked before its state is taken and
        after (the signals are held in between, but one taken by another thread is handled all the same)."""
        return isinstance(self.stage, Source) and (self.stop_requested or self.abort)

    def _drop_save(self, child: int) -> None:
        """A checkpoint a forked child is writing, not to be kept: the child ends, its file never completes."""
        self._saving.pop(child, None)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)

    @contextlib.contextmanager
    def _source_signals_held(self) -> Iterator[None]:
        """For a source, the stop signals wait while its state is taken (a snapshot, or the fork whose child takes
        it): a stop that lands in between would be saved in the state. Consumers are not held."""
        if not isinstance(self.stage, Source):
            yield
            return
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGUSR1})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _save_in_child(self, epoch: int, final: bool, ack: dict[str, Any]) -> int:
        """Pickle and write the checkpoint in a forked child (returned): it sees this moment's memory (copy-on-write)
        while the stage goes on; the acknowledgement follows when the child has written the file."""
        started = time.perf_counter()
        self._reap_saves(wait_s=None)  # one at a time, in epoch order
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: no sockets, no logging, no cleanup handlers
            code = 1
            try:
                gc.disable()
                guard = self.ctx.output_guard  # no sockets here: a full disk only waits, while the stage lives

                def parent_alive() -> None:
                    if os.getppid() != parent:
                        raise OSError(f"stage '{self.stage_id}' is gone")

                guard.on_wait, guard.on_state = parent_alive, None
                saved = self._saved_state(epoch, final)
                # a stage killed meanwhile has been restarted from an older epoch: its files are not ours to write
                if os.getppid() == parent:
                    self._write_checkpoint(epoch, saved)
                    code = 0
            finally:
                os._exit(code)
        self._saving[pid] = ack
        self._count_stall(started)
        return pid

    def _write_checkpoint(self, epoch: int, saved: bytes) -> None:
        """The epoch's file; a full or read-only disk pauses the stage here, as it does a sink's writes."""
        path = checkpoint.stage_file(self.config.output_dir, epoch, self.stage_id)
        self.ctx.output_guard.attempt(path, lambda: checkpoint.write_atomic(path, saved), output=False)

    def _reap_saves(self, wait_s: float | None = 0.0) -> None:
        """Acknowledge the checkpoints children have written; ``wait_s`` None waits for all, else at most so long."""
        if self._reaping:
            return  # a heartbeat sent from the wait below
        self._reaping = True
        try:
            self._reap(None if wait_s is None else time.monotonic() + wait_s)
        finally:
            self._reaping = False

    def _reap(self, deadline: float | None) -> None:
        while self._saving:
            for pid in list(self._saving):
                done, status, usage = os.wait4(pid, os.WNOHANG)
                if not done:
                    continue
                ack = self._saving.pop(pid)
                self.checkpoint_cost["child_cpu_s"] += usage.ru_utime + usage.ru_stime
                if os.waitstatus_to_exitcode(status) != 0:
                    self._checkpoint_failed(ack["epoch"], f"the process saving it ended with status {status}", "")
                    continue
                path = checkpoint.stage_file(self.config.output_dir, ack["epoch"], self.stage_id)
                self._count_saved(path.stat().st_size if path.exists() else 0)
                self._acknowledge(ack)
            if not self._saving or (deadline is not None and time.monotonic() >= deadline):
                return
            self._metrics()  # a child paused by a full disk: waiting for it is not being stuck
            time.sleep(0.01)

    def _checkpoint_failed(self, epoch: int, why: str, trace: str) -> None:
        self.checkpoint_error = f"stage '{self.stage_id}' cannot save a checkpoint: {why}"
        self.log.error("checkpoint failed", error=self.checkpoint_error, traceback=trace)
        self._acknowledge({"type": "checkpoint_failed", "epoch": epoch, "error": self.checkpoint_error})

    def _count_stall(self, started: float) -> None:
        took = time.perf_counter() - started
        self.checkpoint_cost["stalled_s"] += took
        self.checkpoint_cost["slowest_stall_s"] = max(self.checkpoint_cost["slowest_stall_s"], took)

    def _count_saved(self, size: int) -> None:
        self.checkpoint_cost["saved"] += 1
        self.checkpoint_cost["largest_bytes"] = max(self.checkpoint_cost["largest_bytes"], size)

    def _saved_state(self, epoch: int, final: bool) -> bytes:
        inputs = {f"{p}.{port}": [t.records, t.batches] for (p, port), t in self.inputs.items()}
        aside = {path.name: path.stat().st_size for path in self._aside_files()}
        links = {f"{port}>{consumer}": [self.link_records[(port, consumer)], self.link_batches[(port, consumer)]]
                 for port, sockets in self.outputs.items() for consumer, _ in sockets}
        counts = {"out_records": dict(self.out_records), "out_batches": dict(self.out_batches), "inputs": inputs,
                  "links": links,
                  "rejected": dict(self.ctx.rejected), "wire_rejected": dict(self.wire_rejected), "aside": aside,
                  "finished": self.finished}
        collecting = gc.isenabled()
        gc.disable()  # a snapshot builds many objects at once: no collections in between
        try:
            state = self.stage.snapshot()
        finally:
            if collecting:
                gc.enable()
        return msgpack.packb({"stage": self.stage_id, "epoch": epoch, "final": final, "counts": counts,
                              "state": state, "saved_at": time.time()}, use_bin_type=True)

    def _acknowledge(self, message: dict[str, Any]) -> None:
        """Tell the supervisor, without hanging when it is gone (a lost acknowledgement only delays an epoch)."""
        if self.control.sock is None:
            return
        payload = msgpack.packb(dict(message, stage=self.stage_id, pid=os.getpid()), use_bin_type=True)
        while True:
            try:
                self.control.sock.send(payload, zmq.NOBLOCK)
                return
            except zmq.Again:
                if self.abort or self._supervisor_gone():
                    return
                time.sleep(ACK_RETRY_S)

    def _aside_files(self) -> list[Path]:
        aside = self.ctx.aside_dir
        return sorted(aside.glob(f"{self.stage_id}.*.bin")) if aside is not None and aside.is_dir() else []

    def _resume(self) -> bool:
        """Take back the state of the epoch this process resumes from; True when there was one."""
        if self.resume_epoch is None:
            return False
        if self.resume_epoch == 0:  # nothing was saved: start over, without the first attempt's set-aside bytes
            for path in self._aside_files():
                path.unlink(missing_ok=True)
            return False
        path = checkpoint.stage_file(self.config.output_dir, self.resume_epoch, self.stage_id)
        try:
            saved = msgpack.unpackb(path.read_bytes(), raw=False)
        except (OSError, ValueError) as exc:
            raise UserError(f"stage '{self.stage_id}': cannot resume from {path}: {exc}",
                            "start the run over: the same command with --fresh") from None
        counts = saved["counts"]
        self.out_records.update(counts["out_records"])
        self.out_batches.update(counts["out_batches"])
        self._restore_links(counts.get("links"))
        for (producer, port), tally in self.inputs.items():
            tally.records, tally.batches = counts["inputs"].get(f"{producer}.{port}", [0, 0])
        self.ctx.rejected.update(counts["rejected"])
        self.wire_rejected.update(counts["wire_rejected"])
        for aside in self._aside_files():  # bytes set aside after the epoch are set aside again by the replay
            size = counts["aside"].get(aside.name)
            if size is None:
                aside.unlink(missing_ok=True)
            elif aside.stat().st_size > size:
                os.truncate(aside, size)
        self.finished = bool(counts.get("finished"))
        self.epoch = self.resume_epoch
        self.stage.restore(saved["state"])
        self.log.info("resumed from checkpoint", epoch=self.resume_epoch, records_in=self._received())
        return True

    def _restore_links(self, links: dict[str, list[int]] | None) -> None:
        """Per-link counts of a checkpoint; one written without them (an earlier release: no routed links) gives
        each link its port's counts."""
        if links is None:
            for port in self.spec.cls.outputs:
                for consumer in self.config.consumers(self.stage_id, port):
                    self.link_records[(port, consumer)] = self.out_records[port]
                    self.link_batches[(port, consumer)] = self.out_batches[port]
            return
        for key, (records, batches) in links.items():
            port, _, consumer = key.partition(">")
            self.link_records[(port, consumer)], self.link_batches[(port, consumer)] = records, batches

    def _received(self) -> int:
        return sum(t.records for t in self.inputs.values())

    # -- report ---------------------------------------------------------------------------
    def _reconcile(self) -> tuple[list[dict[str, Any]], list[str]]:
        rows, problems = [], []
        for (producer, port), tally in self.inputs.items():
            ok = tally.eos_records == tally.records and tally.eos_batches == tally.batches and tally.gaps == 0
            rows.append({"from": f"{producer}.{port}", "sent": tally.eos_records, "received": tally.records,
                         "batches_sent": tally.eos_batches, "batches_received": tally.batches, "gaps": tally.gaps,
                         "ok": ok})
            if not ok:
                problems.append(f"stage '{self.stage_id}': received {tally.records} records in {tally.batches} "
                                f"batches from {producer}.{port}, which reports {tally.eos_records} in "
                                f"{tally.eos_batches} ({tally.gaps} sequence gaps)")
        return rows, problems

    def _input_problems(self) -> list[str]:
        try:
            return list(self.stage.input_problems())
        except Exception as exc:  # a plugin's bug: one line in the report, not a stage gone without one
            self.log.error("input_problems failed", traceback=traceback.format_exc())
            return [f"stage '{self.stage_id}': input_problems() failed: {type(exc).__name__}: {exc}"]

    def _input_warnings(self) -> list[str]:
        try:
            return list(self.stage.input_warnings())
        except Exception as exc:  # a plugin's bug: one line, not a stage gone without a report
            self.log.error("input_warnings failed", traceback=traceback.format_exc())
            return [f"stage '{self.stage_id}': input_warnings() failed: {type(exc).__name__}: {exc}"]

    def report(self, error: str | None) -> dict[str, Any]:
        reconcile, problems = self._reconcile() if error is None else ([], [])
        check = getattr(self.stage, "check", None)
        if error is None and callable(check):
            problems.extend(check())
        rejected = Counter(self.ctx.rejected)
        rejected.update(self.wire_rejected)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {"type": "final", "stage_type": self.spec.type_name, "role": self.spec.cls.role,
                "ok": error is None and not problems, "error": error, "problems": problems,
                "input_problems": self._input_problems() if error is None else [],
                "input_warnings": self._input_warnings() if error is None else [],
                "input_error": self.input_error,
                "epoch": self.epoch, "resumed_from": self.resume_epoch, "checkpoint_error": self.checkpoint_error,
                "checkpoints": {k: round(v, 4) for k, v in self.checkpoint_cost.items()},
                "wall_s": time.monotonic() - self.started,
                "in": sum(t.records for t in self.inputs.values()), "out": dict(self.out_records),
                "rejected": dict(rejected), "reconcile": reconcile, "accounting": self.stage.accounting(),
                "peak_rss_mb": _peak_rss_mb(usage), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                "pauses": self.ctx.output_guard.summary(),
                "waited_s": {consumer: round(seconds, 3) for consumer, seconds in self.waited_s.items()},
                "peers": [w.summary() for w in [*self.output_peers.values(), *filter(None, [self.input_peers])]]}

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGUSR1, self._on_abort)
        handlers: dict[int, Callable[[int, FrameType | None], None]] = {
            signal.SIGUSR1: self._on_abort, signal.SIGINT: self._on_interrupt}
        for signum in self.early_signals:  # arrived while the process was still starting
            handlers.get(signum, self._on_signal)(signum, None)
        self.control.send({"type": "hello", "role": self.spec.cls.role})
        error: str | None = None
        try:
            self._restored = self._resume()
            self._open_outputs()
            if isinstance(self.stage, Source):
                self._run_source(self.stage)
            else:
                self._run_consumer()
        except UserError as exc:
            error = exc.line()
            self.input_error = isinstance(exc, InputError) and not self.stopped_by_supervisor
            if self.stopped_by_supervisor:
                error = f"stopped: stage '{self.stage_id}' was stopped after another stage failed"
            if self.control.sock is None:  # supervised stages report through the supervisor
                print(error, file=sys.stderr)
        except Exception as exc:  # a bug: keep the traceback in the log, one line in the report
            error = f"stage '{self.stage_id}' crashed: {type(exc).__name__}: {exc}"
            self.log.error("stage crashed", traceback=traceback.format_exc())
        if not self.abort:
            self._reap_saves(wait_s=SAVE_WAIT_S)  # the last checkpoints' acknowledgements go before the report
        self._metrics(force=True)
        self._watch_peers()
        final = self.report(error)
        self.control.send(final, must_arrive=True)
        self.control.close()  # the report has left before the stage says it finished: a kill cannot lose it now
        self.log.info("stage finished", ok=final["ok"], records_in=final["in"], records_out=final["out"],
                      rejected=final["rejected"], problems=final["problems"])
        if self.eos_sent:
            self._wait_for_consumers()
        self._close_peer_watches()
        # After the wait every consumer has read all it was sent, end-of-stream included: nothing is left to deliver.
        # Without an end of stream (a failure, an abort) what is queued is dropped: the consumers are stopped too.
        for sockets in self.outputs.values():
            for _, sock in sockets:
                sock.close(linger=0)
        stop_authenticators()
        self.zctx.destroy(linger=0)  # closes any socket a failed path left open: the process always ends
        if final["ok"]:
            return 0
        return EXIT_INTERRUPTED if self.interrupted_at is not None else 1


def _peak_rss_mb(usage: resource.struct_rusage) -> float:
    """This process's own peak resident memory: VmHWM (Linux). ``ru_maxrss`` is no good for it: a process started
    by fork and exec keeps its parent's peak at the fork (a stage would report its supervisor's size)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return usage.ru_maxrss / 1024


def _rss_mb() -> float:
    """Resident memory now (Linux /proc), for the live view."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def run_stage(config: PipelineConfig, stage_id: str, run_id: str, control: str | None,
              export_stamp: str | None = None, early_signals: list[int] | None = None,
              heartbeat: Path | None = None, resume: int | None = None) -> int:
    # the stages share the machine's cores: a columnar stage's polars works on one thread (less CPU in total)
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    runner = StageRunner(config, stage_id, run_id, control, export_stamp, early_signals, resume)
    runner.heartbeat = heartbeat
    return runner.run()
