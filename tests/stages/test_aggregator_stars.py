"""aic_/aiv_ PMU columns of STARS chips, against values worked out by hand."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chain import run_chain

from stages.aggregator.stars import StarsPmu
from stages.decoder import records
from stages.schema import CONTEXT_ID_NONE, SymbolTable, unpack_rows
from stages.simulator.run import simulate

PIPE = [0x8, 0xA, 0x9, 0xB, 0xC, 0xD, 0x54, 0x55]  # PipeUtilization, counter-slot order
FACTS = {"platform": 5, "aic_frequency_mhz": 1800.0, "ai_core_num": 24, "aiv_num": 48, "pmu_events": PIPE,
         "aiv_pmu_events": PIPE}
# The header msprof's exporter writes for this event set on a 910B (its Python path, checked on a simulated run;
# the C++ path leaves out the same aic_vec / aiv_mac / aiv_mte1 columns).
MSPROF_HEADER = [
    "aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio", "aic_scalar_time(us)",
    "aic_scalar_ratio", "aic_mte1_time(us)", "aic_mte1_ratio", "aic_mte2_time(us)", "aic_mte2_ratio",
    "aic_mte3_time(us)", "aic_mte3_ratio", "aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles",
    "aiv_vec_time(us)", "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
    "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_icache_miss_rate", "cube_utilization(%)",
]
# ... and the metrics it leaves out of op_summary but writes to TASK_PMU_INFO (its C++ exporter's database, checked
# on a simulated run with scripts/compare_db_with_msprof.py)
MSPROF_HIDDEN = {"aic_vec_time(us)", "aic_vec_ratio", "aiv_mac_time(us)", "aiv_mac_ratio", "aiv_mte1_time(us)",
                 "aiv_mte1_ratio"}


def _record(core: int, total: int, counters: list[int], overflow: int = 0) -> Any:
    record = np.zeros(1, records.CONTEXT_PMU)
    record["core"], record["total_cycle"], record["pmu"], record["overflow"] = core, total, counters, overflow
    return record[0]


def _by_name(layout: StarsPmu, values: list[float | None]) -> dict[str, float | None]:
    assert len(values) == len(layout.columns)
    return dict(zip(layout.columns, values, strict=True))


def test_columns_match_msprof_header() -> None:
    assert StarsPmu(FACTS).columns == MSPROF_HEADER


def test_ai_core_task_by_hand() -> None:
    """2,160,000 cycles over block 30 on 24 cores at 1800 MHz: 2.16e6 / 1800 / 30 × ceil(30/24) = 80 µs."""
    layout = StarsPmu(FACTS)
    counters = [0, 1_080_000, 216_000, 432_000, 864_000, 108_000, 54_000, 1_350]
    got = _by_name(layout, layout.values(_record(records.CORE_AIC, 2_160_000, counters), 30, 100_000))
    expected = {"aicore_time(us)": 80.0, "aic_total_cycles": 2_160_000, "aic_mac_ratio": 0.5, "aic_mac_time(us)": 40.0,
                "aic_scalar_ratio": 0.1, "aic_scalar_time(us)": 8.0, "aic_mte1_ratio": 0.2, "aic_mte1_time(us)": 16.0,
                "aic_mte2_ratio": 0.4, "aic_mte2_time(us)": 32.0, "aic_mte3_ratio": 0.05, "aic_mte3_time(us)": 4.0,
                "aic_icache_miss_rate": 0.025,
                # 2.16e6 / (1800 MHz × 24 cores × 100 µs) × 100
                "cube_utilization(%)": 50.0}
    for name, value in expected.items():
        assert got[name] == pytest.approx(value), name
    assert all(got[name] == 0 for name in MSPROF_HEADER if name.startswith("aiv_"))  # msprof writes 0 there


def test_vector_core_task_by_hand_uses_aiv_num() -> None:
    """720,000 cycles over block 48 on 48 vector cores: 720000 / 1800 / 48 × 1 = 8.333 µs (with the 24 AI Cores
    it would be twice that)."""
    layout = StarsPmu(FACTS)
    counters = [360_000, 0, 72_000, 0, 288_000, 0, 10_000, 500]
    got = _by_name(layout, layout.values(_record(records.CORE_AIV, 720_000, counters), 48, 20_000))
    expected = {"aiv_time(us)": 720_000 / 1800 / 48, "aiv_total_cycles": 720_000, "aiv_vec_ratio": 0.5,
                "aiv_vec_time(us)": 720_000 / 1800 / 48 / 2, "aiv_scalar_ratio": 0.1, "aiv_mte2_ratio": 0.4,
                "aiv_mte3_ratio": 0.0, "aiv_mte3_time(us)": 0.0, "aiv_icache_miss_rate": 0.05}
    for name, value in expected.items():
        assert got[name] == pytest.approx(value), name
    assert all(got[name] == 0 for name in MSPROF_HEADER if name.startswith("aic") and name != "aiv_time(us)")
    assert got["cube_utilization(%)"] == 0  # no cube work: 0, as msprof writes it


def test_counters_are_named_by_event_id_not_by_slot() -> None:
    facts = dict(FACTS, pmu_events=[0xC, 0xA], aiv_pmu_events=[0xD])
    layout = StarsPmu(facts)
    assert layout.columns == ["aicore_time(us)", "aic_total_cycles", "aic_mte2_time(us)", "aic_mte2_ratio",
                              "aic_mac_time(us)", "aic_mac_ratio", "aiv_time(us)", "aiv_total_cycles",
                              "aiv_mte3_time(us)", "aiv_mte3_ratio", "cube_utilization(%)"]
    got = _by_name(layout, layout.values(_record(records.CORE_AIC, 1_000, [400, 500] + [0] * 6), 1, 1_000))
    assert (got["aic_mte2_ratio"], got["aic_mac_ratio"]) == (0.4, 0.5)
    assert layout.values(_record(records.CORE_AIV, 1_000, [300] + [0] * 7), 1, 1_000)[9] == 0.3


def test_mix_overflow_and_missing_records() -> None:
    layout = StarsPmu(FACTS)
    counters = [0, 500, 0, 0, 0, 0, 10, 1]
    mix = _by_name(layout, layout.values(_record(records.CORE_MIX_AIC, 1_000, counters), 1, 1_000))
    assert mix["aic_total_cycles"] == 1_000 and mix["aic_mac_ratio"] == 0.5
    assert all(mix[name] is None for name in MSPROF_HEADER if name.startswith("aiv_"))  # slave core: BlockPmu
    overflowed = layout.values(_record(records.CORE_AIC, 1_000, counters, overflow=1), 1, 1_000)
    assert overflowed == [None] * len(MSPROF_HEADER) == layout.values(None, 1, 1_000)


def test_no_vector_events_means_no_aiv_counter_columns() -> None:
    layout = StarsPmu(dict(FACTS, aiv_pmu_events=[]))
    assert [c for c in layout.columns if c.startswith("aiv")] == []
    assert layout.columns[-1] == "cube_utilization(%)"


# -- chain: simulated 910B → collector → decoder → aggregator, against the simulator's truth ------------------


def _chain_rows(batches: list) -> tuple[SymbolTable, list[list[Any]], list[str], list[str]]:
    symbols = SymbolTable()
    rows: list[list[Any]] = []
    columns: list[str] = []
    hidden: list[str] = []
    for batch in batches:
        symbols.learn(batch.meta.get("symbols", []))
        if batch.kind == "task":
            rows.extend(unpack_rows(batch))
            columns, hidden = batch.meta["pmu_columns"], batch.meta["hidden_pmu_columns"]
    return symbols, rows, columns, hidden


def test_simulated_910b_joins_exactly_with_aic_and_aiv_columns(tmp_path: Path) -> None:
    # 8100-byte slices split records across slices (msprof's Python path would lose ContextPmu records
    # here); task ids start near the 16-bit limit so the AI Core stream flips.
    prof = simulate(tmp_path / "board", chip="910b", iterations=8, rate="max", seed=4, slice_bytes=8100,
                    first_task_id=65_500)
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    assert truth["task_flips"] == 1
    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {} and figures["decoder"]["rejected"] == 0
    final = next(b for b in batches if b.kind == "op_statistic" and b.meta.get("final"))
    ours = {(op, core): (count, total, low, high) for _, op, core, count, total, low, high in unpack_rows(final)}
    assert ours == {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"], t["min_ns"], t["max_ns"])
                    for t in truth["op_statistic"]}
    symbols, rows, columns, hidden = _chain_rows(batches)
    assert columns == MSPROF_HEADER and len(hidden) == len(MSPROF_HIDDEN) and set(hidden) == MSPROF_HIDDEN
    at = {name: i for i, name in enumerate(columns)}
    assert {row[5] for row in rows} == {0, 1}  # batch ids from the flips
    by_core = Counter(symbols[row[10]] for row in rows)
    assert by_core == {core: sum(t["count"] for t in truth["op_statistic"] if t["core_type"] == core)
                       for core in ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX_AIC")}
    contexts: dict[tuple[int, int, int], list[int]] = {}  # FFTS+ task (stream, task, batch) → its rows' context ids
    for row in rows:
        core, pmu, duration_us = symbols[row[10]], row[22], (row[7] - row[6]) / 1000
        assert len(pmu) == len(columns) + len(hidden)
        assert (row[23] != CONTEXT_ID_NONE) == (core == "MIX_AIC")
        if core == "MIX_AIC":
            contexts.setdefault((row[3], row[4], row[5]), []).append(row[23])
        if core == "AI_CPU":
            assert pmu == [None] * len(pmu)
            continue
        main, other = ("aiv", "aic") if core == "AI_VECTOR_CORE" else ("aic", "aiv")
        assert pmu[at[f"{main}_total_cycles"]] > 0
        assert pmu[at[f"{other}_total_cycles"]] == (None if core == "MIX_AIC" else 0)  # MIX slave side: BlockPmu
        hidden_values = dict(zip(hidden, pmu[len(columns):], strict=True))
        # the side that did not run the task is 0 in the hidden metrics too (N/A for a MIX task's slave side)
        assert all(value == (None if core == "MIX_AIC" else 0) for name, value in hidden_values.items()
                   if name.startswith(other))
        assert all(value is not None and value >= 0 for name, value in hidden_values.items() if name.startswith(main))
        time_column = "aicore_time(us)" if main == "aic" else "aiv_time(us)"
        assert 0 < pmu[at[time_column]] <= duration_us  # busy cycles never exceed the wall time
        assert 0 <= pmu[at["cube_utilization(%)"]] <= 100
        assert (pmu[at["cube_utilization(%)"]] > 0) == (core != "AI_VECTOR_CORE" and symbols[row[9]] == "Conv2D")
    assert sorted(map(sorted, contexts.values())) == sorted([list(range(4)), list(range(3))] * 8)  # per run


@pytest.mark.parametrize("mode", ["launch", "static"])
def test_simulated_chip_v6_joins_32_bit_task_ids_exactly(tmp_path: Path, mode: str) -> None:
    """Task ids start below 2^16 and pass it: the host's batchId field carries the high 16 bits."""
    prof = simulate(tmp_path / "board", chip="v6", iterations=6, rate="max", seed=4, slice_bytes=8100,
                    first_task_id=65_500, mode=mode)
    truth = json.loads((tmp_path / "board" / "simulator_truth.json").read_text())
    batches, figures = run_chain(prof, tmp_path / "out")
    assert figures["rejected"] == {} and figures["decoder"]["records_in"] == truth["records_total"]
    final = next(b for b in batches if b.kind == "op_statistic" and b.meta.get("final"))
    ours = {(op, core): (count, total, low, high) for _, op, core, count, total, low, high in unpack_rows(final)}
    assert ours == {(t["op_type"], t["core_type"]): (t["count"], t["total_ns"], t["min_ns"], t["max_ns"])
                    for t in truth["op_statistic"]}
    _, rows, columns, _hidden = _chain_rows(batches)
    assert max(row[4] for row in rows) > 0xFFFF and {row[5] for row in rows} == {0}  # 32-bit ids, batch 0
    assert {row[3] for row in rows} == {2, 3} and columns == []  # streams from the task_tracks; no PMU on v6
