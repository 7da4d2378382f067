"""What checkpoints cost: the same finished directory through the whole pipeline, without checkpoints and with
them, alternating (these machines are noisy: read the ratio, not the absolute), and the size of one epoch.
Messages are small (--batch-records) so that the sockets' queues (256 messages a side) hold little and the
collector reads, and cuts epochs, all through the run as it does on a live board, instead of handing everything
over in the first seconds.

    python bench/checkpoints.py [--iterations 300] [--checkpoint-s 2.0] [--repeat 2] [--batch-records 32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """
run: {{name: bench-ckpt, output: "{out}", progress_s: 60, checkpoint_s: {checkpoint_s},
       batch: {{max_records: {batch_records}}}}}
stages:
  collect: {{type: collector, path: "{prof}", follow: false}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], hold_s: 600}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats]}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
"""


def run_once(folder: Path, prof: Path, checkpoint_s: float, label: str,
             batch_records: int) -> tuple[float, int, int, dict]:
    """(wall seconds, records, bytes of the largest epoch folder seen while running, the run report)."""
    out = folder / label
    config = folder / f"{label}.yaml"
    config.write_text(CONFIG.format(out=out, prof=prof, checkpoint_s=checkpoint_s, batch_records=batch_records))
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
    report = json.loads((out / "run_report.json").read_text())
    return wall, report["stages"]["collect"]["accounting"]["records_collected"], largest, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--checkpoint-s", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--batch-records", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        subprocess.run([sys.executable, "-m", "pipeline", "simulate", str(folder / "board"), "--iterations",
                        str(args.iterations), "--seed", "1"], check=True, capture_output=True)
        prof = next((folder / "board").glob("PROF_*"))
        walls: dict[str, list[float]] = {"off": [], "on": []}
        records = largest = 0
        stalls: dict[str, dict] = {}
        for round_ in range(args.repeat):
            for label, seconds in (("off", 0.0), ("on", args.checkpoint_s)):
                wall, records, size, report = run_once(folder, prof, seconds, f"{label}{round_}",
                                                       args.batch_records)
                walls[label].append(wall)
                largest = max(largest, size)
                if label == "on":
                    stalls = {sid: final["checkpoints"] for sid, final in report["stages"].items()}
        off, on = min(walls["off"]), min(walls["on"])
        print(f"{records:,} records, best of {args.repeat}: without checkpoints {off:.1f} s "
              f"({records / off:,.0f}/s), with checkpoint_s={args.checkpoint_s} {on:.1f} s ({records / on:,.0f}/s); "
              f"ratio {on / off:.2f}; largest epoch on disk {largest / 1e6:.1f} MB")
        for sid, cost in stalls.items():
            print(f"  {sid:<10} {cost['saved']:>3} checkpoints, the stage stalled {cost['stalled_s']:.2f} s in all "
                  f"(longest {cost['slowest_stall_s']:.2f} s), largest {cost['largest_bytes'] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
