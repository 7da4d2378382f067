"""TimelineSink: msprof's chrome-trace array, valid after every batch, no crossing slices."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sink_batches import TIMESTAMP, TRACE_VIEW, Feed

from pipeline.stage import StageContext
from stages.sinks._tracks import NestedTrack, SerialTrack, viewer_end, viewer_ns
from stages.sinks.timeline import TimelineSink, format_pid

TS = re.compile(r"^\d+\.\d{3}$")
APP_PID = 4242


def make_sink(ctx: StageContext, **config: Any) -> TimelineSink:
    sink = TimelineSink(TimelineSink.Config(timestamp=TIMESTAMP, **config), ctx)
    sink.open()
    return sink


def load(path: Path) -> list[dict[str, Any]]:
    with open(path) as handle:
        events = json.load(handle)
    assert isinstance(events, list)
    return events


def names_by_pid(events: list[dict[str, Any]]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def feed_run(feed: Feed) -> list[Any]:
    """One small run: node API with its device task (flow), model API, ACL API, a tx range."""
    return [
        feed.run_info(APP_PID),
        feed.batch("api", [
            feed.api(1_000, 5_000, connection_id=7),
            feed.api(6_000, 7_000, level=20000, struct_type="ACL_RTS", name="aclrtSynchronizeStream"),
            feed.api(0, 10_000, level=15000, struct_type="ACL_MODEL", name="ModelExecute", item_id=2),
        ]),
        feed.batch("task", [
            feed.task(1_704_161_511_422_904_204, 1_704_161_511_422_905_554, connection_id=7),
            feed.task(1_704_161_511_422_906_000, 1_704_161_511_422_907_000, op_name="", task_type="EVENT_RECORD"),
        ]),
        feed.batch("tx", [feed.tx(2_000, 3_000, message="forward")]),
        feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 1, 1350, 1350, 1350]]),  # not for the timeline
    ]


def test_valid_json_after_every_batch_with_msprof_layout(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    path = ctx.output_dir / "mindstudio_profiler_output" / f"msprof_{TIMESTAMP}.json"
    assert load(path) == []
    for batch in feed_run(feed):
        sink.write_batch(batch)
        load(path)  # parses after every batch, not only after close
    sink.flush()
    events = load(path)
    sink.close()
    assert load(path) == events

    cann = format_pid(APP_PID, 7, 31)
    hardware = format_pid(APP_PID, 14, 0)
    tx = format_pid(APP_PID, 6, 31)
    assert cann == (APP_PID << 10) | (7 << 5) | 31
    assert names_by_pid(events) == {cann: "CANN", hardware: "Ascend Hardware", tx: "MsprofTx"}
    meta = {(e["pid"], e["tid"], e["name"]): e["args"] for e in events if e["ph"] == "M"}
    assert meta[(cann, 0, "process_labels")] == {"labels": "CPU"}
    assert meta[(cann, 0, "process_sort_index")] == {"sort_index": 7}
    assert meta[(hardware, 0, "process_labels")] == {"labels": "NPU 0"}
    assert meta[(hardware, 0, "process_sort_index")] == {"sort_index": 14}
    assert meta[(tx, 0, "process_sort_index")] == {"sort_index": 6}
    assert meta[(cann, 100, "thread_name")] == {"name": "Thread 100"}
    assert meta[(hardware, 3, "thread_name")] == {"name": "Stream 3"}
    assert meta[(hardware, 3, "thread_sort_index")] == {"sort_index": 3}

    x = {e["name"]: e for e in events if e["ph"] == "X"}
    assert {"Node@MatMul_1", "AscendCL@aclrtSynchronizeStream", "Model@ModelExecute", "MatMul_1",
            "EVENT_RECORD", "forward"} == set(x)
    node = x["Node@MatMul_1"]
    assert node["args"] == {"Thread Id": 100, "Mode": "ACL_OP", "level": "node", "id": "MatMul_1",
                            "item_id": "0", "connection_id": 7}
    assert x["Model@ModelExecute"]["args"]["level"] == "model"
    task = x["MatMul_1"]
    assert task["ts"] == "1704161511422904.204"  # exact from integer ns
    assert task["dur"] == 1.35
    assert task["args"] == {"Model Id": 4294967295, "Task Type": "AI_CORE", "Physic Stream Id": 3, "Task Id": 1,
                            "Batch Id": 0, "Subtask Id": 4294967295, "connection_id": 7}
    assert set(x["forward"]["args"]) == {"Category", "Payload_type", "Payload_value", "Message_type", "event_type"}
    assert x["forward"]["args"]["event_type"] == "start/end"

    flows = [e for e in events if e["ph"] in "sf"]
    flow_id = str(7 << 32)
    assert [(e["ph"], e["id"], e["pid"], e["tid"], e["ts"]) for e in flows] == [
        ("s", flow_id, cann, 100, node["ts"]), ("f", flow_id, hardware, 3, task["ts"])]
    assert flows[0]["name"] == f"HostToDevice{flow_id}" and flows[0]["cat"] == "HostToDevice"
    assert flows[1]["bp"] == "e"
    for event in events:
        if "ts" in event:
            assert isinstance(event["ts"], str) and TS.match(event["ts"]), event


@pytest.mark.skipif(not TRACE_VIEW.exists(),
                    reason=f"{TRACE_VIEW} is absent (a clone without ../shared): the real-sample check needs it")
def test_structure_matches_real_trace_view(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    for batch in feed_run(feed):
        sink.write_batch(batch)
    sink.close()
    ours = load(sink.paths[0])
    real = load(TRACE_VIEW)

    def by_process(events: list[dict[str, Any]], process: str) -> list[dict[str, Any]]:
        pid = {p for p, n in names_by_pid(events).items() if n == process}
        return [e for e in events if e["pid"] in pid]

    assert {e["ph"] for e in ours} <= {e["ph"] for e in real}
    assert {e["name"] for e in ours if e["ph"] == "M"} == {e["name"] for e in real if e["ph"] == "M"}
    for process in ("CANN", "Ascend Hardware"):
        ours_p, real_p = by_process(ours, process), by_process(real, process)
        assert {e["name"] for e in ours_p if e["ph"] == "M"} == {e["name"] for e in real_p if e["ph"] == "M"}
        assert {type(e["ts"]) for e in ours_p if "ts" in e} == {type(e["ts"]) for e in real_p if "ts" in e} == {str}
    ours_api = by_process(ours, "CANN")
    real_api = by_process(real, "CANN")
    assert {frozenset(e["args"]) for e in ours_api if e["ph"] == "X"} == {
        frozenset(e["args"]) for e in real_api if e["ph"] == "X"}
    thread_names = {e["args"]["name"].split()[0] for e in ours + real if e["name"] == "thread_name"}
    assert thread_names <= {"Thread", "Stream", "Computing", "Communication", "Communication(Not", "Free"}
    # CANN 7 wrote "Stream Id"; current msprof writes "Physic Stream Id"
    real_task_args = {frozenset(e["args"]) for e in by_process(real, "Ascend Hardware") if e["ph"] == "X"}
    ours_task_args = {frozenset(e["args"]) for e in by_process(ours, "Ascend Hardware") if e["ph"] == "X"}
    renamed = {frozenset(k if k != "Stream Id" else "Physic Stream Id" for k in keys) for keys in real_task_args}
    assert ours_task_args <= renamed
    for phase in "sf":
        real_flow = {frozenset(e) for e in real if e["ph"] == phase and e.get("cat") == "HostToDevice"}
        ours_flow = {frozenset(e) for e in ours if e["ph"] == phase}
        assert ours_flow == real_flow


def crossing(spans: list[tuple[int, int]]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Pairs of spans that overlap without one containing the other."""
    bad = []
    ordered = sorted(spans)
    for i, (s1, e1) in enumerate(ordered):
        for s2, e2 in ordered[i + 1:]:
            if s2 >= e1:
                break
            if not (e2 <= e1 or s2 == s1):
                bad.append(((s1, e1), (s2, e2)))
    return bad


def test_no_two_complete_events_cross_on_a_track(ctx: StageContext, feed: Feed) -> None:
    rng = random.Random(7)
    sink = make_sink(ctx)
    sink.write_batch(feed.run_info(APP_PID))
    for _ in range(20):
        tasks = [feed.task(s, s + rng.randint(0, 3_000), stream_id=rng.choice([1, 2]), task_id=i)
                 for i, s in enumerate(sorted(rng.randint(0, 200_000) for _ in range(30)))]
        apis = []
        for _ in range(30):
            start = rng.randint(0, 200_000)
            apis.append(feed.api(start, start + rng.choice([500, 5_000, 50_000]), thread_id=rng.choice([100, 101])))
        rng.shuffle(apis)  # any arrival order: outer spans may come after inner ones
        sink.write_batch(feed.batch("task", tasks))
        sink.write_batch(feed.batch("api", apis))
        load(sink.paths[0])
    sink.close()
    tracks: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in load(sink.paths[0]):
        if e["ph"] == "X":
            start = int(e["ts"].replace(".", ""))
            tracks[(e["pid"], e["tid"])].append((start, start + round(e["dur"] * 1000)))
    hardware = format_pid(APP_PID, 14, 0)
    assert len(tracks) == 4
    for (pid, _tid), spans in tracks.items():
        if pid == hardware:  # device streams: strictly one after another
            spans.sort()
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
        else:
            assert crossing(spans) == []
    counts = sink.accounting()
    assert counts["events_adjusted_for_overlap"] > 0
    assert counts["tasks_written"] == 600 and counts["apis_written"] + counts["events_dropped_for_overlap"] == 600


def test_nested_track_keeps_spans_laminar_in_any_order() -> None:
    rng = random.Random(3)
    track = NestedTrack(10**9)
    placed = []
    for _ in range(3_000):
        start = rng.randint(0, 100_000)
        span = track.place(start, start + rng.choice([0, 10, 300, 3_000]))
        assert span is not None
        placed.append(span)
    assert crossing(placed) == [] and track.adjusted > 0
    # a small window: spans far behind the latest start are forgotten; late ones are clipped or dropped
    track = NestedTrack(2_000)
    placed = []
    for i in range(12_000):
        start = i * 10 - rng.choice([0, 0, 0, 100, 5_000])
        span = track.place(start, start + rng.choice([0, 10, 300, 3_000]))
        if span is not None:
            placed.append(span)
    assert crossing(placed) == []
    assert track.dropped > 0 and len(track) < 8_000
    track = NestedTrack(10**9)
    assert [track.place(*s) for s in [(5, 6), (0, 10), (2, 8), (9, 12)]] == [(5, 6), (0, 10), (2, 8), (9, 10)]
    serial = SerialTrack()
    assert [serial.place(*s) for s in [(0, 10), (5, 20), (8, 9)]] == [(0, 10), (10, 20), (20, 20)]
    assert serial.adjusted == 2


def test_flow_end_arriving_before_its_api(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("task", [feed.task(10_000, 11_000, connection_id=9)]))
    sink.write_batch(feed.batch("api", [feed.api(1_000, 2_000, connection_id=9)]))
    sink.close()
    flows = [e for e in load(sink.paths[0]) if e["ph"] in "sf"]
    assert sorted(e["ph"] for e in flows) == ["f", "s"]
    assert {e["id"] for e in flows} == {str(9 << 32)}


@pytest.mark.parametrize("api_first", [True, False])
def test_contexts_of_one_launch_end_its_flow_once(tmp_path: Path, api_first: bool) -> None:
    """An FFTS+ task's context rows share their launch's connection id: one flow, whatever the arrival order."""
    feed = Feed()
    sink = make_sink(StageContext(stage_id="sink", run_id="test", output_dir=tmp_path))
    api = feed.batch("api", [feed.api(1_000, 2_000, connection_id=9)])
    contexts = [feed.batch("task", [feed.task(10_000 + i * 2_000, 11_000 + i * 2_000, connection_id=9,
                                              context_id=i)]) for i in range(3)]
    for batch in [api, *contexts] if api_first else [contexts[0], api, *contexts[1:]]:
        sink.write_batch(batch)
    sink.close()
    flows = [e for e in load(sink.paths[0]) if e["ph"] in "sf"]
    assert sorted(e["ph"] for e in flows) == ["f", "s"]
    [end] = [e for e in flows if e["ph"] == "f"]
    assert end["ts"] == "10.000"  # the first context row


def test_rotation_gives_complete_files_with_their_own_metadata(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, rotate_bytes=4_000)
    for i in range(10):
        base = i * 100_000
        sink.write_batch(feed.batch("task", [feed.task(base + k * 1_000, base + k * 1_000 + 500) for k in range(5)]))
    live_names = [p.name for p in sink.paths]
    sink.close()
    directory = ctx.output_dir / "mindstudio_profiler_output"
    assert live_names[:3] == [f"msprof_{TIMESTAMP}.json", f"msprof_{TIMESTAMP}_1.json", f"msprof_{TIMESTAMP}_2.json"]
    assert [p.name for p in sink.paths] == [f"msprof_slice_{k}_{TIMESTAMP}.json" for k in range(len(live_names))]
    assert sorted(directory.iterdir()) == sorted(sink.paths)
    total = 0
    for path in sink.paths:
        events = load(path)
        x = [e for e in events if e["ph"] == "X"]
        total += len(x)
        named = names_by_pid(events)
        assert all(e["pid"] in named for e in x)
        assert {(e["pid"], e["tid"]) for e in x} <= {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    assert total == 50


def mixed_batches(feed: Feed, rounds: int) -> list[Any]:
    """Node APIs with their device tasks (flows), ACL APIs and tx ranges, round after round."""
    batches = [feed.run_info(APP_PID)]
    for i in range(rounds):
        base = 1_795_347_125_600_000_000 + i * 100_000
        batches.append(feed.batch("api", [
            feed.api(base + k * 2_000, base + k * 2_000 + 1_500, connection_id=i * 10 + k, name=f"Op_{i}_{k}")
            for k in range(4)] + [feed.api(base, base + 9_000, level=20000, name="aclopExecute", thread_id=101)]))
        batches.append(feed.batch("task", [
            feed.task(base + 50_000 + k * 1_000, base + 50_000 + k * 1_000 + 700, connection_id=i * 10 + k,
                      op_name=f"Op_{i}_{k}", task_id=k) for k in range(4)]))
        batches.append(feed.batch("tx", [feed.tx(base, base + 20_000, message=f"step {i}")]))
    return batches


def event_key(event: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in event.items()))


def test_rotation_loses_and_repeats_no_event(ctx: StageContext, feed: Feed, tmp_path: Path) -> None:
    batches = mixed_batches(feed, 40)
    whole = make_sink(StageContext(stage_id="whole", run_id="test", output_dir=tmp_path / "whole"))
    rotated = make_sink(ctx, rotate_bytes=3_000)
    for batch in batches:
        whole.write_batch(batch)
        rotated.write_batch(batch)
        for path in rotated.paths:  # every file is complete JSON at every moment
            load(path)
    whole.close()
    rotated.close()
    assert len(whole.paths) == 1 and len(rotated.paths) > 10
    expected = load(whole.paths[0])
    pieces = [load(path) for path in rotated.paths]
    events = [e for piece in pieces for e in piece if e["ph"] != "M"]
    # the same events, each once: nothing lost or written twice across files
    assert sorted(map(event_key, events)) == sorted(event_key(e) for e in expected if e["ph"] != "M")
    assert len(set(map(event_key, events))) == len(events)
    assert {"X", "s", "f"} == {e["ph"] for e in events}
    for piece in pieces:  # each file names the processes and threads its events are on
        meta = {(e["pid"], e["tid"], e["name"]) for e in piece if e["ph"] == "M"}
        for event in piece:
            if event["ph"] == "X":
                assert (event["pid"], 0, "process_name") in meta
                assert (event["pid"], event["tid"], "thread_name") in meta
    assert rotated.accounting()["files"] == len(rotated.paths)


def test_config_rejects_unknown_keys(ctx: StageContext) -> None:
    with pytest.raises(ValidationError):
        TimelineSink.Config(rotate_mb=3)  # type: ignore[call-arg]
    assert TimelineSink.Config().directory == "mindstudio_profiler_output"
    assert TimelineSink.Config().rotate_bytes == 200 * 1024 * 1024


STEP_BASE = 1_704_161_511_000_000_000
VIEWER_STEP_NS = 512  # doubles near 1.7e15 µs are 0.25 µs apart: a neighbour's rounded end plus our own start


def training_rows(model: int, iterations: int, seed: int = 3) -> list[list[Any]]:
    """step_trace rows of a training loop: consecutive iterations with FP/BP, a data-aug gap and all-reduces."""
    rng = random.Random(seed)
    rows: list[list[Any]] = []
    end = STEP_BASE
    for n in range(1, iterations + 1):
        start = end
        fp = start + rng.randrange(1_000, 90_000)
        bp = fp + rng.randrange(500_000, 900_000)
        end = bp + rng.randrange(100_000, 300_000)
        reduces = [[bp + 10_000, bp + 60_000], [bp + 40_000, bp + 90_000], [bp + 95_000, None]]
        data_aug = fp - start if n > 1 else None
        rows.append([0, model, n, fp, bp, end, end - start, bp - fp, end - bp, data_aug, reduces])
    return rows


def _ns(text: str) -> int:
    whole, _, frac = text.partition(".")
    return int(whole) * 1000 + int(frac)


def assert_laminar(spans: list[tuple[int, int]]) -> None:
    """Any two spans nest or are disjoint (touching allowed)."""
    open_ends: list[int] = []
    for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        assert not open_ends or end <= open_ends[-1], (start, end, open_ends[-1])
        open_ends.append(end)


def test_step_trace_layer_as_msprof_writes_it(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    rows = training_rows(model=5, iterations=6)
    sink.write_batch(feed.run_info(APP_PID))
    sink.write_batch(feed.batch("step_trace", rows[:3]))
    sink.write_batch(feed.batch("step_trace", rows[3:]))
    sink.close()
    events = load(sink.paths[0])

    hardware, tid = format_pid(APP_PID, 14, 0), 70005
    assert names_by_pid(events) == {hardware: "Ascend Hardware"}
    meta = {(e["pid"], e["tid"], e["name"]): e["args"] for e in events if e["ph"] == "M"}
    assert meta[(hardware, tid, "thread_name")] == {"name": "Step Trace(Model ID:5)"}
    assert meta[(hardware, tid, "thread_sort_index")] == {"sort_index": 70005}

    def at(ns: int) -> str:
        return f"{ns // 1000}.{ns % 1000:03d}"

    complete = {e["name"]: e for e in events if e["ph"] == "X"}
    assert all((e["pid"], e["tid"]) == (hardware, tid) and TS.match(e["ts"]) for e in complete.values())

    def span(name: str, cat: str, start: int, end: int) -> dict[str, Any]:
        """The event, written where it was asked for or moved inward by less than a viewer's rounding."""
        event = complete[name]
        written_start = _ns(event["ts"])
        written_end = written_start + round(event["dur"] * 1000)
        assert event["cat"] == cat
        assert 0 <= written_start - start < VIEWER_STEP_NS and 0 <= end - written_end < VIEWER_STEP_NS, name
        return event

    for _dev, _model, n, fp, bp, end, duration, _fpbp, _refresh, aug, _reduces in rows:
        iteration = span(f"Iteration {n}", "Iteration Time", end - duration, end)
        assert iteration["args"] == {"Iteration ID": n, "FP Start": at(fp), "BP End": at(bp),
                                     "Iteration End": at(end), "Iteration Time(us)": pytest.approx(duration / 1000)}
        fp_bp = span(f"FP_BP Time {n}", "FP_BP Time", fp, bp)
        assert fp_bp["args"] == {"Iteration ID": n, "FP Start": at(fp), "BP End": at(bp),
                                 "FP_BP Time(us)": pytest.approx((bp - fp) / 1000)}
        refresh = span(f"Iteration Refresh {n}", "Iteration Refresh", bp, end)
        assert refresh["args"] == {"Iteration ID": n, "BP End": at(bp), "Iteration End": at(end),
                                   "Iteration Refresh(us)": pytest.approx((end - bp) / 1000)}
        # All-reduce k as msprof names it; the second crosses the first and is moved after it; an unpaired
        # start is left out.
        first = span(f"Reduce_{n}_0", "Reduce", bp + 10_000, bp + 60_000)
        assert first["args"] == {"Iteration ID": n, "Reduce Start 0": str(bp + 10_000),
                                 "Reduce End 0": str(bp + 60_000)}
        assert _ns(complete[f"Reduce_{n}_1"]["ts"]) >= bp + 60_000
        assert f"Reduce_{n}_2" not in complete
        starts = [e for e in events if e["ph"] == "s" and e["name"] == f"Data_aug Bound {n}"]
        assert [(s["ts"], s["args"]) for s in starts] == [(at(bp + (aug or 0) // 2),
                                                          {"Data_aug Bound(us)": pytest.approx((aug or 0) / 1000)})]
    steps = [e for e in events if e["ph"] == "t"]
    # A step at iteration n's FP start closes the flow started in n − 1 (none before the first iteration).
    assert [(e["name"], e["ts"], e["args"]) for e in steps] == [
        (f"Data_aug Bound {n - 1}", at(fp), {"Iteration ID": n}) for _d, _m, n, fp, *_ in rows[1:]]
    # Each start and its step share an odd integer id of their own (Perfetto rejects msprof's shared text id).
    flow_ids = defaultdict(list)
    for event in events:
        if event["ph"] in "st":
            flow_ids[event["id"]].append(event["ph"])
    assert all(int(key) % 2 == 1 for key in flow_ids)
    assert sorted(map(tuple, flow_ids.values())) == [("s",)] + [("s", "t")] * (len(rows) - 1)
    assert {e["cat"] for e in events if e["ph"] in "st"} == {"Data_aug Bound"}
    assert len(complete) == 5 * len(rows) == sink.accounting()["step_trace_written"]

    # No crossing on the track, neither as written nor as a viewer reading ts as a double sees it.
    written = [(_ns(e["ts"]), _ns(e["ts"]) + round(e["dur"] * 1000)) for e in complete.values()]
    assert_laminar(written)
    assert_laminar([(viewer_ns(start), viewer_end(start, end)) for start, end in written])
