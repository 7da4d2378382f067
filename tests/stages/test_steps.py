"""Iterations from step-trace keypoints (stages/aggregator/steps.py): msprof's state machine, hand-worked,
and the definitions checked against a real CANN 6 step-trace export."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pipeline_runs import shared_dir

from stages.aggregator.steps import StepTraceBook
from stages.decoder import records
from stages.schema import STEP_TRACE_COLUMNS

STEP_TRACE_SAMPLE = ("samples/mindinsight_msprof_cann6/PROF_000001_20230818142704322_COJGGGCANRMICFBC/device_0/"
                     "timeline")


def keypoints(*points: tuple[int, int], model: int = 1, device: int = 0, stream: int = 5,
              index: int = 0) -> np.ndarray:
    """Step-trace records as the decoder emits them: (tag, ts ns) pairs."""
    arr = np.zeros(len(points), records.STEP)
    arr["device_id"], arr["model_id"], arr["stream_id"], arr["index_id"] = device, model, stream, index
    arr["tag_id"] = [tag for tag, _ in points]
    arr["ts_ns"] = [ts for _, ts in points]
    return arr


def as_dicts(rows: list[list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(STEP_TRACE_COLUMNS, row, strict=True)) for row in rows]


def test_model_start_and_end_make_iterations_counted_per_model() -> None:
    book = StepTraceBook()
    rows = as_dicts(book.add(keypoints((0, 1_000), (1, 3_500), (0, 4_000), (1, 4_900))))
    assert [(r["iteration_id"], r["iteration_end_ns"], r["iteration_ns"]) for r in rows] == [
        (1, 3_500, 2_500), (2, 4_900, 900)]
    assert all(r["fp_start_ns"] is None and r["fp_bp_ns"] is None and r["data_aug_ns"] is None for r in rows)
    # another model on the device counts its own iterations; the record's index id plays no part
    other = as_dicts(book.add(keypoints((0, 5_000), (1, 6_000), model=7, index=42)))
    assert [(r["model_id"], r["iteration_id"]) for r in other] == [(7, 1)]


def test_fp_bp_refresh_reduces_and_data_aug_bound() -> None:
    book = StepTraceBook()
    first = as_dicts(book.add(keypoints((0, 100), (2, 110), (3, 400), (10000, 420), (10001, 470), (10002, 480),
                                        (10003, 490), (1, 500))))[0]
    assert (first["fp_start_ns"], first["bp_end_ns"], first["fp_bp_ns"], first["refresh_ns"]) == (110, 400, 290, 100)
    assert first["reduces"] == [[420, 470], [480, 490]]
    assert first["data_aug_ns"] is None  # no earlier iteration on the device
    # keypoints seen before the next start are forgotten by it; FP of iteration 2 minus the end of iteration 1
    second = as_dicts(book.add(keypoints((2, 510), (10000, 520), (0, 600), (2, 650), (3, 900), (1, 1_000))))[0]
    assert (second["iteration_id"], second["fp_start_ns"], second["data_aug_ns"]) == (2, 650, 150)
    assert second["reduces"] == []
    # an iteration of another model that ended in between is the closest earlier end
    book.add(keypoints((0, 1_010), (1, 1_050), model=2))
    third = as_dicts(book.add(keypoints((0, 1_100), (2, 1_120), (1, 1_300))))[0]
    assert third["data_aug_ns"] == 1_120 - 1_050
    assert third["bp_end_ns"] is None and third["refresh_ns"] is None and third["fp_bp_ns"] is None


def test_iteration_end_chains_and_ignored_keypoints() -> None:
    book = StepTraceBook()
    # before any start: an end or an iteration end means nothing; tag 4 finishes one iteration and starts the next
    rows = as_dicts(book.add(keypoints((1, 50), (4, 60), (0, 100), (4, 200), (4, 350), (0, 360), (1, 500))))
    assert [(r["iteration_id"], r["iteration_end_ns"], r["iteration_ns"]) for r in rows] == [
        (1, 200, 100), (2, 350, 150), (3, 500, 140)]  # a model start after an iteration end restarts it at 360
    assert book.add(keypoints((1, 600), (0, 700))) == []  # a repeated end is ignored; an open iteration is not a row


def test_step_start_and_end_tags_pair_by_index() -> None:
    book = StepTraceBook()
    rows = as_dicts(book.add(np.concatenate([keypoints((60000, 1_000), index=3), keypoints((60001, 1_800), index=3),
                                             keypoints((60001, 2_000), index=4)])))
    assert [(r["iteration_id"], r["iteration_end_ns"], r["iteration_ns"]) for r in rows] == [(3, 1_800, 800)]


def _sample_iterations() -> dict[int, dict[str, Any]]:
    """Iteration events of a real CANN 6 export (MindSpore AlexNet on a 910, 2 ranks), µs → ns."""
    folder = shared_dir() / STEP_TRACE_SAMPLE
    found: dict[int, dict[str, Any]] = {}
    for path in sorted(folder.glob("step_trace_0_2_*.json")):
        for event in json.loads(path.read_text()):
            if event.get("ph") != "X":
                continue
            args = event["args"]
            entry = found.setdefault(int(args["Iteration ID"]), {})
            if event["cat"] == "Iteration Time":
                entry.update(start=event["ts"], fp=args["FP Start"], bp=args["BP End"], end=args["Iteration End"],
                             time_ns=args["Iteration Time(ns)"])
            elif event["cat"] == "FP_BP Time":
                entry["fp_bp_ns"] = args["FP_BP Time(ns)"]
            elif event["cat"] == "Iteration Refresh":
                entry["refresh_ns"] = args["Iteration Refresh(ns)"]
            elif event["cat"] == "Reduce":
                entry["reduce"] = (args["Reduce Start 0"], args["Reduce End 0"])
    return found


def test_definitions_agree_with_a_real_cann6_step_trace() -> None:
    """Keypoints rebuilt from msprof's own step-trace events give back its iteration, FP-BP and refresh times."""
    sample = _sample_iterations()
    assert len(sample) >= 10

    def ns(us_value: float) -> int:
        return round(us_value * 1000)

    points: list[tuple[int, int]] = []
    for iteration in sorted(sample):
        it = sample[iteration]
        points += [(0, ns(it["start"])), (2, ns(it["fp"])), (3, ns(it["bp"])), (10000, ns(it["reduce"][0])),
                   (10001, ns(it["reduce"][1])), (1, ns(it["end"]))]
    rows = as_dicts(StepTraceBook().add(keypoints(*points, model=2)))
    assert [r["iteration_id"] for r in rows] == sorted(sample)
    for row in rows:
        it = sample[row["iteration_id"]]
        assert row["iteration_ns"] == pytest.approx(it["time_ns"], abs=20)
        assert row["fp_bp_ns"] == pytest.approx(it["fp_bp_ns"], abs=20)
        assert row["refresh_ns"] == pytest.approx(it["refresh_ns"], abs=20)
        assert row["iteration_end_ns"] == ns(it["end"])
        (start, end), = row["reduces"]
        assert (start, end) == (ns(it["reduce"][0]), ns(it["reduce"][1]))
