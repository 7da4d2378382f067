"""`pipeline top`: attach to a running pipeline's view (SUB, newest snapshot only)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import zmq

from pipeline.errors import UserError
from pipeline.security import CurveKeys
from pipeline.transport import secure_connect
from pipeline.views import output_console, render_view


def _connectable(endpoint: str) -> str:
    """A bind address such as tcp://*:5555 or tcp://0.0.0.0:5555 is reached on this host's loopback."""
    return endpoint.replace("tcp://*:", "tcp://127.0.0.1:").replace("tcp://0.0.0.0:", "tcp://127.0.0.1:")


def resolve_endpoint(target: str, secret_key: str | None = None,
                     server_key: str | None = None) -> tuple[str, CurveKeys | None]:
    """The top endpoint of ``target`` and the CURVE keys to reach it (None: plain)."""
    if target.startswith(("ipc://", "tcp://")):
        return _connectable(target), _keys(secret_key, server_key)
    path = Path(target).expanduser()
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        from pipeline.config import load_config

        config = load_config(path)
        path = config.output_dir  # the running supervisor wrote run.json there
    run_file = path / "run.json" if path.is_dir() else path
    if run_file.is_file():
        run_info = json.loads(run_file.read_text())
        curve = run_info.get("curve") or {}
        return _connectable(run_info["top_endpoint"]), _keys(secret_key or curve.get("secret_key"),
                                                             server_key or curve.get("server_key"))
    raise UserError(f"top: {target} is not a config, a run output folder (with run.json) or an endpoint",
                    "pass configs/live.yaml, the run's output folder, or ipc://…")


def _keys(secret_key: str | None, server_key: str | None) -> CurveKeys | None:
    if secret_key is None and server_key is None:
        return None
    if secret_key is None or server_key is None:
        raise UserError("top: CURVE needs both --secret-key and --server-key", "pass both key files")
    return CurveKeys.load(Path(secret_key), Path(server_key), None)


def run_top(target: str, once: bool = False, as_json: bool = False, timeout_s: float = 10.0,
            secret_key: str | None = None, server_key: str | None = None) -> int:
    endpoint, curve = resolve_endpoint(target, secret_key, server_key)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.CONFLATE, 1)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    secure_connect(sub, endpoint, curve)
    sub.connect(endpoint)
    try:
        return _loop(sub, endpoint, once, as_json, timeout_s)
    except KeyboardInterrupt:
        return 0
    finally:
        sub.close(0)
        ctx.term()


def _receive(sub: zmq.Socket[bytes], timeout_s: float) -> dict[str, Any] | None:
    if not sub.poll(int(timeout_s * 1000)):
        return None
    view: dict[str, Any] = msgpack.unpackb(sub.recv(), raw=False)
    return view


def _loop(sub: zmq.Socket[bytes], endpoint: str, once: bool, as_json: bool, timeout_s: float) -> int:
    first = _receive(sub, timeout_s)
    if first is None:
        raise UserError(f"top: no pipeline is publishing on {endpoint}", "is `pipeline run` running with that config?")
    if once or as_json or not sys.stdout.isatty():
        view: dict[str, Any] | None = first
        while view is not None:
            if as_json:
                print(json.dumps(view), flush=True)
            else:
                output_console().print(render_view(view))
            if once or view.get("state") == "ended":
                return 0
            time.sleep(1.0)
            view = _receive(sub, timeout_s)
        return 0
    from rich.live import Live

    with Live(render_view(first), refresh_per_second=4) as live:
        while True:
            view = _receive(sub, timeout_s)
            if view is None:
                continue
            live.update(render_view(view))
            if view.get("state") == "ended":
                return 0
