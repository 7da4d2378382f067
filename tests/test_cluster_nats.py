"""Cluster scale-out through a real nats-server with JetStream.

Three simulated boards (configs/cluster-board.yaml, different seeds and hosts) publish their statistics
into JetStream; one merge run (configs/cluster-merge.yaml) consumes them durably. The merge is killed
with SIGKILL while the boards still run and started again: the cluster op_statistic and api_statistic
must equal the combination of the three boards' own CSVs, with nothing lost and nothing counted twice.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pipeline_runs import ROOT, pipeline_env, read_report

pytestmark = pytest.mark.slow
BOARDS = {"board-a": 11, "board-b": 22, "board-c": 33}  # host → simulator seed


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class NatsServer:
    url: str
    process: subprocess.Popen[bytes]


@pytest.fixture()
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A nats-server with JetStream on a free loopback port (a test may kill or stop it)."""
    binary = shutil.which("nats-server")
    if binary is None:
        pytest.skip("nats-server is not installed (apt-get install nats-server; .ci/run does it)")
    port = _free_port()
    server = subprocess.Popen([binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(tmp_path / "js")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("nats-server did not start listening within 15 s")
                time.sleep(0.1)
        yield NatsServer(f"nats://127.0.0.1:{port}", server)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGCONT)  # a test may have stopped it
            server.terminate()
        server.wait(10)


@pytest.fixture()
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


def _start(config: str, env: dict[str, str]) -> subprocess.Popen[str]:
    full = pipeline_env()
    full.update(env)
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(ROOT / "configs" / config), "--live", "off"],
                            env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own process group: SIGKILL reaches every stage


def _table(out: Path, module: str) -> list[dict[str, str]]:
    files = sorted((out / "mindstudio_profiler_output").glob(f"{module}_*.csv"), key=lambda p: p.stat().st_mtime)
    assert files, f"no {module} CSV in {out}"
    with files[-1].open(newline="") as handle:
        return list(csv.DictReader(handle))


def _expected_ops(boards: list[Path]) -> dict[tuple[str, str, str], list[float]]:
    merged: dict[tuple[str, str, str], list[float]] = {}
    for out in boards:
        for row in _table(out, "op_statistic"):
            key = (row["Device_id"], row["OP Type"], row["Core Type"])
            count, total = int(row["Count"]), float(row["Total Time(us)"])
            low, high = float(row["Min Time(us)"]), float(row["Max Time(us)"])
            held = merged.setdefault(key, [0, 0.0, low, high])
            held[0] += count
            held[1] += total
            held[2], held[3] = min(held[2], low), max(held[3], high)
    return merged


def _expected_apis(boards: list[Path]) -> dict[tuple[str, str], list[float]]:
    """Per (level, name): count, total, min, max and the pooled variance from each board's mean and variance."""
    parts: dict[tuple[str, str], list[tuple[int, float, float, float, float]]] = {}
    for out in boards:
        for row in _table(out, "api_statistic"):
            parts.setdefault((row["Level"], row["API Name"]), []).append(
                (int(row["Count"]), float(row["Time(us)"]), float(row["Min(us)"]), float(row["Max(us)"]),
                 float(row["Variance"])))
    merged = {}
    for key, rows in parts.items():
        count = sum(r[0] for r in rows)
        total = sum(r[1] for r in rows)
        mean = total / count
        sum_sq = sum(n * (var + (t / n) ** 2) for n, t, _, _, var in rows)
        merged[key] = [count, total, min(r[2] for r in rows), max(r[3] for r in rows), sum_sq / count - mean ** 2]
    return merged


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_three_boards_merge_through_jetstream_across_a_merge_crash(nats_url: str, tmp_path: Path) -> None:
    common = {"NATS_URL": nats_url, "CLUSTER": "job", "OUT_DIR": ""}
    merge_out = tmp_path / "merge"
    merge_env = {**common, "OUT_DIR": str(merge_out), "BOARDS": str(len(BOARDS)), "DURABLE": "merge"}
    merge = _start("cluster-merge.yaml", merge_env)
    # each board writes its ~35 k records at 5 k records/s (about 7 s): still running when the merge has combined
    # its first parts, however fast the stages start (at realtime a board of 60 images can be done in 2 s)
    boards = {host: _start("cluster-board.yaml", {**common, "BOARD": host, "SEED": str(seed), "ITERATIONS": "60",
                                                  "RATE": "5000", "OUT_DIR": str(tmp_path / host)})
              for host, seed in BOARDS.items()}
    try:
        # the merge has combined some parts while every board still runs: kill it outright, then restart it
        def merged_some() -> bool:
            if merge.poll() is not None:
                pytest.fail(f"the merge ended early: {merge.communicate()[0][-3000:]}")
            return any((merge_out / "mindstudio_profiler_output").glob("op_statistic_*.csv"))

        _wait_for(merged_some, 120, "the merge's first op_statistic")
        assert all(board.poll() is None for board in boards.values()), "a board ended before the crash"
        os.killpg(merge.pid, signal.SIGKILL)
        assert merge.wait(30) == -signal.SIGKILL
        merge = _start("cluster-merge.yaml", merge_env)
        for host, board in boards.items():
            output, _ = board.communicate(timeout=300)
            assert board.returncode == 0, f"{host}: {output[-2000:]}"
        output, _ = merge.communicate(timeout=120)
        assert merge.returncode == 0, output[-3000:]
    finally:
        for process in [merge, *boards.values()]:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)

    board_outs = [tmp_path / host for host in BOARDS]
    ops = {(r["Device_id"], r["OP Type"], r["Core Type"]): r for r in _table(merge_out, "op_statistic")}
    expected_ops = _expected_ops(board_outs)
    assert set(ops) == set(expected_ops)
    for key, (count, total, low, high) in expected_ops.items():
        row = ops[key]
        assert int(row["Count"]) == count, key  # exactly once: neither lost nor counted twice
        assert float(row["Total Time(us)"]) == pytest.approx(total, abs=0.01 * len(BOARDS)), key
        assert (float(row["Min Time(us)"]), float(row["Max Time(us)"])) == (low, high), key

    apis = {(r["Level"], r["API Name"]): r for r in _table(merge_out, "api_statistic")}
    expected_apis = _expected_apis(board_outs)
    assert set(apis) == set(expected_apis)
    for api, (count, total, low, high, variance) in expected_apis.items():
        row = apis[api]
        assert int(row["Count"]) == count, api
        assert float(row["Time(us)"]) == pytest.approx(total, abs=0.01 * len(BOARDS)), api
        assert (float(row["Min(us)"]), float(row["Max(us)"])) == (low, high), api
        assert float(row["Variance"]) == pytest.approx(variance, rel=1e-3, abs=0.05), api

    report = read_report(merge_out)["stages"]
    consumed = report["consume"]["accounting"]
    assert len(consumed["closed_publishers"]) == len(BOARDS)
    assert consumed["replayed"] > 0, "the restarted merge did not rebuild from the newest parts"
    assert report["merge"]["accounting"]["parts_applied"] >= 2 * len(BOARDS)


def test_an_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    pytest.importorskip("nats")
    env = {"NATS_URL": f"nats://127.0.0.1:{_free_port()}", "OUT_DIR": str(tmp_path / "merge"), "BOARDS": "1"}
    full = pipeline_env()
    full.update(env)
    result = subprocess.run([sys.executable, "-m", "pipeline", "run", str(ROOT / "configs" / "cluster-merge.yaml"),
                             "--live", "off"], env=full, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    text = result.stdout + result.stderr
    assert "cannot reach NATS at nats://127.0.0.1:" in text, text[-2000:]
    assert "Traceback" not in text


def _error_lines(output: str) -> list[str]:
    assert "Traceback" not in output and "Event loop is closed" not in output, output[-3000:]
    return [line for line in output.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("outage", ["killed", "stopped"])
def test_a_server_outage_ends_board_and_merge_each_with_one_line(nats_server: NatsServer, tmp_path: Path,
                                                                 outage: str) -> None:
    """The server dies (SIGKILL) or stops answering (SIGSTOP: a network cut) while a board publishes and the
    merge consumes: both runs end by themselves, failed, each naming the lost server once, without a traceback."""
    common = {"NATS_URL": nats_server.url, "CLUSTER": "job"}
    merge_out = tmp_path / "merge"
    merge = _start("cluster-merge.yaml", {**common, "OUT_DIR": str(merge_out), "BOARDS": "1"})
    board = _start("cluster-board.yaml", {**common, "BOARD": "board-a", "SEED": "11", "ITERATIONS": "100000",
                                          "OUT_DIR": str(tmp_path / "board-a")})  # would run for hours
    try:
        def merged_some() -> bool:
            for name, process in (("merge", merge), ("board", board)):
                if process.poll() is not None:
                    pytest.fail(f"the {name} ended before the outage: {process.communicate()[0][-3000:]}")
            return any((merge_out / "mindstudio_profiler_output").glob("op_statistic_*.csv"))

        _wait_for(merged_some, 120, "the merge's first op_statistic")  # the board publishes, the merge consumes
        nats_server.process.send_signal(signal.SIGKILL if outage == "killed" else signal.SIGSTOP)
        board_output, _ = board.communicate(timeout=180)
        merge_output, _ = merge.communicate(timeout=180)
    finally:
        for process in (merge, board):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)

    assert board.returncode == 1, board_output[-3000:]
    nats_lines = [line for line in _error_lines(board_output) if "NATS" in line]
    assert len(nats_lines) == 1, board_output[-3000:]
    assert nats_lines[0].startswith("error: stage 'publish': publishing to ascend.job.board-a."), nats_lines
    assert merge.returncode == 1, merge_output[-3000:]
    (merge_line,) = _error_lines(merge_output)
    assert merge_line.startswith("error: stage 'consume': lost the NATS server: "), merge_line
