"""The collector's tx socket: pipeline.tx records over real ZeroMQ sockets into the spool, bad messages
refused with a count, CURVE on tcp admitting only allowed annotating processes."""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from pipeline import tx
from pipeline.security import CurveKeys, generate_keys
from pipeline.stage import StageContext
from stages.tx_inbox import SPOOL_FOLDER, SPOOL_NAME, TxInbox


@pytest.fixture
def ipc_endpoint() -> Iterator[str]:
    folder = Path(tempfile.mkdtemp(prefix="txi-", dir="/tmp"))  # ipc paths are limited to 107 bytes
    yield f"ipc://{folder}/tx.ipc"
    shutil.rmtree(folder, ignore_errors=True)


def _context(tmp_path: Path) -> StageContext:
    return StageContext(stage_id="collect", run_id="r", output_dir=tmp_path, aside_dir=tmp_path / "rejected")


def _records(count: int, first: int = 0) -> bytes:
    return b"".join(tx.RECORD.pack(tx.MAGIC, tx.LEVEL_MSPROFTX, tx.TX_TYPE, 7, tx.DATA_LEN, n, 0, 0, 0, tx.MAGIC,
                                   tx.DATA_TAG, 1, 7, 0, 0, 0, 0, n, n, 0, 0, 0, f"m{n}".encode())
                    for n in range(first, first + count))


def _take_all(inbox: TxInbox, expected_bytes: int, timeout_s: float = 10) -> int:
    taken, deadline = 0, time.monotonic() + timeout_s
    while taken < expected_bytes and time.monotonic() < deadline:
        taken += inbox.take(until_quiet=True)
    return taken


def test_whole_records_are_spooled_and_other_messages_refused_with_a_count(tmp_path: Path,
                                                                            ipc_endpoint: str) -> None:
    ctx = _context(tmp_path)
    inbox = TxInbox(ctx, ipc_endpoint, None, fresh=True)
    zctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    push = zctx.socket(zmq.PUSH)
    try:
        push.connect(ipc_endpoint)
        push.send(_records(3))
        push.send(b"\x5a" * 100)  # a torn record
        push.send_multipart([_records(1), _records(1)])  # not one frame
        push.send(b"")
        push.send(_records(2, first=3))
        assert _take_all(inbox, 5 * 256) == 5 * 256
    finally:
        push.close(0)
        zctx.term()
        inbox.close()
    spool = tmp_path / SPOOL_FOLDER / "data" / SPOOL_NAME
    assert spool.read_bytes() == _records(3) + _records(2, first=3)
    refused = {reason: n for reason, n in ctx.rejected.items() if reason.startswith("tx socket: ")}
    assert sorted(refused.values()) == [1, 1, 1] and sum(ctx.rejected.values()) == 3
    kept_aside = b"".join(path.read_bytes() for path in (tmp_path / "rejected").iterdir())
    assert len(kept_aside) == 100 + 2 * 256


def test_the_ipc_socket_file_is_removed_when_the_inbox_closes(tmp_path: Path, ipc_endpoint: str) -> None:
    socket_file = Path(ipc_endpoint.removeprefix("ipc://"))
    inbox = TxInbox(_context(tmp_path), ipc_endpoint, None, fresh=True)
    try:
        assert socket_file.exists()
    finally:
        inbox.close()
    assert not socket_file.exists()  # ZeroMQ leaves it behind; the inbox removes it
    TxInbox(_context(tmp_path), ipc_endpoint, None, fresh=False).close()  # the same path binds again
    assert not socket_file.exists()


def test_a_fresh_run_starts_the_spool_over_and_a_resumed_one_appends(tmp_path: Path, ipc_endpoint: str) -> None:
    spool = tmp_path / SPOOL_FOLDER / "data" / SPOOL_NAME
    spool.parent.mkdir(parents=True)
    spool.write_bytes(_records(4))
    TxInbox(_context(tmp_path), ipc_endpoint, None, fresh=False).close()
    assert spool.stat().st_size == 4 * 256
    TxInbox(_context(tmp_path), ipc_endpoint, None, fresh=True).close()
    assert spool.stat().st_size == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_over_tcp_only_an_allowed_key_gets_annotations_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, allowed = tmp_path / "keys", tmp_path / "allowed"
    server_public, server_secret = generate_keys(keys, "workstation")
    app_public, app_secret = generate_keys(keys, "app")
    _, stranger_secret = generate_keys(keys, "stranger")
    allowed.mkdir()
    shutil.copy(app_public, allowed)
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    inbox = TxInbox(_context(tmp_path), endpoint, CurveKeys.load(server_secret, None, allowed), fresh=True)
    try:
        monkeypatch.setenv(tx.SERVER_KEY_ENV, str(server_public))
        monkeypatch.setenv(tx.SECRET_KEY_ENV, str(stranger_secret))
        stranger = tx._Socket(endpoint)
        stranger.send(_records(2, first=100))
        monkeypatch.setenv(tx.SECRET_KEY_ENV, str(app_secret))
        allowed_app = tx._Socket(endpoint)
        allowed_app.send(_records(2))
        assert _take_all(inbox, 2 * 256) == 2 * 256
        assert allowed_app.close() == 0
        time.sleep(1.0)  # the stranger's handshake has long been refused
        assert inbox.take(until_quiet=True) == 0
        stranger.close()
        spool = tmp_path / SPOOL_FOLDER / "data" / SPOOL_NAME
        assert spool.read_bytes() == _records(2)  # the allowed app's records only
    finally:
        inbox.close()


def test_a_tcp_endpoint_without_key_files_is_said_once_and_the_records_go_to_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(tx.SECRET_KEY_ENV, raising=False)
    prof = tmp_path / "PROF_000001_1_X" / "host"
    prof.mkdir(parents=True)
    (prof / "info.json").write_text('{"CPU": [{"Frequency": "1000"}]}')
    (prof / "host_start.log").write_text("clock_monotonic_raw: 0\ncntvct: 0\n")
    tx.init(str(tmp_path), endpoint="tcp://127.0.0.1:9")
    try:
        tx.mark("after")
        assert tx.flush()
    finally:
        tx.finalize()
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("pipeline.tx:")]
    assert len(lines) == 1 and "PIPELINE_TX_SECRET_KEY" in lines[0] and "instead" in lines[0]
    assert (prof / "data" / tx.FILE_NAME).stat().st_size == tx.RECORD.size
