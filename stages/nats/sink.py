"""``nats_sink``: publishes batches into JetStream, statistics split per device (docs/cluster.md).

Example config (on each board's pipeline)::

    publish:
      type: nats_sink
      inputs: [aggregate.stats]
      servers: ["nats://127.0.0.1:4222"]
      cluster: job42          # subject token shared by every board of one job
      host: board-07          # default: this machine's host name

Every publish waits for JetStream's acknowledgement (the message is stored) before the next batch;
``Nats-Msg-Id`` is ``{source}:{kind}:{seq}``, so a batch published twice inside the stream's duplicate
window is stored once.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from pydantic import Field

from pipeline.errors import UserError
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages.nats.link import NatsLink
from stages.nats.message import API_PART, EOS, MAX_PAYLOAD, OP_PART, encode, part_batch, token
from stages.schema import SymbolTable, unpack_rows
from stages.sinks._format import learn_symbols, text_of
from stages.sinks._partitions import PartitionMerge

PUBLISH_TRIES = 3  # a publish JetStream did not acknowledge in time is sent again (same message id)


class NatsSinkConfig(StageConfig):
    servers: list[str] = Field(["nats://127.0.0.1:4222"], min_length=1, description="NATS server URLs")
    stream: str = Field("ASCEND", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="JetStream stream name")
    prefix: str = Field("ascend", pattern=r"^[A-Za-z0-9_-]{1,32}$", description="first subject token")
    cluster: str | None = Field(None, description="second subject token: the job; default run.name")
    host: str | None = Field(None, description="third subject token: this board; default the host name")
    max_age_s: float = Field(86400.0, ge=0, description="stream retention when this stage creates it (0: none)")
    connect_timeout_s: float = Field(5.0, gt=0, description="seconds to reach a server before giving up")


class NatsSink(Sink):
    Config = NatsSinkConfig

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, NatsSinkConfig):
            config = NatsSinkConfig.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: NatsSinkConfig = config
        cluster = config.cluster or ctx.run_id.rsplit("-", 2)[0]  # run ids are {run.name}-{time}-{hex}
        self.base = f"{config.prefix}.{token(cluster)}.{token(config.host or socket.gethostname())}"
        self.symbols = SymbolTable()
        self.last_seq = 0
        self.published = {"messages": 0, "records": 0, "bytes": 0}
        self.partitions = PartitionMerge()  # a partitioned aggregator's snapshots and run_info, merged
        self.link: NatsLink | None = None

    def open(self) -> None:
        self.link = NatsLink(self.config.servers, self.ctx.stage_id, self.config.connect_timeout_s)
        self.link.ensure_stream(self.config.stream, [f"{self.config.prefix}.>"], self.config.max_age_s)

    def write_batch(self, batch: Batch) -> None:
        learn_symbols(self.symbols, batch)
        batch = self.partitions.merged(batch)
        if batch.kind == "op_statistic":
            seq = self._next_seq()
            final = bool(batch.meta.get("final"))
            by_device: dict[Any, list[list[Any]]] = {}
            for device, op_type, core_type, *figures in unpack_rows(batch):
                row = [device, text_of(self.symbols, op_type), text_of(self.symbols, core_type), *figures]
                by_device.setdefault(device, []).append(row)
            for device, rows in sorted(by_device.items()):
                source = f"{self.base}.{token(str(device))}"
                self._publish(f"{source}.stats", part_batch(OP_PART, rows, source, seq, final))
        elif batch.kind == "api_statistic":
            rows = [[level, text_of(self.symbols, name), *figures] for level, name, *figures in unpack_rows(batch)]
            source = f"{self.base}.host"
            self._publish(f"{source}.stats", part_batch(API_PART, rows, source, self._next_seq(),
                                                        bool(batch.meta.get("final"))))
        else:
            self._publish(f"{self.base}.all.{token(batch.kind)}", batch)

    def close(self) -> None:
        if self.link is None:
            return
        self._publish(f"{self.base}.eos", Batch(EOS, 0, {"source": self.base, "seq": self._next_seq()}))
        self.link.close()
        self.link = None

    def accounting(self) -> dict[str, Any]:
        return dict(self.published)

    def snapshot(self) -> bytes:
        from pipeline.checkpoint import pickle_state

        return pickle_state(self, skip=("link",))

    def restore(self, state: bytes) -> None:
        super().restore(state)
        self.open()

    def _next_seq(self) -> int:
        """Snapshot sequence: wall-clock ns, and always above the last one, so a restarted board's parts
        still supersede what it published before."""
        self.last_seq = max(self.last_seq + 1, time.time_ns())
        return self.last_seq

    def _publish(self, subject: str, batch: Batch) -> None:
        assert self.link is not None, "open() first"
        payload = encode(batch)
        if len(payload) > MAX_PAYLOAD:
            raise UserError(f"stage '{self.ctx.stage_id}': a {batch.kind} batch of {len(payload)} bytes exceeds "
                            f"NATS's 1 MiB message limit", "lower run.batch.max_bytes")
        msg_id = f"{batch.meta.get('source', subject)}:{batch.kind}:{batch.meta.get('seq', self.published['messages'])}"
        failure = self._publish_tries(subject, payload, msg_id)
        if failure is not None:  # the stage ends here: the connection and its loop go now, on this path too
            self.link.close(drain=False)  # a server that did not answer the publish would not answer a drain
            self.link = None
            raise UserError(f"stage '{self.ctx.stage_id}': publishing to {subject} failed: {failure}",
                            "is the NATS server up, with JetStream on?")
        self.published["messages"] += 1
        self.published["records"] += batch.count
        self.published["bytes"] += len(payload)

    def _publish_tries(self, subject: str, payload: bytes, msg_id: str) -> str | None:
        """Publish until JetStream acknowledges; None then, else why it failed."""
        assert self.link is not None, "open() first"
        for _ in range(PUBLISH_TRIES):
            try:
                self.link.call(self.link.js.publish(subject, payload, stream=self.config.stream, timeout=5,
                                                    headers={"Nats-Msg-Id": msg_id}))
                return None
            except asyncio.TimeoutError:  # no acknowledgement in time (a busy machine): the message id makes a
                continue  # second publish of one that did land a duplicate JetStream drops
            except Exception as exc:
                return f"{type(exc).__name__} {exc}"
        return f"no acknowledgement in {PUBLISH_TRIES} tries"
