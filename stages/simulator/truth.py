"""Ground truth of a simulated run: what an exact parser must find in the PROF directory.

Device task durations are Δticks × ns_per_tick (10 ns at 100 MHz, 20 ns on the 910B's 50 MHz; exact
integers), host API durations are end − begin ns,
record counts are what the writer put on disk (text dictionaries count lines).

A job of several devices has one truth file for all of them (`board_truth`): op_statistic has a row per
device, op type and core type; the host figures (API and msproftx statistics), task flips and the per-op
device extras are summed over the devices; `iterations` is the images every device ran; `iteration_ns`
is device 0's, and `devices` lists each device's own figures.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stages.simulator.workload import Op

TRUTH_FILE = "simulator_truth.json"
ITERATIONS_LISTED = 10_000  # per-iteration figures kept (the file is rewritten every simulated second)


class Truth:
    def __init__(self, ops: tuple[Op, ...], device_id: int, ns_per_tick: int = 10) -> None:
        self.ops = ops
        self.device_id = device_id
        self.ns_per_tick = ns_per_tick
        n = len(ops)
        self.task_count = np.zeros(n, np.int64)
        self.task_total = np.zeros(n, np.int64)
        self.task_min = np.full(n, np.iinfo(np.int64).max, np.int64)
        self.task_max = np.zeros(n, np.int64)
        self.api_count: Counter[tuple[str, str]] = Counter()
        self.api_total: Counter[tuple[str, str]] = Counter()
        self.msproftx: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.records: Counter[str] = Counter()
        self.slices: Counter[str] = Counter()
        self.iterations = 0
        self.iteration_ns: list[int] = []  # model end − model start keypoint (step trace), first iterations
        self.flips = 0  # task-flip records the device wrote
        self.mode = "launch"
        self.metrics = "PipeUtilization"
        self.pmu_count = np.zeros(n, np.int64)
        self.pmu_cycles = np.zeros(n, np.int64)
        self.pmu_counters = np.zeros((n, 8), np.int64)
        self.aicpu: dict[str, np.ndarray] = {}
        self.aicpu_count = np.zeros(n, np.int64)
        self.l2_count = np.zeros(n, np.int64)
        self.l2_events = np.zeros((n, 3), np.int64)  # request, hit, victim
        self.l2_rates = np.zeros((n, 2), np.float64)  # Σ hit / request, Σ victim / request
        self.freq_points = 0

    def add_tasks(self, durations_ns: np.ndarray, counted: np.ndarray | None = None) -> None:
        """One execution of every op (durations in op order); `counted`: the ops whose task is one statistic
        entry (an FFTS+ task counts per context instead, add_contexts)."""
        ops = np.arange(len(self.ops)) if counted is None else np.flatnonzero(counted)
        self.add_contexts(ops, np.asarray(durations_ns)[ops])

    def add_contexts(self, ops: np.ndarray, durations_ns: np.ndarray) -> None:
        """Statistic entries of `ops` (an op may repeat: one entry per FFTS+ context)."""
        durations = np.asarray(durations_ns, np.int64)
        np.add.at(self.task_count, ops, 1)
        np.add.at(self.task_total, ops, durations)
        np.minimum.at(self.task_min, ops, durations)
        np.maximum.at(self.task_max, ops, durations)

    def add_pmu(self, ops: np.ndarray, total_cycles: np.ndarray, counters: np.ndarray) -> None:
        """One execution's AI Core PMU records (`ops` = op indices of the rows; one per FFTS+ context)."""
        np.add.at(self.pmu_count, ops, 1)
        np.add.at(self.pmu_cycles, ops, total_cycles.astype(np.int64))
        np.add.at(self.pmu_counters, ops, counters.astype(np.int64))

    def add_aicpu(self, ops: np.ndarray, values_ns: dict[str, np.ndarray]) -> None:
        self.aicpu_count[ops] += 1
        for name, values in values_ns.items():
            self.aicpu.setdefault(name, np.zeros(len(self.ops), np.int64))[ops] += values

    def add_l2(self, ops: np.ndarray, events: np.ndarray) -> None:
        """L2 cache counters (request, hit, victim) of AI Core tasks."""
        events = events.astype(np.int64)
        self.l2_count[ops] += 1
        self.l2_events[ops] += events
        request = np.maximum(events[:, :1], 1).astype(np.float64)
        self.l2_rates[ops] += events[:, 1:] / request

    def device_extras(self) -> dict[str, Any]:
        """Per op: PMU sums, AI CPU kernel time sums (ns) and L2 cache rate sums (floats)."""
        ops: list[dict[str, Any]] = []
        for i, op in enumerate(self.ops):
            entry: dict[str, Any] = {"op_name": op.name, "op_type": op.op_type}
            if self.pmu_count[i]:
                entry["pmu"] = {"count": int(self.pmu_count[i]), "total_cycles": int(self.pmu_cycles[i]),
                                "counters": self.pmu_counters[i].tolist()}
            if self.aicpu_count[i]:
                entry["aicpu"] = {"count": int(self.aicpu_count[i]),
                                  **{name: int(values[i]) for name, values in self.aicpu.items()}}
            if self.l2_count[i]:
                entry["l2_cache"] = {"count": int(self.l2_count[i]), "events": self.l2_events[i].tolist(),
                                     "hit_rate_sum": float(self.l2_rates[i, 0]),
                                     "victim_rate_sum": float(self.l2_rates[i, 1])}
            ops.append(entry)
        return {"metrics": self.metrics, "ops": ops, "freq_points": self.freq_points}

    def add_api(self, level: str, name: str, count: int, total_ns: int) -> None:
        self.api_count[level, name] += count
        self.api_total[level, name] += total_ns

    def add_iteration(self, duration_ns: int) -> None:
        if len(self.iteration_ns) < ITERATIONS_LISTED:
            self.iteration_ns.append(duration_ns)

    def add_msproftx(self, message: str, duration_ns: int) -> None:
        entry = self.msproftx[message]
        entry[0] += 1
        entry[1] += duration_ns

    def op_statistic(self) -> list[dict[str, Any]]:
        """Per (device, op type, core type): count, total, min, max of device durations (ns)."""
        groups: dict[tuple[str, str], list[int]] = {}
        for i, op in enumerate(self.ops):
            if not self.task_count[i]:
                continue
            g = groups.setdefault((op.op_type, op.core), [0, 0, int(self.task_min[i]), 0])
            g[0] += int(self.task_count[i])
            g[1] += int(self.task_total[i])
            g[2] = min(g[2], int(self.task_min[i]))
            g[3] = max(g[3], int(self.task_max[i]))
        return [{"device_id": self.device_id, "op_type": op_type, "core_type": core, "count": c, "total_ns": t,
                 "min_ns": lo, "max_ns": hi} for (op_type, core), (c, t, lo, hi) in sorted(groups.items())]

    def to_dict(self, prof_dir: Path, chip: str, complete: bool, planned: int = 0) -> dict[str, Any]:
        """``complete``: the directory is finished (end_info written); ``planned``: the iterations the job was given
        (0: until stopped); ``cut_short``: it finished before those were run (stopped)."""
        return {
            "prof_dir": str(prof_dir),
            "chip": chip,
            "mode": self.mode,
            "complete": complete,
            "iterations": self.iterations,
            "iterations_planned": planned,
            "cut_short": complete and self.iterations < planned,
            "iteration_ns": self.iteration_ns,
            "ns_per_tick": self.ns_per_tick,
            "op_statistic": self.op_statistic(),
            "api_statistic": [{"level": level, "api_name": name, "count": self.api_count[level, name],
                               "total_ns": self.api_total[level, name]} for level, name in sorted(self.api_count)],
            "msproftx": [{"message": m, "count": c, "total_ns": t} for m, (c, t) in sorted(self.msproftx.items())],
            "task_flips": self.flips,
            "device_extras": self.device_extras(),
            "records": dict(sorted(self.records.items())),
            "records_total": sum(self.records.values()),
            "slices": dict(sorted(self.slices.items())),
        }

    def write(self, path: Path, prof_dir: Path, chip: str, complete: bool, planned: int = 0) -> None:
        """Atomically (re)write the truth file."""
        write_truth(path, self.to_dict(prof_dir, chip, complete, planned))


def _summed(truths: Sequence[Truth]) -> Truth:
    """One Truth holding the sums of several devices' (min and max over them)."""
    first = truths[0]
    total = Truth(first.ops, first.device_id, first.ns_per_tick)
    total.mode, total.metrics = first.mode, first.metrics
    total.iterations = min(t.iterations for t in truths)
    total.iteration_ns = list(first.iteration_ns)
    total.task_min = np.minimum.reduce([t.task_min for t in truths])
    total.task_max = np.maximum.reduce([t.task_max for t in truths])
    for name in ("task_count", "task_total", "pmu_count", "pmu_cycles", "pmu_counters", "aicpu_count", "l2_count",
                 "l2_events", "l2_rates"):
        setattr(total, name, sum(getattr(t, name) for t in truths))
    for t in truths:
        total.api_count.update(t.api_count)
        total.api_total.update(t.api_total)
        for message, (count, ns) in t.msproftx.items():
            total.msproftx[message][0] += count
            total.msproftx[message][1] += ns
        for name, values in t.aicpu.items():
            total.aicpu[name] = total.aicpu.get(name, np.zeros(len(t.ops), np.int64)) + values
        total.flips += t.flips
        total.freq_points += t.freq_points
    return total


def board_truth(truths: Sequence[Truth], records: Counter[str], slices: Counter[str], prof_dir: Path, chip: str,
                complete: bool, planned: int = 0) -> dict[str, Any]:
    """The truth of a job over its devices (one Truth per device, in device order); `records` and `slices` are what
    the writer put on disk."""
    whole = truths[0] if len(truths) == 1 else _summed(truths)
    whole.records, whole.slices = records, slices
    out = whole.to_dict(prof_dir, chip, complete, planned)
    if len(truths) > 1:
        out["op_statistic"] = [row for t in truths for row in t.op_statistic()]
        out["devices"] = [{"device_id": t.device_id, "iterations": t.iterations, "iteration_ns": t.iteration_ns,
                           "task_flips": t.flips, "op_statistic": t.op_statistic(),
                           "device_extras": t.device_extras()} for t in truths]
    return out


def write_truth(path: Path, truth: dict[str, Any]) -> None:
    """Atomically (re)write a truth file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(truth, indent=1) + "\n")
    os.replace(tmp, path)
