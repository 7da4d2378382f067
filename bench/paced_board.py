"""A simulated 910 board that writes its PROF_ directory at a fixed number of records per second.

    python bench/paced_board.py OUT_DIR --records 1000000 --rate 100000 --log burst_log.json

The simulator's own board and writer (stages/simulator) make every record first, before the clock starts,
so the pace is not limited by generating them; then bursts of about ``--burst-ms`` of records are
appended, each when the wall clock says the rate allows it (``--rate 0``: as fast as it can). The burst
log lists, per burst, when its write returned (``time.monotonic()``, the clock every process on this
machine shares), the records written so far and the device tasks whose end log is on disk so far: a
device task cannot be in any statistic before its end log is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's stages, not an installed copy

from stages.formats import raw  # noqa: E402
from stages.simulator.board import APP_PID, Board  # noqa: E402
from stages.simulator.records import Chunk  # noqa: E402
from stages.simulator.timebase import HWTS_MHZ, TimeBase  # noqa: E402
from stages.simulator.workload import Chip  # noqa: E402
from stages.simulator.writer import ProfWriter  # noqa: E402

CHIP: Chip = "cloud"  # HWTS logs: one end log per device task
END_LOG_STREAM = "hwts.data.0"
RECORDS_PER_ITERATION = 656  # about, for the cloud chip's face-mask SSD: how many images make --records


class CountingWriter(ProfWriter):
    """The simulator's writer, counting the device tasks whose end log each flush writes."""

    ended = 0

    def wrote(self, key: str, chunk: Chunk) -> None:
        if key == END_LOG_STREAM:
            self.ended += _end_logs(chunk)


def _end_logs(chunk: Chunk) -> int:
    logs = np.frombuffer(chunk.data, raw.HWTS_LOG)
    return int(np.count_nonzero((logs["head"] & 0x7) == raw.HWTS_TASK_END))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--records", type=int, default=1_000_000, help="about this many records in all")
    parser.add_argument("--rate", type=float, default=100_000, help="records per second; 0 = as fast as it can")
    parser.add_argument("--burst-ms", type=float, default=5.0, help="wall time between bursts at the rate")
    parser.add_argument("--start-after", type=Path, help="wait for this file before writing (the pipeline is up)")
    parser.add_argument("--log", type=Path, required=True, help="burst log (JSON) written at the end")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    tb = TimeBase(wall0_ns=time.time_ns(), hwts_mhz=HWTS_MHZ)
    board = Board(CHIP, args.seed, tb)
    writer = CountingWriter(args.out_dir, CHIP, tb, args.seed, 2 * 1024 * 1024, APP_PID)
    writer.add(board.start())
    writer.add(board.load_model())
    for image in range(1, max(1, args.records // RECORDS_PER_ITERATION) + 1):
        writer.add(board.run_image(image))
    writer.add(board.unload_model())
    first, last = tb.host_mono0, board.now
    total = sum(chunk.count for chunks in writer.pending.values() for chunk in chunks)
    # a burst is a slice of simulated time holding about rate × burst_ms records (the run's mean density)
    per_burst = max(1.0, args.rate * args.burst_ms / 1000) if args.rate > 0 else 50_000.0
    step = max(1, int((last - first) * per_burst / max(total, 1)))

    if args.start_after is not None:
        while not args.start_after.exists():
            time.sleep(0.01)
    bursts: list[tuple[float, int, int]] = []
    written = 0
    start = time.monotonic()
    boundary = first
    while boundary < last:
        boundary += step
        written += writer.flush_until(boundary)
        now = time.monotonic()
        bursts.append((now, written, writer.ended))
        if args.rate > 0:
            due = start + written / args.rate
            if due > now:
                time.sleep(due - now)
    written += writer.finish(board.now)
    bursts.append((time.monotonic(), written, writer.ended))
    args.log.write_text(json.dumps({"prof_dir": str(writer.prof_dir), "rate": args.rate, "records": written,
                                    "start": start, "bursts": bursts}))
    print(f"wrote {written:,} records in {bursts[-1][0] - start:.2f} s to {writer.prof_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
