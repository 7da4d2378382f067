"""The aggregator's joins of AI CPU, L2 cache and frequency records (stages/aggregator/extras.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.extras import AICPU_COLUMNS, EXACT_COUNTS, DeviceExtras, extra_columns, l2_configured, l2_rates
from stages.decoder import records


def _aicpu(task: int, end_ns: int, form: int = records.AICPU_BINARY) -> np.ndarray:
    rec = np.zeros(1, records.AICPU)
    rec["stream_id"], rec["task_id"], rec["form"], rec["end_ns"] = 3, task, form, end_ns
    rec["compute_ns"], rec["memcpy_ns"], rec["task_ns"], rec["dispatch_ns"], rec["total_ns"] = 1500, 250, 2000, -1, 3000
    return rec


def test_aicpu_records_join_the_task_whose_time_holds_their_run_end() -> None:
    unused: Counter[str] = Counter()
    extras = DeviceExtras(unused)
    extras.add_aicpu(np.concatenate([_aicpu(7, 1_000), _aicpu(7, 5_000), _aicpu(7, 9_000),
                                     _aicpu(0, 0, records.AICPU_TEXT_NODE)]))
    assert extras.aicpu_ready(0, 9_000) and not extras.aicpu_ready(0, 9_001)
    # the task at [4 000, 6 000]: the record ending at 1 000 belonged to an earlier task that never came
    assert extras.take_aicpu((0, 3, 7), 4_000, 6_000) == [1.5, 0.25, 2.0, None, 3.0]
    assert extras.take_aicpu((0, 3, 7), 6_500, 8_000) == [None] * len(AICPU_COLUMNS)  # 9 000 is a later task's
    extras.leftovers({})
    assert unused == {"AI CPU text records (DATA_PREPROCESS.AICPU text form: no stream/task id to join)": 1,
                      "AI CPU records outside their task's device time": 1,
                      "AI CPU records without a matching AI_CPU task": 1}


def _l2(events: list[int]) -> np.ndarray:
    rec = np.zeros(1, records.L2_CACHE)
    rec["stream_id"], rec["task_id"] = 2, 4
    rec["events"][0, :len(events)] = events
    return rec


def test_l2_rates_follow_each_chip_event_roles() -> None:
    extras = DeviceExtras(Counter())
    cloud = {"platform": 1, "l2_events": [0x59, 0x5B, 0x5C]}  # request, hit, victim
    assert l2_configured(cloud) and extra_columns({**cloud, "aicpu_trace": True})[-2:] == [
        "l2_cache_hit_rate", "l2_cache_victim_rate"]
    extras.add_l2(_l2([200, 150, 10]), {0: cloud})
    assert extras.take_l2((0, 2, 4), cloud) == [0.75, 0.05]
    # 910B: two request and two hit events; msprof shows no hit rate on STARS chips
    b = {"platform": 5, "l2_events": [0xFB, 0xFC, 0x90, 0x91, 0x9C]}
    extras.add_l2(_l2([100, 100, 60, 40, 8]), {0: b})
    assert extras.take_l2((0, 2, 4), b) == [None, 0.04]
    # chip v6: hit = requests − misses (negative ids subtract)
    v6 = {"platform": 15, "l2_events": [0x00, 0x81, 0x82, 0x83, 0x74, 0x75]}
    extras.add_l2(_l2([1000, 10, 20, 30, 40, 50]), {})  # facts not known yet: worked out when taken
    assert extras.take_l2((0, 2, 4), v6) == [None, 0.09]
    assert not l2_configured({"platform": 1, "l2_events": [0x59, 0x5B]})  # no victim event collected
    assert not l2_configured({"platform": 0, "l2_events": [0x59, 0x5B, 0x5C]})  # msprof has no 310 roles


def _freq(points: list[tuple[int, int]]) -> np.ndarray:
    rec = np.zeros(1, records.FREQ)
    rec["count"] = len(points)
    for i, (at, mhz) in enumerate(points):
        rec["points_ns"][0, i], rec["freq_mhz"][0, i] = at, mhz
    return rec


def test_the_clock_in_effect_at_a_task_end_on_910b_class_chips() -> None:
    unused: Counter[str] = Counter()
    extras = DeviceExtras(unused)
    extras.add_freq(_freq([(1_000, 1800), (5_000, 1200)]), {0: 5, 1: 1})
    assert extras.clock_mhz(0, 5, 999) is None  # before the first point: info.json's
    assert extras.clock_mhz(0, 5, 1_000) == 1800.0 and extras.clock_mhz(0, 5, 4_999) == 1800.0
    assert extras.clock_mhz(0, 5, 7_000) == 1200.0
    assert extras.clock_mhz(1, 1, 7_000) is None  # the 910: msprof keeps info.json's
    extras.add_freq(_freq([(6_000, 1000)]), {0: 5})  # arrives after a task at 7 000 was timed
    assert extras.clock_mhz(0, 5, 7_000) == 1000.0
    extras.add_freq(_freq([(8_000, 1600)]), {1: 1})
    assert unused == {"AI Core frequency change that arrived after tasks it applies to": 1,
                      "AI Core frequency change records (msprof applies them on 910B-class chips only)": 1}
    extras.add_freq(_freq([(9_000, 0)]), {0: 5})  # a zero sample: msprof distrusts them all
    assert extras.clock_mhz(0, 5, 9_500) is None


def test_a_trace_that_writes_nothing_is_waited_for_once() -> None:
    extras = DeviceExtras(Counter())
    assert not extras.aicpu_ready(0, 100) and not extras.l2_ready((0, 2, 4))
    extras.waited_in_vain(0, aicpu=True, l2=True)  # the first task's wait ran out
    assert extras.aicpu_ready(0, 100) and extras.l2_ready((0, 2, 4))
    assert not extras.aicpu_ready(1, 100)  # another device still waits
    extras.add_aicpu(_aicpu(7, 5_000))  # records do come after all: wait for them again
    assert not extras.aicpu_ready(0, 6_000) and extras.aicpu_ready(0, 5_000)


L2_FACTS = [{"platform": 1, "l2_events": [0x59, 0x5B, 0x5C]},
            {"platform": 5, "l2_events": [0xFB, 0xFC, 0x90, 0x91, 0x9C]},
            {"platform": 15, "l2_events": [0x00, 0x81, 0x82, 0x83, 0x74, 0x75]},
            {"platform": 3, "l2_events": [0x79, 0x6A, 0x71, 0x78]}]


@settings(max_examples=200, deadline=None)
@given(facts=st.sampled_from(L2_FACTS), device=st.integers(0, 3),
       counts=st.lists(st.lists(st.one_of(st.integers(0, 1 << 20), st.integers(0, EXACT_COUNTS + 5)),
                                min_size=8, max_size=8), min_size=1, max_size=20))
def test_rates_of_a_chunk_equal_each_record_rates(facts: dict[str, object], device: int,
                                                  counts: list[list[int]]) -> None:
    """A chunk's rates, worked out in numpy at intake, are the floats the one-record formula gives when taken."""
    chunk = np.zeros(len(counts), records.L2_CACHE)
    chunk["device_id"], chunk["task_id"] = device, np.arange(len(counts))
    chunk["events"] = counts
    extras = DeviceExtras(Counter())
    extras.add_l2(chunk, {device: facts})
    for task, events in enumerate(counts):
        assert extras.take_l2((device, 0, task), facts) == l2_rates(events, facts)
