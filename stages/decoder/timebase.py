"""Time bases, as msprof converts them: host ticks and device syscnt → local wall-clock ns, in integers."""

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

    def ticks_at(self, local_ns: int) -> int:
        """The tick count at local ns ``local_ns`` (rounded down), in Python integers: the inverse of
        ``to_local_ns`` without its 64-bit wrap-around."""
        return self.cnt0 + (local_ns - self.mono0 - self.local_offset) * self.freq_khz // 1_000_000

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
    _derived: dict[tuple[str, int], Any] = field(default_factory=dict, repr=False, compare=False)
    # How each clock was worked out (clock key → ClockStory), written where it is derived.
    _stories: dict[tuple[str, int], ClockStory] = field(default_factory=dict, repr=False, compare=False)

    def learn(self, rel_path: str, text: str) -> None:
        self.files[rel_path] = text
        self._derived.clear()
        self._stories.clear()

    def story(self, key: tuple[str, int]) -> ClockStory:
        """What the clock ``key`` (``("host", 0)``, ``("legacy", N)``, ``("device", N)``) lacks or stood in for,
        as of the control files learned so far."""
        kind, number = key
        if kind == "host":
            self.host_clock()
        elif kind == "legacy":
            self.legacy_host_clock(number)
        else:
            self.device_clock(number)
        return self._stories.get(key, ClockStory())

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

    def _end_offset(self, rel: str) -> int | None:
        """The same offset from an end_info: the wall clock and CLOCK_MONOTONIC_RAW sampled together at the end
        (they differ from start_info's by the drift of the wall clock over the run: NTP steps included)."""
        info = self._json(rel)
        try:
            return int(info["collectionTimeEnd"]) * 1000 - int(info["clockMonotonicRaw"])
        except (KeyError, ValueError, TypeError):
            return None

    def _wall_offset(self, folder: str, suffix: str, story: ClockStory) -> int | None:
        """Monotonic → wall clock: the folder's start_info, else the host's (the same host clocks),
        else an end_info's (folder's, then host's). A stand-in is told in ``story``; none: start_info missing."""
        wanted = f"{folder}/start_info{suffix}"
        offset = self._offset(wanted)
        if offset is not None:
            return offset
        stand_ins = [(rel, read) for rel, read in (("host/start_info", self._offset),
                                                   (f"{folder}/end_info{suffix}", self._end_offset),
                                                   ("host/end_info", self._end_offset)) if rel != wanted]
        for rel, read in stand_ins:
            offset = read(rel)
            if offset is not None:
                story.substitutes.append(f"{_absent(self.files, wanted)}: wall-clock times use {rel} instead")
                return offset
        story.missing.append(wanted)
        return None

    def host_clock(self) -> Clock | None:
        return self._cached(_HOST_KEY, lambda _: self._host_clock(), 0)

    def legacy_host_clock(self, device: int) -> Clock | None:
        """Clock of the legacy host records in device_N/data (AclModule, Framework, Runtime)."""
        return self._cached(("legacy", device), self._legacy_host_clock, device)

    def device_clock(self, device: int) -> Clock | None:
        return self._cached(("device", device), self._device_clock, device)

    def _host_clock(self) -> Clock | None:
        story = self._stories[_HOST_KEY] = ClockStory()
        offset = self._wall_offset("host", "", story)
        khz = _host_khz(self._json("host/info.json"))
        if khz == DEFAULT_HOST_KHZ:  # already monotonic ns (msprof time_from_host_syscnt, GetTimeFromHostCnt):
            return None if offset is None else Clock(local_offset=offset)  # host_start.log is not needed
        log = _log_values(self.files.get("host/host_start.log", ""))
        if "cntvct" not in log or "clock_monotonic_raw" not in log:
            story.missing.append("host/host_start.log")
        if offset is None or story.missing:
            return None
        return Clock(khz, log["cntvct"], _host_monotonic(log, khz), offset)

    def _legacy_host_clock(self, device: int) -> Clock | None:
        """Only a local offset: CANN ≤ 6 stamped them in host CLOCK_MONOTONIC_RAW ns (msprof's parser of that
        era divided their durations by 1000 for µs and used them as timeline µs as they are). The offset is
        the device folder's start_info, else the host's (else an end_info's, said in the clock's story).
        """
        story = self._stories[("legacy", device)] = ClockStory()
        offset = self._wall_offset(f"device_{device}", f".{device}", story)
        return None if offset is None else Clock(local_offset=offset)

    def _device_clock(self, device: int) -> Clock | None:
        """syscnt → host monotonic from dev_start.log.N's ``cntvct`` and host_start.log.N's
        ``clock_monotonic_raw`` (one instant on both sides), at info.json.N's hwts frequency; then the wall-clock
        offset. A file that is there but lacks its number counts as missing. Stand-ins, each told in the story:
        for host_start.log.N the host's own start log (host/host_start.log, converted with info.json's CPU
        frequency), else the host CLOCK_MONOTONIC_RAW of start_info.N (sampled as the device's collection began);
        for start_info.N see ``_wall_offset``. dev_start.log.N has none: no other file holds a device tick
        count sampled at a known host instant."""
        folder = f"device_{device}"
        story = self._stories[("device", device)] = ClockStory()
        info_rel, dev_rel = f"{folder}/info.json.{device}", f"{folder}/dev_start.log.{device}"
        if info_rel not in self.files:
            story.missing.append(info_rel)
        dev_log = _log_values(self.files.get(dev_rel, ""))
        if "cntvct" not in dev_log:
            story.missing.append(dev_rel)
        info_json = self._json(info_rel)
        host_khz = _host_khz(info_json if info_json.get("CPU") else self._json("host/info.json"))
        host_mono = self._device_host_monotonic(device, host_khz, story)
        offset = self._wall_offset(folder, f".{device}", story)
        if story.missing or host_mono is None or offset is None:
            return None
        khz = _mhz_to_khz(self.device_info(device).get("hwts_frequency") or 100)
        return Clock(khz, dev_log["cntvct"], host_mono, offset)

    def _device_host_monotonic(self, device: int, host_khz: int, story: ClockStory) -> int | None:
        """Host CLOCK_MONOTONIC_RAW at the instant dev_start.log.N's cntvct was read (see ``_device_clock``)."""
        wanted = f"device_{device}/host_start.log.{device}"
        log = _log_values(self.files.get(wanted, ""))
        if "clock_monotonic_raw" in log:
            return _host_monotonic(log, host_khz)
        host_log = _log_values(self.files.get("host/host_start.log", ""))
        if "clock_monotonic_raw" in host_log:
            story.substitutes.append(f"{_absent(self.files, wanted)}: device times use host/host_start.log instead")
            return _host_monotonic(host_log, host_khz)
        start = self._json(f"device_{device}/start_info.{device}").get("clockMonotonicRaw")
        if _int(start) > 0:
            story.substitutes.append(f"{_absent(self.files, wanted)}: device times use the clockMonotonicRaw of "
                                     f"device_{device}/start_info.{device} instead")
            return _int(start)
        story.missing.append(wanted)
        return None

    def collection_window(self, key: tuple[str, int]) -> tuple[int | None, int | None]:
        """(start, end) of the collection in local ns, as the clock ``key`` places times (None: not known yet):
        the folder's start_info and end_info, else the host's. The end is the later of end_info's wall clock and
        its CLOCK_MONOTONIC_RAW placed as records are (a wall clock stepped back during the run moves only the
        first)."""
        kind, number = key
        device = None if kind == "host" else number
        window: tuple[int | None, int | None] = self._cached((f"window:{kind}", number),
                                                             lambda _: self._window(device), number)
        return window

    def _window(self, device: int | None) -> tuple[int | None, int | None]:
        folders = [("host", "")] if device is None else [(f"device_{device}", f".{device}"), ("host", "")]
        starts = [self._json(f"{folder}/start_info{suffix}") for folder, suffix in folders]
        ends = [self._json(f"{folder}/end_info{suffix}") for folder, suffix in folders]
        start_info = next((info for info in starts if _int(info.get("collectionTimeBegin")) > 0), {})
        end_info = next((info for info in ends if _int(info.get("collectionTimeEnd")) > 0), {})
        start = _int(start_info.get("collectionTimeBegin")) * 1000 or None
        end = _int(end_info.get("collectionTimeEnd")) * 1000 or None
        start_mono, end_mono = _int(start_info.get("clockMonotonicRaw")), _int(end_info.get("clockMonotonicRaw"))
        if start is not None and end is not None and start_mono > 0 and end_mono > 0:
            end = max(end, start + end_mono - start_mono)
        return start, end

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


@dataclass
class ClockStory:
    """How a clock was worked out: the control files it lacks (relative paths: none when it is known) and, one
    line each, what stood in for a missing one."""

    missing: list[str] = field(default_factory=list)
    substitutes: list[str] = field(default_factory=list)


def _absent(files: dict[str, str], rel: str) -> str:
    """`rel is missing`, or `rel lacks its numbers` for a file that came but holds none of what is read."""
    return f"{rel} {'is damaged (not the lines or JSON it should hold)' if rel in files else 'is missing'}"


_DEVICE_INFO = re.compile(r"^device_(\d+)/info\.json\.\d+$")


def _int(value: object) -> int:
    """A count or time as the control files write it (number or numeric string); 0 when absent or not one."""
    try:
        return int(str(value))
    except ValueError:
        return 0
