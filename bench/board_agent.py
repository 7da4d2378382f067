"""The board agent's footprint while it follows a PROF directory written at a paced rate.

    PYTHONPATH=. python bench/board_agent.py [--chip 310|910] [--rate 100k] [--iterations 1500] \
        [--python /path/to/python3.7]

The simulator writes at ``--rate`` records per second; the agent follows it and pushes every record to a PULL
socket in this process (over ipc, no CURVE: the encryption's cost is ZeroMQ's, not the agent's). Reported:
the agent's peak RSS, and its CPU time as a percent of one core, both over the whole run and over the window
from its first data message to its end of stream (the board writing at the paced rate, start-up left out),
with that window's records per second and its CPU scaled to 100 k records/s.
Targets: under 30 MB RSS and a few percent of one core at 100 k records/s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import procfs  # bench/, beside this script
import zmq

from pipeline import wire

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATE = 100_000


def _peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set): unlike wait4's ru_maxrss, it starts afresh at exec."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", choices=("310", "910"), default="310", help="310: TLV streams; 910: fixed-size")
    parser.add_argument("--rate", default="100k", help="records per second the simulator writes")
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the agent")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        board = Path(tmp) / "board"
        simulator = subprocess.Popen([sys.executable, "-m", "pipeline", "simulate", str(board), "--rate", args.rate,
                                      "--chip", args.chip, "--iterations", str(args.iterations), "--seed", "1"],
                                     cwd=ROOT, stdout=subprocess.DEVNULL)
        ctx = zmq.Context()
        pull = ctx.socket(zmq.PULL)
        endpoint = f"ipc://{tmp}/agent.ipc"
        pull.bind(endpoint)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        agent = subprocess.Popen([args.python, "-m", "pipeline_board.agent", str(board), "--connect", endpoint,
                                  "--wait-s", "30"], cwd=tmp, env=env)
        started = time.monotonic()
        records = 0
        first: tuple[float, float] | None = None  # (wall, agent CPU) when its first data message arrived
        ended = time.monotonic()
        peak = 0.0
        while True:
            if pull.poll(200):
                message = wire.decode(pull.recv_multipart())
                if message.kind == wire.KIND_EOS:
                    ended = time.monotonic()
                    break
                if first is None:
                    first = (time.monotonic(), procfs.cpu_s(agent.pid))
                records += message.batch.count if message.batch else 0
                peak = max(peak, _peak_rss_mb(agent.pid))
            elif agent.poll() is not None:
                break
        _, status, usage = os.wait4(agent.pid, 0)
        agent.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        cpu = usage.ru_utime + usage.ru_stime
        simulator.wait()
        truth = json.loads((board / "simulator_truth.json").read_text())
        pull.close(0)
        ctx.term()
    window = ended - first[0] if first else 0.0
    window_cpu = 100 * (cpu - first[1]) / window if first and window > 0 else 0.0
    window_rate = records / window if window > 0 else 0.0
    result = {"chip": args.chip, "rate": args.rate,
              "python": subprocess.check_output([args.python, "--version"], text=True).strip(),
              "records": records, "records_expected": truth["records_total"], "wall_s": round(wall, 1),
              "agent_peak_rss_mb": round(peak, 1),
              "run_records_per_s": round(records / wall), "run_cpu_percent": round(100 * cpu / wall, 2),
              "paced_window_s": round(window, 1), "paced_records_per_s": round(window_rate),
              "paced_cpu_percent": round(window_cpu, 2),
              "cpu_percent_at_100k": round(window_cpu * TARGET_RATE / window_rate, 2) if window_rate else None}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
