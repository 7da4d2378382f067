"""A synchronous handle on an asyncio nats-py connection: a private event loop in a daemon thread.

Stages are synchronous (pipeline.stage); nats-py is asyncio-only. Every call here submits one coroutine to
the loop and waits for its result, so a stage never sees asyncio. Connection failures become one
:class:`~pipeline.errors.UserError` line naming the servers and what to do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pipeline.errors import UserError

T = TypeVar("T")
START_HINT = "start a server with JetStream on (nats-server -js) or fix the stage's servers"


class NatsLink:
    """One connection and its JetStream context, driven from synchronous code."""

    def __init__(self, servers: list[str], stage_id: str, connect_timeout_s: float) -> None:
        try:
            import nats  # noqa: F401  (the optional [nats] extra)
        except ImportError:
            raise UserError(f"stage '{stage_id}': the NATS client is not installed",
                            "pip install 'ascend-live-pipeline[nats]'") from None
        self.stage_id = stage_id
        self.servers = servers
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"nats-{stage_id}", daemon=True)
        self._thread.start()
        self.nc: Any = None
        self.js: Any = None
        try:
            self.nc = self.call(self._connect(connect_timeout_s), timeout=connect_timeout_s + 5)
        except UserError:
            self.close()
            raise
        self.js = self.nc.jetstream()

    async def _connect(self, timeout_s: float) -> Any:
        import nats

        async def quiet(_exc: Exception) -> None:  # nats-py prints reconnect noise otherwise
            return None

        try:
            return await asyncio.wait_for(
                nats.connect(servers=self.servers, connect_timeout=timeout_s, allow_reconnect=False, error_cb=quiet),
                timeout_s)
        except Exception as exc:
            why = f"no answer within {timeout_s:g} s" if isinstance(exc, asyncio.TimeoutError) else \
                f"{type(exc).__name__} {exc}".rstrip()
            raise UserError(f"stage '{self.stage_id}': cannot reach NATS at {', '.join(self.servers)}: {why}",
                            START_HINT) from None

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run one coroutine on the link's loop and return its result (its exception is raised here)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout)

    def ensure_stream(self, name: str, subjects: list[str], max_age_s: float) -> None:
        """Create the stream when absent; an existing one is used as it is."""
        from nats.js.api import StreamConfig
        from nats.js.errors import NotFoundError

        async def ensure() -> None:
            try:
                await self.js.stream_info(name)
            except NotFoundError:
                try:
                    await self.js.add_stream(StreamConfig(name=name, subjects=subjects, max_age=max_age_s or None))
                except Exception:  # another stage created it meanwhile: fine if it is there now
                    await self.js.stream_info(name)

        try:
            self.call(ensure())
        except Exception as exc:
            raise UserError(f"stage '{self.stage_id}': JetStream stream '{name}' is not usable: "
                            f"{type(exc).__name__} {exc}", "is JetStream on (nats-server -js)?") from None

    def close(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            try:
                self.call(self.nc.drain(), timeout=10)
            except Exception:  # closing is best effort: the server may be gone already
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
