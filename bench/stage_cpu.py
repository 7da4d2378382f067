"""Each stage alone, in this process: CPU seconds of the decoder, aggregator and every default sink on the same
simulated directory (no sockets, no other processes), best of ``--repeat``; ``--profile STAGE`` prints where
that stage's time goes (cProfile, by own time).

    PYTHONPATH=. python bench/stage_cpu.py --iterations 300 --repeat 3
    PYTHONPATH=. python bench/stage_cpu.py --iterations 300 --profile timeline

The figures are what a stage's own code costs per record, without start-up or transport: compare a branch
with its base in the same minutes (the machine is shared).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.stage import Batch, Sink, StageContext
from stages.aggregator import AggregatorStage
from stages.collector import CollectorStage
from stages.decoder import DecoderStage
from stages.simulator.writer import simulate
from stages.sinks.advice import AdviceSink
from stages.sinks.sqlite import SqliteSink
from stages.sinks.summary import SummarySink
from stages.sinks.timeline import TimelineSink

SINKS: dict[str, type[Sink]] = {"timeline": TimelineSink, "summary": SummarySink, "db": SqliteSink,
                                "advice": AdviceSink}


def _ctx(stage: str, out: Path) -> StageContext:
    return StageContext(stage_id=stage, run_id="bench", output_dir=out, aside_dir=out / "rejected")


def _collect(prof: Path, out: Path) -> list[Batch]:
    collector = CollectorStage(CollectorStage.Config(path=str(prof), follow=False), _ctx("collect", out))
    return [batch for batch in collector.batches() if batch is not None]


def _decode(raw: list[Batch], out: Path) -> list[Batch]:
    decoder = DecoderStage(DecoderStage.Config(), _ctx("decode", out))
    decoded = [batch for chunk in raw for batch in decoder.process(chunk)]
    return decoded + list(decoder.finish())


def _aggregate(decoded: list[Batch], out: Path) -> list[Batch]:
    aggregator = AggregatorStage(AggregatorStage.Config(), _ctx("aggregate", out))
    emitted = [batch for batch in decoded for batch in aggregator.process(batch)]
    return emitted + list(aggregator.finish())


def _sink(name: str, batches: list[Batch], out: Path) -> None:
    sink = SINKS[name](SINKS[name].Config(), _ctx(name, out))
    sink.open()
    for batch in batches:
        sink.write_batch(batch)
    sink.close()


def _cpu(work: Callable[[], Any], repeat: int, profile: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        profiler = cProfile.Profile() if profile else None
        started = time.process_time()
        if profiler is not None:
            profiler.runcall(work)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        else:
            work()
        best = min(best, time.process_time() - started)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300, help="images of the simulated 910 run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", choices=["decode", "aggregate", *SINKS], help="print this stage's profile")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-stages-"))
    try:
        prof = simulate(work / "board", chip="cloud", iterations=args.iterations, rate="max", seed=0)
        raw = _collect(prof, work / "collect")
        records = sum(batch.count for batch in raw)
        decoded = _decode(raw, work / "decode")
        emitted = _aggregate(decoded, work / "aggregate")
        print(f"{records:,} records, {len(emitted):,} aggregator batches ({args.iterations} images, cloud)")
        stages: dict[str, Callable[[Path], Any]] = {
            "decode": lambda out: _decode(raw, out), "aggregate": lambda out: _aggregate(decoded, out),
            **{name: (lambda out, name=name: _sink(name, emitted, out)) for name in SINKS}}
        for name, run in stages.items():
            if args.profile and name != args.profile:
                continue
            folders = iter(work / f"{name}-{attempt}" for attempt in range(args.repeat))
            seconds = _cpu(lambda run=run, folders=folders: run(next(folders)), 1 if args.profile else args.repeat,
                           bool(args.profile))
            print(f"{name:10s} {seconds:7.2f} CPU s  {seconds / records * 1e6:6.2f} µs/record", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
