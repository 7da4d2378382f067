"""Coverage-guided fuzzing with atheris (optional: `pip install atheris`; it ships wheels for CPython ≤ 3.11
on Linux x86-64), for a fixed number of runs per target, beside the hypothesis fuzzers in tests/fuzz.

    python bench/fuzz_atheris.py [--runs 20000] [--seed 1] [--target framing|decoder|wire|all]

Targets, each fed the bytes atheris generates:
- framing: the first byte picks a stream kind; the rest arrives in two reads, then a final one. Every byte
  must come back as a record or as garbage, and the carry between reads stays under a record / a line.
- decoder: the first byte picks a kind; the rest is framed as the collector would and decoded by a
  DecoderStage that knows a 910 board's control files; records in must equal decoded + rejected.
- wire: two frames cut from the bytes go to pipeline.wire.decode: a message or a WireError, nothing else.

An uncaught exception is a finding: atheris prints the input and writes it to crash-<sha1> in the current
folder. Exit status 0 means every run passed. Prints how many inputs each target tried
(`fuzz: atheris <target> tried N inputs`).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    import atheris  # noqa: E402
except ImportError:
    sys.exit("fuzz_atheris: atheris is not installed (pip install atheris); the hypothesis fuzzers are in tests/fuzz")

with atheris.instrument_imports(include=["pipeline", "stages"]):  # this project's code only: fast start
    from pipeline import wire  # noqa: E402
    from pipeline.stage import Batch, StageContext  # noqa: E402
    from stages import framing  # noqa: E402
    from stages.decoder import DecoderStage, checks  # noqa: E402

KINDS = sorted(checks.RAW_KINDS)
CONTROL = {  # a 910 board (platform 1) with host clocks, as the collector ships them
    "host/info.json": '{"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": []}',
    "host/start_info": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "host/host_start.log": "clock_monotonic_raw: 5000000000\ncntvct: 5000000000\n",
    "device_0/info.json.0": '{"platform_version": "1", "DeviceInfo": [{"hwts_frequency": "100", '
                            '"ai_core_num": 32, "aic_frequency": "1000"}]}',
    "device_0/start_info.0": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "device_0/dev_start.log.0": "clock_monotonic_raw: 1\ncntvct: 1000\n",
    "device_0/host_start.log.0": "clock_monotonic_raw: 6000000000\ncntvct: 6000000000\n",
    "device_0/sample.json": '{"ai_core_metrics": "PipeUtilization", "ai_core_profiling_events": "0x8,0xa"}',
}
FOLDER = Path(tempfile.mkdtemp(prefix="fuzz-atheris-"))


def _framed_in_reads(kind_name: str, data: bytes, cut: int) -> list[framing.Framed]:
    kind = checks.RAW_KINDS[kind_name]
    calls, buffer = [], b""
    for piece, final in ((data[:cut], False), (data[cut:], True)):
        buffer += piece
        while buffer:
            framed = framing.frame(kind, buffer, final)
            calls.append(framed)
            buffer = buffer[framed.consumed:]
            if not framed.consumed:
                break
        limit = framing.MAX_LINE_BYTES if kind.framing in ("text", "nul_text") else max(kind.record_size, 112)
        assert len(buffer) <= limit, (kind_name, len(buffer))
    assert buffer == b""
    return calls


def fuzz_framing(data: bytes) -> None:
    if len(data) < 2:
        return
    kind_name = KINDS[data[0] % len(KINDS)]
    body = data[2:]
    calls = _framed_in_reads(kind_name, body, data[1] * len(body) // 256)
    if checks.RAW_KINDS[kind_name].framing in ("fixed", "tlv"):
        total = sum(len(c.records) + sum(map(len, c.garbage)) for c in calls)
        assert total == len(body), (kind_name, total, len(body))


def fuzz_decoder(data: bytes) -> None:
    if len(data) < 2:
        return
    kind_name = KINDS[data[0] % len(KINDS)]
    ctx = StageContext(stage_id="decode", run_id="atheris", output_dir=FOLDER)
    decoder = DecoderStage(DecoderStage.Config.model_validate({}), ctx)
    for path, text in CONTROL.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    for framed in _framed_in_reads(kind_name, data[2:], data[1] * len(data[2:]) // 256):
        if framed.count:
            meta: dict[str, Any] = {"kind": kind_name, "stream": kind_name, "device": 0}
            for out in decoder.process(Batch("raw", framed.count, meta, framed.records)):
                wire.encode_batch("decode", 0, out)
    list(decoder.finish())
    figures = decoder.accounting()
    assert figures["records_in"] == figures["decoded"] + figures["rejected"], figures


def fuzz_wire(data: bytes) -> None:
    cut = data[0] * len(data) // 256 if data else 0
    try:
        message = wire.decode([data[1:cut + 1], data[cut + 1:]])
    except wire.WireError:
        return
    assert isinstance(message.producer, str) and message.seq >= 0


TARGETS = {"framing": fuzz_framing, "decoder": fuzz_decoder, "wire": fuzz_wire}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000, help="inputs per target (default 20000)")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer seed: the same inputs every run (0: random)")
    parser.add_argument("--target", choices=(*TARGETS, "all"), default="all")
    args = parser.parse_args()
    names = list(TARGETS) if args.target == "all" else [args.target]
    for name in names:
        # atheris.Fuzz() ends the process when its runs are done: each target runs in a child of its own,
        # whose libFuzzer log ("Done N runs …") says how many inputs it tried.
        child = subprocess.run([sys.executable, __file__, "--child", name, str(args.runs), str(args.seed)],
                               stderr=subprocess.PIPE, text=True)
        done = re.search(r"^Done (\d+) runs", child.stderr, flags=re.MULTILINE)
        print(f"fuzz: atheris {name} tried {done.group(1) if done else '?'} inputs", flush=True)
        if child.returncode != 0:
            print(child.stderr[-4000:], file=sys.stderr)
            print(f"fuzz_atheris: {name} found a failing input (exit {child.returncode})")
            return child.returncode
    return 0


def child(name: str, runs: int, seed: int) -> None:
    atheris.Setup([sys.argv[0], f"-runs={runs}", f"-seed={seed}", "-max_len=4096"], TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main())
