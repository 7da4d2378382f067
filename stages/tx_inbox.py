"""``pipeline.tx`` annotations sent to the collector over a socket instead of into the PROF directory.

The collector binds a PULL socket at its ``tx_endpoint``; each message is whole 256-byte msproftx records
(MsprofTxInfo), packed by ``pipeline.tx`` exactly as it would write them to the PROF directory's file. What
arrives is appended to a spool file in the run's output folder, which the collector reads as one more host
stream: the same framing, counts and checkpointed offsets as the msproftx file the runtime's host writes, so a
restarted collector goes on from its checkpoint in the spool and nothing it received is lost or sent twice.
Records still in flight in ZeroMQ when the collector is killed are lost, as a crashed runtime loses its buffers.
"""

from __future__ import annotations

import os
import time
from typing import Any

import structlog
import zmq

from pipeline import transport
from pipeline.security import CurveKeys, stop_authenticators

RECORD_BYTES = 256  # MsprofTxInfo with its additional header
SPOOL_FOLDER = "tx_socket"  # under the run's output folder
STREAM_BASE = "aging.additional.msproftx"
SPOOL_NAME = f"{STREAM_BASE}.slice_0"
QUIET_S = 0.2  # at the end of the job, the socket is drained until it has been quiet this long
MAX_QUIET_WAIT_S = 5.0
log = structlog.get_logger()


class TxInbox:
    """Receives annotation records on ``endpoint`` and appends them to ``data_dir / SPOOL_NAME``."""

    def __init__(self, ctx: Any, endpoint: str, curve: CurveKeys | None, fresh: bool) -> None:
        self.ctx = ctx  # the collector's StageContext: rejections, the output guard, the output folder
        self.data_dir = ctx.resolve(SPOOL_FOLDER) / "data"
        self.path = self.data_dir / SPOOL_NAME
        self.data_dir.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if fresh else 0)
        self.fd = os.open(self.path, flags, 0o640)
        self.zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = transport.make_pull(self.zctx, endpoint, hwm=64, curve=curve)
        self.bound = transport.bound_ipc_file(endpoint)  # an ipc socket's file, removed at close
        self.endpoint = endpoint

    def take(self, until_quiet: bool = False) -> int:
        """Append what has arrived; with ``until_quiet``, also what comes until the socket has been quiet for
        QUIET_S (the application has exited: its last records may still be on their way). Returns bytes
        appended."""
        appended = 0
        deadline = time.monotonic() + MAX_QUIET_WAIT_S
        while True:
            wait_ms = int(QUIET_S * 1000) if until_quiet and time.monotonic() < deadline else 0
            if not self.sock.poll(wait_ms):
                return appended
            frames = self.sock.recv_multipart(copy=True)
            appended += self._keep(frames)

    def _keep(self, frames: list[bytes]) -> int:
        body = frames[0] if len(frames) == 1 else b"".join(frames)
        if len(frames) != 1 or not body or len(body) % RECORD_BYTES:
            reason = f"tx socket: a message of {len(body)} bytes in {len(frames)} frames is not whole " \
                     f"{RECORD_BYTES}-byte msproftx records"
            self.ctx.reject(reason, 1, body)
            log.warning("tx socket: message refused", stage=self.ctx.stage_id, endpoint=self.endpoint,
                        bytes=len(body), frames=len(frames))
            return 0
        self.ctx.output_guard.append(self.fd, body, self.path)
        return len(body)

    def close(self) -> None:
        transport.close_bound(self.sock, self.bound)
        stop_authenticators(self.zctx)
        self.zctx.term()
        os.close(self.fd)
