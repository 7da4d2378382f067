"""docker/compose.yaml runs the stages of configs/live.yaml, each as its own service, over CURVE tcp."""

from __future__ import annotations

import csv
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pipeline_runs import ROOT, pipeline_env, run_cli

COMPOSE = ROOT / "docker" / "compose.yaml"
STAGE_KEYS = ("type", "inputs")


def _yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def test_compose_services_are_the_stages_of_the_live_config() -> None:
    live = _yaml(ROOT / "configs" / "live.yaml")["stages"]
    split = _yaml(ROOT / "configs" / "compose.yaml")["stages"]
    services = _yaml(COMPOSE)["services"]
    assert set(services) - {"keys"} == set(live) == set(split)
    for sid, spec in live.items():
        assert {k: split[sid].get(k) for k in STAGE_KEYS} == {k: spec.get(k) for k in STAGE_KEYS}, sid
        service = services[sid]
        command = service["command"]
        assert command[:4] == ["stage", sid, "--config", "configs/compose.yaml"], sid
        assert "--heartbeat" in command and service["healthcheck"]["test"], sid
        assert int(service["stop_grace_period"].rstrip("s")) >= 30, sid
        if spec["type"] not in ("simulator", "collector"):  # receivers bind a tcp endpoint on their service name
            assert split[sid]["endpoint"].startswith(f"tcp://{sid}:"), sid


def _compose_command() -> list[str]:
    """``docker compose`` (the plugin), else the standalone ``docker-compose``; skips when neither runs."""
    docker = shutil.which("docker")
    if docker is not None and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    if standalone is not None:
        return [standalone]
    pytest.skip("neither the docker compose plugin nor docker-compose is installed here")


def test_docker_compose_accepts_the_file() -> None:
    result = subprocess.run([*_compose_command(), "-f", str(COMPOSE), "config"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)["services"]
    assert set(resolved) == set(_yaml(COMPOSE)["services"])
    assert all(service["healthcheck"]["test"] for sid, service in resolved.items() if sid != "keys")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_split_config_runs_one_process_per_stage_over_curve(tmp_path: Path) -> None:
    """The compose config on one host: service names → loopback, then `pipeline stage` per service."""
    keys = tmp_path / "keys"
    assert run_cli("keys", "generate", str(keys), "--name", "compose").returncode == 0
    (keys / "allowed").mkdir()
    shutil.copy(keys / "compose.key", keys / "allowed" / "compose.key")
    text = re.sub(r"tcp://[a-z]+:\d+", lambda _: f"tcp://127.0.0.1:{_free_port()}",
                  (ROOT / "configs" / "compose.yaml").read_text())
    config = tmp_path / "compose.yaml"
    config.write_text(text)
    env = pipeline_env() | {"KEYS_DIR": str(keys), "OUT_DIR": str(tmp_path / "out"), "ITERATIONS": "60",
                            "RATE": "max", "BOARD_DIR": str(tmp_path / "board"), "PROF_DIR": ""}
    env.pop("PROF_DIR")
    services = _yaml(COMPOSE)["services"]
    procs = {}
    for sid in (s for s in services if s != "keys"):
        command = [part.replace("configs/compose.yaml", str(config)).replace("/tmp/heartbeat",
                                                                              str(tmp_path / f"{sid}.beat"))
                   .replace("${STAMP:-20260101000000}", "20260101000000") for part in services[sid]["command"]]
        procs[sid] = subprocess.Popen([sys.executable, "-m", "pipeline", *command], env=env, cwd=ROOT,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    failures = {}
    for sid, proc in procs.items():
        try:
            _, stderr = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
        if proc.returncode != 0:
            failures[sid] = stderr[-1500:]
    assert not failures, failures
    assert all((tmp_path / f"{sid}.beat").exists() for sid in procs)
    statistic = next((tmp_path / "out" / "mindstudio_profiler_output").glob("op_statistic_20260101000000.csv"))
    with statistic.open(newline="") as handle:
        assert sum(int(row["Count"]) for row in csv.DictReader(handle)) > 0
