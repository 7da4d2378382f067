"""Soak: `pipeline run` with the simulator writing at a fixed record rate, RSS of every stage over time.

    python bench/soak.py [--duration 600] [--rate 100k] [--chip cloud] [--every 5] [--warmup 60]
                         [--output DIR] [--csv FILE]
    python bench/soak.py --judge FILE.csv --warmup 300   # the verdicts of an earlier run, another warm-up

Every ``--every`` seconds it reads each stage's VmRSS (/proc/PID/status, PIDs from the run's run.json)
and prints a row: elapsed time, records the simulator wrote (its truth file, refreshed once per
simulated second, so it trails), records the collector shipped (the run's metrics endpoint), the
collector's rate over the last interval, and the RSS of every stage. After ``--duration`` it stops the run as Ctrl-C
does (the simulator finishes its directory, the stages drain) and prints, per stage, RSS after the
warm-up, the mean of the first and last quarter of the samples after warm-up, the largest, the slope
in MB per minute, and a verdict: flat when the last quarter's mean is within max(5 MB, 5 %) of the
first quarter's (no stage's memory may grow with the length of the run). It also prints
the rate achieved against the rate asked for (from the run report: records the simulator wrote
and the collector shipped), and the machine's load average: on a busy machine the stages fall
behind, records queue between them (ZeroMQ's high-water marks bound that), and RSS rises with the
queues, not with the length of the run.

The run's output folder (default: a new temporary folder) holds the outputs, the config and
soak.log (the run's own output); ``--csv`` writes the samples.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("board", "collect", "decode", "aggregate", "timeline", "summary", "db", "top", "advice")
FLAT_MB, FLAT_SHARE = 5.0, 0.05
BUDGET_MB = 200.0  # the target: every stage under 200 MB RSS through a long run
DRAIN_TIMEOUT_S = 900


def config_text(output: Path, rate: str, chip: str, metrics_port: int | None) -> str:
    metrics = f", metrics_port: {metrics_port}" if metrics_port else ""
    return f"""# written by bench/soak.py
version: 1
run: {{name: soak-{os.getpid()}, output: "{output}", progress_s: 30, drain_timeout_s: 900{metrics}}}
stages:
  board: {{type: simulator, chip: {chip}, iterations: 0, rate: "{rate}", seed: 0, output: board}}
  collect: {{type: collector, path: board, follow: true}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: 1.0}}
  timeline: {{type: timeline, inputs: [aggregate.tasks]}}
  summary: {{type: summary, inputs: [aggregate.tasks, aggregate.stats], format: csv}}
  db: {{type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}}
  top: {{type: live, inputs: [aggregate.stats]}}
  advice: {{type: advice, inputs: [aggregate.stats, aggregate.tasks]}}
"""


@dataclass
class Sample:
    elapsed_s: float
    written: int
    collected: int
    rss_mb: dict[str, float] = field(default_factory=dict)


def rss_mb(pid: int) -> float | None:
    """VmRSS of a process in MB, None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def records_written(output: Path) -> int:
    """What the simulator has written so far (its truth file, refreshed every simulated second)."""
    try:
        truth = json.loads((output / "board" / "simulator_truth.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(sum(truth.get("records", {}).values()))


def records_collected(port: int | None) -> int:
    """Records the collector has shipped, from the run's metrics endpoint (0 without one)."""
    if port is None:
        return 0
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("ascend_pipeline_stage_records_out_total{") and 'stage="collect"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def free_port() -> int | None:
    try:
        import prometheus_client  # noqa: F401  (the run's metrics endpoint needs it)
    except ImportError:
        return None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stage_pids(output: Path, timeout_s: float = 60) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pids: dict[str, int] = json.loads((output / "run.json").read_text()).get("stage_pids", {})
        except (OSError, ValueError):
            pids = {}
        if pids:
            return pids
        time.sleep(0.5)
    raise SystemExit(f"soak: no stage_pids in {output / 'run.json'} after {timeout_s:.0f} s (see soak.log)")


def slope_mb_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) in MB per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if var == 0 else 60 * sum((t - mean_t) * (v - mean_v) for t, v in points) / var


def verdicts(samples: list[Sample], stages: list[str], warmup_s: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for stage in stages:
        points = [(s.elapsed_s, s.rss_mb[stage]) for s in samples if s.elapsed_s >= warmup_s and stage in s.rss_mb]
        if len(points) < 4:
            rows.append({"stage": stage, "verdict": "too few samples after warm-up"})
            continue
        quarter = len(points) // 4
        first = sum(v for _, v in points[:quarter]) / quarter
        last = sum(v for _, v in points[-quarter:]) / quarter
        largest = max(v for s in samples for k, v in s.rss_mb.items() if k == stage)
        growth = last - first
        flat = growth <= max(FLAT_MB, FLAT_SHARE * first)
        rows.append({"stage": stage, "after_warmup_mb": points[0][1], "first_quarter_mb": first,
                     "last_quarter_mb": last, "max_mb": largest, "slope_mb_per_min": slope_mb_per_min(points),
                     "verdict": ("flat" if flat else "GROWS") + ("" if largest <= BUDGET_MB else
                                                              f", over {BUDGET_MB:.0f} MB")})
    return rows


def print_row(sample: Sample, previous: Sample | None, stages: list[str]) -> None:
    span = sample.elapsed_s - previous.elapsed_s if previous else 0.0
    rate = (sample.collected - previous.collected) / span if previous and span > 0 else 0.0
    cells = "".join(f"{sample.rss_mb.get(stage, float('nan')):>10.1f}" for stage in stages)
    print(f"{sample.elapsed_s:>7.0f} {sample.written:>12,} {sample.collected:>12,} {rate:>10,.0f}{cells}", flush=True)


def print_verdicts(rows: list[dict[str, object]]) -> None:
    print(f"\n{'stage':<10} {'warm-up':>8} {'1st qtr':>8} {'last qtr':>8} {'max':>8} {'MB/min':>8}  verdict")
    for row in rows:
        if "first_quarter_mb" in row:
            print(f"{row['stage']:<10} {row['after_warmup_mb']:>8.1f} {row['first_quarter_mb']:>8.1f} "
                  f"{row['last_quarter_mb']:>8.1f} {row['max_mb']:>8.1f} {row['slope_mb_per_min']:>+8.2f}  "
                  f"{row['verdict']}")
        else:
            print(f"{row['stage']:<10} {row['verdict']}")


def judge(path: Path, warmup_s: float) -> int:
    """The verdicts of samples written by --csv, with another warm-up."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    stages = rows[0][3:]
    samples = [Sample(float(r[0]), int(r[1]), int(r[2]), {s: float(v) for s, v in zip(stages, r[3:], strict=True)})
               for r in rows[1:]]
    verdict_rows = verdicts(samples, stages, warmup_s)
    print(f"soak: {len(samples)} samples from {path}, warm-up {warmup_s:.0f} s")
    print_verdicts(verdict_rows)
    return 0 if all(str(row["verdict"]).startswith("flat") for row in verdict_rows) else 1


def _finals(report: Path) -> dict[str, dict]:
    """Each stage's final figures from the run report (empty if there is none)."""
    try:
        stages: dict[str, dict] = json.loads(report.read_text()).get("stages", {})
    except (OSError, ValueError):
        return {}
    return stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600, help="seconds of writing (default 600)")
    parser.add_argument("--rate", default="100k", help="simulator records per second (default 100k)")
    parser.add_argument("--chip", default="cloud", choices=("mini", "cloud", "910b", "v6"))
    parser.add_argument("--every", type=float, default=5, help="seconds between samples (default 5)")
    parser.add_argument("--warmup", type=float, default=60, help="seconds left out of the verdict (default 60)")
    parser.add_argument("--output", help="run output folder (default: a new temporary folder)")
    parser.add_argument("--csv", help="write the samples to this CSV file")
    parser.add_argument("--judge", metavar="CSV", help="no run: judge the samples of an earlier --csv with --warmup")
    args = parser.parse_args(argv)
    if args.judge:
        return judge(Path(args.judge), args.warmup)

    output = Path(args.output or tempfile.mkdtemp(prefix="soak-")).resolve()
    output.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = output / "soak.yaml"
    config.write_text(config_text(output, args.rate, args.chip, port))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    load_before = os.getloadavg()
    print(f"soak: rate {args.rate} records/s, chip {args.chip}, {args.duration:.0f} s, samples every "
          f"{args.every:.0f} s, warm-up {args.warmup:.0f} s; output {output}")
    print(f"soak: {os.cpu_count()} CPUs, load average {load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}")
    with open(output / "soak.log", "w") as log:
        run = subprocess.Popen([sys.executable, "-m", "pipeline", "run", str(config), "--live", "off"],
                               stdout=log, stderr=subprocess.STDOUT, env=env, cwd=output)
        pids = stage_pids(output)
        stages = [s for s in STAGES if s in pids] + sorted(set(pids) - set(STAGES))
        print(f"{'t (s)':>7} {'written':>12} {'collected':>12} {'rec/s':>10}" +
              "".join(f"{stage[:9]:>10}" for stage in stages) + "   (RSS in MB)")
        samples: list[Sample] = []
        started = time.monotonic()
        next_sample = started
        while (now := time.monotonic()) - started < args.duration and run.poll() is None:
            if now >= next_sample:
                sample = Sample(now - started, records_written(output), records_collected(port),
                                {stage: mb for stage, pid in pids.items() if (mb := rss_mb(pid)) is not None})
                print_row(sample, samples[-1] if samples else None, stages)
                samples.append(sample)
                next_sample += args.every
            time.sleep(min(0.2, max(0.0, next_sample - time.monotonic())))
        elapsed = time.monotonic() - started
        if run.poll() is None:
            run.send_signal(signal.SIGINT)  # as Ctrl-C: the simulator completes its directory, stages drain
        try:
            code = run.wait(timeout=DRAIN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            run.send_signal(signal.SIGINT)
            code = run.wait()
        drained_s = time.monotonic() - started - elapsed

    load_after = os.getloadavg()
    finals = _finals(output / "run_report.json")
    written = int((finals.get("board") or {}).get("accounting", {}).get("records_written", 0))
    collected = int((finals.get("collect") or {}).get("accounting", {}).get("records_collected", 0))
    print(f"\nsoak: ran {elapsed:.0f} s; the simulator wrote {written:,} records ({written / max(elapsed, 1):,.0f}/s, "
          f"asked {args.rate}/s); the collector shipped {collected:,}; the stages drained in {drained_s:.0f} s "
          f"after the stop; `pipeline run` exit code {code}")
    print(f"soak: load average at the end {load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f}")
    rows = verdicts(samples, stages, args.warmup)
    print_verdicts(rows)
    peaks = {sid: (stage or {}).get("peak_rss_mb") for sid, stage in finals.items()}
    print("soak: peak RSS per stage over the whole run, drain included (run report, MB): " +
          ", ".join(f"{sid} {mb:.0f}" for sid, mb in peaks.items() if isinstance(mb, (int, float))))
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["elapsed_s", "written", "collected", *stages])
            for sample in samples:
                writer.writerow([round(sample.elapsed_s, 1), sample.written, sample.collected,
                                 *(round(sample.rss_mb.get(stage, 0.0), 1) for stage in stages)])
    (output / "soak_summary.json").write_text(json.dumps({"rate": args.rate, "chip": args.chip, "elapsed_s": elapsed,
                                                          "written": written, "collected": collected,
                                                          "load_before": load_before, "load_after": load_after,
                                                          "stages": rows}, indent=2))
    return 0 if all(str(row["verdict"]).startswith("flat") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
