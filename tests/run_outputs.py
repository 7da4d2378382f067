"""A run's outputs in comparable form: CSV rows, database rows with ids resolved, timeline events."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

SUMMARY_MODULES = ("op_summary", "op_statistic", "api_statistic")
OUTPUT_FOLDER = "mindstudio_profiler_output"

# The headers as msprof's exports have them (Device_id first, as msprof's summary merger adds it;
# msprof_tx as msprof writes it after matching device marks: mark_id replaced by the device-side times).
SUMMARY_HEADERS = {
    "task_time": "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)",
    "step_trace": "Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),"
                  "FP to BP Time(us),Iteration Refresh(us),Data Aug Bound(us),Model ID",
    "msprof_tx": "Device_id,pid,tid,category,event_type,payload_type,payload_value,Start_time(us),End_time(us),"
                 "message_type,message,domain,Device Start_time(us),Device End_time(us)",
    "aicpu": "Device_id,Timestamp(us),Node,Compute_time(us),Memcpy_time(us),Task_time(us),Dispatch_time(us),"
             "Total_time(us),Stream ID,Task ID",
    "l2_cache": "Device_id,Stream Id,Task Id,Hit Rate,Victim Rate,Op Name",
}


def csv_rows(out: Path, module: str) -> list[tuple[str, ...]]:
    """Rows of ``{module}_{timestamp}.csv`` (header first), sorted after the header."""
    found = sorted((out / OUTPUT_FOLDER).glob(f"{module}_[0-9]*.csv"))
    assert len(found) == 1, f"expected one {module} CSV in {out}, found {found}"
    with open(found[0], newline="", encoding="utf-8") as handle:
        rows = [tuple(row) for row in csv.reader(handle)]
    return rows[:1] + sorted(rows[1:])


def database_rows(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    """TASK, COMPUTE_TASK_INFO and CANN_API rows, sorted, with STRING_IDS resolved to their text and a task's
    global id replaced by what identifies it (the sink numbers tasks in arrival order, which may differ)."""
    found = sorted(out.glob("msprof_*.db"))
    assert len(found) == 1, f"expected one database in {out}, found {found}"
    with sqlite3.connect(found[0]) as db:
        text = dict(db.execute("SELECT id, value FROM STRING_IDS"))
        tasks: dict[int, tuple[Any, ...]] = {}
        for row in db.execute("SELECT startNs, endNs, deviceId, connectionId, globalTaskId, globalPid, taskType, "
                              "contextId, streamId, taskId, modelId FROM TASK"):
            start, end, device, connection, global_id, pid, task_type, context, stream, task, model = row
            tasks[global_id] = (start, end, device, connection, pid, text[task_type], context, stream, task, model)
        compute = [(tasks[row[1]], text[row[0]], *row[2:4], *(text.get(v, v) for v in row[4:]))
                   for row in db.execute("SELECT * FROM COMPUTE_TASK_INFO")]
        apis = [(*row[:5], text[row[5]]) for row in db.execute(
            "SELECT startNs, endNs, type, globalTid, connectionId, name FROM CANN_API")]
        task_rows = db.execute("SELECT count(*), count(DISTINCT globalTaskId) FROM TASK").fetchone()
    assert task_rows[0] == task_rows[1] == len(tasks)
    return {"TASK": sorted(tasks.values()), "COMPUTE_TASK_INFO": sorted(compute, key=repr),
            "CANN_API": sorted(apis)}


def timeline_events(out: Path) -> Counter[str]:
    """Complete (``X``) events of every timeline file, as a multiset; each file must parse."""
    events: Counter[str] = Counter()
    files = sorted((out / OUTPUT_FOLDER).glob("msprof_*.json"))
    assert files, f"no timeline in {out}"
    for path in files:
        for event in json.loads(path.read_text(encoding="utf-8")):
            if event.get("ph") == "X":
                events[json.dumps(event, sort_keys=True)] += 1
    return events


def duplicates(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [row for row, count in Counter(rows).items() if count > 1]


def assert_same_outputs(out: Path, reference: Path) -> None:
    """The summaries, the database and the timeline of ``out`` equal those of ``reference``, and hold no row
    twice that the reference holds once."""
    for module in SUMMARY_MODULES:
        got, want = csv_rows(out, module), csv_rows(reference, module)
        assert got[0] == want[0], f"{module}: header differs"
        assert duplicates(got[1:]) == duplicates(want[1:]), f"{module}: rows written twice"
        assert got == want, f"{module}: {len(got) - 1} rows, the reference has {len(want) - 1}"
    got_db, want_db = database_rows(out), database_rows(reference)
    for table, want_rows in want_db.items():
        assert not duplicates(got_db[table]), f"{table}: rows written twice"
        assert got_db[table] == want_rows, f"{table}: {len(got_db[table])} rows, the reference has {len(want_rows)}"
    got_events, want_events = timeline_events(out), timeline_events(reference)
    assert got_events == want_events, (f"timeline: {sum((got_events - want_events).values())} extra X events, "
                                       f"{sum((want_events - got_events).values())} missing")
