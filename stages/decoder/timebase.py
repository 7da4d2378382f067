"""Time bases (spec §1.3): host ticks and device syscnt → local wall-clock ns, in integers."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

_LOG_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*(-?\d+)\s*$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT64, _UINT64 = np.dtype(np.int64), np.dtype(np.uint64)
_UNKNOWN = object()  # not worked out yet (None: worked out, and not known)
_HOST_KEY = ("host", 0)


@dataclass(frozen=True)
class Clock:
    """ns = mono0 + (ticks − cnt0) / freq, then + local offset."""

    freq_khz: int = 1_000_000  # 1000 MHz: host ticks are already ns
    cnt0: int = 0
    mono0: int = 0
    local_offset: int = 0

    @cached_property
    def _multiply_add(self) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """(scale, shift, scale is 1) with ns = ticks × scale + shift, when a tick is a whole number of ns and the
        shift fits in int64 (int64 arithmetic wraps, so this equals the step-by-step form bit for bit). 0-d arrays:
        numpy takes them in faster than Python ints."""
        scale, rest = divmod(1_000_000, self.freq_khz)
        shift = self.mono0 + self.local_offset - self.cnt0 * scale
        if rest or not _INT64_MIN <= shift <= _INT64_MAX:
            return None
        return np.array(scale, np.int64), np.array(shift, np.int64), scale == 1

    def to_local_ns(self, ticks: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Local ns of device or host ticks; written into ``out`` (an int64 array or field) when given."""
        counts = ticks.view(_INT64) if ticks.dtype == _UINT64 else ticks.astype(_INT64)
        fast = self._multiply_add
        if fast is not None:
            scale, shift, unit = fast
            if unit:
                return np.add(counts, shift, out=out)
            ns: np.ndarray = np.multiply(counts, scale, out=out)
            ns += shift
            return ns
        delta = counts - np.int64(self.cnt0)
        whole, rest = np.divmod(delta, self.freq_khz)
        result: np.ndarray = whole * 1_000_000 + (rest * 1_000_000) // self.freq_khz + np.int64(
            self.mono0 + self.local_offset)
        if out is not None:
            out[...] = result
            return out
        return result

    def to_local_ns_one(self, ticks: int) -> int:
        """``to_local_ns`` of one tick count, in Python integers with the same 64-bit wrap-around."""
        fast = self._multiply_add
        if fast is None:
            return int(self.to_local_ns(np.array([ticks], np.uint64))[0])
        scale, shift, _ = fast
        counts = ticks - 2**64 if ticks >= 2**63 else ticks
        return (counts * int(scale) + int(shift) + 2**63) % 2**64 - 2**63

    def duration_ns(self, ticks: int) -> int:
        return ticks * 1_000_000 // self.freq_khz


def _log_values(text: str) -> dict[str, int]:
    values = {}
    for line in text.splitlines():
        match = _LOG_LINE.match(line)
        if match:
            values[match.group(1).lower()] = int(match.group(2))
    return values


def _mhz_to_khz(value: object) -> int:
    return max(1, round(float(str(value)) * 1000))


DEFAULT_HOST_KHZ = 1_000_000  # CPU Frequency missing or 1000 MHz: host records carry monotonic ns as they are


def _host_khz(info: dict) -> int:
    """The host counter's frequency from an info.json's CPU list (kHz)."""
    cpus = info.get("CPU") or [{}]
    freq = cpus[0].get("Frequency") if isinstance(cpus, list) and cpus and isinstance(cpus[0], dict) else None
    try:
        return _mhz_to_khz(freq) if freq not in (None, "") and float(str(freq)) > 0 else DEFAULT_HOST_KHZ
    except ValueError:
        return DEFAULT_HOST_KHZ


def _host_monotonic(log: dict[str, int], host_khz: int) -> int:
    """clock_monotonic_raw of a host_start.log, corrected by its cntvct_diff (host counter ticks) as msprof does
    (TimerBean.host_mon; C++ GetSyscntConversionParams)."""
    return log.get("clock_monotonic_raw", 0) + log.get("cntvct_diff", 0) * 1_000_000 // host_khz


@dataclass
class TimeBase:
    """Everything learned from the control files of one PROF directory."""

    files: dict[str, str] = field(default_factory=dict)
    # Clocks and platforms derived from ``files``, asked for on every chunk: worked out once per control file learned.
    _derived: dict[tuple[str, int], Clock | int | None] = field(default_factory=dict, repr=False, compare=False)

    def learn(self, rel_path: str, text: str) -> None:
        self.files[rel_path] = text
        self._derived.clear()

    def _cached(self, key: tuple[str, int], derive: Callable[[int], Any], device: int) -> Any:
        value = self._derived.get(key, _UNKNOWN)
        if value is _UNKNOWN:
            value = self._derived[key] = derive(device)
        return value

    def _json(self, rel: str) -> dict:
        try:
            value = json.loads(self.files[rel])
        except (KeyError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def _offset(self, rel: str) -> int | None:
        info = self._json(rel)
        try:
            return int(info["collectionTimeBegin"]) * 1000 - int(info["clockMonotonicRaw"])
        except (KeyError, ValueError, TypeError):
            return None

    def host_clock(self) -> Clock | None:
        return self._cached(_HOST_KEY, lambda _: self._host_clock(), 0)

    def legacy_host_clock(self, device: int) -> Clock | None:
        """Clock of the legacy host records in device_N/data (AclModule, Framework, Runtime; spec §1.5)."""
        return self._cached(("legacy", device), self._legacy_host_clock, device)

    def device_clock(self, device: int) -> Clock | None:
        return self._cached(("device", device), self._device_clock, device)

    def _host_clock(self) -> Clock | None:
        if "host/start_info" not in self.files or "host/host_start.log" not in self.files:
            return None
        offset = self._offset("host/start_info")
        if offset is None:
            return None
        khz = _host_khz(self._json("host/info.json"))
        if khz == DEFAULT_HOST_KHZ:  # already monotonic ns (msprof time_from_host_syscnt, GetTimeFromHostCnt)
            return Clock(local_offset=offset)
        log = _log_values(self.files["host/host_start.log"])
        return Clock(khz, log.get("cntvct", 0), _host_monotonic(log, khz), offset)

    def _legacy_host_clock(self, device: int) -> Clock | None:
        """Only a local offset: CANN ≤ 6 stamped them in host CLOCK_MONOTONIC_RAW ns (msprof's parser of that
        era divided their durations by 1000 for µs and used them as timeline µs as they are). The offset is
        the device folder's start_info, else the host's.
        """
        offset = self._offset(f"device_{device}/start_info.{device}")
        if offset is None:
            offset = self._offset("host/start_info")
        return None if offset is None else Clock(local_offset=offset)

    def _device_clock(self, device: int) -> Clock | None:
        folder = f"device_{device}"
        needed = (f"{folder}/info.json.{device}", f"{folder}/dev_start.log.{device}",
                  f"{folder}/host_start.log.{device}")
        if any(rel not in self.files for rel in needed):
            return None
        offset = self._offset(f"{folder}/start_info.{device}")
        if offset is None:
            offset = self._offset("host/start_info")
        if offset is None:
            return None
        info = self.device_info(device)
        dev_log = _log_values(self.files[f"{folder}/dev_start.log.{device}"])
        host_log = _log_values(self.files[f"{folder}/host_start.log.{device}"])
        khz = _mhz_to_khz(info.get("hwts_frequency") or 100)
        info_json = self._json(f"{folder}/info.json.{device}")
        host_khz = _host_khz(info_json if info_json.get("CPU") else self._json("host/info.json"))
        return Clock(khz, dev_log.get("cntvct", 0), _host_monotonic(host_log, host_khz), offset)

    def platform(self, device: int) -> int:
        """The device's platform_version (1 when not given)."""
        platform: int = self._cached(("platform", device), self._platform, device)
        return platform

    def _platform(self, device: int) -> int:
        return int(self.device_info(device).get("platform_version") or 1)

    def device_info(self, device: int) -> dict:
        info = self._json(f"device_{device}/info.json.{device}")
        devices = info.get("DeviceInfo") or [{}]
        first = devices[0] if isinstance(devices, list) and devices else {}
        return dict(first, platform_version=info.get("platform_version", "1"), pid=info.get("pid"),
                    hostname=info.get("hostname"))

    def sample(self, device: int) -> dict:
        return self._json(f"device_{device}/sample.json")

    def session(self) -> dict[str, Any]:
        """Run-level facts as msprof's exporter reads them: from the host folder's info.json, start_info and
        end_info, else from the lowest-numbered device folder's (msprof ``Context::GetInfoByDeviceId``).
        Times are ns (the files hold µs); ``end_ns`` is 0 until end_info is written. Empty while no such
        file is known."""
        folder, suffix = "host", ""
        if not any(f"host/{name}" in self.files for name in ("info.json", "start_info")):
            devices = sorted(int(match.group(1)) for rel in self.files if (match := _DEVICE_INFO.match(rel)))
            if not devices:
                return {}
            folder, suffix = f"device_{devices[0]}", f".{devices[0]}"
        info = self._json(f"{folder}/info.json{suffix}")
        start = self._json(f"{folder}/start_info{suffix}").get("collectionTimeBegin")
        end = self._json(f"{folder}/end_info{suffix}").get("collectionTimeEnd")
        return {"pid": _int(info.get("pid")), "pid_name": str(info.get("pid_name") or ""),
                "hostname": str(info.get("hostname") or ""), "host_uid": str(info.get("hostUid") or "0"),
                "start_ns": _int(start) * 1000, "end_ns": _int(end) * 1000}


_DEVICE_INFO = re.compile(r"^device_(\d+)/info\.json\.\d+$")


def _int(value: object) -> int:
    """A count or time as the control files write it (number or numeric string); 0 when absent or not one."""
    try:
        return int(str(value))
    except ValueError:
        return 0
