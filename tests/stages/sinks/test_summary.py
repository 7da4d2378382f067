"""SummarySink: msprof's op_summary / op_statistic / api_statistic, parseable at every moment."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sink_batches import TIMESTAMP, Feed

from pipeline.stage import StageContext
from stages.sinks.summary import SummarySink

OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),"
    "Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,"
    "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID"
).split(",")
OP_STATISTIC_HEADER = ("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
                       "Max Time(us),Ratio(%)").split(",")
API_STATISTIC_HEADER = "Device_id,Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance".split(",")


def make_sink(ctx: StageContext, **config: Any) -> SummarySink:
    sink = SummarySink(SummarySink.Config(timestamp=TIMESTAMP, **config), ctx)
    sink.open()
    return sink


def out(ctx: StageContext, name: str) -> Path:
    return ctx.output_dir / "mindstudio_profiler_output" / name


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def starts(rows: list[list[str]]) -> list[tuple[str, str]]:
    return [(row[0], row[8]) for row in rows]


def test_op_summary_rows_live_with_msprof_quirks(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    path = out(ctx, f"op_summary_{TIMESTAMP}.csv")
    sink.write_batch(feed.run_info())
    assert not path.exists()  # no rows, no file
    sink.write_batch(feed.batch("task", [
        feed.task(1_736_413_971_558_972_912, 1_736_413_971_559_158_416, input_shapes="81920,4096;8192,512",
                  output_shapes="4096,512"),
        feed.task(1_736_413_971_559_160_000, 1_736_413_971_559_161_000, block_dim=None, mix_block_dim=None,
                  hf32_eligible="",
                  input_shapes="", op_state="", task_id=2),
        feed.task(1_736_413_971_559_170_000, 1_736_413_971_559_171_000, op_name=""),  # no host info: left out
        feed.task(1_736_413_971_559_180_000, 1_736_413_971_559_181_000, task_type="WRITE_BACK"),
    ]))
    rows = read_csv(path)  # readable while the sink is open
    assert rows[0] == OP_SUMMARY_HEADER
    first, second = rows[1], rows[2]
    assert len(rows) == 3 and all(len(row) == len(OP_SUMMARY_HEADER) for row in rows)
    assert first[:11] == ["0", "4294967295", "1", "3", "MatMul_1", "MatMul", "static", "AI_CORE",
                          "1736413971558972.912\t", "185.504", "0.000"]
    assert first[11:] == ["8", "0", "NO", '"81920,4096;8192,512"', "FLOAT16;FLOAT16", "ND;ND", '"4096,512"',
                          "FLOAT16", "ND", "N/A"]
    raw = path.read_text().splitlines()[1]
    assert ',"""81920,4096;8192,512""",' in raw and ",1736413971558972.912\t," in raw
    assert second[6] == "N/A" and second[11:15] == ["N/A", "N/A", "N/A", "N/A"]
    assert second[10] == "1.584"  # wait: 1736413971559160.000 - 1736413971558972.912 - 185.504
    assert sink.accounting()["tasks_skipped"] == 2
    sink.close()
    assert read_csv(path) == rows  # already in order: close changes nothing


def test_close_sorts_by_device_and_start_and_recomputes_wait(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx)
    path = out(ctx, f"op_summary_{TIMESTAMP}.csv")
    sink.write_batch(feed.batch("task", [feed.task(10_000, 12_000, device_id=1, task_id=1),
                                         feed.task(5_000, 6_000, device_id=0, task_id=2)]))
    sink.write_batch(feed.batch("task", [feed.task(1_000, 4_000, device_id=0, task_id=3),
                                         feed.task(2_000, 3_000, device_id=1, task_id=4),
                                         feed.task(4_500, 4_600, device_id=0, task_id=5)]))
    assert len(read_csv(path)) == 6
    sink.close()
    rows = read_csv(path)
    assert rows[0] == OP_SUMMARY_HEADER
    body = rows[1:]
    assert [(r[0], r[2], r[8], r[9], r[10]) for r in body] == [
        ("0", "3", "1.000\t", "3.000", "0.000"),
        ("0", "5", "4.500\t", "0.100", "0.500"),
        ("0", "2", "5.000\t", "1.000", "0.400"),
        ("1", "4", "2.000\t", "1.000", "0.000"),
        ("1", "1", "10.000\t", "2.000", "7.000"),
    ]
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp files left


def test_rows_that_arrive_sorted_are_final_as_written(tmp_path: Path) -> None:
    """Close keeps the live file when rows came in sort order; shuffled, the same rows sort to the same file."""
    files = {}
    for name in ("sorted", "shuffled"):
        feed = Feed()
        tasks = [feed.task(1_000 * i + (i % 3) * 200, 1_000 * i + 700, device_id=i // 40, stream_id=3 + i % 2,
                           task_id=i % 7) for i in range(80)]
        tasks.insert(5, feed.task(5_000, 5_100, task_id=1))  # between its neighbours
        order = tasks if name == "sorted" else tasks[41:] + tasks[:41][::-1]
        ctx = StageContext(stage_id="sink", run_id="test", output_dir=tmp_path / name)
        sink = make_sink(ctx)
        for i in range(0, len(order), 16):
            sink.write_batch(feed.batch("task", order[i:i + 16]))
        path = out(ctx, f"op_summary_{TIMESTAMP}.csv")
        live = path.stat().st_ino
        sink.close()
        files[name] = path.read_text()
        assert (path.stat().st_ino == live) == (name == "sorted")  # rewritten only when out of order
    assert files["sorted"] == files["shuffled"]


def test_slices_past_max_rows_and_external_sort(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, max_rows=50, sort_chunk_rows=2)  # 65 sorted runs: more than one merge pass
    times = [(i * 7_919) % 130 for i in range(130)]
    for k in range(0, 130, 10):
        sink.write_batch(feed.batch("task", [feed.task(t * 1_000, t * 1_000 + 500, task_id=t)
                                             for t in times[k:k + 10]]))
        for path in out(ctx, "").glob("op_summary*"):  # every live file parses, whole lines only
            rows = read_csv(path)
            assert rows[0] == OP_SUMMARY_HEADER and all(len(r) == len(OP_SUMMARY_HEADER) for r in rows)
    live = sorted(p.name for p in out(ctx, "").glob("op_summary*"))
    assert live == [f"op_summary_{TIMESTAMP}.csv", f"op_summary_slice_1_{TIMESTAMP}.csv",
                    f"op_summary_slice_2_{TIMESTAMP}.csv"]
    sink.close()
    final = [f"op_summary_slice_{k}_{TIMESTAMP}.csv" for k in range(3)]
    assert sorted(p.name for p in out(ctx, "").glob("op_summary*")) == final
    body = []
    for name in final:
        rows = read_csv(out(ctx, name))
        assert rows[0] == OP_SUMMARY_HEADER
        body.extend(rows[1:])
    assert [int(r[2]) for r in body] == list(range(130))
    assert {r[10] for r in body[1:]} == {"0.500"} and body[0][10] == "0.000"


def test_block_header_and_pmu_columns(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, block_header="Block Num")
    path = out(ctx, f"op_summary_{TIMESTAMP}.csv")
    sink.write_batch(feed.batch("task", [feed.task(0, 1_000)]))  # before PMU columns are known
    pmu = ["aicore_time(us)", "aic_total_cycles", "aic_mac_ratio"]
    sink.write_batch(feed.batch("task", [feed.task(2_000, 3_000, pmu=[183.87, 5295467.0, None])], pmu_columns=pmu))
    sink.write_batch(feed.batch("task", [feed.task(4_000, 5_000, pmu=[0.0004])], pmu_columns=pmu[:1]))
    rows = read_csv(path)
    assert rows[0][11:13] == ["Block Num", "Mix Block Num"] and rows[0][21:] == pmu
    assert [r[21:] for r in rows[1:]] == [["N/A", "N/A", "N/A"], ["183.87", "5295467", "N/A"], ["0", "N/A", "N/A"]]
    sink.close()
    assert read_csv(path) == rows


def test_statistics_files(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, refresh_s=3600)
    op_path, api_path = out(ctx, f"op_statistic_{TIMESTAMP}.csv"), out(ctx, f"api_statistic_{TIMESTAMP}.csv")
    sink.write_batch(feed.batch("op_statistic", [
        [0, "MatMul", "AI_CORE", 3, 3_000, 500, 1_500],
        [0, "Add", "AI_VECTOR_CORE", 1, 1_000, 1_000, 1_000],
        [1, "Conv2D", "AI_CORE", 2, 7_000, 3_000, 4_000],
    ]))
    rows = read_csv(op_path)
    assert rows == [OP_STATISTIC_HEADER,
                    ["1", "Conv2D", "AI_CORE", "2", "7", "3", "3.5", "4", "100"],
                    ["0", "MatMul", "AI_CORE", "3", "3", "0.5", "1", "1.5", "75"],
                    ["0", "Add", "AI_VECTOR_CORE", "1", "1", "1", "1", "1", "25"]]
    # durations 1, 2, 3 µs: mean 2, population variance 2/3
    sink.write_batch(feed.batch("api_statistic", [["acl", "aclmdlExecute", 3, 6_000, 1_000, 3_000, 14.0],
                                                  ["runtime", "rtKernelLaunch", 1, 1_234, 1_234, 1_234, 1.522756]]))
    assert not api_path.exists()  # rate-limited: the next write is due in an hour
    sink.flush()
    assert not api_path.exists()
    sink.write_batch(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 4, 4_000, 500, 1_500]], final=True))
    assert read_csv(api_path) == [API_STATISTIC_HEADER,
                                  ["host", "acl", "aclmdlExecute", "6", "3", "2", "1", "3", "0.667"],
                                  ["host", "runtime", "rtKernelLaunch", "1.234", "1", "1.234", "1.234", "1.234",
                                   "0"]]
    assert read_csv(op_path)[1] == ["0", "MatMul", "AI_CORE", "4", "4", "0.5", "1", "1.5", "100"]
    sink.close()
    assert not [p for p in out(ctx, "").iterdir() if p.name.startswith(".")]


def test_json_format(ctx: StageContext, feed: Feed) -> None:
    sink = make_sink(ctx, format="json")
    path = out(ctx, f"op_summary_{TIMESTAMP}.json")
    sink.write_batch(feed.batch("task", [feed.task(5_000, 6_000, task_id=2), feed.task(1_000, 2_000, task_id=1)]))
    live = json.loads(path.read_text())
    assert [row["Task ID"] for row in live] == ["2", "1"] and list(live[0]) == OP_SUMMARY_HEADER
    sink.write_batch(feed.batch("op_statistic", [[0, "MatMul", "AI_CORE", 2, 2_000, 1_000, 1_000]]))
    sink.close()
    rows = json.loads(path.read_text())
    assert [(r["Task ID"], r["Task Start Time(us)"], r["Task Wait Time(us)"]) for r in rows] == [
        ("1", "1.000", "0.000"), ("2", "5.000", "3.000")]
    assert rows[0]["Input Shapes"] == "16,16;16,16"
    stats = json.loads(out(ctx, f"op_statistic_{TIMESTAMP}.json").read_text())
    expected = ["0", "MatMul", "AI_CORE", "2", "2", "1", "1", "1", "100"]
    assert stats == [dict(zip(OP_STATISTIC_HEADER, expected, strict=True))]


def test_config(ctx: StageContext) -> None:
    with pytest.raises(ValidationError):
        SummarySink.Config(block_header="Blocks")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        SummarySink.Config(rows=5)  # type: ignore[call-arg]
    defaults = SummarySink.Config()
    assert (defaults.format, defaults.block_header, defaults.max_rows, defaults.refresh_s) == (
        "csv", "Block Dim", 1_000_000, 1.0)
