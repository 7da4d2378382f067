"""Golden directories, one per chip (tests/data/<chip>/, written by tests/data/make_golden.py).

Each directory holds two iterations of a three-op model: Conv2D and Relu on stream 5, NonMaxSuppressionV3 on
the AI CPU stream 6. The expected op_summary and op_statistic rows below are worked by hand from the raw values
make_golden.py packs (its ``*_TASKS`` and ``*_PMU`` tables, its control files), with msprof's formulas:

* times: local ns = clock_monotonic_raw of host_start.log.0 (+ cntvct_diff × 1000 / host CPU MHz)
  + (syscnt − dev_start.log cntvct) × 1000 / hwts MHz + (collectionTimeBegin × 1000 − clockMonotonicRaw of
  start_info). Every directory has clock_monotonic_raw = clockMonotonicRaw = 3_000_000_000_000 ns,
  collectionTimeBegin = 1_700_000_000_000_000 µs and cntvct = 200_000_000_000, so a task starting k ticks after
  cntvct starts at 1_700_000_000_000_000_000 + diff + k × (1000 / hwts MHz) ns; printed as µs with 3 decimals.
* Task Duration = (end − start) ticks × ns per tick; Task Wait Time = start − previous start − previous duration,
  over the device's rows sorted by start, 0 for the first, as msprof computes it.
* PMU: aicore_time(us) = total_cycles / aic MHz / block × ceil(block / ai_core_num) (rounded to 2
  decimals on the 910, as msprof's cal_total_time does); <x>_ratio = counter / total_cycles; <x>_time(us) =
  ratio × aicore_time; icache_miss_rate = miss / requests; memory_bound = mte2_ratio / max(vec_ratio,
  mac_ratio); cube_utilization(%) = total_cycles / (aic MHz × ai_core_num × duration µs) × 100, 0 when
  mac_ratio is 0 (msprof runtime_report.cube_usage). Derived figures print with 3 decimals at most.
* op_statistic: per (OP Type, Core Type) count, total, min, avg, max of the durations (µs), ratio = total / the
  device's total × 100; rows by total time, largest first.

Cross-check, done once by hand (not a test): msprof's own Python parser (github Ascend/msprof @9ba1ac7, `import`
then `export summary`) gives these values on the cloud and 910B directories and on the mini's first iteration
(msprof exports the 310 one iteration at a time), and its 2022 version
(96593dcfb) the same task times and PMU values for the legacy one (copied into PROF_…/device_0), apart from
number formatting (msprof prints "20.0" where we print "20.000" / "20").
"""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pipeline_runs import run_cli

from pipeline.stage import Batch
from stages.collector import CollectorStage
from stages.schema import unpack_rows
from stages.sinks.summary import SummarySink

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
CHIPS = ("mini", "cloud", "910b", "legacy")
NA = "N/A"
BASE = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
        "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Dim", "Mix Block Dim",
        "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
        "Output Formats", "Context ID"]
PIPE = ["aicore_time(us)", "total_cycles", "vec_time(us)", "vec_ratio", "mac_time(us)", "mac_ratio",
        "scalar_time(us)", "scalar_ratio", "mte1_time(us)", "mte1_ratio", "mte2_time(us)", "mte2_ratio",
        "mte3_time(us)", "mte3_ratio", "icache_miss_rate", "memory_bound", "cube_utilization(%)"]
# 910B: aic_/aiv_ sides without the columns msprof's C++ exporter leaves out (aic_vec_*, aiv_mac_*, aiv_mte1_*)
STARS = ["aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio", "aic_scalar_time(us)",
         "aic_scalar_ratio", "aic_mte1_time(us)", "aic_mte1_ratio", "aic_mte2_time(us)", "aic_mte2_ratio",
         "aic_mte3_time(us)", "aic_mte3_ratio", "aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles",
         "aiv_vec_time(us)", "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
         "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_icache_miss_rate", "cube_utilization(%)"]
CONV, RELU, NMS = "conv1/Conv2D", "relu1/Relu", "nms/NonMaxSuppressionV3"
NMS_TENSORS = ('"100,4;100"', "FLOAT;FLOAT", "ND;ND", '"10"', "INT32", "ND")  # shapes always in quotes
RELU_5HD = ('"1,2,28,28,16"', "FLOAT16", "NC1HWC0", '"1,2,28,28,16"', "FLOAT16", "NC1HWC0")


def row(task: str, stream: str, name: str, op_type: str, state: str, core: str, start: str, duration: str,
        wait: str, block: str, tensors: tuple[str, ...], pmu: dict[str, str]) -> dict[str, str]:
    """One expected op_summary row: device 0, model 3, no mix blocks, context id N/A; every op has node basic info
    with op flag 0, which msprof writes as HF32 Eligible "NO" (N/A only without node info)."""
    cells = ["0", "3", task, stream, name, op_type, state, core, start, duration, wait, block, "0", "NO", *tensors,
             NA]
    return {**dict(zip(BASE, cells, strict=True)), **pmu}


def na(columns: list[str]) -> dict[str, str]:
    """AI CPU tasks have no AI Core PMU record."""
    return dict.fromkeys(columns, NA)


# -- Ascend 310 (mini): hwts 100 MHz (10 ns a tick); host_start.log.0 cntvct_diff 3 at host CPU 100 MHz = 30 ns;
#    aic 1000 MHz, ai_core_num 2; PMU from the TLV EventCount records, block from the record, times not rounded.
MINI_CONV = {  # total 200_000, block 4, ceil(4 / 2) = 2; counters 25_000 100_000 10_000 40_000 120_000 30_000 2_000 100
    "aicore_time(us)": "100",  # 200_000 / 1000 / 4 × 2
    "total_cycles": "200000",
    "vec_time(us)": "12.5", "vec_ratio": "0.125",  # 25_000 / 200_000; 0.125 × 100
    "mac_time(us)": "50", "mac_ratio": "0.5",  # 100_000 / 200_000
    "scalar_time(us)": "5", "scalar_ratio": "0.05",  # 10_000 / 200_000
    "mte1_time(us)": "20", "mte1_ratio": "0.2",  # 40_000 / 200_000
    "mte2_time(us)": "60", "mte2_ratio": "0.6",  # 120_000 / 200_000
    "mte3_time(us)": "15", "mte3_ratio": "0.15",  # 30_000 / 200_000
    "icache_miss_rate": "0.05",  # 100 / 2_000
    "memory_bound": "1.2",  # 0.6 / max(0.125, 0.5)
}
MINI_RELU = {  # total 30_000, block 2, ceil(2 / 2) = 1; counters 15_000 0 3_000 0 9_000 6_000 500 25
    "aicore_time(us)": "15",  # 30_000 / 1000 / 2
    "total_cycles": "30000",
    "vec_time(us)": "7.5", "vec_ratio": "0.5",  # 15_000 / 30_000
    "mac_time(us)": "0", "mac_ratio": "0",
    "scalar_time(us)": "1.5", "scalar_ratio": "0.1",  # 3_000 / 30_000
    "mte1_time(us)": "0", "mte1_ratio": "0",
    "mte2_time(us)": "4.5", "mte2_ratio": "0.3",  # 9_000 / 30_000
    "mte3_time(us)": "3", "mte3_ratio": "0.2",  # 6_000 / 30_000
    "icache_miss_rate": "0.05",  # 25 / 500
    "memory_bound": "0.6",  # 0.3 / max(0.5, 0)
    "cube_utilization(%)": "0",  # mac_ratio 0
}
MINI_CONV_TENSORS = ('"1,1,28,28,16;9,2,16,16"', "FLOAT16;FLOAT16", "NC1HWC0;FRACTAL_Z", '"1,2,28,28,16"', "FLOAT16",
                     "NC1HWC0")
MINI_ROWS = [
    # conv (5,10): ticks 100_000 → 112_500: start 1_700_000_000_000_000_000 + 30 + 1_000_000 ns, 12_500 × 10 ns
    row("10", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000001000.030", "125.000", "0.000", "4",
        MINI_CONV_TENSORS, {**MINI_CONV, "cube_utilization(%)": "80"}),  # 200_000 / (1000 × 2 × 125) × 100
    # relu (5,11): 112_700 → 114_700; wait (112_700 − 112_500) × 10 ns
    row("11", "5", RELU, "Relu", "static", "AI_CORE", "1700000000001127.030", "20.000", "2.000", "2", RELU_5HD,
        MINI_RELU),
    # nms (6,20): 115_000 → 125_000; wait (115_000 − 114_700) × 10 ns
    row("20", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000001150.030", "100.000", "3.000", "1",
        NMS_TENSORS, na(PIPE)),
    # conv (5,14): 200_000 → 213_000; wait (200_000 − 125_000) × 10 ns
    row("14", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000002000.030", "130.000", "750.000", "4",
        MINI_CONV_TENSORS, {**MINI_CONV, "cube_utilization(%)": "76.923"}),  # 200_000 / (1000 × 2 × 130) × 100
    # relu (5,15): 213_000 → 215_100
    row("15", "5", RELU, "Relu", "static", "AI_CORE", "1700000000002130.030", "21.000", "0.000", "2", RELU_5HD,
        MINI_RELU),
    # nms (6,21): 215_100 → 226_100
    row("21", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000002151.030", "110.000", "0.000", "1",
        NMS_TENSORS, na(PIPE)),
]
MINI_STATISTIC = [  # Device_id, OP Type, Core Type, Count, Total, Min, Avg, Max, Ratio(%) of 506 µs
    ["0", "Conv2D", "AI_CORE", "2", "255", "125", "127.5", "130", "50.395"],  # 125 + 130; 255 / 506 × 100
    ["0", "NonMaxSuppressionV3", "AI_CPU", "2", "210", "100", "105", "110", "41.502"],  # 100 + 110
    ["0", "Relu", "AI_CORE", "2", "41", "20", "20.5", "21", "8.103"],  # 20 + 21
]

# -- Ascend 910 (cloud): hwts 100 MHz; cntvct_diff 25 at the default host CPU 1000 MHz = 25 ns; aic 1000 MHz,
#    ai_core_num 32; aicore_time rounded to 2 decimals, and each <x>_time is that rounded time × ratio.
CLOUD_CONV = {  # total 123_456, block 8, ceil(8 / 32) = 1; counters 15_432 61_728 3_858 46_296 77_160 15_432 4_000 500
    "aicore_time(us)": "15.43",  # 123_456 / 1000 / 8 = 15.432 → 15.43
    "total_cycles": "123456",
    "vec_time(us)": "1.929", "vec_ratio": "0.125",  # 15_432 / 123_456; 15.43 × 0.125 = 1.92875
    "mac_time(us)": "7.715", "mac_ratio": "0.5",  # 61_728 / 123_456; 15.43 × 0.5 (15.432 × 0.5 would be 7.716)
    "scalar_time(us)": "0.482", "scalar_ratio": "0.031",  # 3_858 / 123_456 = 0.03125; 15.43 × 0.03125 = 0.4821875
    "mte1_time(us)": "5.786", "mte1_ratio": "0.375",  # 46_296 / 123_456; 15.43 × 0.375 = 5.78625
    "mte2_time(us)": "9.644", "mte2_ratio": "0.625",  # 77_160 / 123_456; 15.43 × 0.625 = 9.64375
    "mte3_time(us)": "1.929", "mte3_ratio": "0.125",  # 15_432 / 123_456
    "icache_miss_rate": "0.125",  # 500 / 4_000
    "memory_bound": "1.25",  # 0.625 / max(0.125, 0.5)
}
CLOUD_RELU = {  # total 10_000, block 1; counters 5_000 0 1_250 0 2_500 3_750 1_000 0
    "aicore_time(us)": "10",  # 10_000 / 1000 / 1
    "total_cycles": "10000",
    "vec_time(us)": "5", "vec_ratio": "0.5",  # 5_000 / 10_000
    "mac_time(us)": "0", "mac_ratio": "0",
    "scalar_time(us)": "1.25", "scalar_ratio": "0.125",  # 1_250 / 10_000
    "mte1_time(us)": "0", "mte1_ratio": "0",
    "mte2_time(us)": "2.5", "mte2_ratio": "0.25",  # 2_500 / 10_000
    "mte3_time(us)": "3.75", "mte3_ratio": "0.375",  # 3_750 / 10_000
    "icache_miss_rate": "0",  # 0 / 1_000
    "memory_bound": "0.5",  # 0.25 / max(0.5, 0)
    "cube_utilization(%)": "0",  # mac_ratio 0
}
# The weights' format 4 | 2 << 8: FRACTAL_Z with sub-format 2, printed "FRACTAL_Z:2" (msprof GetFormat)
CLOUD_CONV_TENSORS = ('"1,1,28,28,16;9,2,16,16"', "FLOAT16;FLOAT16", "NC1HWC0;FRACTAL_Z:2", '"1,2,28,28,16"',
                      "FLOAT16", "NC1HWC0")
CLOUD_ROWS = [
    # conv (5,10): ticks 100_000 → 102_000: start 1_700_000_000_000_000_000 + 25 + 1_000_000 ns
    row("10", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000001000.025", "20.000", "0.000", "8",
        CLOUD_CONV_TENSORS, {**CLOUD_CONV, "cube_utilization(%)": "19.29"}),  # 123_456 / (1000 × 32 × 20) × 100
    # relu (5,11): 102_300 → 103_800; wait (102_300 − 102_000) × 10 ns
    row("11", "5", RELU, "Relu", "static", "AI_CORE", "1700000000001023.025", "15.000", "3.000", "1", RELU_5HD,
        CLOUD_RELU),
    # nms (6,20): 104_000 → 109_000; wait (104_000 − 103_800) × 10 ns
    row("20", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000001040.025", "50.000", "2.000", "1",
        NMS_TENSORS, na(PIPE)),
    # conv (5,14): 200_000 → 202_500; wait (200_000 − 109_000) × 10 ns
    row("14", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000002000.025", "25.000", "910.000", "8",
        CLOUD_CONV_TENSORS, {**CLOUD_CONV, "cube_utilization(%)": "15.432"}),  # 123_456 / (1000 × 32 × 25) × 100
    # relu (5,15): 202_500 → 204_100
    row("15", "5", RELU, "Relu", "static", "AI_CORE", "1700000000002025.025", "16.000", "0.000", "1", RELU_5HD,
        CLOUD_RELU),
    # nms (6,21): 205_000 → 210_500; wait (205_000 − 204_100) × 10 ns
    row("21", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000002050.025", "55.000", "9.000", "1",
        NMS_TENSORS, na(PIPE)),
]
CLOUD_STATISTIC = [  # of 181 µs
    ["0", "NonMaxSuppressionV3", "AI_CPU", "2", "105", "50", "52.5", "55", "58.011"],  # 50 + 55; 105 / 181 × 100
    ["0", "Conv2D", "AI_CORE", "2", "45", "20", "22.5", "25", "24.862"],  # 20 + 25
    ["0", "Relu", "AI_CORE", "2", "31", "15", "15.5", "16", "17.127"],  # 15 + 16
]

# -- Ascend 910B: hwts 50 MHz (20 ns a tick); cntvct_diff 7 at host CPU 100 MHz = 70 ns; aic 1800 MHz,
#    ai_core_num 24, aiv_num 48; ContextPmu records; a task fills its own side, the other side is 0.
STARS_AIV_ZERO = dict.fromkeys(STARS[13:24], "0")
STARS_AIC_ZERO = dict.fromkeys(STARS[:13], "0")
STARS_CONV = {  # total 1_440_000, block 8, ceil(8 / 24) = 1; counters 14_400 720_000 144_000 288_000 432_000 72_000
    # 1_000 40
    "aicore_time(us)": "100",  # 1_440_000 / 1800 / 8
    "aic_total_cycles": "1440000",
    "aic_mac_time(us)": "50", "aic_mac_ratio": "0.5",  # 720_000 / 1_440_000
    "aic_scalar_time(us)": "10", "aic_scalar_ratio": "0.1",  # 144_000 / 1_440_000
    "aic_mte1_time(us)": "20", "aic_mte1_ratio": "0.2",  # 288_000 / 1_440_000
    "aic_mte2_time(us)": "30", "aic_mte2_ratio": "0.3",  # 432_000 / 1_440_000
    "aic_mte3_time(us)": "5", "aic_mte3_ratio": "0.05",  # 72_000 / 1_440_000
    "aic_icache_miss_rate": "0.04",  # 40 / 1_000
    **STARS_AIV_ZERO,
}
STARS_RELU = {  # AI Vector Core: total 36_000, block 4, ceil(4 / 48) = 1; counters 18_000 0 3_600 0 10_800 7_200 400 10
    **STARS_AIC_ZERO,
    "aiv_time(us)": "5",  # 36_000 / 1800 / 4
    "aiv_total_cycles": "36000",
    "aiv_vec_time(us)": "2.5", "aiv_vec_ratio": "0.5",  # 18_000 / 36_000
    "aiv_scalar_time(us)": "0.5", "aiv_scalar_ratio": "0.1",  # 3_600 / 36_000
    "aiv_mte2_time(us)": "1.5", "aiv_mte2_ratio": "0.3",  # 10_800 / 36_000
    "aiv_mte3_time(us)": "1", "aiv_mte3_ratio": "0.2",  # 7_200 / 36_000
    "aiv_icache_miss_rate": "0.025",  # 10 / 400
    "cube_utilization(%)": "0",  # aic_mac_ratio 0
}
STARS_CONV_TENSORS = ('"1,1,28,28,16;9,2,16,16"', "DT_BF16;DT_BF16", "NC1HWC0;FRACTAL_Z", '"1,2,28,28,16"', "DT_BF16",
                      "NC1HWC0")  # data type 27 is DT_BF16 in msprof's GeDataType
STARS_RELU_TENSORS = ('"8,4,16,16"', "DT_BF16", "FRACTAL_NZ", '"64,128"', "DT_BF16", "ND")  # format 29 FRACTAL_NZ
STARS_NMS_TENSORS = ('"100,4;100"', "FLOAT;FLOAT", "ND;ND", '"10"', "INT64", "ND")
STARS_ROWS = [
    # conv (5,10): ticks 50_000 → 56_000: start 1_700_000_000_000_000_000 + 70 + 50_000 × 20 ns; 6_000 × 20 ns
    row("10", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000001000.070", "120.000", "0.000", "8",
        STARS_CONV_TENSORS, {**STARS_CONV, "cube_utilization(%)": "27.778"}),  # 1_440_000 / (1800 × 24 × 120) × 100
    # relu (5,11): 56_100 → 56_500; wait (56_100 − 56_000) × 20 ns
    row("11", "5", RELU, "Relu", "static", "AI_VECTOR_CORE", "1700000000001122.070", "8.000", "2.000", "4",
        STARS_RELU_TENSORS, STARS_RELU),
    # nms (6,20): 56_600 → 59_100; wait (56_600 − 56_500) × 20 ns
    row("20", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000001132.070", "50.000", "2.000", "1",
        STARS_NMS_TENSORS, na(STARS)),
    # conv (5,14): 100_000 → 106_500; wait (100_000 − 59_100) × 20 ns
    row("14", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000002000.070", "130.000", "818.000", "8",
        STARS_CONV_TENSORS, {**STARS_CONV, "cube_utilization(%)": "25.641"}),  # 1_440_000 / (1800 × 24 × 130) × 100
    # relu (5,15): 106_500 → 106_950
    row("15", "5", RELU, "Relu", "static", "AI_VECTOR_CORE", "1700000000002130.070", "9.000", "0.000", "4",
        STARS_RELU_TENSORS, STARS_RELU),
    # nms (6,21): 107_000 → 109_750; wait (107_000 − 106_950) × 20 ns
    row("21", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000002140.070", "55.000", "1.000", "1",
        STARS_NMS_TENSORS, na(STARS)),
]
STARS_STATISTIC = [  # of 372 µs
    ["0", "Conv2D", "AI_CORE", "2", "250", "120", "125", "130", "67.204"],  # 120 + 130; 250 / 372 × 100
    ["0", "NonMaxSuppressionV3", "AI_CPU", "2", "105", "50", "52.5", "55", "28.226"],  # 50 + 55
    ["0", "Relu", "AI_VECTOR_CORE", "2", "17", "8", "8.5", "9", "4.57"],  # 8 + 9
]

# -- CANN 5 JOB folder on a 910: hwts 100 MHz, no cntvct_diff; ops named by GE's task_desc_info (the Conv2D
#    through Framework.hash_dic), shapes from tensor_data_info (none for the AI CPU op).
LEGACY_CONV = {  # total 640_000, block 16, ceil(16 / 32) = 1; counters 64_000 320_000 32_000 128_000 192_000 96_000
    # 5_000 250
    "aicore_time(us)": "40",  # 640_000 / 1000 / 16
    "total_cycles": "640000",
    "vec_time(us)": "4", "vec_ratio": "0.1",  # 64_000 / 640_000
    "mac_time(us)": "20", "mac_ratio": "0.5",  # 320_000 / 640_000
    "scalar_time(us)": "2", "scalar_ratio": "0.05",  # 32_000 / 640_000
    "mte1_time(us)": "8", "mte1_ratio": "0.2",  # 128_000 / 640_000
    "mte2_time(us)": "12", "mte2_ratio": "0.3",  # 192_000 / 640_000
    "mte3_time(us)": "6", "mte3_ratio": "0.15",  # 96_000 / 640_000
    "icache_miss_rate": "0.05",  # 250 / 5_000
    "memory_bound": "0.6",  # 0.3 / max(0.1, 0.5)
}
LEGACY_RELU = {  # total 8_000, block 1; counters 4_000 0 800 0 2_400 1_600 100 5
    "aicore_time(us)": "8",  # 8_000 / 1000 / 1
    "total_cycles": "8000",
    "vec_time(us)": "4", "vec_ratio": "0.5",  # 4_000 / 8_000
    "mac_time(us)": "0", "mac_ratio": "0",
    "scalar_time(us)": "0.8", "scalar_ratio": "0.1",  # 800 / 8_000
    "mte1_time(us)": "0", "mte1_ratio": "0",
    "mte2_time(us)": "2.4", "mte2_ratio": "0.3",  # 2_400 / 8_000
    "mte3_time(us)": "1.6", "mte3_ratio": "0.2",  # 1_600 / 8_000
    "icache_miss_rate": "0.05",  # 5 / 100
    "memory_bound": "0.6",  # 0.3 / max(0.5, 0)
    "cube_utilization(%)": "0",  # mac_ratio 0
}
LEGACY_CONV_TENSORS = ('"1,16,28,28"', "FLOAT16", "NCHW", '"1,32,28,28"', "FLOAT16", "NCHW")
LEGACY_RELU_TENSORS = ('"1,32,28,28"', "FLOAT16", "NCHW", '"1,32,28,28"', "FLOAT16", "NCHW")
LEGACY_ROWS = [
    # conv (5,10): ticks 100_000 → 103_000: start 1_700_000_000_000_000_000 + 1_000_000 ns
    row("10", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000001000.000", "30.000", "0.000", "16",
        LEGACY_CONV_TENSORS, {**LEGACY_CONV, "cube_utilization(%)": "66.667"}),  # 640_000 / (1000 × 32 × 30) × 100
    # relu (5,11): 103_000 → 104_000
    row("11", "5", RELU, "Relu", "static", "AI_CORE", "1700000000001030.000", "10.000", "0.000", "1",
        LEGACY_RELU_TENSORS, LEGACY_RELU),
    # nms (6,20): 104_500 → 108_500; wait (104_500 − 104_000) × 10 ns
    row("20", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000001045.000", "40.000", "5.000", "1",
        (NA,) * 6, na(PIPE)),
    # conv (5,14): 200_000 → 203_200; wait (200_000 − 108_500) × 10 ns
    row("14", "5", CONV, "Conv2D", "static", "AI_CORE", "1700000000002000.000", "32.000", "915.000", "16",
        LEGACY_CONV_TENSORS, {**LEGACY_CONV, "cube_utilization(%)": "62.5"}),  # 640_000 / (1000 × 32 × 32) × 100
    # relu (5,15): 203_400 → 204_500; wait (203_400 − 203_200) × 10 ns
    row("15", "5", RELU, "Relu", "static", "AI_CORE", "1700000000002034.000", "11.000", "2.000", "1",
        LEGACY_RELU_TENSORS, LEGACY_RELU),
    # nms (6,21): 204_500 → 209_000
    row("21", "6", NMS, "NonMaxSuppressionV3", "dynamic", "AI_CPU", "1700000000002045.000", "45.000", "0.000", "1",
        (NA,) * 6, na(PIPE)),
]
LEGACY_STATISTIC = [  # of 168 µs
    ["0", "NonMaxSuppressionV3", "AI_CPU", "2", "85", "40", "42.5", "45", "50.595"],  # 40 + 45; 85 / 168 × 100
    ["0", "Conv2D", "AI_CORE", "2", "62", "30", "31", "32", "36.905"],  # 30 + 32
    ["0", "Relu", "AI_CORE", "2", "21", "10", "10.5", "11", "12.5"],  # 10 + 11
]

EXPECTED: dict[str, tuple[list[str], list[dict[str, str]], list[list[str]]]] = {
    "mini": (PIPE, MINI_ROWS, MINI_STATISTIC),
    "cloud": (PIPE, CLOUD_ROWS, CLOUD_STATISTIC),
    "910b": (STARS, STARS_ROWS, STARS_STATISTIC),
    "legacy": (PIPE, [{**r, "HF32 Eligible": NA} for r in LEGACY_ROWS], LEGACY_STATISTIC),  # CANN 5/6: no op flag
}


def load(path: Path) -> ModuleType:
    """A helper module that is not on the import path (tests/stages/chain.py, tests/data/make_golden.py)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


chain = load(TESTS / "stages" / "chain.py")


# -- running the pipeline in one process ------------------------------------------------------------------
def golden_dir(chip: str) -> Path:
    """The PROF_… (or JOB…) folder of a chip's golden directory."""
    (found,) = (DATA / chip).iterdir()
    return found


Tables = dict[str, list[dict[str, str]]]


def summaries(prof: Path, out: Path) -> tuple[Tables, dict[str, Any], list[Batch]]:
    """collector → decoder → aggregator → summary sink on a finished directory: the CSV rows per module,
    each stage's figures and the aggregator's batches."""
    emitted, figures = chain.run_chain(prof, out)
    sink = SummarySink(SummarySink.Config(timestamp="20240101000000"), chain.make_ctx("summary", out))
    sink.open()
    for batch in emitted:
        sink.write_batch(batch)
    sink.close()
    tables: Tables = {}
    for module in ("op_summary", "op_statistic", "api_statistic", "task_time", "step_trace"):
        with open(out / "mindstudio_profiler_output" / f"{module}_20240101000000.csv", newline="") as handle:
            tables[module] = list(csv.DictReader(handle))
    return tables, figures, emitted


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Tables, dict[str, Any], list[Batch]]]:
    return {chip: summaries(golden_dir(chip), tmp_path_factory.mktemp(chip)) for chip in CHIPS}


@pytest.mark.parametrize("chip", CHIPS)
def test_op_summary_rows_equal_the_hand_worked_ones(chip: str, outputs: dict) -> None:
    columns, expected, _ = EXPECTED[chip]
    tables = outputs[chip][0]
    rows = tables["op_summary"]
    assert list(rows[0]) == [*BASE, *columns]
    assert all(r["Task Start Time(us)"].endswith("\t") for r in rows)  # msprof's spreadsheet guard
    got = [{**r, "Task Start Time(us)": r["Task Start Time(us)"].rstrip("\t")} for r in rows]
    assert len(got) == len(expected)
    for index, (actual, wanted) in enumerate(zip(got, expected, strict=True)):
        assert set(actual) == set(wanted), index
        differing = {k: (actual[k], wanted[k]) for k in wanted if actual[k] != wanted[k]}
        assert not differing, f"row {index} (task {wanted['Task ID']}): (ours, hand-worked) {differing}"


@pytest.mark.parametrize("chip", CHIPS)
def test_op_statistic_rows_equal_the_hand_worked_ones(chip: str, outputs: dict) -> None:
    tables = outputs[chip][0]
    assert [list(r.values()) for r in tables["op_statistic"]] == EXPECTED[chip][2]


KERNELS = {CONV: "te_conv2d_1a2b", RELU: "te_relu_3c4d", NMS: "N/A"}  # make_golden's kernels; NMS reports none
ITERATION_TASKS = (("10", "11", "20"), ("14", "15", "21"))
KEYPOINT_TICKS = 1000  # make_golden's model start / end keypoints: this many ticks before / after the tasks


def _ns(us: str) -> int:
    whole, _, frac = us.partition(".")
    return int(whole) * 1000 + int(frac)


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


@pytest.mark.parametrize("chip", CHIPS)
def test_task_time_rows_follow_the_hand_worked_tasks(chip: str, outputs: dict) -> None:
    """One row per device task: the runtime's kernel name (the op name in legacy data, which has none),
    start / stop with msprof's TAB, duration = stop − start; by start."""
    tasks = sorted(EXPECTED[chip][1], key=lambda r: _ns(r["Task Start Time(us)"]))
    expected = []
    for task in tasks:
        start, duration = _ns(task["Task Start Time(us)"]), _ns(task["Task Duration(us)"])
        kernel = task["Op Name"] if chip == "legacy" else KERNELS[task["Op Name"]]
        expected.append({"Device_id": "0", "kernel_name": kernel, "kernel_type": task["Task Type"],
                         "stream_id": task["Stream ID"], "task_id": task["Task ID"], "task_time(us)": _us(duration),
                         "task_start(us)": _us(start) + "\t", "task_stop(us)": _us(start + duration) + "\t"})
    assert outputs[chip][0]["task_time"] == expected


@pytest.mark.parametrize("chip", CHIPS)
def test_step_trace_rows_from_the_keypoints(chip: str, outputs: dict) -> None:
    """Model start 1000 ticks before an iteration's first task, model end 1000 ticks after its last: iteration time
    = (last end − first start) + 2000 ticks; no FP / BP keypoints, so those columns are N/A."""
    tick_ns = 20 if chip == "910b" else 10  # hwts 50 MHz on the 910B, 100 MHz elsewhere
    by_task = {r["Task ID"]: r for r in EXPECTED[chip][1]}
    expected = []
    for iteration, ids in enumerate(ITERATION_TASKS, start=1):
        first = min(_ns(by_task[i]["Task Start Time(us)"]) for i in ids)
        last = max(_ns(by_task[i]["Task Start Time(us)"]) + _ns(by_task[i]["Task Duration(us)"]) for i in ids)
        begin, end = first - KEYPOINT_TICKS * tick_ns, last + KEYPOINT_TICKS * tick_ns
        expected.append({"Device_id": "0", "Iteration ID": str(iteration), "FP Start(us)": NA, "BP End(us)": NA,
                         "Iteration End(us)": _us(end) + "\t", "Iteration Time(us)": _us(end - begin),
                         "FP to BP Time(us)": NA, "Iteration Refresh(us)": NA, "Data Aug Bound(us)": NA,
                         "Model ID": "3"})
    assert outputs[chip][0]["step_trace"] == expected


@pytest.mark.parametrize("chip", CHIPS)
def test_every_record_is_decoded_and_nothing_rejected(chip: str, outputs: dict) -> None:
    figures = outputs[chip][1]
    decoder = figures["decoder"]
    assert decoder["records_in"] == decoder["decoded"] == figures["collector"]["records_collected"] > 0
    assert figures["rejected"] == {}
    assert figures["aggregator"]["tasks_out"] == 6


@pytest.mark.slow
def test_pipeline_import_gives_the_same_rows(tmp_path: Path) -> None:
    """The real `pipeline import` (stages as processes over ZeroMQ) on the 910B's directory."""
    result = run_cli("import", str(golden_dir("910b")), "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    folder = tmp_path / "mindstudio_profiler_output"
    tables = {}
    for module in ("op_summary", "op_statistic"):
        (path,) = folder.glob(f"{module}_[0-9]*.csv")
        with open(path, newline="") as handle:
            tables[module] = list(csv.DictReader(handle))
    assert [{**r, "Task Start Time(us)": r["Task Start Time(us)"].rstrip("\t")} for r in tables["op_summary"]] \
        == STARS_ROWS
    assert [list(r.values()) for r in tables["op_statistic"]] == STARS_STATISTIC


# Host clock: with a CPU Frequency of 1000 MHz (cloud, legacy) host records hold monotonic ns as they
# are and host_start.log's cntvct (2_999_999_000_000 on the cloud, not clock_monotonic_raw) plays no part; with
# 100 MHz (mini, 910B) ns = clock_monotonic_raw + cntvct_diff × 10 + (ticks − cntvct) × 10. aclmdlExecute of
# iteration r spans [490, 700] µs + (r − 1) ms after collection start, so it starts at local
# 1_700_000_000_000_490_000 ns (+ 30 ns for the mini's cntvct_diff 3, + 70 ns for the 910B's 7).
ACL_EXECUTE_SPANS = {  # (start, end) local ns of iterations 1 and 2
    "mini": [(1_700_000_000_000_490_030, 1_700_000_000_000_700_030),
             (1_700_000_000_001_490_030, 1_700_000_000_001_700_030)],
    "cloud": [(1_700_000_000_000_490_000, 1_700_000_000_000_700_000),
              (1_700_000_000_001_490_000, 1_700_000_000_001_700_000)],
    "910b": [(1_700_000_000_000_490_070, 1_700_000_000_000_700_070),
             (1_700_000_000_001_490_070, 1_700_000_000_001_700_070)],
    "legacy": [(1_700_000_000_000_490_000, 1_700_000_000_000_700_000),
               (1_700_000_000_001_490_000, 1_700_000_000_001_700_000)],
}


@pytest.mark.parametrize("chip", CHIPS)
def test_host_api_times_follow_the_host_clock(chip: str, outputs: dict) -> None:
    rows = [row for batch in outputs[chip][2] if batch.kind == "api" for row in unpack_rows(batch)]
    acl = sorted((int(start), int(end)) for start, end, level, *_ in rows if level == 20000)
    assert acl == ACL_EXECUTE_SPANS[chip]


# -- the directory alone selects the chip and the record formats ------------------------------------------
STREAM_KINDS = {  # device data streams (slice base name → decoded framing/kind), by platform_version
    "mini": {"ts_track.data.0": "mini_ts_track", "aicore.data.0": "mini_aicore"},
    "cloud": {"hwts.data.0": "hwts", "aicore.data.0": "aicore", "ts_track.data.0": "ts_track"},
    "910b": {"stars_soc.data.0": "stars_soc", "ffts_profile.data.0": "ffts_profile", "ts_track.data.0": "ts_track"},
    "legacy": {"hwts.log.data.45.dev.profiler_default_tag.0": "hwts",
               "aicore.data.43.dev.profiler_default_tag.0": "aicore",
               "ts_track.data.46.dev.profiler_default_tag.0": "ts_track",
               "AclModule.acl_model.0": "legacy_acl", "Framework.step_info.0": "legacy_ge_step",
               "Framework.task_desc_info.0": "legacy_ge_task", "Framework.tensor_data_info.0": "legacy_ge_tensor",
               "Framework.hash_dic.0": "hash_dic", "Runtime.task_track.0": "legacy_rt_track"},
}
HOST_KINDS = {"unaging.api_event.data": "api_event", "unaging.compact.node_basic_info": "node_basic_info",
              "aging.compact.node_basic_info": "node_basic_info", "unaging.compact.task_track": "task_track",
              "unaging.additional.tensor_info": "tensor_info", "aging.additional.tensor_info": "tensor_info",
              "unaging.additional.hash_dic": "hash_dic", "unaging.additional.type_info_dic": "type_info_dic"}
# NPU_INFO's chip names (msprof's exporter: platform_version 0 Ascend310, 1 Ascend910A, 5 Ascend910B)
CHIP_NAMES = {"mini": "Ascend310", "cloud": "Ascend910A", "910b": "Ascend910B", "legacy": "Ascend910A"}


def stream_kinds(prof: Path, out: Path) -> dict[str, str]:
    """Slice base name → the stream kind the collector frames it as."""
    collector = CollectorStage(CollectorStage.Config(path=str(prof), follow=False), chain.make_ctx("collect", out))
    for _ in collector.batches():
        pass
    assert collector.tree is not None
    return {state.base: state.kind.name for state in collector.tree.streams.values()}


@pytest.mark.parametrize("chip", CHIPS)
def test_the_directory_alone_selects_chip_and_formats(chip: str, outputs: dict, tmp_path: Path) -> None:
    expected = dict(STREAM_KINDS[chip], **({} if chip == "legacy" else HOST_KINDS))
    assert stream_kinds(golden_dir(chip), tmp_path) == expected
    # run_info is sent again as facts come in (the host's control files, then each device's): the last is whole
    info = [b for b in chain.run_chain(golden_dir(chip), tmp_path / "chain")[0] if b.kind == "run_info"][-1]
    (run_info,) = unpack_rows(info)[0]
    assert run_info["devices"]["0"]["chip"] == CHIP_NAMES[chip]


@pytest.mark.parametrize(("chip", "claimed", "kinds"), [
    ("mini", "1", {"ts_track.data.0": "ts_track", "aicore.data.0": "aicore"}),  # 40 B / 128 B fixed records
    ("cloud", "0", {"ts_track.data.0": "mini_ts_track", "aicore.data.0": "mini_aicore"}),  # no hwts on a 310
    ("910b", "1", {"ts_track.data.0": "ts_track"}),  # STARS files are not read on a 910
])
def test_platform_version_not_the_file_names_decides(chip: str, claimed: str, kinds: dict[str, str],
                                                     tmp_path: Path) -> None:
    prof = tmp_path / "prof"
    shutil.copytree(golden_dir(chip), prof)
    info_path = prof / "device_0" / "info.json.0"
    info = json.loads(info_path.read_text())
    info["platform_version"] = claimed
    info_path.write_text(json.dumps(info))
    found = {k: v for k, v in stream_kinds(prof, tmp_path).items() if k in STREAM_KINDS[chip]}
    assert found == kinds


# -- the generator still writes the committed bytes ----------------------------------------------------
def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_make_golden_reproduces_the_committed_bytes(tmp_path: Path) -> None:
    load(DATA / "make_golden.py").make(tmp_path)
    for chip in CHIPS:
        assert _files(tmp_path / chip) == _files(DATA / chip), chip


def test_golden_data_stays_small() -> None:
    sizes = [p.stat().st_size for p in DATA.rglob("*") if p.is_file()]
    assert sum(sizes) < 200_000
