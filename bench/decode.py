"""Decoder throughput per record kind: the numpy decoder vs a pure-Python baseline, measured in the same run
(these machines are noisy: read the ratio, not the absolute).

    python bench/decode.py [--records 200000] [--chunk 1024] [--repeat 3] [--kinds hwts,ts_track]

Both sides get the same chunks: ``--chunk`` records each, the collector's batch size (``run.batch.max_records``,
1024; its 1 MiB ``max_bytes`` only bites for records over 1 KiB). The baseline is what a careful pure-Python
parser does (bench/decode_baseline.py): ``struct.iter_unpack``, one tuple per output record with the same fields,
filters and integer time-base conversion. Before timing, both sides' outputs are compared field by field.
Decoder set-up (control files) is outside the timed region; the rolling counters carry across the chunks.

Each kind is measured in a process of its own, so that every kind, in any order, starts from the same heap: the
pure-Python baseline's speed depends on the heap it runs on (with several kinds in one process, the ts_track
baseline ran 2.1 M records/s right after api_event and 1.7 M records/s first). In that process each side runs once
untimed (warm-up), then the two sides take turns, ``--repeat`` times each; the best time of each counts.
``--in-process`` measures every kind in this process instead (the older way, for comparison).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # decode_baseline
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's stages, not an installed copy

import decode_baseline as baseline  # noqa: E402

from pipeline.stage import Batch, StageContext  # noqa: E402
from stages.decoder import DecoderStage, records  # noqa: E402
from stages.decoder.timebase import Clock  # noqa: E402
from stages.formats import host_extra, raw  # noqa: E402

# Control files for one host and one 910 device (100 MHz syscnt), as a real PROF directory has them.
CONTROL = {
    "host/info.json": '{"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": [], "devices": "64"}',
    "host/start_info": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "host/host_start.log": "clock_monotonic_raw: 5000000000\ncntvct: 5000000000\n",
    "device_0/info.json.0": '{"platform_version": "1", "DeviceInfo": [{"hwts_frequency": "100", '
                            '"ai_core_num": 32, "aic_frequency": "1000"}]}',
    "device_0/start_info.0": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "device_0/dev_start.log.0": "clock_monotonic_raw: 1\ncntvct: 1000\n",
    "device_0/host_start.log.0": "clock_monotonic_raw: 6000000000\ncntvct: 6000000000\n",
    "device_0/sample.json": '{"ai_core_metrics": "PipeUtilization", '
                            '"ai_core_profiling_events": "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55"}',
}
DEVICE = 0
EVENT_EVERY, FLIP_EVERY = 64, 1000  # api_event: one MsprofEvent per 64 records; ts_track: one flip per 1000

# stream kind → raw layout (device kinds decode on DEVICE; the others are host kinds)
LAYOUTS: dict[str, np.dtype] = {
    "api_event": raw.API_EVENT, "task_track": raw.TASK_TRACK, "node_basic_info": raw.NODE_BASIC_INFO,
    "tensor_info": raw.TENSOR_INFO, **host_extra.LAYOUTS,
    "hwts": raw.HWTS_LOG, "aicore": raw.AICORE_PMU, "ts_track": raw.TS_STEP_TRACE,
    "stars_soc": raw.ACSQ_LOG, "ffts_profile": raw.FFTS_PMU,
}
DEVICE_KINDS = frozenset({"hwts", "aicore", "ts_track", "stars_soc", "ffts_profile"})


def make_records(kind: str, n: int) -> bytes:
    """Every field random, then the fields the decoder looks at set as a run writes them."""
    dtype = LAYOUTS[kind]
    rng = np.random.default_rng(0)
    arr = np.zeros(n, dtype)
    for name in dtype.names or ():
        field = arr[name]
        if field.dtype.kind in "ui":
            info = np.iinfo(field.dtype)
            field[...] = rng.integers(0, int(info.max), field.shape, dtype=np.int64, endpoint=True) \
                if info.max < 2**63 else rng.integers(0, 2**64 - 1, field.shape, dtype=np.uint64, endpoint=True)
        elif field.dtype.kind == "f":
            field[...] = rng.random(field.shape)
    ticks = 5_000_000_000 + np.cumsum(rng.integers(1, 1000, n))
    counter = np.arange(n) % 16
    if kind == "api_event":
        arr["level"] = raw.LEVEL_NODE  # a report level: the decoder rejects any other
        arr["begin"] = ticks
        arr["end"] = np.where(np.arange(n) % EVENT_EVERY == 0, raw.EVENT_FLAG, ticks + 100)
    elif kind == "hwts":
        arr["head"] = (counter << 4) | (np.arange(n) % 2)  # task start / end
        arr["syscnt"] = ticks
    elif kind == "aicore":
        arr["head"] = (counter << 4) | (arr["head"] & 0x0F)
    elif kind == "ts_track":
        arr["tag"] = np.where(np.arange(n) % FLIP_EVERY == FLIP_EVERY - 1, raw.TS_TAG_TASK_FLIP,
                              raw.TS_TAG_STEP_TRACE)
        arr["buf_size"] = raw.TS_TRACK_SIZE
        arr["timestamp"] = ticks
    elif kind == "stars_soc":
        arr["head"] = (np.arange(n) % 2) | (counter << 6) | ((arr["head"] >> 10) << 10)  # start / end, any sqe type
        arr["timestamp"] = ticks
    elif kind == "ffts_profile":
        arr["head"] = raw.CONTEXT_PMU | (counter << 6)
        ffts_types = np.array([raw.FFTS_TYPE_AIC, raw.FFTS_TYPE_AIV, raw.FFTS_TYPE_PLUS, raw.FFTS_TYPE_MIX_AIC])
        arr["ffts"] = (rng.choice(ffts_types, n) << 5) | (arr["ffts"] & 0x1F)
        arr["start_cnt"], arr["end_cnt"] = ticks, ticks + 500
    else:  # host records
        arr["timestamp"] = ticks
    return arr.tobytes()


def new_decoder(folder: Path) -> DecoderStage:
    ctx = StageContext(stage_id="decode", run_id="bench", output_dir=folder, aside_dir=folder / "rejected")
    decoder = DecoderStage(DecoderStage.Config.model_validate({}), ctx)
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    return decoder


def raw_batches(kind: str, body: bytes, chunk: int) -> list[Batch]:
    """What the collector sends: one batch per ``chunk`` records."""
    size = LAYOUTS[kind].itemsize
    device = DEVICE if kind in DEVICE_KINDS else None
    return [Batch("raw", len(body[i:i + chunk * size]) // size,
                  {"kind": kind, "stream": kind, "device": device, "size": size}, body[i:i + chunk * size])
            for i in range(0, len(body), chunk * size)]


def numpy_decode(decoder: DecoderStage, batches: list[Batch]) -> list[Batch]:
    return [out for batch in batches for out in decoder.process(batch)]


def clock_of(kind: str, decoder: DecoderStage) -> Clock:
    clock = decoder.timebase.device_clock(DEVICE) if kind in DEVICE_KINDS else decoder.timebase.host_clock()
    assert clock is not None
    return clock


def differences(kind: str, ours: list[Batch], theirs: dict[str, list[tuple]]) -> list[str]:
    """Where the baseline's rows and the decoder's records disagree (nothing: they decode the same)."""
    decoded: dict[str, list[np.ndarray]] = {}
    for batch in ours:
        decoded.setdefault(batch.kind, []).append(records.from_batch(batch))
    problems = [f"{kind}: output kinds {sorted(decoded)} vs baseline {sorted(k for k, v in theirs.items() if v)}"] \
        if set(decoded) != {k for k, v in theirs.items() if v} else []
    for out_kind, parts in decoded.items():
        arr, rows = np.concatenate(parts), theirs.get(out_kind, [])
        if len(arr) != len(rows):
            problems.append(f"{kind}/{out_kind}: {len(arr)} records vs {len(rows)} baseline rows")
            continue
        for j, name in enumerate(arr.dtype.names or ()):
            column = np.array([row[j] for row in rows], dtype=arr.dtype[name].base).reshape(arr[name].shape)
            if not np.array_equal(column, arr[name]):
                problems.append(f"{kind}/{out_kind}.{name}: baseline differs")
    return problems


def best_of(repeat: int, setup: Callable[[], Any], work: Callable[[Any], object]) -> float:
    """Shortest CPU time of ``work(setup())`` over ``repeat`` runs (set-up not timed). CPU time, not wall time:
    on a shared machine, time spent waiting for a core is not the decoder's."""
    best = float("inf")
    for _ in range(repeat):
        state = setup()
        start = time.process_time()
        work(state)
        best = min(best, time.process_time() - start)
    return best


def measure(kind: str, n: int, chunk: int, repeat: int, folder: Path) -> tuple[float, float]:
    """Records per second of (decoder, baseline); SystemExit when their outputs differ."""
    batches = raw_batches(kind, make_records(kind, n), chunk)
    bodies = [batch.body for batch in batches]
    clock = clock_of(kind, new_decoder(folder))
    parse = baseline.PARSERS[kind]
    problems = differences(kind, numpy_decode(new_decoder(folder), batches[:4]), parse(bodies[:4], clock, DEVICE))
    if problems:
        raise SystemExit("\n".join(problems))
    fast = partial(best_of, 1, partial(new_decoder, folder), partial(numpy_decode, batches=batches))
    slow = partial(best_of, 1, lambda: None, lambda _: parse(bodies, clock, DEVICE))
    fast(), slow()  # warm-up, untimed
    fast_s = slow_s = float("inf")
    for _ in range(repeat):  # in turns: both sides see the same machine and the same heap
        fast_s, slow_s = min(fast_s, fast()), min(slow_s, slow())
    return n / fast_s, n / slow_s


def measure_apart(kind: str, args: argparse.Namespace) -> tuple[float, float]:
    """``measure`` in a fresh process of its own (its result as the last line it prints)."""
    command = [sys.executable, __file__, "--one", kind, "--records", str(args.records), "--chunk", str(args.chunk),
               "--repeat", str(args.repeat)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{kind}: {(result.stderr or result.stdout).strip()}")
    fast, slow = result.stdout.split()[-2:]
    return float(fast), float(slow)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=1024, help="records per raw chunk (the collector's batch size)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(LAYOUTS), help="comma-separated stream kinds")
    parser.add_argument("--in-process", action="store_true", help="every kind in this process (not one each)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure this kind here, print the two rates
    args = parser.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory() as folder:
            print(*measure(args.one, args.records, args.chunk, args.repeat, Path(folder)))
        return 0
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in LAYOUTS]
    if unknown:
        print(f"unknown kinds: {', '.join(unknown)} (known: {', '.join(LAYOUTS)})", file=sys.stderr)
        return 2
    where = "all in this process" if args.in_process else "each kind in a fresh process"
    print(f"decode benchmark: {args.records:,} records per kind, chunks of {args.chunk:,}, best of {args.repeat}, "
          f"{where}")
    print(f"{'kind':<20} {'numpy rec/s':>14} {'baseline rec/s':>15} {'ratio':>7}  target ≥3 M/s and ≥10×")
    with tempfile.TemporaryDirectory() as folder:
        for kind in kinds:
            fast, slow = measure(kind, args.records, args.chunk, args.repeat, Path(folder)) if args.in_process \
                else measure_apart(kind, args)
            verdict = "met" if fast >= 3e6 and fast >= 10 * slow else "missed"
            print(f"{kind:<20} {fast:>14,.0f} {slow:>15,.0f} {fast / slow:>6.1f}×  {verdict}", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
