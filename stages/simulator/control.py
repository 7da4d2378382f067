"""Text control files of a PROF directory, with the keys msprof's parser requires, and its name.

Shapes follow the real CANN 6 files in shared/samples (compact JSON, string-valued numbers where the
collector writes strings); the values describe the simulated board.
"""

from __future__ import annotations

import json
import random
from datetime import datetime
from typing import Any

from stages.formats.raw import PMU_EVENT_SETS
from stages.simulator.timebase import HOST_CPU_MHZ, TimeBase
from stages.simulator.workload import AI_CORE_NUM, AIV_NUM, STARS_CHIPS, aic_mhz

HOST_DEVICE_ID = "64"  # the host pseudo device: msprof parses a directory as host data only under id 64
PLATFORM_VERSION = {"mini": "0", "cloud": "1", "910b": "5", "v6": "15"}
DRV_VERSION = 467732  # ≥ 467473: msprof exports the whole run
HOSTNAME = "atlas-sim"
APP = "python3"
APP_PARAMETERS = "detect_image.py image/demo1.jpg"
AI_CORE_METRICS = "PipeUtilization"
L2_CACHE_EVENTS = "0x59,0x5b,0x5c"  # request, hit, victim on the 910 (msprof l2_cache_config platform 1)


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def prof_dir_name(job_index: int, wall_ns: int, seed: int) -> str:
    """`PROF_{NNNNNN}_{YYYYMMDDhhmmssmmm}_{16 letters A–R}`; the letters come from the seed."""
    stamp = datetime.fromtimestamp(wall_ns // 10**9)
    millis = (wall_ns // 10**6) % 1000
    rng = random.Random(seed)
    letters = "".join(rng.choice("ABCDEFGHIJKLMNOPQR") for _ in range(16))
    return f"PROF_{job_index:06d}_{stamp:%Y%m%d%H%M%S}{millis:03d}_{letters}"


def _local(wall_ns: int) -> str:
    micros = (wall_ns // 1000) % 10**6
    return f"{datetime.fromtimestamp(wall_ns // 10**9):%Y-%m-%d %H:%M:%S}.{micros:06d}"


def start_info(tb: TimeBase) -> str:
    return dump({"collectionDateBegin": _local(tb.wall0_ns), "collectionTimeBegin": str(tb.wall0_ns // 1000),
                 "clockMonotonicRaw": str(tb.host_mono0)})


def end_info(tb: TimeBase, mono_ns: int) -> str:
    wall = tb.wall_ns(mono_ns)
    return dump({"collectionDateEnd": _local(wall), "collectionTimeEnd": str(wall // 1000),
                 "clockMonotonicRaw": str(mono_ns)})


def host_start_log(tb: TimeBase, section: str) -> str:
    """`[Host]` (host/) or `[Device0]` (device_0/): the host clocks at collection start."""
    return f"[{section}]\nclock_monotonic_raw: {tb.host_mono0}\ncntvct: {tb.host_mono0}\ncntvct_diff: 0\n"


def dev_start_log(tb: TimeBase) -> str:
    return f"clock_monotonic_raw: {tb.dev_mono0}\ncntvct: {tb.dev_cnt0}\n"


def _device_info(chip: str, device_id: int, tb: TimeBase) -> dict[str, Any]:
    mini = chip == "mini"
    ai_cpus = 4 if mini else 14
    first_ai_cpu = 4 if mini else 2
    return {"id": device_id, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 3 if mini else 1,
            "ctrl_cpu_endian_little": 1, "ts_cpu_core_num": 1 if mini else 4, "ai_cpu_core_num": ai_cpus,
            "ai_core_num": AI_CORE_NUM[chip], "ai_cpu_core_id": first_ai_cpu, "ai_core_id": 0,
            "aicpu_occupy_bitmap": ((1 << ai_cpus) - 1) << first_ai_cpu, "ctrl_cpu": "0",
            "ai_cpu": ",".join(str(first_ai_cpu + i) for i in range(ai_cpus)), "aiv_num": AIV_NUM[chip],
            "hwts_frequency": str(tb.hwts_mhz), "aic_frequency": str(aic_mhz(chip)),
            "aiv_frequency": str(aic_mhz(chip))}


def info_json(chip: str, tb: TimeBase, pid: int, device_id: int | None) -> str:
    """host/info.json (`device_id` None: devices "64", DeviceInfo []) or device_N/info.json.N."""
    uptime = tb.host_mono0 / 1e9
    return dump({
        "jobInfo": "NA", "version": "1.0", "mac": "00-E0-FC-5A-17-3B",
        "OS": "Linux-4.19.90-vhulk2211.3.0.h1543.eulerosv2r10.aarch64-#1 SMP aarch64", "cpuCores": 8,
        "hostname": HOSTNAME, "hwtype": "aarch64",
        "devices": HOST_DEVICE_ID if device_id is None else str(device_id), "platform": "",
        "CPU": [{"Id": 0, "Name": "HiSilicon", "Frequency": HOST_CPU_MHZ, "Logical_CPU_Count": "8",
                 "Type": "TaishanV110"}],
        "DeviceInfo": [] if device_id is None else [_device_info(chip, device_id, tb)],
        "platform_version": PLATFORM_VERSION[chip], "pid": str(pid), "pid_name": APP,
        "memoryTotal": 32_594_212, "cpuNums": 8, "sysClockFreq": 100,
        "upTime": f"{uptime:.2f} {uptime * 7.3:.2f}", "netCardNums": 1,
        "netCard": [{"netCardName": "enp125s0f0", "speed": 1000}], "rank_id": -1,
        "drvVersion": DRV_VERSION, "cannVersion": "8.0.0",
    })


def sample_json(chip: str, result_dir: str, device_id: int | None, metrics: str = AI_CORE_METRICS) -> str:
    """Collection switches: task-based AI Core PMU of one metric group, TS timeline on the 310, HWTS log on the
    910, and there also the AI CPU trace and L2 cache task counters; on the 910B the task time switch (its
    STARS log replaces the HWTS log) and the AI Vector Core PMU (msprof's C++ device context requires its
    keys). Chip v6: no PMU (its layout is not simulated), so both PMU switches are off and list no events."""
    mini, cloud, stars = chip == "mini", chip == "cloud", chip in STARS_CHIPS
    pmu = chip != "v6"
    events = ",".join(f"0x{e:x}" for e in PMU_EVENT_SETS[metrics]) if pmu else ""
    return dump({
        "acl": "on", "ai_core_metrics": metrics, "ai_core_profiling": "on" if pmu else "off",
        "ai_core_profiling_events": events, "ai_core_profiling_mode": "task-based", "aicore_sampling_interval": 10,
        "aicpuTrace": "on" if cloud else "off", "aiv_metrics": metrics,
        "aiv_profiling": "on" if stars and pmu else "off", "aiv_profiling_events": events,
        "aiv_profiling_mode": "task-based", "aiv_sampling_interval": 10, "app": APP, "app_dir": "/home/app",
        "app_parameters": APP_PARAMETERS, "cpu_profiling": "off",
        "devices": HOST_DEVICE_ID if device_id is None else str(device_id), "host_profiling": 0,
        "hwts_log": "off" if mini else "on", "hwts_log1": "off" if mini else "on", "job_id": "1",
        "l2CacheTaskProfiling": "on" if cloud else "off",
        "l2CacheTaskProfilingEvents": L2_CACHE_EVENTS if cloud else "", "llc_interval": 20,
        "llc_profiling": "read", "llc_profiling_events": "read", "modelExecution": "on", "msproftx": "on",
        "profiling_mode": "def_mode", "result_dir": result_dir, "runtimeApi": "on", "runtimeTrace": "on",
        "stream_enabled": "on", "sys_profiling": "off", "ts_keypoint": "on", "ts_memcpy": "off",
        "ts_task_track": "on" if not mini else "", "ts_timeline": "on" if mini else "off",
    })
