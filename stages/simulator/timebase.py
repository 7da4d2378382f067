"""Clocks of the simulated board, as msprof converts them.

The host counter *is* CLOCK_MONOTONIC_RAW in ns (info.json CPU Frequency "1000.000000", host_start.log
cntvct == clock_monotonic_raw), so host records carry monotonic ns directly. The device syscnt runs at
100 MHz (50 MHz on the 910B); dev_start.log.0 and host_start.log.0 pin one device tick to
one host instant, so (at 100 MHz)

    mono_ns = host_mono0 + (syscnt - dev_cnt0) * 10

converts exactly. Wall clock = mono + (wall0_ns - host_mono0), from start_info.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOST_MONO0_NS = 93_784_512_345_678  # host CLOCK_MONOTONIC_RAW at collection start (≈ 26 h uptime)
DEV_CNT0 = 9_211_408_337_120  # device syscnt at that instant (device booted earlier than the host counter)
HWTS_MHZ = 100
STARS_HWTS_MHZ = 50  # hwts_frequency of the 910B
HOST_CPU_MHZ = "1000.000000"


@dataclass(frozen=True)
class TimeBase:
    wall0_ns: int  # wall clock at collection start (Unix ns)
    host_mono0: int = HOST_MONO0_NS
    dev_cnt0: int = DEV_CNT0
    hwts_mhz: int = HWTS_MHZ

    @property
    def ns_per_tick(self) -> int:
        return 1000 // self.hwts_mhz

    @property
    def dev_mono0(self) -> int:
        """Device CLOCK_MONOTONIC_RAW at collection start (dev_start.log)."""
        return self.dev_cnt0 * self.ns_per_tick

    def ticks_at(self, mono_ns: np.ndarray | int) -> np.ndarray:
        """First device tick at or after host monotonic time `mono_ns`."""
        return self.dev_cnt0 - ((self.host_mono0 - np.asarray(mono_ns, np.int64)) // self.ns_per_tick)

    def mono_at(self, ticks: np.ndarray) -> np.ndarray:
        """Host monotonic ns of device tick(s)."""
        return self.host_mono0 + (ticks - self.dev_cnt0) * self.ns_per_tick

    def wall_ns(self, mono_ns: int) -> int:
        return self.wall0_ns + (mono_ns - self.host_mono0)
