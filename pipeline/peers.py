"""Who is connected on a tcp data socket: ZeroMQ monitor events turned into a state and counts.

ZeroMQ reconnects by itself, so a peer on another host that disconnects (a collector
restarted, a network cut) is invisible to the stage unless it looks. A :class:`PeerWatch`
reads the socket's monitor events: a peer counts as connected once its ZMTP handshake
(CURVE included) succeeded, and as gone when its connection closes. A client refused by
CURVE is never counted. The runner shows the state of tcp peers only (local stages are the
supervisor's), and on every output waits at the end until the consumer has left.
"""

from __future__ import annotations

import time
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

_EVENTS = (zmq.EVENT_ACCEPTED | zmq.EVENT_CONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
           | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
           zmq.EVENT_HANDSHAKE_FAILED_AUTH)


class PeerWatch:
    """Connections of one tcp socket. ``role`` names the other side: ``producers`` for a bound
    input, ``consumer 'decode'`` for a connected output."""

    def __init__(self, sock: zmq.Socket[bytes], endpoint: str, role: str) -> None:
        self.endpoint = endpoint
        self.role = role
        self.sock = sock
        self.monitor: zmq.Socket[bytes] | None = sock.get_monitor_socket(_EVENTS)
        self.started = time.monotonic()
        self._pending: list[int] = []  # connections whose handshake has not finished (fds)
        self._up: set[int] = set()
        self.connects = 0
        self.disconnects = 0
        self.last_change = self.started
        self.events: list[tuple[float, str]] = []  # (seconds since start, "connected" | "disconnected")

    @property
    def connected(self) -> int:
        return len(self._up)

    def idle(self) -> bool:
        """No peer connected, nor one whose handshake is under way."""
        return not self._up and not self._pending

    def poll(self, expected: int) -> list[str]:
        """Read the events so far; returns what changed ("connected", "disconnected"). A peer that
        leaves while at least ``expected`` others stay connected (a producer that sent its end of
        stream) is not counted as a disconnect."""
        changes: list[str] = []
        while self.monitor is not None:
            try:
                frames = self.monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            event = parse_monitor_message(frames)
            kind, fd = event["event"], event["value"]
            if kind in (zmq.EVENT_ACCEPTED, zmq.EVENT_CONNECTED):
                self._pending.append(fd)
            elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED and self._pending:  # in accept order, close enough
                self._up.add(self._pending.pop(0))
                changes.append(self._record("connected"))
                self.connects += 1
            elif kind in _FAILED and self._pending:
                self._pending.pop(0)
            elif kind == zmq.EVENT_DISCONNECTED:
                if fd in self._up:
                    self._up.discard(fd)
                    if self.connected < expected:
                        self.disconnects += 1
                        changes.append(self._record("disconnected"))
                elif fd in self._pending:
                    self._pending.remove(fd)
        return changes

    def _record(self, what: str) -> str:
        now = time.monotonic()
        self.last_change = now
        self.events.append((round(now - self.started, 3), what))
        return what

    def waiting_state(self, expected: int) -> str | None:
        """A state line when fewer than ``expected`` peers are connected, else None."""
        if expected <= 0 or self.connected >= expected:
            return None
        since = time.monotonic() - self.last_change
        if not self.disconnects:
            return f"waiting for {self.role} to connect on {self.endpoint} ({since:.0f} s)"
        if self.role == "producers":
            return (f"peer disconnected: {self.connected} of {expected} producers connected on {self.endpoint} "
                    f"({since:.0f} s)")
        return f"peer disconnected: {self.role} at {self.endpoint} ({since:.0f} s)"

    def summary(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "peer": self.role, "connects": self.connects,
                "disconnects": self.disconnects, "events": self.events[-20:]}

    def close(self) -> None:
        """Before the socket itself closes."""
        if self.monitor is not None:
            self.sock.disable_monitor()
            self.monitor.close(0)
            self.monitor = None
