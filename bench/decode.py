"""Decoder throughput per record kind: the numpy decoder vs a struct.iter_unpack + Python-loop
baseline, measured in the same run (these machines are noisy: read the ratio, not the absolute).

    python bench/decode.py [--records 200000] [--chunk 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pipeline.stage import Batch, StageContext
from stages.decoder import DecoderStage
from stages.formats import raw

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

# kind → (dtype, struct format of the same bytes, device id or None, field filler)
KINDS: dict[str, tuple[np.dtype, str, int | None]] = {
    "api_event": (raw.API_EVENT, "<HHIIIQQQ", None),
    "task_track": (raw.TASK_TRACK, "<HHIIIQHHHHQQHH12x", None),
    "node_basic_info": (raw.NODE_BASIC_INFO, "<HHIIIQQIQIIB11x", None),
    "tensor_info": (raw.TENSOR_INFO, "<HHIIIQQI55I", None),
    "hwts": (raw.HWTS_LOG, "<BBHHHQI44x", 0),
    "aicore": (raw.AICORE_PMU, "<BBHHHIIQQ8QI28x", 0),
    "ts_track": (raw.TS_STEP_TRACE, "<BBHIQQQHHHH", 0),
}


def make_records(kind: str, n: int) -> bytes:
    dtype, _, _ = KINDS[kind]
    rng = np.random.default_rng(0)
    arr = np.zeros(n, dtype)
    names = dtype.names or ()
    if "magic" in names:
        arr["magic"] = raw.HOST_MAGIC
        arr["level"] = raw.LEVEL_NODE
    if "marker" in names:
        arr["marker"] = raw.HWTS_MARKER
    for field in ("timestamp", "begin", "syscnt"):
        if field in names:
            arr[field] = 5_000_000_000 + np.cumsum(rng.integers(1, 1000, n))
    if "end" in names:
        arr["end"] = arr["begin"] + 100
    if "head" in names:
        arr["head"] = np.arange(n) % 2  # task start / end
    if kind == "ts_track":
        arr["tag"] = raw.TS_TAG_STEP_TRACE
        arr["buf_size"] = raw.TS_TRACK_SIZE
    if "task_id" in names:
        arr["task_id"] = np.arange(n) % 65536
    return arr.tobytes()


def new_decoder(folder: Path) -> DecoderStage:
    ctx = StageContext(stage_id="decode", run_id="bench", output_dir=folder, aside_dir=folder / "rejected")
    decoder = DecoderStage(DecoderStage.Config(), ctx)
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    return decoder


def numpy_decode(kind: str, body: bytes, chunk: int, folder: Path) -> Callable[[], int]:
    dtype, _, device = KINDS[kind]
    size = dtype.itemsize
    batches = [Batch("raw", len(body[i:i + chunk * size]) // size,
                     {"kind": kind, "stream": kind, "device": device, "size": size}, body[i:i + chunk * size])
               for i in range(0, len(body), chunk * size)]

    def run() -> int:
        decoder = new_decoder(folder)
        out = 0
        for batch in batches:
            out += sum(b.count for b in decoder.process(batch))
        return out

    return run


def baseline_decode(kind: str, body: bytes) -> Callable[[], int]:
    """What a straightforward parser does: unpack each record, convert its time, build a dict."""
    _, fmt, _ = KINDS[kind]
    unpack = struct.Struct(fmt)
    offset_ns = 1_700_000_000_000_000_000 - 5_000_000_000

    def run() -> int:
        out = []
        for fields in unpack.iter_unpack(body):
            record = dict(enumerate(fields))
            record["ts_ns"] = fields[5] + offset_ns if len(fields) > 5 else 0
            out.append(record)
        return len(out)

    return run


def best_of(repeat: int, work: Callable[[], int]) -> tuple[float, int]:
    best, count = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        count = work()
        best = min(best, time.perf_counter() - start)
    return best, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--chunk", type=int, default=1024, help="records per raw chunk (the pipeline's batch size)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"decode benchmark: {args.records:,} records per kind, chunks of {args.chunk:,}, best of {args.repeat}")
    print(f"{'kind':<16} {'numpy rec/s':>14} {'baseline rec/s':>15} {'ratio':>7}  target ≥3 M/s and ≥10×")
    with tempfile.TemporaryDirectory() as folder:
        for kind in KINDS:
            body = make_records(kind, args.records)
            fast_s, decoded = best_of(args.repeat, numpy_decode(kind, body, args.chunk, Path(folder)))
            slow_s, parsed = best_of(args.repeat, baseline_decode(kind, body))
            if decoded != args.records or parsed != args.records:
                print(f"{kind}: decoded {decoded}, baseline {parsed}, expected {args.records}", file=sys.stderr)
                return 1
            fast, slow = args.records / fast_s, args.records / slow_s
            verdict = "met" if fast >= 3e6 and fast >= 10 * slow else "missed"
            print(f"{kind:<16} {fast:>14,.0f} {slow:>15,.0f} {fast / slow:>6.1f}×  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
