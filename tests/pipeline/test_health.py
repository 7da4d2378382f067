"""Stage health as the supervisor sees it, tcp peers as a stage sees them, the stage clock, and
the config rule that lets a tcp stage take its input from a stage run elsewhere."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import zmq

from pipeline.config import parse_config
from pipeline.errors import UserError
from pipeline.health import StageHealth
from pipeline.peers import PeerWatch
from pipeline.report import render_report
from pipeline.runner import StageRunner


def test_stuck_after_the_timeout_then_responding_again() -> None:
    health = StageHealth(last_heard=100.0)
    assert health.check(200.0, 30) is None and health.status(200.0) == "starting"  # no hello yet: not judged
    assert health.heard(101.0, None, has_state=False) == []
    assert health.check(130.0, 30) is None and health.status(130.0) == "running"
    assert health.check(131.5, 30) == "is stuck: no heartbeat for 30 s"
    assert health.check(140.0, 30) is None  # said once
    assert health.status(141.0) == "stuck (no heartbeat for 40 s)"
    assert health.heard(150.0, None, has_state=True) == ["is responding again after 49.0 s without a heartbeat"]
    assert health.status(150.0) == "running"
    assert health.stalls(160.0, run_started=90.0) == [{"at_s": 11.0, "for_s": 49.0, "ended": True}]


def test_pause_and_peer_states_are_announced_once_each_way() -> None:
    health = StageHealth(last_heard=0.0)
    full = "paused: disk full: /out/x.db (0 B free)"
    assert health.heard(1.0, "waiting for 'db' to read (2 s)", True) == []  # backpressure: shown, not printed
    assert health.heard(2.0, full, True) == [f"{full}; it goes on by itself when the disk takes writes again"]
    assert health.heard(2.5, "paused: disk full: /out/y.csv (10 B free)", True) == []  # the same pause goes on
    read_only = "paused: read-only file system: /out/y.csv"
    assert health.heard(3.0, read_only, True) == [  # still paused, for another reason: said once
        f"{read_only}; it goes on by itself when the disk takes writes again"]
    assert health.status(3.5) == read_only
    assert health.heard(4.0, "view-less hello", False) == []  # not a metrics message: state unchanged
    assert health.heard(9.5, None, True) == ["resumed after 6.5 s"]
    lost = "peer disconnected: 0 of 1 producers connected on tcp://h:1 (0 s)"
    assert health.heard(10.0, lost, True) == [lost]
    assert health.heard(12.0, None, True) == ["peer connected again after 2.0 s"]


def test_report_lines_for_pauses_waits_peers_and_stalls() -> None:
    final = {"stage_type": "sqlite", "in": 10, "out": {}, "rejected": {}, "wall_s": 1.0, "reconcile": [],
             "pauses": [{"reason": "disk full", "path": "/o/x.db", "free": "0 B", "seconds": 4.25, "retries": 3}],
             "waited_s": {"summary": 0.2, "timeline": 3.5},
             "peers": [{"endpoint": "tcp://h:1", "peer": "producers", "connects": 2, "disconnects": 1}]}
    text = render_report({"run_id": "r", "state": "completed", "wall_s": 2.0, "stages": {"db": final, "gone": None},
                          "problems": [], "stalls": {"gone": [{"at_s": 1.0, "for_s": 31.0, "ended": False}]}})
    assert "paused 4.2 s: disk full: /o/x.db (0 B free), 3 retries, then resumed" in text
    assert "waited 3.5 s for 'timeline' to read (backpressure)" in text
    assert "'summary'" not in text  # a short wait is ordinary flow control
    assert "producers on tcp://h:1: 1 disconnect(s), 2 connect(s)" in text
    assert "stuck at 1.0 s: no heartbeat for 31.0 s\n" in text + "\n"


def _poll_until(watch: PeerWatch, expected: int, wanted: list[str]) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + 10
    while seen != wanted and time.monotonic() < deadline:
        seen += watch.poll(expected)
        time.sleep(0.02)
    return seen


def test_peer_watch_counts_connections_on_a_tcp_socket() -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    endpoint = f"tcp://127.0.0.1:{port}"
    watch = PeerWatch(pull, endpoint, "producers")
    try:
        assert watch.waiting_state(1) is not None and watch.waiting_state(1).startswith(  # type: ignore[union-attr]
            f"waiting for producers to connect on {endpoint} (")
        push = ctx.socket(zmq.PUSH)
        push.connect(endpoint)
        assert _poll_until(watch, 1, ["connected"]) == ["connected"]
        assert watch.connected == 1 and watch.waiting_state(1) is None
        push.close(0)
        assert _poll_until(watch, 1, ["disconnected"]) == ["disconnected"]
        assert watch.waiting_state(1).startswith(  # type: ignore[union-attr]
            f"peer disconnected: 0 of 1 producers connected on {endpoint} (")
        again = ctx.socket(zmq.PUSH)
        again.connect(endpoint)
        assert _poll_until(watch, 1, ["connected"]) == ["connected"]
        again.close(0)  # this producer had finished (no input left): not a disconnect
        deadline = time.monotonic() + 2
        while watch.connected and time.monotonic() < deadline:
            assert watch.poll(0) == []
        assert watch.connected == 0
        assert (watch.connects, watch.disconnects) == (2, 1)
        assert [event for _, event in watch.summary()["events"]] == ["connected", "disconnected", "connected"]
    finally:
        watch.close()
        pull.close(0)
        ctx.term()


def _config(tmp_path: Path, collect_enabled: bool, decode_endpoint: str | None) -> dict:
    decode = {"type": "decoder", "inputs": ["collect"]}
    if decode_endpoint:
        decode["endpoint"] = decode_endpoint
    return {"run": {"name": "t", "output": str(tmp_path), "insecure_tcp": True},
            "stages": {"collect": {"type": "collector", "path": "board", "enabled": collect_enabled},
                       "decode": decode, "aggregate": {"type": "aggregator", "inputs": ["decode"]}}}


def test_a_disabled_input_is_allowed_only_into_a_tcp_endpoint(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="input 'collect' is disabled"):
        parse_config(_config(tmp_path, False, None), tmp_path / "c.yaml")
    config = parse_config(_config(tmp_path, False, "tcp://127.0.0.1:5999"), tmp_path / "c.yaml")
    assert set(config.enabled_stages()) == {"decode", "aggregate"}
    assert config.consumers("collect", "out") == ["decode"]  # `pipeline stage collect` elsewhere finds it


def test_the_stage_clock_leaves_out_time_spent_waiting_for_consumers(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path, True, None), tmp_path / "c.yaml")
    runner = StageRunner(config, "aggregate", "run", control=None)
    try:
        assert runner.stage.ctx.clock == runner.stage_clock  # what the aggregator's join timeouts read
        assert abs(runner.stage_clock() - time.monotonic()) < 0.5
        runner.waited_total = 100.0
        assert abs(runner.stage_clock() - (time.monotonic() - 100.0)) < 0.5
        runner.waiting_for = ("timeline", time.monotonic() - 50.0)  # blocked right now, for 50 s so far
        assert abs(runner.stage_clock() - (time.monotonic() - 150.0)) < 0.5
    finally:
        runner.zctx.term()
