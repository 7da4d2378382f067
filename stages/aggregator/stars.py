"""op_summary PMU columns on STARS chips (msprof's C++ metric formulas): `aic_` and `aiv_` sides.

Each side's columns come from its own event list in sample.json (`ai_core_profiling_events`,
`aiv_profiling_events`), named by event id through :mod:`.metrics`, then prefixed: the AI Core
side's time is `aicore_time(us)` and its cycles `aic_total_cycles`, the vector side's
`aiv_time(us)` and `aiv_total_cycles`. Columns that have no meaning on a side are left out, as
msprof's C++ exporter leaves them out (its UNSUPPORTED_HEADER list). `aic_total_cycles` is the
ContextPmu totalCycle; aicore time divides by `ai_core_num`, aiv time by `aiv_num`, both at the
AI Core clock (msprof times both sides with `aic_frequency`).

A task ran on one side: that side gets its values and the other side 0, as msprof writes them.
MIX tasks get their main core from the ContextPmu; the slave core's counters are in BlockPmu
records this release does not sum, so the slave side is N/A. A record whose counters overflowed
gives N/A everywhere (msprof drops it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stages.aggregator.metrics import EXACT_FLOATS, event_batch, event_columns, event_values
from stages.decoder import records
from stages.formats import raw

CUBE_UTILIZATION = "cube_utilization(%)"
# msprof metric_processor.cpp UNSUPPORTED_HEADER, in its raw names (before "(us)" / "(GB/s)" are added).
UNSUPPORTED = frozenset({
    "aic_vec_ratio", "aic_vec_time", "aiv_mac_ratio", "aiv_mac_time", "aiv_mte1_ratio", "aic_ub_read_bw",
    "aiv_mte1_time", "aic_ub_write_bw", "aiv_l1_read_bw", "aiv_l1_write_bw", "aic_l0c_read_bw", "aic_l0c_write_bw",
    "aiv_l0a_read_bw", "aiv_l0a_write_bw", "aiv_l0b_read_bw", "aiv_l0b_write_bw", "aiv_l0c_read_bw_cube",
    "aiv_l0c_write_bw_cube", "aic_ub_read_bw_mte", "aic_ub_write_bw_mte", "aic_ub_read_bw_vector",
    "aic_ub_write_bw_vector", "aiv_mac_fp16_ratio", "aiv_mac_int8_ratio", "aic_vec_fp32_ratio", "aic_vec_fp16_ratio",
    "aic_vec_int32_ratio", "aic_vec_misc_ratio", "aic_vec_fp16_128lane_ratio", "aic_vec_fp16_64lane_ratio",
    "aic_vec_bankgroup_cflt_ratio", "aic_vec_bank_cflt_ratio", "aic_vec_resc_cflt_ratio", "aic_vector_fops",
    "aiv_cube_fops", "aiv_fixpipe_ratio", "aiv_fixpipe_time",
})
SIDES = (("aic", "aicore_time(us)", "pmu_events", "ai_core_num"), ("aiv", "aiv_time(us)", "aiv_pmu_events", "aiv_num"))
MAIN_SIDE = {records.CORE_AIC: "aic", records.CORE_MIX_AIC: "aic", records.CORE_AIV: "aiv",
             records.CORE_MIX_AIV: "aiv"}
MIX = (records.CORE_MIX_AIC, records.CORE_MIX_AIV)


def is_stars(facts: dict[str, Any]) -> bool:
    return int(facts.get("platform", 1)) in raw.STARS_PLATFORMS


def _raw_name(column: str) -> str:
    for unit in ("(us)", "(GB/s)"):
        column = column.removesuffix(unit)
    return column


class StarsPmu:
    """One device's column layout (built once from its facts) and the per-task values."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = facts
        self.aic_mhz = float(facts.get("aic_frequency_mhz", 0))
        self.ai_core_num = int(facts.get("ai_core_num") or 0)
        self.columns: list[str] = []
        self.hidden_columns: list[str] = []  # msprof's UNSUPPORTED ones: not in op_summary, in its database
        # prefix, events, core num, positions of the columns, positions of the hidden columns
        self.sides: list[tuple[str, list[int], int, list[int], list[int]]] = []
        for prefix, time_column, events_key, core_key in SIDES:
            events = [int(e) for e in facts.get(events_key, [])]
            positions: list[int] = []  # a side without events (its profiling off) has no columns
            hidden: list[int] = []
            for position, column in enumerate(event_columns(events) if events else []):
                name = time_column if position == 0 else f"{prefix}_{column}"
                shown = _raw_name(name) not in UNSUPPORTED
                (self.columns if shown else self.hidden_columns).append(name)
                (positions if shown else hidden).append(position)
            self.sides.append((prefix, events, int(facts.get(core_key) or 1), positions, hidden))
        self.cube = {"aic_mac_ratio", "aic_total_cycles"} <= set(self.columns)
        if self.cube:
            self.aic_cycles_at = self.columns.index("aic_total_cycles")
            self.mac_ratio_at = self.columns.index("aic_mac_ratio")
            self.columns.append(CUBE_UTILIZATION)

    def values(self, record: Any, block: int, duration_ns: int, time_mhz: float | None = None) -> list[float | None]:
        """Values aligned with :attr:`columns` for one task; ``record`` is its ContextPmu or None.
        ``time_mhz``: the AI Core clock in effect for the task's times when a frequency change set it."""
        return self.split_values(record, block, duration_ns, time_mhz)[0]

    def split_values(self, record: Any, block: int, duration_ns: int, time_mhz: float | None = None,
                     ) -> tuple[list[float | None], list[float | None]]:
        """(values aligned with :attr:`columns`, values aligned with :attr:`hidden_columns`) for one task."""
        if record is None or int(record["overflow"]):
            return [None] * len(self.columns), [None] * len(self.hidden_columns)
        core = int(record["core"])
        counters = [int(v) for v in record["pmu"]]
        values: list[float | None] = []
        hidden_values: list[float | None] = []
        for prefix, events, core_num, positions, hidden in self.sides:
            if MAIN_SIDE[core] == prefix:
                side = event_values(events, int(record["total_cycle"]), counters, block, core_num,
                                    time_mhz or self.aic_mhz)
                values += [side[p] for p in positions]
                hidden_values += [side[p] for p in hidden]
            else:
                values += [None if core in MIX else 0.0] * len(positions)
                hidden_values += [None if core in MIX else 0.0] * len(hidden)
        if self.cube:
            values.append(self.cube_utilization(values[self.mac_ratio_at], values[self.aic_cycles_at], duration_ns))
        return values, hidden_values

    def batch_values(self, cycles: np.ndarray, counters: np.ndarray, cores: np.ndarray, blocks: np.ndarray,
                     durations: np.ndarray, time_mhz: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`split_values` of n ContextPmu records without overflow (``time_mhz``: NaN where info.json's clock
        applies), NaN where a value is None, and which records it could not work out so (counts, cycles or
        duration too big for exact floats, a core type it does not know): those take :meth:`split_values`."""
        n = len(cycles)
        known = np.isin(cores, list(MAIN_SIDE))
        exact = known & (cycles < EXACT_FLOATS) & (np.abs(durations) < EXACT_FLOATS)
        if counters.size:
            exact &= (counters < EXACT_FLOATS).all(axis=1)
        clocks = np.where(np.isnan(time_mhz) | (time_mhz == 0), self.aic_mhz, time_mhz)
        mix = np.isin(cores, MIX)
        parts: list[list[np.ndarray]] = [[], []]  # shown, hidden
        for prefix, events, core_num, positions, hidden in self.sides:
            mine = np.isin(cores, [core for core, side in MAIN_SIDE.items() if side == prefix])
            other = np.where(mix, np.nan, 0.0)[:, None]
            side = event_batch(events, np.where(exact, cycles, 0), np.where(exact[:, None], counters, 0), blocks,
                               core_num, clocks) if events else np.zeros((n, 0))
            for found, chosen in zip(parts, (positions, hidden), strict=True):
                found.append(np.where(mine[:, None], side[:, chosen], other))
        if self.cube:
            shown = np.hstack(parts[0]) if parts[0] else np.zeros((n, 0))
            parts[0].append(self._cube_batch(shown[:, self.mac_ratio_at], shown[:, self.aic_cycles_at],
                                             durations)[:, None])
        shown, hidden_values = (np.hstack(found) if found else np.zeros((n, 0)) for found in parts)
        return shown, hidden_values, ~exact

    def _cube_batch(self, mac_ratio: np.ndarray, aic_cycles: np.ndarray, durations: np.ndarray) -> np.ndarray:
        """:meth:`cube_utilization` of n tasks (NaN: None)."""
        if not self.aic_mhz or not self.ai_core_num:
            return np.full(len(durations), np.nan)
        zero = (mac_ratio == 0) | (aic_cycles == 0) | (durations <= 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = aic_cycles / (self.aic_mhz * self.ai_core_num * durations.astype(np.float64) / 1000) * 100
        return np.where(np.isnan(mac_ratio) | np.isnan(aic_cycles), np.nan, np.where(zero, 0.0, value))

    def cube_utilization(self, mac_ratio: float | None, aic_cycles: float | None, duration_ns: int) -> float | None:
        """aic_total_cycles / (aic MHz × ai_core_num × duration µs) × 100, as msprof computes it.

        0 when the mac ratio, the cycles or the duration is 0, as msprof's Python exporter writes it
        (runtime_report.cube_usage; its C++ exporter only zeroes a zero duration): a task that never
        used the cube unit did not use it at all.
        """
        if mac_ratio is None or aic_cycles is None or not self.aic_mhz or not self.ai_core_num:
            return None
        if not mac_ratio or not aic_cycles or duration_ns <= 0:
            return 0.0
        return aic_cycles / (self.aic_mhz * self.ai_core_num * duration_ns / 1000) * 100
