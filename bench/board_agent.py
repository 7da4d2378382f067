"""The board agent's footprint while it follows a PROF directory written at a paced rate.

    PYTHONPATH=. python bench/board_agent.py [--rate 100k] [--iterations 3000] [--python /path/to/python3.7]

The simulator writes at ``--rate`` records per second; the agent follows it and pushes every record to a PULL
socket in this process (over ipc, no CURVE: the encryption's cost is ZeroMQ's, not the agent's). Reported:
the agent's peak RSS (VmHWM), its CPU time over its wall time (percent of one core), and records per second.
Targets (issue 7): under 30 MB RSS and a few percent of one core at 100 k records/s.
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

import zmq

from pipeline import wire

ROOT = Path(__file__).resolve().parents[1]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", default="100k", help="records per second the simulator writes")
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the agent")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        board = Path(tmp) / "board"
        simulator = subprocess.Popen([sys.executable, "-m", "pipeline", "simulate", str(board), "--rate", args.rate,
                                      "--iterations", str(args.iterations), "--seed", "1"], cwd=ROOT)
        ctx = zmq.Context()
        pull = ctx.socket(zmq.PULL)
        endpoint = f"ipc://{tmp}/agent.ipc"
        pull.bind(endpoint)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        agent = subprocess.Popen([args.python, "-m", "pipeline_board.agent", str(board), "--connect", endpoint,
                                  "--wait-s", "30"], cwd=tmp, env=env)
        started = time.monotonic()
        records = 0
        peak = cpu = 0.0
        while True:
            if pull.poll(200):
                message = wire.decode(pull.recv_multipart())
                if message.kind == wire.KIND_EOS:
                    break
                records += message.batch.count if message.batch else 0
            if agent.poll() is None:
                peak, cpu = max(peak, _peak_rss_mb(agent.pid)), _cpu_s(agent.pid)
            elif not pull.poll(0):
                break
        wall = time.monotonic() - started
        agent.wait()
        simulator.wait()
        truth = json.loads((board / "simulator_truth.json").read_text())
        pull.close(0)
        ctx.term()
    result = {"rate": args.rate, "python": subprocess.check_output([args.python, "--version"], text=True).strip(),
              "records": records, "records_expected": truth["records_total"], "wall_s": round(wall, 1),
              "records_per_s": round(records / wall), "agent_peak_rss_mb": round(peak, 1),
              "agent_cpu_percent": round(100 * cpu / wall, 1)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
