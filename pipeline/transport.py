"""Endpoints and sockets: PUSH→PULL data hops, ipc in a 0700 directory."""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import zmq

from pipeline.config import PipelineConfig
from pipeline.errors import UserError
from pipeline.security import CurveKeys, connect_as_client, serve

IPC_PATH_LIMIT = 107
LINGER_MS = 30_000
SEND_POLL_MS = 200
MAX_MESSAGE_BYTES = 256 << 20  # a peer sending a larger frame is disconnected by ZeroMQ, before it is read
TCP_HEARTBEAT_MS, TCP_HEARTBEAT_TIMEOUT_MS = 2_000, 10_000  # a silent tcp peer (cable cut) counts as gone


def socket_root() -> Path:
    """Where run socket directories live: $XDG_RUNTIME_DIR or the temp folder, per user."""
    root = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(root) / f"ascend-pipeline-{os.getuid()}"


def private_socket_root() -> Path:
    """:func:`socket_root`, made 0700 when absent; one that exists must be this user's own directory, 0700.

    The folder's name is predictable, so in a shared temp folder another user may have made it first: its
    sockets would then be theirs to reach or replace. A folder that is not the user's alone is refused.
    """
    root = socket_root()
    try:
        root.mkdir(parents=True, mode=stat.S_IRWXU)
        root.chmod(stat.S_IRWXU)  # mkdir's mode passes through the umask
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserError(f"cannot make the socket folder {root}: {exc.strerror or exc}", _ROOT_HINT) from None
    _check_private(root)
    return root


_ROOT_HINT = "set XDG_RUNTIME_DIR to a folder of your own, or run.socket_dir"


def _check_private(root: Path) -> None:
    info = root.lstat()
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise UserError(f"socket folder {root} is {kind}", f"remove it, or {_ROOT_HINT}")
    if info.st_uid != os.getuid():
        raise UserError(f"socket folder {root} belongs to {_user(info.st_uid)}, not to you ({_user(os.getuid())})",
                        f"remove it (its owner or root can), or {_ROOT_HINT}")
    mode = stat.S_IMODE(info.st_mode)
    if mode != stat.S_IRWXU:
        raise UserError(f"socket folder {root} has mode {mode:04o}, not 0700 (yours alone)", f"chmod 700 {root}")


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def socket_dir(config: PipelineConfig) -> Path:
    """Per-run socket directory, private to the user (0700)."""
    if config.run.socket_dir:
        base = Path(config.run.socket_dir).expanduser()
        if base.parent == socket_root():  # the run's own folder (pipeline.supervisor) sits in the shared root
            private_socket_root()
    else:
        base = private_socket_root() / config.run.name
    if not base.exists():
        base.mkdir(parents=True, mode=0o700)
        base.chmod(stat.S_IRWXU)  # a directory we made is private; a user's own is left as it is
    return base


def input_endpoint(config: PipelineConfig, stage_id: str) -> str:
    spec = config.stages[stage_id]
    if spec.endpoint:
        return spec.endpoint
    endpoint = f"ipc://{socket_dir(config) / ('in-' + stage_id + '.ipc')}"
    if len(endpoint) - len("ipc://") > IPC_PATH_LIMIT:
        raise UserError(f"ipc path too long for stage '{stage_id}': {endpoint}",
                        "set run.socket_dir to a shorter directory")
    return endpoint


def control_endpoint(config: PipelineConfig) -> str:
    return f"ipc://{socket_dir(config) / 'supervisor-control.ipc'}"


def top_endpoint(config: PipelineConfig) -> str:
    return config.run.top_endpoint or f"ipc://{socket_dir(config) / 'supervisor-top.ipc'}"


def bind_endpoint(endpoint: str) -> str:
    """A tcp endpoint naming a host binds on that host's interface; ``*`` binds all."""
    return endpoint


def secure_bind(ctx: zmq.Context[zmq.Socket[bytes]], sock: zmq.Socket[bytes], endpoint: str,
                curve: CurveKeys | None) -> None:
    """CURVE server on tcp when keys are configured; ipc and insecure tcp stay plain."""
    if curve is not None and endpoint.startswith("tcp://"):
        serve(ctx, sock, curve)


def secure_connect(sock: zmq.Socket[bytes], endpoint: str, curve: CurveKeys | None) -> None:
    if curve is not None and endpoint.startswith("tcp://"):
        connect_as_client(sock, curve)


def make_pull(ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str, hwm: int = 256,
              curve: CurveKeys | None = None,
              before: Callable[[zmq.Socket[bytes]], object] | None = None) -> zmq.Socket[bytes]:
    """A bound PULL; ``before`` sees the socket just before it binds (a monitor then misses no peer)."""
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, hwm)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
    _tcp_heartbeat(sock, endpoint)
    secure_bind(ctx, sock, endpoint, curve)
    if before is not None:
        before(sock)
    try:
        sock.bind(bind_endpoint(endpoint))
    except zmq.ZMQError as exc:
        sock.close(0)
        raise UserError(f"cannot bind {endpoint}: {exc}",
                        "is another run using it? stop it or change the endpoint") from None
    return sock


def make_push(ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str, hwm: int = 256,
              curve: CurveKeys | None = None,
              before: Callable[[zmq.Socket[bytes]], object] | None = None) -> zmq.Socket[bytes]:
    """A connected PUSH; ``before`` sees the socket just before it connects (a monitor then misses no peer)."""
    sock = ctx.socket(zmq.PUSH)
    secure_connect(sock, endpoint, curve)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing for a peer that is not there yet
    sock.setsockopt(zmq.SNDTIMEO, SEND_POLL_MS)
    sock.setsockopt(zmq.LINGER, LINGER_MS)
    _tcp_heartbeat(sock, endpoint)
    if before is not None:
        before(sock)
    sock.connect(endpoint)
    return sock


@dataclass(frozen=True)
class BoundIpcFile:
    """The file an ipc bind made, as it was then: a later bind of the same path by another process makes a new one."""

    path: Path
    device: int
    inode: int


def bound_ipc_file(endpoint: str) -> BoundIpcFile | None:
    """The file behind a just-bound ipc endpoint (None for tcp, or when it cannot be read)."""
    if not endpoint.startswith("ipc://"):
        return None
    path = Path(endpoint[len("ipc://"):])
    try:
        made = path.stat()
    except OSError:
        return None
    return BoundIpcFile(path, made.st_dev, made.st_ino)


def close_bound(sock: zmq.Socket[bytes], bound: BoundIpcFile | None) -> None:
    """Close a bound socket at once and remove its ipc file, which ZeroMQ leaves behind; a file another process
    has bound at the same path since is left alone."""
    sock.close(linger=0)
    if bound is None:
        return
    try:
        now = bound.path.stat()
        if (now.st_dev, now.st_ino) == (bound.device, bound.inode):
            bound.path.unlink()
    except OSError:
        pass  # already gone


def _tcp_heartbeat(sock: zmq.Socket[bytes], endpoint: str) -> None:
    """ZMTP heartbeats: a peer that stops answering (host down, network cut) is disconnected and
    ZeroMQ reconnects when it is back, instead of waiting on a dead connection."""
    if endpoint.startswith("tcp://"):
        sock.setsockopt(zmq.HEARTBEAT_IVL, TCP_HEARTBEAT_MS)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, TCP_HEARTBEAT_TIMEOUT_MS)
