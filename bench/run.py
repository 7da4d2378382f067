"""The benchmark: one table, every figure beside a baseline measured in the same run.

    python bench/run.py [--quick] [--work DIR] [--markdown FILE]

Rows, all on the simulated Ascend 910 (`cloud`) unless said otherwise:

- decode: records/s per record kind, the numpy decoder vs a pure-Python baseline (bench/decode.py, run as is);
- end to end, import: ``pipeline import`` of a finished directory of ``--large`` records (simulated first, not
  timed): collector → decoder → aggregator → every default sink (timeline, summary, sqlite, advice);
  records/s = the collector's records / the run's wall time (process start-up included);
- end to end, live: ``pipeline run`` (the live.yaml stages: timeline, summary, sqlite, live view, advice)
  following a board that writes ``--live-records`` as fast as it can (bench/paced_board.py, its records made
  before the clock starts); records/s = records / (pipeline end − first write);
- live lag at fixed write rates: for the k-th device task, (first statistics snapshot holding ≥ k tasks, as a
  probe sink on ``aggregate.stats`` receives it) − (the board's write that put the k-th end log on disk);
  the baseline column is the same for the decoder's output (a probe on ``decode``), i.e. before the join.
  The aggregator snapshots every 0.1 s here (live.yaml: 1 s, which alone adds up to 1 s);
- the large import vs Perfetto: trace_processor_shell loads the timeline JSON that import wrote and runs the
  op-statistics GROUP BY (name, count, sum, min and max of the slices' durations);
- CPU per record of an import of ``--msprof-records`` records (1 M), over the whole process tree (supervisor and
  stages, from the kernel's accounting of waited-for children), beside msprof's parser on the same directory;
- fixed cost: the same CPU for an import of a tiny directory (the simulated 310, one iteration; least of three
  runs), split into the supervisor's own and its stage processes', and its share of the 1 M import's: what every
  import pays for starting its processes (interpreter, imports, config) and ending them, whatever its size;
- import vs msprof's own parser (``--msprof-src``; import + export summary + export timeline) on that directory;
- rows on a slow path: what the stages' accounting counts as rows handled one at a time (``slow_path_rows``);
- idle: the live stages following a job that has stopped writing (its files read, no end_info yet), CPU of
  each stage over ``--idle-seconds`` from /proc, as a share of one core: what the pipeline costs the machine
  it shares with the job while nothing happens;
- peak RSS and CPU seconds of every stage in every run (second table); the sum over the stages of the large
  import and each stage's growth from the 1 M to the large import (flat in run length).

The machine is shared and noisy: wall figures carry the load of whatever else runs; CPU seconds are steadier.
"CPU-bound" is what the run's CPU seconds allow on 2 cores of its own: records / max(all stages' CPU s / 2,
the busiest stage's CPU s). Verdicts go by the wall figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import peers  # noqa: E402
import procfs  # noqa: E402

RECORDS_PER_ITERATION = 656  # the simulated 910's face-mask SSD writes about this many records per image
E2E_TARGET = 300_000
LAG_TARGET_MS = 250
LAG_TARGET_RATE = 100_000
RSS_TARGET_MB = 200
RSS_SUM_TARGET_MB = 1024
CPU_US_TARGET = 6.7  # µs per record: 300 k records/s on two cores
MSPROF_RATIO_TARGET = 20
RSS_GROWTH_TARGET = 0.10  # peak RSS of a stage, 1 M vs 5 M records
DECODE_LINE = re.compile(r"^(\S+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)×")
LIVE_SINKS = """
  timeline: {type: timeline, inputs: [aggregate.tasks]}
  summary: {type: summary, inputs: [aggregate.tasks, aggregate.stats], format: csv}
  db: {type: sqlite, inputs: [aggregate.tasks, aggregate.stats]}
  top: {type: live, inputs: [aggregate.stats]}
  advice: {type: advice, inputs: [aggregate.stats, aggregate.tasks]}
"""


@dataclass
class Row:
    measure: str
    ours: str
    baseline: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""


@dataclass
class Stages:
    """Peak RSS (MB) and CPU seconds of each stage of one run."""

    label: str
    rss_mb: dict[str, float] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    tree_cpu_s: float = 0.0  # an import's whole process tree: supervisor and stages
    slow_rows: dict[str, int] = field(default_factory=dict)  # stage → rows it handled one at a time


def env() -> dict[str, str]:
    """Stage processes import this checkout's packages and the bench's probe sink."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(BENCH), out.get("PYTHONPATH", "")])
    out.pop("PROF_DIR", None)
    return out


def pipeline(*args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline", *args]


def rate(value: float) -> str:
    return f"{value / 1e6:.2f} M rec/s" if value >= 1e6 else f"{value / 1e3:,.1f} k rec/s"


def capacity(records: int, stages: Stages, cores: int = 2) -> float:
    """Records/s the run's CPU seconds allow on ``cores`` cores of its own: no faster than all the work spread
    over the cores, nor than its busiest stage on one (what the wall figure would be on an idle machine)."""
    cpu = stages.cpu_s.values()
    return records / max(sum(cpu) / cores, max(cpu, default=0.0), 1e-9)


def miss(value: float, target: float, higher_is_better: bool = True) -> str:
    met = value >= target if higher_is_better else value <= target
    if met:
        return "met"
    return f"missed by {abs(1 - value / target) * 100:.0f}%" if higher_is_better else \
        f"missed ({value / target:.1f}× the target)"


# -- decode -----------------------------------------------------------------------------------


def decode_rows(records: int, repeat: int) -> list[Row]:
    result = subprocess.run([sys.executable, str(BENCH / "decode.py"), "--records", str(records), "--repeat",
                             str(repeat)], capture_output=True, text=True, env=env(), cwd=ROOT, timeout=3600)
    rows = []
    for line in result.stdout.splitlines():
        found = DECODE_LINE.match(line)
        if found:
            kind, fast, slow, ratio = found.groups()
            fast_rate, slow_rate = float(fast.replace(",", "")), float(slow.replace(",", ""))
            ok = fast_rate >= 3e6 and fast_rate >= 10 * slow_rate
            rows.append(Row(f"decode {kind}", rate(fast_rate), f"pure Python {rate(slow_rate)}", f"{float(ratio):.1f}×",
                            "≥ 3 M/s and ≥ 10×", "met" if ok else "missed"))
    if not rows:
        rows.append(Row("decode", "failed", result.stderr.strip()[-300:] or result.stdout.strip()[-300:]))
    return rows


# -- runs ---------------------------------------------------------------------------------------


def simulate(board: Path, records: int) -> Path:
    iterations = max(1, records // RECORDS_PER_ITERATION)
    subprocess.run(pipeline("simulate", str(board), "--chip", "cloud", "--iterations", str(iterations), "--rate",
                            "max", "--seed", "0"), check=True, capture_output=True, env=env(), cwd=ROOT)
    return next(path for path in board.iterdir() if path.name.startswith("PROF_"))


def report(out: Path, label: str) -> tuple[dict[str, Any], Stages]:
    data: dict[str, Any] = json.loads((out / "run_report.json").read_text())
    stages = Stages(label)
    for stage_id, final in data["stages"].items():
        stages.rss_mb[stage_id] = float(final.get("peak_rss_mb", 0))
        stages.cpu_s[stage_id] = float(final.get("cpu_s", 0))
    if data.get("state") != "completed":
        raise RuntimeError(f"{label}: run ended {data.get('state')}: see {out / 'run_report.json'}")
    return data, stages


def collected(data: dict[str, Any]) -> int:
    return int(data["stages"]["collect"]["out"].get("out", 0))


def import_dir(prof: Path, out: Path) -> tuple[float, int, Stages]:
    """`pipeline import`: (wall s, records, stages); ``stages.tree_cpu_s``: CPU of the whole process tree."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(pipeline("import", str(prof), "--output", str(out)), check=True, capture_output=True, env=env(),
                   cwd=ROOT)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the supervisor and every stage it waited for
    data, stages = report(out, f"import {prof.parent.name}")
    stages.tree_cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    stages.slow_rows = slow_path_rows(data)
    return wall, collected(data), stages


SUPERVISOR_CPU = "supervisor_cpu_s"
# `pipeline import` as the console script runs it, and then the supervisor's own CPU seconds on stderr
MEASURED_MAIN = ("import resource, sys\nfrom pipeline.cli import main\nsys.argv[0] = 'pipeline'\ncode = main()\n"
                 "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
                 f"print('{SUPERVISOR_CPU}', usage.ru_utime + usage.ru_stime, file=sys.stderr)\nsys.exit(code)")


def import_fixed_cost(prof: Path, out: Path) -> tuple[float, float]:
    """`pipeline import` of ``prof``: (CPU s of the whole process tree, the supervisor's own share of it)."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([sys.executable, "-c", MEASURED_MAIN, "import", str(prof), "--output", str(out)],
                            check=True, capture_output=True, text=True, env=env(), cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report(out, "fixed cost")  # the run completed
    supervisor = next(float(line.split()[1]) for line in result.stderr.splitlines()
                      if line.startswith(SUPERVISOR_CPU))
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, supervisor


def fixed_cost_row(work: Path, runs: list[Stages]) -> Row:
    """An import of a tiny directory (least of three runs): CPU seconds every import pays whatever its size."""
    board = work / "tiny-board"
    shutil.rmtree(board, ignore_errors=True)
    subprocess.run(pipeline("simulate", str(board), "--chip", "mini", "--iterations", "1", "--rate", "max", "--seed",
                            "0"), check=True, capture_output=True, env=env(), cwd=ROOT)
    prof = next(path for path in board.iterdir() if path.name.startswith("PROF_"))
    tree, supervisor = min(import_fixed_cost(prof, work / "tiny-import") for _ in range(3))
    one_m = next((run for run in runs if run.label == "import small-board"), None)
    share = f"{tree / one_m.tree_cpu_s * 100:.0f} % of the 1 M import's {one_m.tree_cpu_s:.1f} CPU s" if one_m else ""
    return Row("fixed cost: import of a tiny directory (whole process tree CPU s)",
               f"{tree:.2f} CPU s: supervisor {supervisor:.2f}, stage processes {tree - supervisor:.2f}", share)


def slow_path_rows(data: dict[str, Any]) -> dict[str, int]:
    """Rows each stage handled one at a time (its accounting's ``slow_path_rows``), where it counts them."""
    found = {}
    for stage, final in data["stages"].items():
        rows = (final.get("accounting") or {}).get("slow_path_rows")
        if rows is not None:
            found[stage] = int(rows)
    return found


def slow_path_row(slow: dict[str, int], records: int) -> Row:
    """Rows on a slow path over all stages, and each stage's count."""
    total = sum(slow.values())
    each = ", ".join(f"{stage} {rows:,}" for stage, rows in sorted(slow.items(), key=lambda item: -item[1]))
    return Row("rows on a slow path (one at a time), large import", f"{total:,} ({each})" if each else f"{total:,}",
               f"of {records:,} records", f"{total / max(records, 1) * 100:.3f} %")


def live_config(out: Path, board: Path, snapshot_s: float, probes: bool) -> Path:
    probe = """
  probe_stats: {type: "lag_probe:LagProbe", inputs: [aggregate.stats]}
  probe_decoded: {type: "lag_probe:LagProbe", inputs: [decode]}
""" if probes else ""
    text = f"""version: 1
run: {{name: bench-{os.getpid()}-{out.name}, output: "{out}", progress_s: 5,
       batch: {{max_records: 1024, max_bytes: 1048576, flush_ms: 50}}}}
stages:
  collect: {{type: collector, path: "{board}", follow: true, wait_s: 600}}
  decode: {{type: decoder, inputs: [collect]}}
  aggregate: {{type: aggregator, inputs: [decode], snapshot_every_s: {snapshot_s}}}
{LIVE_SINKS}{probe}"""
    path = out.parent / f"{out.name}.yaml"
    path.write_text(text)
    return path


@dataclass
class LiveRun:
    records: int
    first_write: float
    last_write: float
    pipeline_end: float
    bursts: list[list[float]]
    stats: Stages
    out: Path


def live_run(work: Path, label: str, records: int, write_rate: float, snapshot_s: float = 0.1,
             probes: bool = True) -> LiveRun:
    """`pipeline run` following a paced board; the board starts writing once the probes (or stages) are up."""
    out, board = work / label, work / f"{label}-board"
    for path in (out, board):
        shutil.rmtree(path, ignore_errors=True)
    out.mkdir(parents=True)
    board.mkdir(parents=True)
    config = live_config(out, board, snapshot_s, probes)
    go, log = work / f"{label}.go", work / f"{label}.bursts.json"
    go.unlink(missing_ok=True)
    with open(work / f"{label}.pipeline.log", "w") as pipeline_log, open(work / f"{label}.board.log", "w") as board_log:
        run = subprocess.Popen(pipeline("run", str(config), "--live", "off"), stdout=pipeline_log,
                               stderr=subprocess.STDOUT, env=env(), cwd=ROOT)
        writer = subprocess.Popen([sys.executable, str(BENCH / "paced_board.py"), str(board), "--records", str(records),
                                   "--rate", str(write_rate), "--start-after", str(go), "--log", str(log)],
                                  stdout=board_log, stderr=subprocess.STDOUT, env=env(), cwd=ROOT)
        try:
            ready = [out / "lag_probe_probe_stats.ready", out / "lag_probe_probe_decoded.ready"] if probes else \
                [out / "run.json"]
            deadline = time.monotonic() + 300
            while not all(path.exists() for path in ready):
                if run.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{label}: the pipeline did not start (see {pipeline_log.name})")
                time.sleep(0.05)
            time.sleep(2.0)  # the other stages finish importing
            go.touch()
            if writer.wait(timeout=3600) != 0:
                raise RuntimeError(f"{label}: the board failed (see {board_log.name})")
            run.wait(timeout=3600)
            ended = time.monotonic()
        finally:
            for process in (writer, run):
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)
                    process.wait(timeout=60)
    burst_log = json.loads(log.read_text())
    data, stages = report(out, label)
    bursts = burst_log["bursts"]
    return LiveRun(collected(data), burst_log["start"], bursts[-1][0], ended, bursts, stages, out)


def lag_ms(bursts: list[list[float]], samples: list[list[float]]) -> tuple[float, float, int]:
    """p50 and p99 (ms) over device tasks of (visible − written), matching the k-th written with the k-th seen."""
    written_at = np.array([b[0] for b in bursts])
    ended = np.array([b[2] for b in bursts], np.int64)
    if not samples:
        return float("nan"), float("nan"), 0
    seen_at = np.array([s[0] for s in samples])
    seen = np.maximum.accumulate(np.array([s[1] for s in samples], np.int64))
    tasks = int(min(ended[-1], seen[-1]))
    if tasks <= 0:
        return float("nan"), float("nan"), 0
    k = np.arange(1, tasks + 1)
    lag = seen_at[np.searchsorted(seen, k)] - written_at[np.searchsorted(ended, k)]
    p50, p99 = np.percentile(lag, [50, 99]) * 1000
    return float(p50), float(p99), tasks


def probe_samples(out: Path, probe: str) -> list[list[float]]:
    path = out / f"lag_probe_{probe}.json"
    return json.loads(path.read_text()) if path.exists() else []


# -- table -------------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    header = ["measure", "ours", "baseline (same run)", "ratio", "target", "verdict"]
    cells = [header] + [[r.measure, r.ours, r.baseline, r.ratio, r.target, r.verdict] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + " |"
             for row in cells]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


def stage_table(runs: list[Stages]) -> str:
    stages = sorted({stage for run in runs for stage in run.rss_mb},
                    key=lambda s: ["collect", "decode", "aggregate", "timeline", "summary", "db", "top",
                                   "advice"].index(s) if s in ("collect", "decode", "aggregate", "timeline", "summary",
                                                               "db", "top", "advice") else 99)
    header = ["stage: peak RSS MB / CPU s", *[run.label for run in runs]]
    cells = [header]
    for stage in stages:
        cells.append([stage, *[f"{run.rss_mb[stage]:.0f} / {run.cpu_s[stage]:.1f}" if stage in run.rss_mb else ""
                               for run in runs]])
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + " |"
             for row in cells]
    lines.insert(1, "|" + "|".join("-" * (width + 2) for width in widths) + "|")
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="working folder (default: a temporary one, removed at the end)")
    parser.add_argument("--large", type=int, default=5_000_000, help="records of the imported directory")
    parser.add_argument("--live-records", type=int, default=1_000_000, help="records of the live run at max rate")
    parser.add_argument("--lag-rates", default="10000,100000,300000", help="write rates (records/s) for the lag")
    parser.add_argument("--lag-seconds", type=float, default=8.0, help="how long the board writes at each rate")
    parser.add_argument("--msprof-src", type=Path, default=Path("/tmp/msprof-src"),
                        help="a checkout of github.com/Ascend/msprof (absent: that row is skipped)")
    parser.add_argument("--msprof-records", type=int, default=1_000_000,
                        help="records of the directory for CPU per record and the msprof comparison")
    parser.add_argument("--decode-records", type=int, default=200_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="how long the idle pipeline is measured")
    parser.add_argument("--skip", default="", help="comma-separated parts to leave out: decode,cpu,fixed,import,"
                                                   "live,lag,idle,perfetto,msprof")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test of the benchmark itself")
    parser.add_argument("--markdown", type=Path, help="also write both tables to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.large, args.live_records, args.lag_seconds = 150_000, 100_000, 2.0
        args.msprof_records, args.decode_records, args.lag_rates = 30_000, 20_000, "10000,100000"
        args.idle_seconds = 3.0
    return args


def msprof_rows(args: argparse.Namespace, work: Path, runs: list[Stages],
                with_msprof: bool) -> tuple[list[Row], float | None]:
    """CPU per record of the whole process tree, and import vs msprof's parser, on one directory of
    ``--msprof-records``; returns msprof's records/s too (None: it could not run)."""
    small = simulate(work / "small-board", args.msprof_records)
    wall, records, stages = import_dir(small, work / "small-import")
    runs.append(stages)
    per_record = stages.tree_cpu_s / records * 1e6
    measure = f"import vs msprof parser ({records / 1e6:.2f} M records)"
    msprof = peers.msprof_parse(small, args.msprof_src, work / "msprof") if with_msprof else "skipped"
    cpu_row = Row(f"CPU per record, import ({records / 1e6:.2f} M records, whole process tree)",
                  f"{per_record:.2f} µs ({stages.tree_cpu_s:.1f} CPU s)", "", "", f"≤ {CPU_US_TARGET} µs",
                  miss(per_record, CPU_US_TARGET, higher_is_better=False))
    if isinstance(msprof, str):
        return [cpu_row, Row(measure, rate(records / wall), msprof)], None
    cpu_row.baseline = f"msprof {msprof.cpu_s / records * 1e6:.1f} µs"
    cpu_row.ratio = f"{msprof.cpu_s / stages.tree_cpu_s:.1f}×"
    ratio = msprof.wall_s / wall
    return [cpu_row, Row(measure, f"{rate(records / wall)} ({wall:.1f} s, {stages.tree_cpu_s:.1f} CPU s)",
                         f"msprof {rate(records / msprof.wall_s)} ({msprof.wall_s:.1f} s, {msprof.cpu_s:.1f} CPU s, "
                         f"{msprof.peak_mb:.0f} MB)", f"{ratio:.1f}×", f"≥ {MSPROF_RATIO_TARGET}×",
                         miss(ratio, MSPROF_RATIO_TARGET))], records / msprof.wall_s


def import_rows(args: argparse.Namespace, work: Path, runs: list[Stages], msprof_rate: float | None,
                with_perfetto: bool) -> list[Row]:
    """The large import, and Perfetto loading the timeline it wrote."""
    large = simulate(work / "large-board", args.large)
    wall, records, stages = import_dir(large, work / "large-import")
    runs.append(stages)
    cpu = sum(stages.cpu_s.values())
    rows = [Row(f"end to end, import ({records / 1e6:.2f} M records)",
                f"{rate(records / wall)}; CPU-bound {rate(capacity(records, stages))} ({cpu:.0f} CPU s)",
                f"msprof {rate(msprof_rate)} (row above)" if msprof_rate else "",
                f"{records / wall / msprof_rate:.0f}×" if msprof_rate else "", f"≥ {rate(E2E_TARGET)}",
                miss(records / wall, E2E_TARGET)),
            slow_path_row(stages.slow_rows, records)]
    if not with_perfetto:
        return rows
    print("perfetto …", flush=True)
    trace = peers.merged_timeline(work / "large-import", work / "merged_timeline.json")
    found = peers.perfetto_group_by(trace, work)
    if isinstance(found, str):
        return [*rows, Row("import vs Perfetto load + GROUP BY", f"{wall:.1f} s", found)]
    verdict = "met" if wall < found.total_s else f"missed ({wall / found.total_s:.1f}× its time)"
    return [*rows, Row(f"import vs Perfetto load + GROUP BY ({found.slices / 1e6:.2f} M slices, "
                       f"{found.trace_mb:.0f} MB JSON)", f"{wall:.1f} s ({cpu:.0f} CPU s)",
                       f"Perfetto {found.total_s:.1f} s (load {found.load_s:.1f} s; {found.cpu_s:.0f} CPU s, "
                       f"{found.peak_mb:.0f} MB)", f"{found.total_s / wall:.2f}×", "faster than Perfetto", verdict)]


def live_rows(args: argparse.Namespace, work: Path, runs: list[Stages]) -> list[Row]:
    live = live_run(work, "live-max", args.live_records, 0, probes=False)
    runs.append(live.stats)
    sustained = live.records / (live.pipeline_end - live.first_write)
    written = live.records / max(live.last_write - live.first_write, 1e-9)
    return [Row(f"end to end, live ({live.records / 1e6:.2f} M records, board at max)",
                f"{rate(sustained)}; CPU-bound {rate(capacity(live.records, live.stats))}",
                f"board wrote {rate(written)}", f"{sustained / written:.2f}×", f"≥ {rate(E2E_TARGET)}",
                miss(sustained, E2E_TARGET))]


def lag_rows(args: argparse.Namespace, work: Path, runs: list[Stages]) -> list[Row]:
    rows = []
    for write_rate in (int(r) for r in args.lag_rates.split(",") if r):
        print(f"lag at {write_rate:,} records/s …", flush=True)
        live = live_run(work, f"lag-{write_rate // 1000}k", int(write_rate * args.lag_seconds), write_rate)
        runs.append(live.stats)
        p50, p99, tasks = lag_ms(live.bursts, probe_samples(live.out, "probe_stats"))
        d50, d99, _ = lag_ms(live.bursts, probe_samples(live.out, "probe_decoded"))
        at_target = write_rate == LAG_TARGET_RATE
        rows.append(Row(f"live lag p50 / p99 at {rate(write_rate)} ({tasks:,} tasks)", f"{p50:.0f} / {p99:.0f} ms",
                        f"decoded {d50:.0f} / {d99:.0f} ms", "", f"p99 ≤ {LAG_TARGET_MS} ms" if at_target else "",
                        miss(p99, LAG_TARGET_MS, higher_is_better=False) if at_target else ""))
    return rows


def idle_row(args: argparse.Namespace, work: Path) -> Row:
    """The live stages following a job that writes nothing more: CPU of each, as a share of one core."""
    made, board, out = work / "idle-made", work / "idle-board", work / "idle"
    for path in (made, board, out):
        shutil.rmtree(path, ignore_errors=True)
    prof = simulate(made, 20_000)
    for end_info in prof.rglob("end_info*"):
        end_info.unlink()  # the job is still on: the collector keeps following it
    board.mkdir(parents=True)
    out.mkdir(parents=True)
    config = live_config(out, board, 1.0, probes=False)
    with open(work / "idle.pipeline.log", "w") as log:
        run = subprocess.Popen(pipeline("run", str(config), "--live", "off"), stdout=log, stderr=subprocess.STDOUT,
                               env=env(), cwd=ROOT)
        try:
            time.sleep(6.0)  # the stages are up (the collector waits for a job that starts after the run)
            moved = board / prof.name
            prof.rename(moved)
            os.utime(moved)
            time.sleep(6.0)  # its 20 k records read and through every stage
            before, started = stage_cpu_s(out), time.monotonic()
            time.sleep(args.idle_seconds)
            after, elapsed = stage_cpu_s(out), time.monotonic() - started
        finally:
            run.send_signal(signal.SIGINT)
            run.wait(timeout=60)
    shares = {stage: (after[stage] - before.get(stage, 0.0)) / elapsed * 100 for stage in after}
    if not shares:
        return Row("idle, following a job that writes nothing", "no stage found", "")
    busiest = max(shares, key=lambda stage: shares[stage])
    return Row(f"idle, following a job that writes nothing ({len(shares)} stages, {elapsed:.0f} s)",
               f"{sum(shares.values()):.1f} % of a core", f"busiest: {busiest} {shares[busiest]:.1f} %")


def stage_cpu_s(out: Path) -> dict[str, float]:
    """CPU seconds so far of each stage process of the run writing to ``out`` (Linux /proc)."""
    found: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            if "stage" not in args or "--output" not in args or args[args.index("--output") + 1] != str(out):
                continue
            found[args[args.index("stage") + 1]] = procfs.cpu_s(pid)
        except (OSError, IndexError):
            continue  # ended meanwhile
    return found


def rss_rows(runs: list[Stages]) -> list[Row]:
    """The largest stage of any run; the sum of all stages and each stage's growth from the 1 M to the 5 M import."""
    worst = max((mb, stage, run.label) for run in runs for stage, mb in run.rss_mb.items())
    verdict = "met" if worst[0] < RSS_TARGET_MB else miss(worst[0], RSS_TARGET_MB, higher_is_better=False)
    rows = [Row("peak RSS, largest stage", f"{worst[0]:.0f} MB ({worst[1]}, {worst[2]})", "", "",
                f"< {RSS_TARGET_MB} MB", verdict)]
    small = next((run for run in runs if run.label == "import small-board"), None)
    large = next((run for run in runs if run.label == "import large-board"), None)
    if large is not None:
        total = sum(large.rss_mb.values())
        rows.append(Row("peak RSS, all stages summed (large import)", f"{total:.0f} MB", "", "",
                        f"< {RSS_SUM_TARGET_MB} MB", "met" if total < RSS_SUM_TARGET_MB else
                        miss(total, RSS_SUM_TARGET_MB, higher_is_better=False)))
    if small is not None and large is not None:
        growth = {stage: large.rss_mb[stage] / small.rss_mb[stage] - 1 for stage in large.rss_mb
                  if small.rss_mb.get(stage)}
        stage = max(growth, key=lambda name: growth[name])
        rows.append(Row("peak RSS growth, CPU-row import → large import (largest)",
                        f"{growth[stage] * 100:+.0f} % ({stage})",
                        f"{small.rss_mb[stage]:.0f} → {large.rss_mb[stage]:.0f} MB", "",
                        f"≤ {RSS_GROWTH_TARGET * 100:.0f} %", "met" if growth[stage] <= RSS_GROWTH_TARGET else
                        f"missed ({growth[stage] * 100:.0f} %)"))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="pipeline_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    runs: list[Stages] = []
    started = time.monotonic()
    try:
        if "decode" not in skip:
            print("decode …", flush=True)
            rows += decode_rows(args.decode_records, 3)
        msprof_rate = None
        if "cpu" not in skip:
            print("1 M import and msprof …", flush=True)
            found, msprof_rate = msprof_rows(args, work, runs, "msprof" not in skip)
            rows += found
        if "fixed" not in skip:
            print("fixed cost (tiny import) …", flush=True)
            rows.append(fixed_cost_row(work, runs))
        if "import" not in skip:
            print("large import …", flush=True)
            rows += import_rows(args, work, runs, msprof_rate, "perfetto" not in skip)
        if "live" not in skip:
            print("live at max …", flush=True)
            rows += live_rows(args, work, runs)
        if "lag" not in skip:
            rows += lag_rows(args, work, runs)
        if "idle" not in skip:
            print("idle …", flush=True)
            rows.append(idle_row(args, work))
        if runs:
            rows += rss_rows(runs)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    text = (f"pipeline benchmark, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f}, {time.monotonic() - started:.0f} s\n\n{table(rows)}\n\n"
            f"{stage_table(runs)}\n")
    print("\n" + text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
