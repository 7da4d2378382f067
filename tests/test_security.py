"""CURVE on tcp endpoints: only allowed client keys push into or read from a running pipeline."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from pathlib import Path

import msgpack
import pytest
import zmq
import zmq.auth
from pipeline_runs import read_report, run_cli, start_run

from pipeline.transport import socket_root

MALFORMED = [b"not a pipeline header", b"x"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _keys(folder: Path, name: str) -> tuple[Path, Path]:
    result = run_cli("keys", "generate", str(folder), "--name", name)
    assert result.returncode == 0, result.stderr
    return folder / f"{name}.key", folder / f"{name}.key_secret"


def test_keys_generate_writes_a_private_secret_and_never_overwrites(tmp_path: Path) -> None:
    public, secret = _keys(tmp_path / "keys", "board")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) & 0o007 == 0  # umask 0027: nothing for others
    loaded_public, loaded_secret = zmq.auth.load_certificate(str(secret))
    assert loaded_secret is not None and loaded_public == zmq.auth.load_certificate(str(public))[0]
    again = run_cli("keys", "generate", str(tmp_path / "keys"), "--name", "board")
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "already exists" in again.stderr


@pytest.mark.parametrize("where", ["decode.endpoint", "collect.tx_endpoint"])
def test_tcp_endpoint_without_keys_is_refused_unless_insecure(tmp_path: Path, where: str) -> None:
    decoder_tcp = ', endpoint: "tcp://127.0.0.1:5999"' if where == "decode.endpoint" else ""
    collector_tcp = ', tx_endpoint: "tcp://127.0.0.1:5998"' if where == "collect.tx_endpoint" else ""
    body = """
run: {{name: sec, output: "{out}"{extra}}}
stages:
  collect: {{type: collector, path: "{out}"{collector_tcp}}}
  decode: {{type: decoder, inputs: [collect]{decoder_tcp}}}
"""
    config = tmp_path / "p.yaml"
    config.write_text(body.format(out=tmp_path, extra="", collector_tcp=collector_tcp, decoder_tcp=decoder_tcp))
    refused = run_cli("validate", str(config))
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"stages.{where}" in lines[0] and "CURVE" in lines[0]
    config.write_text(body.format(out=tmp_path, extra=", insecure_tcp: true", collector_tcp=collector_tcp,
                                  decoder_tcp=decoder_tcp))
    assert run_cli("validate", str(config)).returncode == 0


def _wait_for_run(out: Path, timeout_s: float = 30) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            info: dict[str, object] = json.loads((out / "run.json").read_text())
            if "stage_pids" in info:
                return info
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.1)
    raise AssertionError("the run never wrote run.json with its stage pids")


def _push(ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str, server_public: bytes,
          own: tuple[bytes, bytes] | None) -> zmq.Socket[bytes]:
    sock = ctx.socket(zmq.PUSH)
    sock.linger = 0
    if own is not None:
        sock.curve_publickey, sock.curve_secretkey = own
        sock.curve_serverkey = server_public
    sock.connect(endpoint)
    for frame in MALFORMED:
        try:
            sock.send(frame, zmq.NOBLOCK)
        except zmq.Again:
            pass
    return sock


def _first_view(ctx: zmq.Context[zmq.Socket[bytes]], endpoint: str, server_public: bytes,
                own: tuple[bytes, bytes], wait_s: float) -> dict[str, object] | None:
    sub = ctx.socket(zmq.SUB)
    sub.linger = 0
    sub.curve_publickey, sub.curve_secretkey = own
    sub.curve_serverkey = server_public
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(endpoint)
    try:
        if not sub.poll(int(wait_s * 1000)):
            return None
        view: dict[str, object] = msgpack.unpackb(sub.recv(), raw=False)
        return view
    finally:
        sub.close(0)


def test_only_allowed_client_keys_push_into_or_read_from_tcp_stages(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    host_public, host_secret = _keys(keys, "workstation")
    _keys(keys, "board")
    _keys(tmp_path / "strangers", "rogue")
    allowed = keys / "allowed"
    allowed.mkdir()
    for name in ("workstation", "board"):
        (allowed / f"{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    decode_ep, top_ep = f"tcp://127.0.0.1:{_free_port()}", f"tcp://127.0.0.1:{_free_port()}"
    out = tmp_path / "out"
    config = tmp_path / "secure.yaml"
    config.write_text(f"""
run:
  name: sec{os.getpid()}
  output: "{out}"
  top_endpoint: "{top_ep}"
  curve: {{secret_key: "{host_secret}", server_key: "{host_public}", allowed_clients: "{allowed}"}}
stages:
  board: {{type: simulator, chip: mini, iterations: 400, rate: realtime, seed: 3, output: board}}
  collect: {{type: collector, path: board, follow: true, wait_s: 20}}
  decode: {{type: decoder, inputs: [collect], endpoint: "{decode_ep}"}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.3}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.5}}
  top: {{type: live, inputs: [aggregate.stats]}}
""")
    server_public = zmq.auth.load_certificate(str(host_public))[0]

    def pair(path: Path) -> tuple[bytes, bytes]:
        public, secret = zmq.auth.load_certificate(str(path))
        assert secret is not None
        return public, secret

    board, rogue = pair(keys / "board.key_secret"), pair(tmp_path / "strangers" / "rogue.key_secret")
    process = start_run(config)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        _wait_for_run(out)
        time.sleep(1.0)  # the decoder has bound its endpoint
        (sockets,) = socket_root().glob(f"sec{os.getpid()}"[:16] + "-*")  # this run's ipc folder: the user's alone
        assert stat.S_IMODE(sockets.stat().st_mode) == 0o700 and any(sockets.glob("*.ipc"))
        assert stat.S_IMODE(socket_root().stat().st_mode) == 0o700
        pushers = [_push(ctx, decode_ep, server_public, rogue), _push(ctx, decode_ep, server_public, None),
                   _push(ctx, decode_ep, server_public, board)]
        assert _first_view(ctx, top_ep, server_public, rogue, wait_s=3.0) is None
        view = _first_view(ctx, top_ep, server_public, board, wait_s=10.0)
        assert view is not None and "stages" in view
        shown = run_cli("top", str(out), "--once", "--json", "--timeout", "10", timeout=60)
        assert shown.returncode == 0 and json.loads(shown.stdout.splitlines()[0])["run_id"]
        stdout, stderr = process.communicate(timeout=240)
        for sock in pushers:
            sock.close(0)
    finally:
        if process.poll() is None:
            process.kill()
        ctx.term()
    assert process.returncode == 0, stderr[-3000:]
    decode = read_report(out)["stages"]["decode"]
    malformed = {reason: count for reason, count in decode["rejected"].items() if reason.startswith("malformed")}
    assert sum(malformed.values()) == len(MALFORMED), decode["rejected"]  # the allowed client's frames only
    others = [path for path in out.rglob("*") if stat.S_IMODE(path.stat().st_mode) & 0o007]
    assert not others, f"readable by other users (umask 027 expected): {others[:3]}"
    # The config names key files; no secret key's text reaches the logs, the report or any output file.
    secrets = [pair(path)[1] for path in (host_secret, keys / "board.key_secret")]
    written = [stdout.encode(), stderr.encode(), *(path.read_bytes() for path in out.rglob("*") if path.is_file())]
    assert not [secret for secret in secrets for blob in written if secret in blob]
