"""PMU formulas of every ai_core_metrics group, against values worked out by hand.

One record throughout: 1 234 567 total cycles, block_num 4 on 2 cores (the blocks run in 2 waves), a
1000 MHz AI Core clock, 700 µs task duration. aicore_time = 1 234 567 cycles / 1000 MHz / 4 × 2 =
617.2835 µs; the 910 (HWTS path) prints it rounded, 617.28, and multiplies that by each ratio.
"""

from __future__ import annotations

import pytest

from stages.aggregator.metrics import pmu_columns, pmu_values
from stages.formats.raw import PMU_EVENT_SETS

CYCLES, BLOCK, CORES, MHZ, DURATION_NS = 1_234_567, 4, 2, 1000.0, 700_000
COUNTS = {0x8: 400_000, 0xA: 800_000, 0x9: 123_456, 0xB: 0, 0xC: 600_000, 0xD: 300_000, 0x54: 30_000, 0x55: 600,
          0x416: 500_000, 0x417: 100_000, 0x302: 50_000, 0x303: 80_000, 0x12C: 350_000,
          0x49: 700_000, 0x4A: 100_000, 0x4B: 50_000, 0x4C: 200_000, 0x4D: 30_000, 0x4E: 10_000, 0x4F: 20_000,
          0x15: 500_000, 0x16: 250_000, 0x31: 100_000, 0x32: 200_000, 0xF: 40_000, 0x10: 30_000, 0x12: 100_000,
          0x13: 90_000, 0x1B: 10_000, 0x1C: 20_000, 0x21: 30_000, 0x22: 40_000, 0x27: 1_000, 0x28: 2_000,
          0x29: 3_000, 0x2A: 4_000, 0x37: 5_000, 0x38: 6_000, 0x3D: 7_000, 0x3E: 8_000, 0x43: 9_000, 0x44: 11_000,
          0x64: 12_345, 0x65: 23_456, 0x66: 34_567, 0x500: 11, 0x502: 22, 0x504: 33, 0x506: 44, 0x508: 55,
          0x50A: 66, 0x206: 1_000, 0x20C: 5_000, 0x50C: 2_048, 0x50D: 1_024, 0x50E: 512}


def _row(group: str, platform: int = 1, **kw: float) -> dict[str, float | None]:
    events = list(PMU_EVENT_SETS[group])
    values = pmu_values(events, CYCLES, [COUNTS[e] for e in events], BLOCK, CORES, MHZ, metric=group,
                        platform=platform, duration_ns=DURATION_NS, **kw)  # type: ignore[arg-type]
    columns = pmu_columns(events, group, platform)
    assert len(values) == len(columns)
    return dict(zip(columns, values, strict=True))


def test_pipe_utilization_on_the_910() -> None:
    row = _row("PipeUtilization")
    assert list(row) == ["aicore_time(us)", "total_cycles", "vec_time(us)", "vec_ratio", "mac_time(us)", "mac_ratio",
                         "scalar_time(us)", "scalar_ratio", "mte1_time(us)", "mte1_ratio", "mte2_time(us)",
                         "mte2_ratio", "mte3_time(us)", "mte3_ratio", "icache_miss_rate", "memory_bound",
                         "cube_utilization(%)"]
    assert row["aicore_time(us)"] == 617.28 and row["total_cycles"] == CYCLES
    assert row["vec_ratio"] == pytest.approx(0.3240002365201727)  # 400 000 / 1 234 567
    assert row["vec_time(us)"] == pytest.approx(199.99886599917218)  # 617.28 × vec_ratio
    assert row["mac_time(us)"] == pytest.approx(399.99773199834436)
    assert row["mte1_ratio"] == 0.0 and row["mte1_time(us)"] == 0.0
    assert row["icache_miss_rate"] == pytest.approx(0.02)  # 600 / 30 000
    assert row["memory_bound"] == 0.75  # 0.486 / max(0.324, 0.648), 3-decimal ratios
    assert row["cube_utilization(%)"] == 88.183  # 1 234 567 / (1000 MHz × 2 cores × 700 000 ns) × 10^5


def test_pipe_utilization_on_the_310_scales_each_pipe_directly() -> None:
    row = _row("PipeUtilization", platform=0)
    assert row["aicore_time(us)"] == pytest.approx(617.2835)  # not rounded
    assert row["vec_time(us)"] == pytest.approx(200.0)  # 400 000 cycles / 1000 MHz / 4 × 2
    assert row["scalar_time(us)"] == pytest.approx(61.728)
    assert row["vec_ratio"] == pytest.approx(0.3240002365201727)


def test_pipe_utilization_exct_sums_the_mac_events_and_keeps_cube_utilization() -> None:
    row = _row("PipeUtilizationExct")
    assert list(row)[2:] == ["mac_time(us)", "mac_ratio", "scalar_time(us)", "scalar_ratio", "mte1_time(us)",
                             "mte1_ratio", "mte2_time(us)", "mte2_ratio", "fixpipe_time(us)", "fixpipe_ratio",
                             "icache_miss_rate", "cube_utilization(%)"]
    assert row["mac_ratio"] == pytest.approx(600_000 / CYCLES)  # 0x416 + 0x417
    assert row["mte1_ratio"] == pytest.approx(50_000 / CYCLES)  # 0x302
    assert row["fixpipe_time(us)"] == pytest.approx(617.28 * 80_000 / CYCLES)
    assert row["cube_utilization(%)"] == 88.183


def test_pipeline_execute_utilization() -> None:
    row = _row("PipelineExecuteUtilization")
    assert list(row)[2:] == [f"{p}_exe_{w}" for p in ("vec", "mac", "scalar", "mte1", "mte2", "mte3", "fixpipe")
                             for w in ("time(us)", "ratio")] + ["memory_bound"]
    assert row["mac_exe_ratio"] == pytest.approx(800_000 / CYCLES)  # 0x49 + 0x4a
    assert row["vec_exe_time(us)"] == pytest.approx(617.28 * 350_000 / CYCLES)
    assert row["memory_bound"] == pytest.approx(0.75)  # 0.486 / max(0.284, 0.648)
    assert _row("PipelineExecuteUtilization", platform=0)["mte2_exe_time(us)"] == pytest.approx(300.0)


def test_arithmetic_utilization_fops() -> None:
    row = _row("ArithmeticUtilization")
    assert list(row)[2:] == ["mac_fp16_ratio", "mac_int8_ratio", "vec_fp32_ratio", "vec_fp16_ratio", "vec_int32_ratio",
                             "vec_misc_ratio", "cube_fops", "vector_fops"]
    assert row["vec_fp16_ratio"] == pytest.approx(0.18630013599909928)  # (200 000 + 30 000) / cycles
    assert row["cube_fops"] == pytest.approx(7_372_800_000)  # 700 000 × 16·16·16·2 + 100 000 × 16·16·32·2
    # 200 000 × 128 + 30 000 × 64 + 50 000 × 64 (fp32) + 10 000 × 64 + 20 000 × 32
    assert row["vector_fops"] == pytest.approx(32_000_000)
    assert _row("ArithmeticUtilization", platform=0)["vector_fops"] == 30_400_000  # the 310 counts fp32 as 32 lanes


def test_memory_bandwidths() -> None:
    row = _row("Memory")
    assert list(row)[2:] == ["ub_read_bw(GB/s)", "ub_write_bw(GB/s)", "l1_read_bw(GB/s)", "l1_write_bw(GB/s)",
                             "main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)"]  # msprof drops l2_* here
    # 500 000 × 1024 B / (1 234 567 cycles / 10^9 Hz) / 2^33
    assert row["ub_read_bw(GB/s)"] == pytest.approx(48.27979751231859)
    assert row["l1_write_bw(GB/s)"] == pytest.approx(38.62383800985487)  # 2048 B per count
    assert row["main_mem_read_bw(GB/s)"] == pytest.approx(0.6034974689039824)  # 64 B per count
    mini = _row("Memory", platform=0)
    assert "l2_read_bw(GB/s)" in mini
    assert mini["ub_read_bw(GB/s)"] == pytest.approx(96.55959502463718)  # per block: / 4 × 2 of the time
    assert mini["main_mem_read_bw(GB/s)"] == pytest.approx(38.62383800985487)  # 2048 B per count there


def test_memory_l0_and_ub() -> None:
    l0 = _row("MemoryL0")
    assert l0["l0b_read_bw(GB/s)"] == pytest.approx(30_000 * 2048 / (CYCLES / 1e9) / 2**33)
    assert _row("MemoryL0", platform=0)["l0b_read_bw(GB/s)"] == pytest.approx(
        30_000 * 4096 / (CYCLES / 1e9 / 4 * 2) / 2**33)
    ub = _row("MemoryUB")
    assert list(ub)[2:] == ["ub_read_bw_vector(GB/s)", "ub_write_bw_vector(GB/s)", "ub_read_bw_scalar(GB/s)",
                            "ub_write_bw_scalar(GB/s)"]
    assert ub["ub_read_bw_vector(GB/s)"] == pytest.approx(9_000 * 256 / (CYCLES / 1e9) / 2**33)
    assert _row("MemoryUB", platform=0)["ub_read_bw_mte(GB/s)"] == pytest.approx(
        7_000 * 1024 / (CYCLES / 1e9 / 4 * 2) / 2**33)


def test_resource_conflicts_l2_cache_and_memory_access() -> None:
    conflicts = _row("ResourceConflictRatio")
    assert conflicts["vec_bank_cflt_ratio"] == pytest.approx(23_456 / CYCLES)
    l2 = _row("L2Cache")
    assert [l2[c] for c in list(l2)[2:]] == [11, 22, 33, 44, 55, 66]
    access = _row("MemoryAccess")
    assert access["read_main_memory_datas(KB)"] == 192  # (1024 + 512) × 128 B
    assert access["write_main_memory_datas(KB)"] == 256
    assert access["gm_to_l1_datas(KB)"] == 49_750  # (200 000 − 1000) × 256 B
    assert access["l0c_to_gm_datas(KB)"] == 500  # (5000 − 1000) × 128 B
    assert access["ub_to_gm_datas(KB)"] == 875  # 7000 × 128 B


def test_a_lower_clock_lengthens_times_but_not_bandwidths() -> None:
    slow = _row("Memory", time_mhz=800.0)
    assert slow["aicore_time(us)"] == 771.6  # 617.2835 × 1000/800, rounded
    assert slow["ub_read_bw(GB/s)"] == _row("Memory")["ub_read_bw(GB/s)"]


def test_missing_events_and_custom_event_lists() -> None:
    events = [0x8, 0xA]  # a PipeUtilization device whose list lacks the other events
    row = dict(zip(pmu_columns(events, "PipeUtilization"),
                   pmu_values(events, CYCLES, [1, 2], BLOCK, CORES, MHZ, metric="PipeUtilization"), strict=True))
    assert row["vec_ratio"] == pytest.approx(1 / CYCLES) and row["scalar_ratio"] is None
    assert row["icache_miss_rate"] is None and row["memory_bound"] is None
    custom = [0x1, 0x7]
    assert pmu_columns(custom, "Custom") == ["aicore_time(us)", "total_cycles", "r1", "r7"]
    assert pmu_values(custom, CYCLES, [5, 6], BLOCK, CORES, MHZ, metric="Custom")[2:] == [5.0, 6.0]
    # a sample.json without ai_core_metrics: the group is recognised by its event set
    assert pmu_columns(list(PMU_EVENT_SETS["Memory"])) == pmu_columns(list(PMU_EVENT_SETS["Memory"]), "Memory")
