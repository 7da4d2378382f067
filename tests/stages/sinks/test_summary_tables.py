"""SummarySink's per-record tables: task_time, step_trace, msprof_tx, aicpu, l2_cache."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from run_outputs import SUMMARY_HEADERS as HEADERS
from sink_batches import TIMESTAMP, Feed

from pipeline.stage import StageContext
from stages.schema import AICPU_COLUMNS, L2_CACHE_COLUMNS, STEP_TRACE_COLUMNS
from stages.sinks._format import NA, num3, num3_rows
from stages.sinks.summary import SummarySink

T0 = 1_736_413_971_558_972_912  # ns of local wall clock


def make_sink(ctx: StageContext, **config: Any) -> SummarySink:
    sink = SummarySink(SummarySink.Config(timestamp=TIMESTAMP, **config), ctx)
    sink.open()
    return sink


def folder(ctx: StageContext) -> Path:
    return ctx.output_dir / "mindstudio_profiler_output"


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def table(ctx: StageContext, module: str) -> list[list[str]]:
    rows = read_csv(folder(ctx) / f"{module}_{TIMESTAMP}.csv")
    assert rows[0] == HEADERS[module].split(",")[: len(rows[0])]
    return rows


def row(feed: Feed, columns: tuple[str, ...], text: tuple[str, ...], **values: Any) -> list[Any]:
    return [feed.symbols.intern(values[c]) if c in text else values[c] for c in columns]


def step(feed: Feed, **fields: Any) -> list[Any]:
    values: dict[str, Any] = dict(device_id=0, model_id=1, iteration_id=1, fp_start_ns=None, bp_end_ns=None,
                                  iteration_end_ns=T0, iteration_ns=2_559_820, fp_bp_ns=None, refresh_ns=None,
                                  data_aug_ns=None, reduces=[])
    return row(feed, STEP_TRACE_COLUMNS, (), **{**values, **fields})


def aicpu(feed: Feed, **fields: Any) -> list[Any]:
    values: dict[str, Any] = dict(device_id=0, start_ns=T0, node="decode_bbox/DecodeBbox", compute_ns=186_000,
                                  memcpy_ns=26_000, task_ns=260_400, dispatch_ns=9_000, total_ns=270_270, stream_id=3,
                                  task_id=0)
    return row(feed, AICPU_COLUMNS, ("node",), **{**values, **fields})


def l2(feed: Feed, **fields: Any) -> list[Any]:
    values: dict[str, Any] = dict(device_id=0, stream_id=2, task_id=0, hit_rate=0.6438021, victim_rate=0.068408,
                                  op_name="data_1_aipp/Aipp", sequence=0)
    return row(feed, L2_CACHE_COLUMNS, ("op_name",), **{**values, **fields})


def test_task_time_one_row_per_task_sorted_by_device_and_start(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("task", [
        feed.task(T0 + 1_130, T0 + 378_850, task_id=1, stream_id=2, kernel_name="te_conv2d_abc369"),
        feed.task(T0, T0 + 39_940, task_id=0, stream_id=2, kernel_name="te_aipp_49a85a"),
        # legacy data has no kernel name: the op name stands in; a task without host info (no op name) is kept
        feed.task(T0 + 500_000, T0 + 501_000, op_name="", task_type="", kernel_name="", device_id=1),
        feed.task(T0 + 400_000, T0 + 400_007, task_type="WRITE_BACK", kernel_name="", op_name="Cast_3"),
    ]))
    live = table(ctx, "task_time")
    assert len(live) == 5  # readable while the sink is open, in arrival order
    sink.close()
    rows = table(ctx, "task_time")
    assert rows[1:] == [
        ["0", "te_aipp_49a85a", "AI_CORE", "2", "0", "39.940", "1736413971558972.912\t", "1736413971559012.852\t"],
        ["0", "te_conv2d_abc369", "AI_CORE", "2", "1", "377.720", "1736413971558974.042\t", "1736413971559351.762\t"],
        ["0", "Cast_3", "WRITE_BACK", "3", "1", "0.007", "1736413971559372.912\t", "1736413971559372.919\t"],
        ["1", "N/A", "N/A", "3", "1", "1.000", "1736413971559472.912\t", "1736413971559473.912\t"],
    ]
    assert sink.accounting()["task_time_rows"] == 4
    assert sink.accounting()["op_summary_rows"] == 2  # op_summary leaves out WRITE_BACK and unnamed tasks


def test_task_time_keeps_the_first_context_of_an_ffts_task(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("task", [
        feed.task(T0 + 100 * k, T0 + 100 * k + 50, task_id=7, task_type="MIX_AIC", context_id=k, kernel_name="te_mm")
        for k in range(3)] + [feed.task(T0 + 1_000, T0 + 1_050, task_id=8, kernel_name="te_add")]))
    sink.close()
    assert [(r[4], r[2], r[6]) for r in table(ctx, "task_time")[1:]] == [
        ("7", "MIX_AIC", "1736413971558972.912\t"), ("8", "AI_CORE", "1736413971558973.912\t")]
    assert sink.accounting()["op_summary_rows"] == 4  # op_summary keeps a row per context


def test_task_time_slices_and_sorts_with_bounded_memory(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, max_rows=40, sort_chunk_rows=3)  # many sorted runs, more than one file
    starts = [(i * 37) % 100 for i in range(100)]
    for k in range(0, 100, 7):
        sink.write_batch(feed.batch("task", [feed.task(T0 + s * 1_000, T0 + s * 1_000 + 10, task_id=s)
                                             for s in starts[k:k + 7]]))
    assert sorted(p.name for p in folder(ctx).glob("task_time*")) == [
        f"task_time_{TIMESTAMP}.csv", f"task_time_slice_1_{TIMESTAMP}.csv", f"task_time_slice_2_{TIMESTAMP}.csv"]
    sink.close()
    names = [f"task_time_slice_{k}_{TIMESTAMP}.csv" for k in range(3)]
    assert sorted(p.name for p in folder(ctx).glob("task_time*")) == names
    body = []
    for name in names:
        rows = read_csv(folder(ctx) / name)
        assert rows[0] == HEADERS["task_time"].split(",") and len(rows) <= 41
        body += rows[1:]
    assert [int(r[4]) for r in body] == list(range(100))
    assert not [p for p in folder(ctx).iterdir() if p.name.startswith(".")]  # no run or temp files left


def test_step_trace_cells_and_reduce_columns(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("step_trace", [step(feed, iteration_end_ns=T0 + 9_000_000, iteration_id=2,
                                                    fp_start_ns=T0 + 100, bp_end_ns=T0 + 4_236_200,
                                                    fp_bp_ns=4_236_100, refresh_ns=4_763_800, data_aug_ns=32_134_950),
                                               step(feed)]))
    rows = table(ctx, "step_trace")
    assert rows[1:] == [
        ["0", "2", "1736413971558973.012\t", "1736413971563209.112\t", "1736413971567972.912\t", "2559.820",
         "4236.100", "4763.800", "32134.950", "1"],
        ["0", "1", "N/A", "N/A", "1736413971558972.912\t", "2559.820", "N/A", "N/A", "N/A", "1"],
    ]
    # an iteration with two all-reduces widens the header; earlier rows get N/A there
    sink.write_batch(feed.batch("step_trace", [step(feed, iteration_id=3, iteration_end_ns=T0 + 20_000_000,
                                                    reduces=[[T0 + 1_000, T0 + 42_565], [T0 + 50_000, None]])]))
    live = read_csv(folder(ctx) / f"step_trace_{TIMESTAMP}.csv")
    reduce_header = ["Reduce Start(us)", "Reduce Duration(us)"] * 2
    assert live[0] == HEADERS["step_trace"].split(",") + reduce_header
    assert live[1][10:] == ["N/A"] * 4 and live[3][10:] == ["1736413971558973.912\t", "41.565",
                                                            "1736413971559022.912\t", "N/A"]
    sink.close()
    final = read_csv(folder(ctx) / f"step_trace_{TIMESTAMP}.csv")
    assert final[0] == live[0] and [r[1] for r in final[1:]] == ["1", "2", "3"]  # by iteration end
    assert all(len(r) == 14 for r in final)


def test_msprof_tx_marks_and_ranges(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("tx", [
        feed.tx(T0 + 5_000, T0 + 2_615_331, process_id=14250, thread_id=14263, message="preprocess, resize"),
        feed.tx(T0, T0, process_id=14250, thread_id=14263, event_type=0, message="frame 1", domain=77),
    ]))
    sink.close()
    rows = table(ctx, "msprof_tx")
    assert rows[1:] == [
        ["host", "14250", "14263", "0", "marker", "0", "0", "1736413971558972.912\t", "1736413971558972.912\t", "0",
         "frame 1", "N/A", "N/A", "N/A"],
        ["host", "14250", "14263", "0", "start/end", "0", "0", "1736413971558977.912\t", "1736413971561588.243\t",
         "0", "preprocess, resize", "N/A", "N/A", "N/A"],
    ]


def test_aicpu_and_l2_cache(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    sink.write_batch(feed.batch("aicpu", [aicpu(feed, start_ns=T0 + 7, task_id=1, node="", dispatch_ns=None),
                                          aicpu(feed)]))
    sink.write_batch(feed.batch("l2_cache", [l2(feed, sequence=1, task_id=1, hit_rate=None, victim_rate=1.25,
                                                op_name=""),
                                             l2(feed)]))
    sink.close()
    assert table(ctx, "aicpu")[1:] == [
        ["0", "1736413971558972.912\t", "decode_bbox/DecodeBbox", "186.000", "26.000", "260.400", "9.000", "270.270",
         "3", "0"],
        ["0", "1736413971558972.919\t", "N/A", "186.000", "26.000", "260.400", "N/A", "270.270", "3", "1"],
    ]
    assert table(ctx, "l2_cache")[1:] == [["0", "2", "0", "0.643802", "0.068408", "data_1_aipp/Aipp"],
                                          ["0", "2", "1", "N/A", "1.25", "N/A"]]


def test_json_format_and_no_file_without_rows(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, format="json")
    sink.write_batch(feed.batch("aicpu", [aicpu(feed)]))
    sink.write_batch(feed.batch("step_trace", []))
    sink.close()
    rows = json.loads((folder(ctx) / f"aicpu_{TIMESTAMP}.json").read_text())
    assert rows == [dict(zip(HEADERS["aicpu"].split(","), [
        "0", "1736413971558972.912", "decode_bbox/DecodeBbox", "186.000", "26.000", "260.400", "9.000", "270.270",
        "3", "0"], strict=True))]
    assert not list(folder(ctx).glob("step_trace*")) and not list(folder(ctx).glob("l2_cache*"))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                                        st.integers(-10**6, 10**6),
                                        st.sampled_from([0.0, -0.0, -0.0004, 0.0005, 10.0, 100.05, 1e20])),
                              max_size=6), max_size=12),
       width=st.integers(0, 5))
def test_a_batch_of_pmu_cells_reads_as_each_value_alone(rows: list[list[float | None]], width: int) -> None:
    """num3_rows (one format for a whole batch) against num3 per value; short rows padded with N/A."""
    expected = [[num3(value) for value in values[:width]] + [NA] * (width - len(values[:width])) for values in rows]
    assert num3_rows(rows, width) == expected
