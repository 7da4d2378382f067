"""`pipeline simulate --subscribe FIFO`: the board side of aclprofModelSubscribe.

Runs the simulated workload (workload.py) and, for every op execution, writes a ProfOpDesc record into the
FIFO (made when absent) and, just before it, the op's names to the resolver file as the board-side agent
would after calling pyACL's getters (stages/subscription/resolver.py). Records go out in writes of random
sizes, so a reader sees records split across reads. ``corrupt_every`` N spoils the signature of every N-th
record (a reader must reject those). The truth file gives the op statistics an exact reader finds:
per device, op type and core type, the count, total, min and max duration of the records with a good
signature.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np

from pipeline.errors import UserError
from stages.formats import op_desc
from stages.simulator.run import records_per_second
from stages.simulator.workload import MODEL_ID, Chip, Model, OpTable, sample_durations_us

FIRST_OP_INDEX = 1000  # op_index is the producer's table key: any number, used once
OP_GAP_NS = 2_000  # between one op's end and the next one's start
ITERATION_GAP_NS = 500_000
MAX_WRITE = 1500  # writes are 1 … MAX_WRITE bytes


@dataclass
class SubscriptionTruth:
    op_desc_size: int
    records_written: int = 0
    corrupted: int = 0
    ops: dict[tuple[int, str, str], list[int]] = field(default_factory=dict)  # → [count, total, min, max]

    def add(self, device: int, op_type: str, core: str, duration: int) -> None:
        entry = self.ops.get((device, op_type, core))
        if entry is None:
            self.ops[(device, op_type, core)] = [1, duration, duration, duration]
            return
        entry[0] += 1
        entry[1] += duration
        entry[2] = min(entry[2], duration)
        entry[3] = max(entry[3], duration)

    def to_dict(self) -> dict[str, Any]:
        return {"op_desc_size": self.op_desc_size, "records_written": self.records_written,
                "corrupted": self.corrupted,
                "op_statistic": [{"device_id": d, "op_type": t, "core_type": c, "count": n, "total_ns": total,
                                  "min_ns": low, "max_ns": high}
                                 for (d, t, c), (n, total, low, high) in sorted(self.ops.items())]}


def simulate_subscription(fifo: Path, resolver: Path | None = None, truth_path: Path | None = None, *,
                          chip: Chip = "mini", model: Model = "face_mask_ssd", iterations: int = 200,
                          seed: int = 0, op_desc_size: int = 80, device_id: int = 0, corrupt_every: int = 0,
                          rate: str = "max") -> SubscriptionTruth:
    """Write ``iterations`` executions of the model into ``fifo``; returns (and writes) the truth."""
    if op_desc_size not in op_desc.LAYOUTS:
        raise UserError(f"--op-desc-size must be 72 or 80, not {op_desc_size}")
    per_second = records_per_second(rate) if rate != "realtime" else None
    resolver = resolver or Path(f"{fifo}.ndjson")
    truth_path = truth_path or Path(f"{fifo}.truth.json")
    _make_fifo(fifo)
    table = OpTable.build(chip, model)
    rng = np.random.default_rng(seed)
    truth = SubscriptionTruth(op_desc_size)
    layout = op_desc.LAYOUTS[op_desc_size]
    cores: list[str] = [op.core for op in table.ops]
    flags = np.where(table.contexts > 0, op_desc.FLAG_SUBGRAPH, op_desc.FLAG_OP)
    clock_ns = time.monotonic_ns()
    started = time.monotonic()
    with open(resolver, "w", encoding="utf-8") as names, _open_writer(fifo) as pipe:
        names.write(json.dumps({"op_desc_size": op_desc_size}) + "\n")
        names.flush()
        for _ in range(iterations):
            durations = np.rint(sample_durations_us(table, rng) * 1000).astype(np.int64)
            recs = np.zeros(len(table), layout)
            first = FIRST_OP_INDEX + truth.records_written
            recs["op_index"] = np.arange(first, first + len(table))
            starts = clock_ns + np.concatenate(([0], np.cumsum(durations + OP_GAP_NS)[:-1]))
            recs["start"], recs["end"], recs["duration"] = starts, starts + durations, durations
            recs["execution_time"] = np.where(table.is_aicpu, 0, durations)
            recs["cube_fops"] = np.where(table.is_aicpu | table.is_aiv, 0, durations * table.block_dim)
            recs["model_id"], recs["flag"], recs["thread_id"] = MODEL_ID, flags, os.getpid() & 0xFFFFFFFF
            if op_desc_size == 80:
                recs["dev_id"] = device_id
            op_desc.sign(recs)
            numbers = np.arange(truth.records_written + 1, truth.records_written + len(table) + 1)
            spoiled = numbers % corrupt_every == 0 if corrupt_every else np.zeros(len(table), bool)
            recs["signature"][spoiled] ^= 0x5A5A5A5A
            _write_names(names, table, recs, cores)
            _write_split(pipe, recs.tobytes(), rng)
            for i in np.flatnonzero(~spoiled).tolist():
                truth.add(device_id, table.ops[i].op_type, cores[i], int(durations[i]))
            truth.records_written += len(table)
            truth.corrupted += int(spoiled.sum())
            clock_ns = int(starts[-1] + durations[-1]) + ITERATION_GAP_NS
            _pace(started, truth.records_written, per_second, (clock_ns - time.monotonic_ns()) / 1e9
                  if rate == "realtime" else 0.0)
    tmp = truth_path.with_name(truth_path.name + ".tmp")
    tmp.write_text(json.dumps(truth.to_dict(), indent=1) + "\n")
    os.replace(tmp, truth_path)
    return truth


def _make_fifo(fifo: Path) -> None:
    fifo.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkfifo(fifo, 0o600)
    except FileExistsError:
        if not stat.S_ISFIFO(fifo.stat().st_mode):
            raise UserError(f"--subscribe: {fifo} exists and is not a FIFO",
                            "name a new path (it is made) or an existing FIFO") from None


def _open_writer(fifo: Path) -> BinaryIO:
    """Opening a FIFO for writing waits for its reader, as a board-side forwarder would."""
    return open(fifo, "wb", buffering=0)


def _write_names(names: TextIO, table: OpTable, recs: np.ndarray, cores: list[str]) -> None:
    lines = [json.dumps({"op_index": index, "op_type": op.op_type, "op_name": op.name, "core_type": core})
             for index, op, core in zip(recs["op_index"].tolist(), table.ops, cores, strict=True)]
    names.write("\n".join(lines) + "\n")
    names.flush()  # the names are readable before their records are


def _write_split(pipe: BinaryIO, data: bytes, rng: np.random.Generator) -> None:
    at = 0
    try:
        while at < len(data):
            step = int(rng.integers(1, MAX_WRITE + 1))
            at += pipe.write(data[at:at + step]) or 0
    except BrokenPipeError:
        raise UserError("--subscribe: the reader closed the FIFO before the simulation ended") from None


def _pace(started: float, written: int, per_second: float | None, realtime_ahead_s: float) -> None:
    if per_second is not None:
        ahead = written / per_second - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    elif realtime_ahead_s > 0:
        time.sleep(realtime_ahead_s)
