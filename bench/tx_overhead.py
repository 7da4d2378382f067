"""Cost of pipeline.tx annotations: ns per call with profiling off and on, against an empty function call
measured in the same run (these machines are noisy: read the ratios, not the absolutes).

    python bench/tx_overhead.py [--calls 200000] [--repeat 5]

"on" writes every record into a PROF directory in a temporary folder, as a profiled app does (one
os.write of 256 bytes per mark; two stamps per push/pop or range pair, one record each); "socket" sends
them to a ZeroMQ PULL socket instead, as to a collector's tx_endpoint (a thread here drains it).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import zmq

from pipeline import tx


def _empty(stamp: object) -> int:
    return 0


def _per_call_ns(call: Callable[[], object], calls: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter_ns() - started) / calls)
    return best


def _loop_ns(calls: int, repeat: int) -> float:
    return _per_call_ns(lambda: None, calls, repeat)


def _fake_prof_dir(root: Path) -> None:
    host = root / "PROF_000001_20240101000000000_BENCHABCDEFGHIJK" / "host"
    host.mkdir(parents=True)
    (host / "info.json").write_text(json.dumps({"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": []}))
    (host / "host_start.log").write_text("[Host]\nclock_monotonic_raw: 1\ncntvct: 1\n")


def _push_pop(stamp: tx.Stamp) -> None:
    tx.push(stamp)
    tx.pop()


def _range(stamp: tx.Stamp) -> None:
    range_id, _ = tx.range_start(stamp)
    tx.range_stop(range_id)


def _with_range() -> None:
    with tx.range("bench"):
        pass


class _Drain:
    """A PULL socket on an ipc endpoint whose thread counts the records that arrive."""

    def __init__(self, folder: Path) -> None:
        self.endpoint = f"ipc://{folder}/tx.ipc"
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.sock = self.context.socket(zmq.PULL)
        self.sock.bind(self.endpoint)
        self.records = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping or self.sock.poll(200):
            if self.sock.poll(50):
                self.records += len(self.sock.recv()) // tx.RECORD.size

    def close(self) -> int:
        self.stopping = True
        self.thread.join()
        self.sock.close(0)
        self.context.term()
        return self.records


def _measure_on(cases: list[tuple[str, Callable[[], object]]], label: str, calls: int, repeat: int, loop: float,
                folder: str, endpoint: str | None) -> list[tuple[str, float]]:
    tx.init(folder, endpoint=endpoint)
    tx.flush()
    rows = [(f"{label} {name}", _per_call_ns(call, calls, repeat) - loop) for name, call in cases]
    tx.finalize()
    return rows


def measure(calls: int, repeat: int) -> list[tuple[str, float]]:
    stamp = tx.create_stamp()
    tx.set_stamp_trace_message(stamp, "bench")
    cases: list[tuple[str, Callable[[], object]]] = [
        ("mark", lambda: tx.mark(stamp)),
        ("push+pop", lambda: _push_pop(stamp)),
        ("range_start+range_stop", lambda: _range(stamp)),
        ("with tx.range(...)", _with_range),
    ]
    loop = _loop_ns(calls, repeat)
    rows = [("loop overhead (subtracted below)", loop),
            ("empty function call (baseline)", _per_call_ns(lambda: _empty(stamp), calls, repeat) - loop)]
    tx.finalize()
    for name, call in cases:
        rows.append((f"off:    {name}", _per_call_ns(call, calls, repeat) - loop))
    on_calls = max(1, calls // 10)
    expected = on_calls * repeat * len(cases)
    with tempfile.TemporaryDirectory() as folder:
        _fake_prof_dir(Path(folder))
        rows += _measure_on(cases, "on:    ", on_calls, repeat, loop, folder, None)
        written = sum(f.stat().st_size for f in Path(folder).glob("PROF_*/host/data/*msproftx*")) // tx.RECORD.size
        rows.append((f"records written (expected {expected})", float(written)))
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # ipc paths are limited to 107 bytes
        _fake_prof_dir(Path(folder))
        drain = _Drain(Path(folder))
        rows += _measure_on(cases, "socket:", on_calls, repeat, loop, folder, drain.endpoint)
        rows.append((f"records received (expected {expected})", float(drain.close())))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = measure(args.calls, args.repeat)
    baseline = rows[1][1]
    print(f"{'case':<40} {'ns/call':>9} {'× empty call':>13}")
    for name, ns in rows:
        plain = name.startswith(("loop", "records"))
        ratio = f"{ns / baseline:>13.1f}" if baseline > 0 and not plain else f"{'':>13}"
        print(f"{name:<40} {ns:>9.0f} {ratio}")


if __name__ == "__main__":
    main()
