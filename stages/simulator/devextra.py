"""Device records beyond task logs: PMU counters of any metric group, AI CPU kernel times, L2 cache task
counters and AI Core frequency change points, with what the truth file records of them.

Counters derive from the op's pipe profile (workload.PIPE_PROFILE: vec, mac, scalar, mte1, mte2, mte3
fractions of its cycles), so a cube op shows cube traffic and a vector op vector traffic in every group.
Draws come from the board's extra generators: the default PipeUtilization run keeps its bytes, and a
metric group changes only the AI Core counters.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stages.formats import raw

VEC, MAC, SCALAR, MTE1, MTE2, MTE3 = range(6)
Profile = np.ndarray  # (n, 6) pipe fractions


def _pipe(index: int, scale: float = 1.0, floor: float = 0.0) -> Callable[[Profile], np.ndarray]:
    return lambda p: p[:, index] * scale + floor


def _mix(*parts: tuple[int, float]) -> Callable[[Profile], np.ndarray]:
    return lambda p: np.sum([p[:, index] * scale for index, scale in parts], axis=0)


# PMU event id → fraction of the task's total cycles it counts (busy cycles, executed instructions,
# requests or data beats).
EVENT_FRACTION: dict[int, Callable[[Profile], np.ndarray]] = {
    0x8: _pipe(VEC), 0xA: _pipe(MAC), 0x9: _pipe(SCALAR), 0xB: _pipe(MTE1), 0xC: _pipe(MTE2), 0xD: _pipe(MTE3),
    0x12C: _pipe(VEC, 0.9), 0x302: _pipe(MTE1, 0.9), 0x303: _pipe(MAC, 0.3, 0.01),
    0x416: _pipe(MAC, 0.7), 0x417: _pipe(MAC, 0.2), 0x49: _pipe(MAC, 0.8), 0x4A: _pipe(MAC, 0.1),
    0x4B: _pipe(VEC, 0.2), 0x4C: _pipe(VEC, 0.4), 0x4D: _pipe(VEC, 0.1), 0x4E: _pipe(VEC, 0.05),
    0x4F: _pipe(VEC, 0.1, 0.01),
    0x64: _pipe(VEC, 0.05), 0x65: _pipe(VEC, 0.08), 0x66: _pipe(VEC, 0.03, 0.002),
    0x15: _pipe(VEC, 0.8), 0x16: _pipe(VEC, 0.5), 0x31: _pipe(MAC, 0.5), 0x32: _mix((MTE2, 0.3), (MAC, 0.2)),
    0xF: _pipe(MTE2, 0.6), 0x10: _pipe(MTE3, 0.6), 0x12: _pipe(MTE2, 0.3), 0x13: _pipe(MTE3, 0.3),
    0x1B: _pipe(MAC, 0.6), 0x1C: _pipe(MTE1, 0.5), 0x21: _pipe(MAC, 0.6), 0x22: _pipe(MTE1, 0.4),
    0x27: _pipe(VEC, 0.05), 0x28: _pipe(MAC, 0.3), 0x29: _pipe(VEC, 0.05), 0x2A: _pipe(MAC, 0.3),
    0x37: _pipe(SCALAR, 0.2), 0x38: _pipe(SCALAR, 0.1), 0x3D: _pipe(MTE3, 0.5), 0x3E: _pipe(MTE2, 0.5),
    0x43: _pipe(VEC, 0.6), 0x44: _pipe(VEC, 0.4),
    0x500: _pipe(MTE3, 0.3), 0x502: _pipe(MTE3, 0.05), 0x504: _pipe(MTE2, 0.3), 0x506: _pipe(MTE2, 0.05),
    0x508: _pipe(MTE2, 0.1), 0x50A: _pipe(MTE2, 0.02),
    0x206: _pipe(MAC, 0.05), 0x20C: _pipe(MAC, 0.2, 0.01), 0x50C: _pipe(MTE3, 0.2), 0x50D: _pipe(MTE2, 0.15),
    0x50E: _pipe(MTE2, 0.1),
}
ICACHE_REQ, ICACHE_MISS = 0x54, 0x55
CYCLES_PER_ICACHE_REQ = 40

# L2 cache task counters of the 910 (msprof msconfig/l2_cache_config.py, platform 1): request, hit, victim.
L2_EVENTS = (0x59, 0x5B, 0x5C)
L2_REQUESTS_PER_CYCLE = 0.05
US_TICKS = 100  # device µs clock of AI CPU records: syscnt / 100 at the 100 MHz hwts clock


def group_counters(events: tuple[int, ...], total: np.ndarray, profile: Profile,
                   rng: np.random.Generator) -> np.ndarray:
    """(n, 8) counters of `events` for tasks with `total` cycles and pipe `profile`."""
    n = len(total)
    pmu = np.zeros((n, 8), np.uint64)
    for slot, event in enumerate(events):
        if event == ICACHE_REQ:
            pmu[:, slot] = (total / CYCLES_PER_ICACHE_REQ * rng.uniform(0.9, 1.1, n)).astype(np.int64)
        elif event == ICACHE_MISS:
            req = total / CYCLES_PER_ICACHE_REQ
            pmu[:, slot] = (req * rng.uniform(0.01, 0.05, n)).astype(np.int64)
        else:
            fraction = EVENT_FRACTION[event](profile) * rng.uniform(0.95, 1.05, n)
            pmu[:, slot] = np.minimum(total, (fraction * total).astype(np.int64))
    return pmu


def l2_cache_records(stream_id: np.ndarray, task_id: np.ndarray, total: np.ndarray, profile: Profile,
                     rng: np.random.Generator) -> np.ndarray:
    """l2_cache.data records of AI Core tasks: requests, hits (the rest of the data reuse), victims."""
    n = len(total)
    request = np.maximum(1, (total * L2_REQUESTS_PER_CYCLE * rng.uniform(0.8, 1.2, n)).astype(np.int64))
    hit = (request * np.clip(0.95 - profile[:, MTE2] * 0.5, 0.3, 0.95) * rng.uniform(0.97, 1.0, n)).astype(np.int64)
    victim = (request * rng.uniform(0.01, 0.08, n)).astype(np.int64)
    recs = np.zeros(n, raw.L2_CACHE)
    recs["stream_id"] = stream_id
    recs["task_id"] = task_id
    recs["events"][:, :3] = np.stack([request, hit, victim], axis=1)
    return recs


AICPU_NODE_DATA_LEN = 232  # payload bytes after the 24-byte additional-info header


def aicpu_records(stream_id: np.ndarray, task_id: np.ndarray, start: np.ndarray, end: np.ndarray, device_id: int,
                  rng: np.random.Generator, *, preprocess: bool = False) -> np.ndarray:
    """AI CPU kernel times of tasks running in device ticks [start, end): submit → schedule → run.

    aicpu.data records (MsprofAdditionalInfo, AICPU_NODE), or with `preprocess` the bare MsprofAicpuProfData
    of the older DATA_PREPROCESS.AICPU files.
    """
    n = len(start)
    recs = np.zeros(n, raw.AICPU_PROF if preprocess else raw.AICPU_NODE)
    recs["magic"] = raw.HOST_MAGIC
    if preprocess:
        recs["data_tag"] = raw.AICPU_DATA_TAG
    else:
        recs["level"] = raw.LEVEL_AICPU
        recs["type"] = raw.AICPU_NODE_TYPE
        recs["data_len"] = AICPU_NODE_DATA_LEN
    recs["stream_id"] = stream_id
    recs["task_id"] = task_id
    submit = start + rng.integers(5, 20, n)
    schedule = submit + rng.integers(300, 1500, n)
    before_run = schedule + rng.integers(200, 800, n)
    run_start = before_run + rng.integers(1, 5, n)
    run_end = end - rng.integers(20, 60, n)
    after_run = run_end + rng.integers(2, 8, n)
    run_start_us, run_end_us = run_start // US_TICKS, run_end // US_TICKS
    span = run_end_us - run_start_us
    compute_start = run_start_us + span // 20
    memcpy_start = compute_start + (span * rng.uniform(0.7, 0.85, n)).astype(np.int64)
    memcpy_end = memcpy_start + span // 10
    for name, value in (("run_start_us", run_start_us), ("run_start_tick", run_start),
                        ("compute_start_us", compute_start), ("memcpy_start_us", memcpy_start),
                        ("memcpy_end_us", memcpy_end), ("run_end_us", run_end_us), ("run_end_tick", run_end),
                        ("submit_tick", submit), ("schedule_tick", schedule), ("tick_before_run", before_run),
                        ("tick_after_run", after_run), ("dispatch_us", (before_run - submit) // US_TICKS),
                        ("total_us", (after_run - submit) // US_TICKS)):
        recs[name] = value
    recs["node_thread_id"] = rng.integers(1, 5, n)
    if not preprocess:
        recs["thread_id"] = recs["node_thread_id"]
        recs["timestamp"] = after_run
    recs["device_id"] = device_id
    recs["kernel_type"] = 1
    recs["version"] = 1
    return recs


def aicpu_truth_ns(recs: np.ndarray, ns_per_tick: int) -> dict[str, np.ndarray]:
    """What an exact parser derives from each AI CPU record, in ns."""
    def ticks(name: str) -> np.ndarray:
        return recs[name].astype(np.int64)

    def us(name: str) -> np.ndarray:
        return recs[name].astype(np.int64) * 1000

    return {"compute_ns": us("memcpy_start_us") - us("compute_start_us"),
            "memcpy_ns": us("memcpy_end_us") - us("memcpy_start_us"),
            "task_ns": (ticks("run_end_tick") - ticks("run_start_tick")) * ns_per_tick,
            "dispatch_ns": us("dispatch_us"),
            "total_ns": (ticks("tick_after_run") - ticks("submit_tick")) * ns_per_tick}


def freq_record(syscnt: list[int], freq_mhz: list[int]) -> np.ndarray:
    """One lpmFreqConv record holding these change points."""
    rec = np.zeros(1, raw.LPM_FREQ)
    rec["count"] = len(syscnt)
    rec["points"]["syscnt"][0, :len(syscnt)] = syscnt
    rec["points"]["freq_mhz"][0, :len(freq_mhz)] = freq_mhz
    return rec
