"""``nats_source``: consumes pipeline batches from JetStream durably, acknowledging what it handed on.

Example config (on the central host)::

    consume:
      type: nats_source
      servers: ["nats://127.0.0.1:4222"]
      cluster: job42
      durable: merge          # the consumer's name: a restart resumes where it was
      boards: 3               # end when three publishers have closed (or set idle_s)

A durable **pull** consumer fetches up to ``fetch`` messages at a time (that bounds the work in flight)
and acknowledges a message once the runtime has passed its batch downstream: a source killed before that
gets it again from the server (redelivery after ``ack_wait_s``, or at once after a restart). On start, with
``replay_latest`` on, the source first reads the newest message of every subject of the cluster (without
acknowledging): the latest statistics part of every device and every publisher's end marker. A consumer
restarted after a crash thus rebuilds everything it had, whatever was acknowledged; stages/cluster.py keeps
one part per (source, seq), so whatever arrives twice counts once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from pydantic import Field

from pipeline.errors import UserError
from pipeline.stage import Batch, Source, StageConfig, StageContext
from stages.nats.link import NatsLink
from stages.nats.message import EOS, decode, token

POLL_S = 0.2  # a fetch waits at most this long, so the source stays responsive to stop()


class NatsSourceConfig(StageConfig):
    servers: list[str] = Field(["nats://127.0.0.1:4222"], min_length=1, description="NATS server URLs")
    stream: str = Field("ASCEND", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="JetStream stream name")
    prefix: str = Field("ascend", pattern=r"^[A-Za-z0-9_-]{1,32}$", description="first subject token")
    cluster: str = Field(..., description="the job whose subjects to read ({prefix}.{cluster}.>)")
    durable: str = Field("pipeline", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="durable consumer name")
    fetch: int = Field(64, ge=1, le=10_000, description="messages fetched (and in flight) at most at once")
    ack_wait_s: float = Field(30.0, gt=0, description="the server redelivers a message unacknowledged so long")
    replay_latest: bool = Field(True, description="first read the newest message of every subject (no ack)")
    boards: int | None = Field(None, ge=1, description="end once this many publishers have closed")
    idle_s: float | None = Field(None, gt=0, description="end after this many seconds without a message")
    max_age_s: float = Field(86400.0, ge=0, description="stream retention when this stage creates it (0: none)")
    connect_timeout_s: float = Field(5.0, gt=0, description="seconds to reach a server before giving up")


class NatsSource(Source):
    Config = NatsSourceConfig

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, NatsSourceConfig):
            config = NatsSourceConfig.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: NatsSourceConfig = config
        self.subjects = f"{config.prefix}.{token(config.cluster)}.>"
        self.closed_publishers: set[str] = set()
        self.figures = {"replayed": 0, "delivered": 0, "acked": 0, "redelivered": 0, "bad_messages": 0}
        self._stop = False

    def stop(self) -> None:
        self._stop = True

    def progress(self) -> dict[str, Any]:
        return {"closed_publishers": len(self.closed_publishers), **self.figures}

    def accounting(self) -> dict[str, Any]:
        return {"closed_publishers": sorted(self.closed_publishers), **self.figures}

    def batches(self) -> Iterator[Batch | None]:
        link = NatsLink(self.config.servers, self.ctx.stage_id, self.config.connect_timeout_s)
        try:
            link.ensure_stream(self.config.stream, [f"{self.config.prefix}.>"], self.config.max_age_s)
            if self.config.replay_latest:
                for payload in self._latest_per_subject(link):
                    batch = self._batch(payload)
                    if batch is not None:
                        self.figures["replayed"] += 1
                        yield batch
            yield from self._consume(link)
        finally:
            link.close()

    # -- reading ------------------------------------------------------------------------------

    def _latest_per_subject(self, link: NatsLink) -> list[bytes]:
        """The newest message of every subject under the cluster, through an ephemeral consumer."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        async def read() -> list[bytes]:
            info = await link.js.stream_info(self.config.stream)
            if not info.state.messages:
                return []
            sub = await link.js.pull_subscribe(
                self.subjects, stream=self.config.stream,
                config=ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, ack_policy=AckPolicy.NONE))
            payloads: list[bytes] = []
            try:
                while True:
                    pending = (await sub.consumer_info()).num_pending
                    if pending == 0:
                        break
                    try:
                        payloads += [msg.data for msg in await sub.fetch(min(pending, 256), timeout=2)]
                    except asyncio.TimeoutError:  # a busy machine: ask again (the call's own timeout bounds this)
                        continue
            finally:
                await sub.unsubscribe()
            return payloads

        try:
            return link.call(read(), timeout=120)
        except Exception as exc:
            raise UserError(f"stage '{self.ctx.stage_id}': cannot read the latest messages of {self.subjects}: "
                            f"{type(exc).__name__} {exc}") from None

    def _consume(self, link: NatsLink) -> Iterator[Batch | None]:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        async def fetch_some(sub: Any) -> list[Any]:
            """The next messages; none within the poll (nats-py raises its own timeout error, or asyncio's when
            the deadline ran out on a busy machine): an empty poll, not a lost server."""
            try:
                return list(await sub.fetch(self.config.fetch, timeout=POLL_S))
            except asyncio.TimeoutError:  # nats.errors.TimeoutError is one too
                return []

        config = ConsumerConfig(durable_name=self.config.durable, deliver_policy=DeliverPolicy.ALL,
                                ack_policy=AckPolicy.EXPLICIT, ack_wait=self.config.ack_wait_s,
                                max_ack_pending=max(self.config.fetch * 4, 256))
        try:
            sub = link.call(link.js.pull_subscribe(self.subjects, durable=self.config.durable,
                                                   stream=self.config.stream, config=config))
        except Exception as exc:
            raise UserError(f"stage '{self.ctx.stage_id}': cannot open durable consumer '{self.config.durable}' "
                            f"on {self.subjects}: {type(exc).__name__} {exc}") from None
        last_message = time.monotonic()
        while not self._stop and not self._done(last_message):
            try:
                messages = link.call(fetch_some(sub), timeout=POLL_S + 30)
            except Exception as exc:
                raise UserError(f"stage '{self.ctx.stage_id}': lost the NATS server: {type(exc).__name__} {exc}",
                                "restart the server; unacknowledged messages come again") from None
            if not messages:
                yield None
                continue
            last_message = time.monotonic()
            for msg in messages:
                self.figures["delivered"] += 1
                if msg.metadata.num_delivered > 1:
                    self.figures["redelivered"] += 1
                batch = self._batch(msg.data)
                if batch is not None:
                    yield batch  # the runtime resumes us once the batch went downstream: then ack
                link.call(msg.ack())
                self.figures["acked"] += 1

    def _batch(self, payload: bytes) -> Batch | None:
        """The message's batch; an end marker is counted and not passed on; a foreign message is set aside."""
        try:
            batch = decode(payload)
        except ValueError as exc:
            self.figures["bad_messages"] += 1
            self.ctx.reject(f"nats message: {exc}"[:80], 1, payload)
            return None
        if batch.kind == EOS:
            self.closed_publishers.add(str(batch.meta.get("source")))
            return None
        return batch

    def _done(self, last_message: float) -> bool:
        if self.config.boards is not None and len(self.closed_publishers) >= self.config.boards:
            return True
        return self.config.idle_s is not None and time.monotonic() - last_message >= self.config.idle_s
