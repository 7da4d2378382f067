"""A synchronous handle on an asyncio nats-py connection: a private event loop in a daemon thread.

Stages are synchronous (pipeline.stage); nats-py is asyncio-only. Every call here submits one coroutine to
the loop and waits for its result, so a stage never sees asyncio. Connection failures become one
:class:`~pipeline.errors.UserError` line naming the servers and what to do.

The link ends on every path: :meth:`NatsLink.close` cancels what the client still runs, stops the loop and
closes it, and runs at interpreter exit when no one called it (a stage that failed). A loop left to the
garbage collector with the client's tasks on it logs "Event loop is closed" tracebacks as the process ends.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog

from pipeline.errors import UserError

T = TypeVar("T")
log = structlog.get_logger()
START_HINT = "start a server with JetStream on (nats-server -js) or fix the stage's servers"
PING_INTERVAL_S, MAX_OUTSTANDING_PINGS = 5, 3  # a server that stops answering is given up within ~20 s
DRAIN_TIMEOUT_S = 5.0  # closing a healthy connection: what it still sends and receives, at most this long


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
        self._loop.set_exception_handler(self._unhandled)
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"nats-{stage_id}", daemon=True)
        self._thread.start()
        self.nc: Any = None
        self.js: Any = None
        atexit.register(self.close)
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
                nats.connect(servers=self.servers, connect_timeout=timeout_s, allow_reconnect=False, error_cb=quiet,
                             ping_interval=PING_INTERVAL_S, max_outstanding_pings=MAX_OUTSTANDING_PINGS),
                timeout_s)
        except Exception as exc:
            why = f"no answer within {timeout_s:g} s" if isinstance(exc, asyncio.TimeoutError) else \
                f"{type(exc).__name__} {exc}".rstrip()
            raise UserError(f"stage '{self.stage_id}': cannot reach NATS at {', '.join(self.servers)}: {why}",
                            START_HINT) from None

    def _unhandled(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An error inside the client no call waits for (a cancelled drain, a lost socket): one log line, as the
        failure itself reaches the stage through the call that meets it."""
        error = context.get("exception")
        log.warning("nats client", stage=self.stage_id, message=context.get("message", ""),
                    error=f"{type(error).__name__} {error}".rstrip() if error is not None else None)

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

    def close(self, drain: bool = True) -> None:
        """Drain a healthy connection (``drain=False``, or a broken one: close it), end the client's tasks, stop
        and close the loop. Safe to call again: later calls do nothing."""
        if self._loop.is_closed():
            return
        atexit.unregister(self.close)
        if self._thread.is_alive():
            try:
                self.call(self._shut(drain), timeout=DRAIN_TIMEOUT_S + 5)
            except Exception:  # closing is best effort: the server may be gone or not answering
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._thread.is_alive():  # a loop still running cannot be closed; a daemon thread ends with us
            self._loop.close()

    async def _shut(self, drain: bool) -> None:
        if self.nc is not None and not self.nc.is_closed:
            try:
                if drain and self.nc.is_connected:
                    await asyncio.wait_for(self.nc.drain(), DRAIN_TIMEOUT_S)
                else:
                    await self.nc.close()
            except Exception:  # a drain that fails or takes too long: close outright
                try:
                    await asyncio.wait_for(self.nc.close(), DRAIN_TIMEOUT_S)
                except Exception:
                    pass
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
