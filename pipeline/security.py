"""CURVE on tcp endpoints: key pairs, the server side's allow-list, the client side's keys.

A host has one key pair in zmq's certificate files (``NAME.key`` public, ``NAME.key_secret`` both halves).
Sockets that bind a tcp endpoint are CURVE servers and accept only clients whose public key is in the
``allowed_clients`` folder (checked by a ZAP handler in the binding process). Sockets that connect to a
tcp endpoint are CURVE clients and check the server against ``server_key``. ipc endpoints stay plain:
they live in a 0700 directory.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from pipeline.errors import UserError

ZAP_DOMAIN = "ascend-pipeline"
OUTPUT_UMASK = 0o027  # CANN's profiling guides ask for 0027 or stricter on profiling outputs


def restrict_umask() -> None:
    """Make files this process creates unreadable to others (keeps a stricter umask as it is)."""
    current = os.umask(OUTPUT_UMASK)
    os.umask(current | OUTPUT_UMASK)


def generate_keys(folder: Path, name: str) -> tuple[Path, Path]:
    """Write ``NAME.key`` and ``NAME.key_secret`` (mode 0600) in ``folder``; refuse to overwrite."""
    public, secret = folder / f"{name}.key", folder / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise UserError(f"keys generate: {path} already exists", "pick another --name or remove the old pair")
    folder.mkdir(parents=True, exist_ok=True)
    made_public, made_secret = zmq.auth.create_certificates(str(folder), name)
    os.chmod(made_secret, stat.S_IRUSR | stat.S_IWUSR)
    return Path(made_public), Path(made_secret)


@dataclass(frozen=True)
class CurveKeys:
    """What one process needs: its own pair, the server's public key, the allowed client keys' folder."""

    public: bytes
    secret: bytes
    server_public: bytes | None
    allowed_clients: Path | None

    @classmethod
    def load(cls, secret_key: Path, server_key: Path | None, allowed_clients: Path | None) -> CurveKeys:
        public, secret = _read_certificate(secret_key, "run.curve.secret_key", need_secret=True)
        assert secret is not None
        server_public = _read_certificate(server_key, "run.curve.server_key")[0] if server_key else None
        if allowed_clients is not None and not allowed_clients.is_dir():
            raise UserError(f"run.curve.allowed_clients: {allowed_clients} is not a folder",
                            "make a folder holding the public .key files of the hosts allowed to connect")
        return cls(public, secret, server_public, allowed_clients)


def _read_certificate(path: Path, key: str, need_secret: bool = False) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise UserError(f"{key}: {path} does not exist", "create a pair with `pipeline keys generate FOLDER`")
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as exc:
        raise UserError(f"{key}: {path} is not a zmq certificate ({exc})",
                        "use a file written by `pipeline keys generate`") from None
    if need_secret and secret is None:
        raise UserError(f"{key}: {path} holds no secret key", "point it at the .key_secret file")
    return public, secret


_authenticators: dict[int, ThreadAuthenticator] = {}
_lock = threading.Lock()


def serve(ctx: zmq.Context[zmq.Socket[bytes]], sock: zmq.Socket[bytes], keys: CurveKeys) -> None:
    """Make ``sock`` (about to bind) a CURVE server that admits only the allowed clients."""
    if keys.allowed_clients is None:
        raise UserError("run.curve.allowed_clients is not set",
                        "a stage that binds tcp needs the folder of client public keys it accepts")
    with _lock:
        if id(ctx) not in _authenticators:
            auth = ThreadAuthenticator(ctx)
            auth.start()
            auth.configure_curve(domain=ZAP_DOMAIN, location=str(keys.allowed_clients))
            _authenticators[id(ctx)] = auth
    sock.zap_domain = ZAP_DOMAIN.encode()
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = True


def connect_as_client(sock: zmq.Socket[bytes], keys: CurveKeys) -> None:
    """Make ``sock`` (about to connect) a CURVE client of the configured server key."""
    if keys.server_public is None:
        raise UserError("run.curve.server_key is not set",
                        "a stage that connects to tcp needs the public .key of the host it connects to")
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_serverkey = keys.server_public


def stop_authenticators(ctx: zmq.Context[zmq.Socket[bytes]] | None = None) -> None:
    """Stop the authenticator of ``ctx`` (None: of every context) before the context is terminated."""
    with _lock:
        for key in [key for key in _authenticators if ctx is None or key == id(ctx)]:
            _authenticators.pop(key).stop()
