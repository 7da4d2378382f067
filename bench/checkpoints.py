"""What checkpoints cost: the live pipeline (simulated board at real-time pace) without checkpoints and with
them, alternating (these machines are noisy: read the ratio, not the absolute), each stage's stall per
checkpoint, the CPU time of the children that pickled them, and the largest epoch on disk.

    python bench/checkpoints.py [--iterations 400] [--checkpoint-s 2.0] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIG = """
run: {{name: bench-ckpt, output: "{out}", progress_s: 60, checkpoint_s: {checkpoint_s}}}
stages:
  board: {{type: simulator, chip: mini, iterations: {iterations}, rate: realtime, seed: 1, output: board}}
  collect: {{type: collector, path: board, follow: true}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode]}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
"""


def run_once(folder: Path, label: str, checkpoint_s: float, iterations: int) -> tuple[float, int, dict[str, Any]]:
    """(wall seconds, bytes of the largest epoch folder seen while running, the run report)."""
    out = folder / label
    config = folder / f"{label}.yaml"
    config.write_text(CONFIG.format(out=out, checkpoint_s=checkpoint_s, iterations=iterations))
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    largest = 0
    while process.poll() is None:
        for epoch in (out / "checkpoints").glob("epoch-*"):
            try:
                largest = max(largest, sum(f.stat().st_size for f in epoch.iterdir()))
            except OSError:
                pass  # removed while we looked
        time.sleep(0.2)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"{label}: pipeline run exited {process.returncode}")
    return wall, largest, json.loads((out / "run_report.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--checkpoint-s", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"off": [], "on": []}
    largest, records, costs = 0, 0, {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat):
            for label, seconds in (("off", 0.0), ("on", args.checkpoint_s)):
                wall, size, report = run_once(Path(tmp), f"{label}{round_}", seconds, args.iterations)
                walls[label].append(wall)
                largest = max(largest, size)
                records = report["stages"]["collect"]["accounting"]["records_collected"]
                if label == "on":
                    costs = {sid: final["checkpoints"] for sid, final in report["stages"].items()
                             if final["checkpoints"]["saved"]}
    off, on = min(walls["off"]), min(walls["on"])
    print(f"{records:,} records (live board, real-time pace), best of {args.repeat}: without checkpoints {off:.1f} s, "
          f"with checkpoint_s={args.checkpoint_s} {on:.1f} s; ratio {on / off:.2f}; "
          f"largest epoch on disk {largest / 1e6:.1f} MB")
    pairs = " ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(walls["off"], walls["on"], strict=True))
    print(f"  every run (off/on alternating): {pairs} s")
    for sid, cost in costs.items():
        print(f"  {sid:<10} {cost['saved']:>3} checkpoints; the stage stalled {cost['stalled_s']:.2f} s in all "
              f"(longest {cost['slowest_stall_s']:.3f} s); children's CPU {cost['child_cpu_s']:.2f} s; "
              f"largest {cost['largest_bytes'] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
