"""Faults in a live run, with real processes: an output disk that is full or read-only, a stage
that stops answering, a remote producer that disconnects and comes back."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq
from disk import fill, small_disk
from faults import assert_equals_undisturbed, finish, log_events, start, status, wait_for_view
from pipeline_runs import pipeline_env, read_report, run_cli

from pipeline import wire
from pipeline.output_guard import FAULT_CUE_ENV

pytestmark = pytest.mark.slow
FILE_SINKS = ("timeline", "summary", "db")


def config_text(out: Path, board: Path, iterations: int, run_extra: str = "", rate: str = "realtime",
                extra_stages: str = "") -> str:
    """The live graph with the board outside ``out`` (the output disk may be a small one). Under the fault cue a
    sink lagging behind pauses with the aggregator held by its full queue, and the other sinks get nothing more
    to write: they find the cue on their idle tick."""
    return f"""
run: {{name: f{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", progress_s: 1 {run_extra}}}
stages:
  board: {{type: simulator, chip: mini, iterations: {iterations}, rate: {rate}, seed: 5, slice_bytes: 65536,
           output: "{board}"}}
  collect: {{type: collector, path: "{board}", follow: true, wait_s: 30}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.5}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  top: {{type: live, inputs: [aggregate.stats]}}
{extra_stages}"""


def prof_dir(board: Path) -> Path:
    return Path(json.loads((board / "simulator_truth.json").read_text())["prof_dir"])


def flowing(snapshot: dict, stage: str = "db") -> bool:
    return bool(snapshot["stages"][stage]["in"] > 0 and snapshot["stages"]["collect"]["out"] > 0)


def collector_held_back(out: Path, run: subprocess.Popen[str]) -> dict:
    """The collector waits for the decoder and has not read all the board wrote: the rest stays on disk."""

    def held(snapshot: dict) -> bool:
        stages = snapshot["stages"]
        return (snapshot["state"] == "paused" and status(snapshot, "collect").startswith("waiting for 'decode'")
                and stages["collect"]["out"] < stages["board"]["progress"].get("records_written", 0))

    return wait_for_view(out, run, "the collector held back with records left on disk", held)


def test_disk_full_cue_pauses_the_pipeline_and_it_resumes_without_loss(tmp_path: Path) -> None:
    out, board, cue = tmp_path / "out", tmp_path / "board", tmp_path / "disk-full"
    config = tmp_path / "c.yaml"
    config.write_text(config_text(out, board, iterations=600,
                                  run_extra=", write_retry_s: 0.5, batch: {max_records: 16}"))
    run = start(config, env={FAULT_CUE_ENV: str(cue)})
    try:
        wait_for_view(out, run, "records reaching the sinks", flowing)
        cue.touch()  # from now on every write of a sink fails with ENOSPC
        paused = wait_for_view(out, run, "every file sink paused", lambda v: all(
            status(v, sink).startswith("paused: disk full: ") for sink in FILE_SINKS))
        assert paused["state"] == "paused"
        assert status(paused, "db").startswith(f"paused: disk full: {out}/msprof_")
        assert re.fullmatch(r"paused: disk full: \S+ \([\d.]+ (B|KiB|MiB|GiB) free\)", status(paused, "db"))
        held = collector_held_back(out, run)  # backpressure reached the collector: it stopped reading
        assert re.fullmatch(r"waiting for 'decode' to read \(\d+ s\)", status(held, "collect"))
        cue.unlink()
        stdout, stderr = finish(run, out)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == [] and "all counts reconcile" in stdout
    for sink in FILE_SINKS:
        pauses = report["stages"][sink]["pauses"]
        assert pauses and all(p["reason"] == "disk full" for p in pauses), sink
        assert sum(p["retries"] for p in pauses) > len(pauses), sink  # retried, yet ...
        assert len(log_events(stderr, sink, "output paused")) == len(pauses), sink  # ... logged once per pause
        assert len(log_events(stderr, sink, "output resumed after")) == len(pauses), sink
        assert f"stage '{sink}' paused: disk full: " in stderr and f"stage '{sink}' resumed after " in stderr
        assert f"{sink}" in stdout and "then resumed" in stdout
    aggregate = report["stages"]["aggregate"]
    assert sum(aggregate["waited_s"].values()) > 0  # it waited for the paused sinks, dropping nothing
    assert report["stages"]["collect"]["waited_s"].get("decode", 0) > 0
    truth = json.loads((board / "simulator_truth.json").read_text())
    assert report["stages"]["collect"]["accounting"]["records_collected"] == truth["records_total"]
    assert_equals_undisturbed(out, prof_dir(board), tmp_path / "reference")


def test_a_real_disk_that_fills_then_turns_read_only(tmp_path: Path) -> None:
    board, config = tmp_path / "board", tmp_path / "c.yaml"
    with small_disk(tmp_path / "disk", size_mb=128) as out:
        config.write_text(config_text(out, board, iterations=600, run_extra=", write_retry_s: 0.5"))
        run = start(config)
        try:
            wait_for_view(out, run, "records reaching the sinks", flowing)
            filler = fill(out)
            full = wait_for_view(out, run, "a sink paused on the full disk", lambda v: any(
                status(v, sink).startswith("paused: disk full: ") for sink in FILE_SINKS))
            paused_sink = next(s for s in FILE_SINKS if status(full, s).startswith("paused"))
            assert re.fullmatch(rf"paused: disk full: {re.escape(str(out))}/\S+ \([\d.]+ (B|KiB) free\)",
                                status(full, paused_sink))
            filler.unlink()  # space returns; then the disk turns read-only for every file opened by path
            subprocess.run(["mount", "--bind", str(out), str(out)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(out)], check=True)
            try:  # on one of its outputs, or on its checkpoint if an epoch was being cut when the disk filled
                wait_for_view(out, run, "the summary paused on the read-only disk", lambda v: status(
                    v, "summary").startswith(f"paused: read-only file system: {out}/"))
            finally:
                subprocess.run(["umount", "-l", str(out)], check=True)
            stdout, stderr = finish(run, out)
        finally:
            run.kill()
        assert run.returncode == 0, stderr[-3000:]
        report = read_report(out)
        assert report["problems"] == []
        reasons = {p["reason"] for sink in FILE_SINKS for p in report["stages"][sink]["pauses"]}
        assert reasons == {"disk full", "read-only file system"}
        assert "stage 'summary' paused: read-only file system: " in stderr
        assert_equals_undisturbed(out, prof_dir(board), tmp_path / "reference")


def test_a_producer_stays_until_its_consumer_has_read_the_end_of_stream(tmp_path: Path) -> None:
    """A collector (a real `pipeline stage`) ends while its consumer is far behind: it must not go away
    before the consumer has read everything, or ZeroMQ drops the unread tail and the end of stream."""
    made = run_cli("simulate", str(tmp_path / "board"), "--iterations", "20", "--rate", "max")
    assert made.returncode == 0, made.stderr
    endpoint = f"ipc://{tmp_path / 'in.ipc'}"
    config = tmp_path / "c.yaml"
    config.write_text(f"""
run: {{name: drain{os.getpid()}, output: "{tmp_path / 'out'}", batch: {{max_records: 4}}}}
stages:
  collect: {{type: collector, path: "{prof_dir(tmp_path / 'board')}", follow: false}}
  decode: {{type: decoder, inputs: [collect], endpoint: "{endpoint}"}}
""")
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pull = ctx.socket(zmq.PULL)  # the consumer, as transport.make_pull makes it
    pull.setsockopt(zmq.RCVHWM, 256)
    pull.bind(endpoint)
    collector = subprocess.Popen([sys.executable, "-m", "pipeline", "stage", "collect", "--config", str(config)],
                                 env=pipeline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finished = threading.Event()

    def watch_log() -> None:
        for line in collector.stderr or []:
            if "stage finished" in line:
                finished.set()

    threading.Thread(target=watch_log, daemon=True).start()
    received, batches, eos = 0, 0, None
    try:
        while eos is None:
            if not pull.poll(30_000):
                break
            message = wire.decode(pull.recv_multipart())
            if message.kind == wire.KIND_EOS:
                eos = (message.sent_records, message.sent_batches)
            else:
                received += message.batch.count if message.batch else 0
                batches += 1
            time.sleep(0.003)  # slower than the collector: its queue to us is full when it ends
        assert finished.is_set()
        assert collector.poll() is None  # still connected: it waits for this consumer to leave
    finally:
        pull.close(0)
        ctx.term()
    assert collector.wait(timeout=30) == 0  # and goes once it has
    assert eos == (received, batches) and batches > 512  # every message, more than two queues hold


def test_a_slow_sink_far_behind_at_the_end_of_stream_gets_every_record(tmp_path: Path) -> None:
    """The aggregator ends while the slow sink is a thousand small messages behind: it stays connected
    until the sink has read its end of stream (ZeroMQ drops a backlog whose sender went away)."""
    out, board = tmp_path / "out", tmp_path / "board"
    # 50 messages/s: slower than the aggregator even on a loaded machine
    slow = "  slow: {type: 'slow_sink:SlowSink', inputs: [aggregate.tasks], delay_s: 0.02}\n"
    config = tmp_path / "c.yaml"
    config.write_text(config_text(out, board, iterations=40, rate="max", run_extra=", batch: {max_records: 8}",
                                  extra_stages=slow))
    result = run_cli("run", str(config), "--live", "off", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == []
    sent = report["stages"]["aggregate"]["out"]["tasks"]
    assert report["stages"]["aggregate"]["waited_s"]["slow"] > 0  # it was held back by the slow sink
    assert sum(json.loads((out / "slow_sink.json").read_text()).values()) == sent == report["stages"]["slow"]["in"]
    assert sent > 8 * 512  # more messages than the two queues between them hold


STALL = "  stall: {{type: 'stall_sink:StallSink', inputs: [aggregate.tasks], cue: \"{cue}\"}}\n"


def test_a_stuck_stage_is_shown_and_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    out, board, cue = tmp_path / "out", tmp_path / "board", tmp_path / "stall"
    config = tmp_path / "c.yaml"
    config.write_text(config_text(out, board, iterations=600,
                                  run_extra=", heartbeat_timeout_s: 5, batch: {max_records: 16}",
                                  extra_stages=STALL.format(cue=cue)))
    run = start(config)
    try:
        wait_for_view(out, run, "records reaching the stalling sink", lambda v: flowing(v, "stall"))
        cue.touch()  # its write_batch now blocks: no heartbeat
        stuck = wait_for_view(out, run, "the sink marked stuck", lambda v: status(v, "stall").startswith(
            "stuck (no heartbeat for "))
        assert re.fullmatch(r"stuck \(no heartbeat for \d+ s\)", status(stuck, "stall"))
        assert stuck["state"] == "running, a stage is stuck"
        wait_for_view(out, run, "the aggregator waiting for it", lambda v: status(v, "aggregate").startswith(
            "waiting for 'stall' to read ("))
        cue.unlink()
        stdout, stderr = finish(run, out)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == []
    (stall,) = report["stalls"]["stall"]
    assert stall["ended"] and stall["for_s"] > 5
    assert report["stages"]["aggregate"]["waited_s"]["stall"] > 0
    assert report["stages"]["stall"]["in"] == report["stages"]["aggregate"]["out"]["tasks"]
    assert "stage 'stall' is stuck: no heartbeat for " in stderr
    assert "stage 'stall' is responding again after " in stderr
    assert "stuck at " in stdout and "waited " in stdout


def test_a_stuck_stage_is_killed_when_configured(tmp_path: Path) -> None:
    out, board, cue = tmp_path / "out", tmp_path / "board", tmp_path / "stall"
    cue.touch()  # stuck from its first batch on
    config = tmp_path / "c.yaml"
    config.write_text(config_text(out, board, iterations=40, rate="max",
                                  run_extra=", heartbeat_timeout_s: 10, kill_stuck: true, max_restarts: 1",
                                  extra_stages=STALL.format(cue=cue)))
    result = run_cli("run", str(config), "--live", "off", timeout=300)
    assert result.returncode == 1
    report = read_report(out)
    # killed, handled as a crash (restarted from its checkpoint), stuck again and killed past max_restarts
    assert report["recovery"]["restarts"] == {"stall": 1}
    assert "stage 'stall' killed: no heartbeat for 10 s (run.kill_stuck)" in result.stderr
    killed = "stage 'stall' was killed: no heartbeat for 10 s (run.kill_stuck)"
    assert killed in report["problems"]
    assert report["exit_codes"]["stall"] == -signal.SIGKILL
    assert f"error: {killed}" in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_remote_collector_that_disconnects_and_reconnects(tmp_path: Path) -> None:
    out, board = tmp_path / "out", tmp_path / "board"
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    config = tmp_path / "split.yaml"
    config.write_text(f"""
run: {{name: p{os.getpid()}, output: "{out}", insecure_tcp: true, progress_s: 1}}
stages:
  collect: {{type: collector, path: "{board}", follow: true, wait_s: 120, enabled: false}}  # on the board
  decode: {{type: decoder, inputs: [collect], endpoint: "{endpoint}"}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
""")

    def collector() -> subprocess.Popen[str]:  # `pipeline stage collect` on the board
        return subprocess.Popen([sys.executable, "-m", "pipeline", "stage", "collect", "--config", str(config)],
                                env=pipeline_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    run = start(config)
    remote = [collector()]
    try:
        waiting = wait_for_view(out, run, "decode waiting for its producer", lambda v: "decode" in v["stages"])
        assert set(waiting["stages"]) == {"decode", "aggregate", "summary", "db"}
        wait_for_view(out, run, "the collector connected", lambda v: status(v, "decode") == "running")
        remote[0].kill()  # the board's collector dies; its tcp connection drops
        gone = wait_for_view(out, run, "decode showing the disconnect", lambda v: status(v, "decode").startswith(
            f"peer disconnected: 0 of 1 producers connected on {endpoint} ("))
        assert gone["state"] == "running"
        remote.append(collector())  # restarted on the board
        wait_for_view(out, run, "the collector connected again", lambda v: status(v, "decode") == "running")
        made = run_cli("simulate", str(board), "--iterations", "30", "--rate", "max")
        assert made.returncode == 0, made.stderr
        stdout, stderr = finish(run, out)
        assert remote[1].wait(timeout=60) == 0, remote[1].stderr.read() if remote[1].stderr else ""
    finally:
        run.kill()
        for process in remote:
            process.kill()
    assert run.returncode == 0, stderr[-3000:]
    report = read_report(out)
    assert report["problems"] == []
    (peers,) = report["stages"]["decode"]["peers"]
    assert (peers["endpoint"], peers["peer"], peers["connects"], peers["disconnects"]) == (
        endpoint, "producers", 2, 1)
    assert [event for _, event in peers["events"]] == ["connected", "disconnected", "connected"]
    assert f"stage 'decode' peer disconnected: 0 of 1 producers connected on {endpoint}" in stderr
    assert "stage 'decode' peer connected again after " in stderr
    assert f"producers on {endpoint}: 1 disconnect(s), 2 connect(s)" in stdout
