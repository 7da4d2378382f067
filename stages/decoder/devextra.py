"""Other device records: AI CPU kernel times, L2 cache task counters, AI Core frequency changes.

aicpu.data holds MsprofAdditionalInfo records (level 6000): type 0 (AICPU_NODE) carries one kernel's
times; the other types (data pipeline, model, MindSpore queue, KFC, HCCL …) are not decoded here. The
older DATA_PREPROCESS.AICPU files hold the same times as bare MsprofAicpuProfData, or text lines
(NUL-separated, as MindSpore's parser reads them):

    [<ts>] Node:<name>, Run start:<us>[ <tick>], Run end:<us>[ <tick>]
    [<ts>] Node:<name>, Run start:…, compute start:<us>, memcpy start:<us>, memcpy end:<us>, Run end:…
    Thread[<n>] process device[<d>]:aicpu[<c>] task end, tick…=<n>, …, dispatchTime=<us> us, totalTime=<us> us.

Fields are taken by position, as MindSpore does (one real file spells "Run tart").
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from stages.decoder import records
from stages.decoder.timebase import Clock
from stages.formats import raw

Reject = Callable[[str, int, bytes], None]
Output = list[tuple[str, np.ndarray]]
KINDS = ("aicpu", "aicpu_preprocess", "l2_cache", "lpm_freq")

_NODE_FIELDS_SHORT, _NODE_FIELDS_LONG = 3, 6  # name, run start, run end | + compute, memcpy start, memcpy end
_THREAD = re.compile(r"^\s*Thread\s*\[\s*(\d+)\s*\]")
_KEY_VALUE = re.compile(r"(\w+)\s*=\s*(-?\d+)")
_DISPATCH_KEYS, _TOTAL_KEYS = ("dispatchtime", "dispatch_time"), ("totaltime", "total_time")


def decode(kind: str, body: bytes, device: int, clock: Clock, reject: Reject) -> Output:
    if kind == "aicpu":
        return [("aicpu", _aicpu_binary(kind, _aicpu_nodes(np.frombuffer(body, raw.AICPU_NODE), reject), device,
                                        clock, reject))]
    if kind == "aicpu_preprocess" and body.startswith(raw.AICPU_PROF_HEAD):
        return [("aicpu", _aicpu_binary(kind, np.frombuffer(body, raw.AICPU_PROF), device, clock, reject))]
    if kind == "aicpu_preprocess":
        return [("aicpu", _aicpu_text(body, device, clock, reject))]
    if kind == "l2_cache":
        return [("l2_cache", _l2_cache(np.frombuffer(body, raw.L2_CACHE), device))]
    if kind == "lpm_freq":
        return [("freq", _freq(np.frombuffer(body, raw.LPM_FREQ), device, clock, reject))]
    raise ValueError(f"no decoder for {kind}")


def _durations(ticks: np.ndarray, clock: Clock) -> np.ndarray:
    """Tick differences (signed) → ns, in integers."""
    whole, rest = np.divmod(ticks.astype(np.int64), clock.freq_khz)
    result: np.ndarray = whole * 1_000_000 + (rest * 1_000_000) // clock.freq_khz
    return result


def _aicpu_nodes(arr: np.ndarray, reject: Reject) -> np.ndarray:
    """The AICPU_NODE records of an aicpu.data chunk; the other additional-info types are counted aside."""
    node = (arr["level"] == raw.LEVEL_AICPU) & (arr["type"] == raw.AICPU_NODE_TYPE)
    if not node.all():
        others = arr[~node]
        for level, type_ in sorted(set(zip(others["level"].tolist(), others["type"].tolist(), strict=True))):
            picked = others[(others["level"] == level) & (others["type"] == type_)]
            reject(f"aicpu: additional info level {level} type {type_} is not an AI CPU node record (not decoded)",
                   len(picked), picked.tobytes())
    return arr[node]


def _aicpu_binary(kind: str, arr: np.ndarray, device: int, clock: Clock, reject: Reject) -> np.ndarray:
    timed = (arr["run_start_tick"] != 0) & (arr["run_end_tick"] != 0)
    if not timed.all():  # msprof drops these too: nothing places them in time
        reject(f"{kind}: run start or end tick is 0", int((~timed).sum()), arr[~timed].tobytes())
        arr = arr[timed]
    out = np.zeros(len(arr), records.AICPU)
    out["device_id"] = device
    out["stream_id"] = arr["stream_id"] % 2048
    out["task_id"] = arr["task_id"]
    out["form"] = records.AICPU_BINARY
    out["start_ns"] = clock.to_local_ns(arr["run_start_tick"])
    out["end_ns"] = out["ts_ns"] = clock.to_local_ns(arr["run_end_tick"])
    out["task_ns"] = out["end_ns"] - out["start_ns"]
    us = {name: arr[name].astype(np.int64) for name in ("compute_start_us", "memcpy_start_us", "memcpy_end_us")}
    out["compute_ns"] = (us["memcpy_start_us"] - us["compute_start_us"]) * 1000
    out["memcpy_ns"] = (us["memcpy_end_us"] - us["memcpy_start_us"]) * 1000
    out["dispatch_ns"] = arr["dispatch_us"].astype(np.int64) * 1000
    out["total_ns"] = _durations(arr["tick_after_run"].astype(np.int64) - arr["submit_tick"].astype(np.int64), clock)
    out["thread_id"] = arr["node_thread_id"]
    return out


def _point(field: str) -> tuple[int, int | None]:
    """`Run start:2298200409 229820040900` → (µs, tick or None)."""
    values = field.rsplit(":", 1)[-1].split()
    return int(values[0]), int(values[1]) if len(values) > 1 else None


def _node_line(line: str, row: np.void, clock: Clock) -> bool:
    fields = [f.strip() for f in line.split(",")]
    if len(fields) not in (_NODE_FIELDS_SHORT, _NODE_FIELDS_LONG) or "Node:" not in fields[0]:
        return False
    (start_us, start_tick), (end_us, end_tick) = _point(fields[1]), _point(fields[-1])
    phases = [_point(f)[0] for f in fields[2:5]] if len(fields) == _NODE_FIELDS_LONG else []
    row["form"] = records.AICPU_TEXT_NODE
    row["node"] = fields[0].split("Node:", 1)[1].encode()[:64]
    row["task_ns"] = (end_us - start_us) * 1000
    if start_tick is not None and end_tick is not None:
        row["start_ns"], row["end_ns"] = clock.to_local_ns(np.array([start_tick, end_tick], np.uint64)).tolist()
        row["ts_ns"] = row["end_ns"]
    if phases:
        row["compute_ns"] = (phases[1] - phases[0]) * 1000
        row["memcpy_ns"] = (phases[2] - phases[1]) * 1000
    return True


def _thread_line(line: str, row: np.void) -> bool:
    thread = _THREAD.match(line)
    values = {key.lower(): int(value) for key, value in _KEY_VALUE.findall(line)}
    dispatch = next((values[k] for k in _DISPATCH_KEYS if k in values), None)
    total = next((values[k] for k in _TOTAL_KEYS if k in values), None)
    if thread is None or dispatch is None or total is None:
        return False
    row["form"] = records.AICPU_TEXT_THREAD
    row["thread_id"] = int(thread.group(1))
    row["dispatch_ns"] = dispatch * 1000
    row["total_ns"] = total * 1000
    return True


def _aicpu_text(body: bytes, device: int, clock: Clock, reject: Reject) -> np.ndarray:
    """The legacy text form: low-volume lines, parsed one by one."""
    lines = body.decode("utf-8", errors="replace").split("\0")
    out = np.zeros(len(lines), records.AICPU)
    for name in ("start_ns", "end_ns", "compute_ns", "memcpy_ns", "task_ns", "dispatch_ns", "total_ns"):
        out[name] = -1
    out["ts_ns"] = 0
    out["device_id"] = device
    good = np.zeros(len(lines), bool)
    for i, line in enumerate(lines):
        try:
            good[i] = _node_line(line, out[i], clock) if "Node:" in line else _thread_line(line, out[i])
        except (ValueError, IndexError, OverflowError):  # a number that is not one, or out of range
            good[i] = False
    if not good.all():
        bad = [lines[i] for i in np.flatnonzero(~good)]
        reject("aicpu_preprocess: text line that is neither an AI CPU Node nor a Thread line", len(bad),
               "\0".join(bad).encode())
    return out[good]


def _l2_cache(arr: np.ndarray, device: int) -> np.ndarray:
    out = np.zeros(len(arr), records.L2_CACHE)
    out["device_id"] = device
    for name in ("stream_id", "task_id", "task_type", "events"):
        out[name] = arr[name]
    return out


def _freq(arr: np.ndarray, device: int, clock: Clock, reject: Reject) -> np.ndarray:
    fits = arr["count"] <= raw.LPM_FREQ_POINTS
    if not fits.all():
        reject(f"lpm_freq: more than {raw.LPM_FREQ_POINTS} change points in a record", int((~fits).sum()),
               arr[~fits].tobytes())
        arr = arr[fits]
    out = np.zeros(len(arr), records.FREQ)
    out["device_id"] = device
    out["count"] = arr["count"]
    used = np.arange(raw.LPM_FREQ_POINTS) < arr["count"][:, None]
    points = arr["points"]
    out["points_ns"] = np.where(used, clock.to_local_ns(points["syscnt"]), 0)
    out["freq_mhz"] = np.where(used, points["freq_mhz"], 0)
    out["ts_ns"] = out["points_ns"].max(axis=1, initial=0)
    return out
