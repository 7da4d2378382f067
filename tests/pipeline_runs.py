"""Helpers for tests that start real pipeline runs in a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def stage_config(out: Path, iterations: int, rate: str = "realtime", chip: str = "mini",
                 extra_stages: str = "", slice_bytes: int = 65536, devices: int = 1) -> str:
    return f"""
run: {{name: t{os.getpid()}-{abs(hash(str(out))) % 100000}, output: "{out}", progress_s: 1}}
stages:
  board: {{type: simulator, chip: {chip}, iterations: {iterations}, rate: {rate}, seed: 3,
           slice_bytes: {slice_bytes}, output: board{f", devices: {devices}" if devices > 1 else ""}}}
  collect: {{type: collector, path: board, follow: true, wait_s: 20}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 0.5}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], refresh_s: 0.2}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
  top: {{type: live, inputs: [aggregate.stats]}}
{extra_stages}"""


def pipeline_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "plugins"), env.get("PYTHONPATH", "")])
    env.pop("PROF_DIR", None)
    return env


def install_example(name: str, target: Path) -> dict[str, str]:
    """pip-installs ``examples/NAME`` into the scratch prefix ``target`` (no dependencies); returns the
    environment in which a pipeline subprocess finds it (and the checkout)."""
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                             str(target), str(ROOT / "examples" / name)], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.fail(f"pip could not install examples/{name}: {result.stderr[-1500:]}")
    env = pipeline_env()
    env["PYTHONPATH"] = os.pathsep.join([str(target), env["PYTHONPATH"]])
    return env


def run_cli(*args: str, timeout: float = 240, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
                          timeout=timeout, env=pipeline_env(), **kwargs)


def start_run(config: Path, capture: bool = True) -> subprocess.Popen[str]:
    """`pipeline run CONFIG` in the background (the caller stops or waits for it)."""
    stream = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                            env=pipeline_env(), stdout=stream, stderr=stream, text=True)


def read_report(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "run_report.json").read_text())
    return report


def shared_dir() -> Path:
    """The shared reference folder, or a skip that says why it is needed."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent (a user's clone): sample-based checks need the shared folder")
    return SHARED


def crossing_slices(events: list[dict[str, Any]]) -> int:
    """Complete events on one track that partially overlap (Perfetto drops those); nesting is fine."""
    tracks: dict[tuple[Any, Any], list[tuple[float, float]]] = {}
    for event in events:
        if event.get("ph") == "X":
            start = float(event["ts"])
            tracks.setdefault((event["pid"], event["tid"]), []).append((start, start + float(event["dur"])))
    crossings = 0
    for spans in tracks.values():
        spans.sort(key=lambda span: (span[0], -span[1]))
        open_ends: list[float] = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start + 1e-6:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + 1e-6:
                crossings += 1
            open_ends.append(end)
    return crossings


def run_socket_folders(under: Path) -> list[Path]:
    """Socket folders of pipeline runs whose outputs go under ``under``: a run's supervisor removes its folder when
    it ends, so those still there belong to runs that did not end (a supervisor a test killed, as a crash would).
    A run's folder holds the config it runs (``config.yaml``), which names its output folder."""
    from pipeline.transport import socket_root

    root, under = socket_root(), under.resolve()
    found = []
    for folder in root.iterdir() if root.is_dir() else ():
        try:
            output = yaml.safe_load((folder / "config.yaml").read_text())["run"]["output"]
        except (OSError, yaml.YAMLError, KeyError, TypeError):
            continue  # not a run's folder, or one another run is writing now
        if Path(output).resolve().is_relative_to(under):
            found.append(folder)
    return found
