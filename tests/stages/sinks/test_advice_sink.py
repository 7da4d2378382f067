"""The advice sink: busy-time buckets in any arrival order, timeline facts from task / api / tx rows,
advice files and the view it reports, config errors at validation time."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sink_batches import Feed

from pipeline.config import parse_config
from pipeline.errors import UserError
from pipeline.stage import StageContext
from stages.sinks._activity import BusyHistogram, TimelineTracker
from stages.sinks.advice import AdviceSink
from stages.tables import table_of_rows

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
ACL = 20000


@st.composite
def disjoint_intervals(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Up to 40 disjoint intervals (gaps and lengths in ns, some spanning many buckets)."""
    cursor = draw(st.integers(0, 5_000))
    out = []
    for gap, length in draw(st.lists(st.tuples(st.integers(0, 3_000), st.integers(1, 4_000)), max_size=40)):
        out.append((cursor + gap, cursor + gap + length))
        cursor += gap + length
    return out


@settings(max_examples=150, deadline=None)
@given(disjoint_intervals(), st.randoms(use_true_random=False), st.integers(1, 6))
def test_busy_time_is_kept_whatever_the_order_and_rescaling(intervals: list[tuple[int, int]], rng: random.Random,
                                                            chunks: int) -> None:
    histogram = BusyHistogram(buckets=16, width_ns=10)  # small: the width doubles as the span grows
    shuffled = intervals[:]
    rng.shuffle(shuffled)
    for k in range(chunks):
        part = shuffled[k::chunks]
        if part:
            histogram.add(np.array([s for s, _ in part]), np.array([e for _, e in part]))
    if not intervals:
        assert histogram.busy_within(0, 10**9) == 0
        return
    total = sum(e - s for s, e in intervals)
    assert histogram.busy_within(0, 10**9) == total
    w, origin = histogram.width, histogram.origin
    assert origin is not None and origin + 16 * w >= intervals[-1][1]
    for lo, hi in ((intervals[0][0], intervals[-1][1]), (intervals[len(intervals) // 2][0], intervals[-1][1])):
        exact = sum(max(0, min(e, hi) - max(s, lo)) for s, e in intervals)
        assert abs(histogram.busy_within(lo, hi) - exact) <= 2 * w  # only the two edge buckets are prorated
        a, b = origin + (lo - origin) // w * w, origin + -(-(hi - origin) // w) * w  # bucket-aligned: exact
        assert histogram.busy_within(a, b) == sum(max(0, min(e, b) - max(s, a)) for s, e in intervals)


def test_tracker_spans_ranges_and_idle_time() -> None:
    feed = Feed()
    tracker = TimelineTracker()
    tasks = [feed.task(T0 + k * 10 * MS, T0 + k * 10 * MS + 4 * MS, device_id=0) for k in range(10)]
    tracker.add_tasks(table_of_rows("task", tasks[5:]))
    tracker.add_tasks(table_of_rows("task", tasks[:5]))  # out of order
    tracker.add_apis(table_of_rows("api", [
        feed.api(T0 - 1000 * MS, T0 - 990 * MS, level=ACL, name="aclmdlLoadFromFile"),
        feed.api(T0 - 500 * MS, T0 - 499 * MS, level=5000)]))  # runtime: not counted as host work
    tracker.add_tx(table_of_rows("tx", [feed.tx(T0 - 1001 * MS, T0 - 1 * MS, message="load", event_type=2),
                                        feed.tx(T0 - 1001 * MS, T0 - 1001 * MS, message="mark", event_type=0)]))
    facts = tracker.facts()
    assert facts.devices[0].tasks == 10 and facts.devices[0].span_ns == 94 * MS
    assert facts.devices[0].busy_ns == 40 * MS and facts.devices[0].idle_ns == 54 * MS
    assert [(t.message, t.count, t.total_ns) for t in facts.tx] == [("load", 1, 1000 * MS)]
    (load,) = facts.longest_ranges
    assert load.idle_ns == 990 * MS  # 1000 ms range, 10 ms of AscendCL inside


def _sink(tmp_path: Path, upstream: tuple[str, ...], views: list[dict[str, Any]], **config: Any) -> AdviceSink:
    ctx = StageContext(stage_id="advice", run_id="test", output_dir=tmp_path, upstream=upstream,
                       report_view=views.append)
    sink = AdviceSink(AdviceSink.Config.model_validate(config), ctx)
    sink.open()
    return sink


def _feed_run(sink: AdviceSink, feed: Feed) -> None:
    op_rows = [[0, "TransData", "AI_CORE", 30, 3 * MS, 0, 0], [0, "Conv2D", "AI_CORE", 10, 7 * MS, 0, 0]]
    api_rows = [["acl", "aclmdlExecute", 10, 20 * MS, 0, 0, 0.0]]
    sink.write_batch(feed.batch("task", [feed.task(T0 + 3000 * MS, T0 + 3001 * MS)]))
    sink.write_batch(feed.batch("tx", [feed.tx(T0, T0 + 2000 * MS, message="sleepy")]))
    sink.write_batch(feed.batch("op_statistic", op_rows, final=True))
    sink.write_batch(feed.batch("api_statistic", api_rows, final=True))


def test_sink_writes_advice_files_and_reports_the_view(tmp_path: Path, feed: Feed) -> None:
    views: list[dict[str, Any]] = []
    sink = _sink(tmp_path, ("aggregate.stats", "aggregate.tasks"), views, every_s=1000, path="out/advice")
    _feed_run(sink, feed)
    sink.close()
    document = json.loads((tmp_path / "out" / "advice.json").read_text())
    rules = {item["rule"] for item in document["advice"]}
    assert {"transdata", "tx_idle", "top_op_types"} <= rules and "decomposed_activation" not in rules
    assert document["final"] is True
    assert views[-1]["advice"] == document["advice"]
    assert "please check and reduce the transData" in (tmp_path / "out" / "advice.txt").read_text()
    assert sink.accounting()["advice"] == len(document["advice"])


def test_without_task_rows_the_timeline_rules_stay_quiet(tmp_path: Path, feed: Feed) -> None:
    views: list[dict[str, Any]] = []
    sink = _sink(tmp_path, ("aggregate.stats",), views, disable=["top_op_types"])
    sink.write_batch(feed.batch("op_statistic", [[0, "TransData", "AI_CORE", 3, 3, 0, 0]]))
    sink.write_batch(feed.batch("api_statistic", []))
    sink.close()
    assert [a["rule"] for a in views[-1]["advice"]] == ["transdata"]  # 3 in a run without executions


def test_evaluations_are_rate_limited(tmp_path: Path, feed: Feed) -> None:
    views: list[dict[str, Any]] = []
    sink = _sink(tmp_path, ("aggregate.stats",), views, every_s=1000)
    for k in range(1, 6):
        sink.write_batch(feed.batch("op_statistic", [[0, "TransData", "AI_CORE", 3 * k, 3, 0, 0]]))
    assert sink.counts["evaluations"] == 1
    sink.close()
    assert sink.counts["evaluations"] == 2 and "15" in views[-1]["advice"][0]["title"]


@pytest.mark.parametrize(("settings_text", "message"), [
    ("rules: [nope]", "unknown advice rule 'nope'"),
    ("options: {tx_idle: {min_idle_share: 2}}", "min_idle_share"),
    ("every_s: 0", "every_s"),
])
def test_bad_advice_settings_fail_config_validation(tmp_path: Path, settings_text: str, message: str) -> None:
    raw = {"stages": {"src": {"type": "collector", "path": "."},
                      "advice": {"type": "advice", "inputs": ["src"], **_yaml(settings_text)}}}
    with pytest.raises(UserError) as caught:
        parse_config(raw, tmp_path / "c.yaml", env={})
    assert "stages.advice" in caught.value.line() and message in caught.value.line()


def _yaml(text: str) -> dict[str, Any]:
    import yaml

    loaded: dict[str, Any] = yaml.safe_load("{" + text + "}")
    return loaded
