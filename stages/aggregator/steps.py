"""Iterations from the step-trace keypoints (ts_track tag 10), as msprof's step-trace calculator
reads them (mscalculate/step_trace: tag handlers and their state machine).

Per (device, model), tags 0 (model start), 1 (model end) and 4 (iteration end) drive a small state machine:
an iteration starts at a model start (or at an iteration end that follows a start) and finishes at the next
model end or iteration end. Iteration ids count the finished iterations of the (device, model) from 1; the
record's own index id is not used. Between a start and a finish, tags 2 / 3 give the FP start and BP end
(the last of each wins) and tags 10000–19999 all-reduce pairs per stream (even tag: start, odd: end); a start
forgets those seen before it. Tags 60000 / 60001 (step start / end, paired by index id) give iterations of
their own, without FP or BP.

The 20-byte step trace of 2020 MindSpore jobs (stages/formats/legacy.py STEP_TRACE_20) comes decoded into these
tags (BP end 3, iteration end 4, all-reduce pairs 10000 + tag − 3) plus two of its own: TAG_LEGACY_STEP_START
(a step's job-id record: no time of its own, a step lasting from the previous step's end) and TAG_LEGACY_FP
(an FP start, which opens the first step when none is open).

A finished iteration is final: its row is emitted at once. ``Data Aug Bound`` is the FP start minus the latest
iteration end on the same device (any model) before it; every such end is known by then, because a
device's keypoints arrive in time order. msprof stores a missing value as 0 and prints 0 as N/A, so a
duration of exactly 0 is N/A here too.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stages.formats import legacy

TAG_MODEL_START, TAG_MODEL_END, TAG_FP, TAG_BP, TAG_ITERATION_END = 0, 1, 2, 3, 4
ALL_REDUCE_FIRST, GET_NEXT_FIRST = 10000, 20000
TAG_STEP_START, TAG_STEP_END = 60000, 60001
TAG_LEGACY_STEP_START, TAG_LEGACY_FP = legacy.BOOK_STEP_START, legacy.BOOK_FP
assert (legacy.BOOK_BP, legacy.BOOK_ITERATION_END, legacy.BOOK_REDUCE) == (TAG_BP, TAG_ITERATION_END, ALL_REDUCE_FIRST)
ENDS_KEPT = 256  # recent iteration ends per device, for Data Aug Bound


@dataclass
class _Iteration:
    start: int | None = None
    fp: int | None = None
    bp: int | None = None
    reduces: dict[int, list[list[int | None]]] = field(default_factory=dict)  # stream → [[start, end]]


@dataclass
class _ModelSteps:
    state: int = TAG_MODEL_END  # the tag that set the state; msprof starts as after a model end
    index: int = 1
    current: _Iteration = field(default_factory=_Iteration)


class StepTraceBook:
    """Turns step-trace records into finished iterations (rows of ``schema.STEP_TRACE_COLUMNS``)."""

    def __init__(self) -> None:
        self.models: dict[tuple[int, int], _ModelSteps] = {}
        self.ends: dict[int, list[int]] = {}  # device → recent iteration ends, sorted
        self.step_starts: dict[tuple[int, int], tuple[int, int]] = {}  # (device, index) → (model, start)

    def add(self, arr: np.ndarray) -> list[list[Any]]:
        """Rows of the iterations these records finish (records of one device in time order)."""
        rows: list[list[Any]] = []
        columns = (arr["device_id"].tolist(), arr["model_id"].tolist(), arr["tag_id"].tolist(),
                   arr["ts_ns"].tolist(), arr["stream_id"].tolist(), arr["index_id"].tolist())
        for device, model, tag, ts, stream, index in zip(*columns, strict=True):
            if tag == TAG_LEGACY_STEP_START:
                continue
            if tag == TAG_LEGACY_FP:
                self._legacy_fp(self.models.setdefault((device, model), _ModelSteps()), ts)
                continue
            if tag >= TAG_STEP_START:
                self._step_time(device, model, tag, ts, index, rows)
                continue
            steps = self.models.get((device, model))
            if steps is None:
                steps = self.models[(device, model)] = _ModelSteps()
            if tag in (TAG_MODEL_START, TAG_MODEL_END, TAG_ITERATION_END):
                self._keypoint(device, model, steps, tag, ts, rows)
            elif tag in (TAG_FP, TAG_BP):
                setattr(steps.current, "fp" if tag == TAG_FP else "bp", ts)
            elif ALL_REDUCE_FIRST <= tag < GET_NEXT_FIRST:
                pairs = steps.current.reduces.setdefault(stream, [])
                if tag % 2 == 0:
                    pairs.append([ts, None])
                elif pairs:
                    pairs[-1][1] = ts
        return rows

    @staticmethod
    def _legacy_fp(steps: _ModelSteps, ts: int) -> None:
        """An FP start of the 20-byte layout: it opens the first step (later ones open at the step before's end)."""
        if steps.state == TAG_MODEL_END:
            steps.current = _Iteration(start=ts)
            steps.state = TAG_MODEL_START
        steps.current.fp = ts

    def _keypoint(self, device: int, model: int, steps: _ModelSteps, tag: int, ts: int,
                  rows: list[list[Any]]) -> None:
        """msprof's states: after a model end only a model start counts; after a start, a model end finishes
        the iteration and an iteration end finishes it and starts the next; after an iteration end, another
        one does the same and a model start restarts the open iteration."""
        state = steps.state
        if tag == TAG_MODEL_START and state in (TAG_MODEL_END, TAG_ITERATION_END):
            steps.current = _Iteration(start=ts)
            steps.state = TAG_MODEL_START
        elif tag == TAG_MODEL_END and state == TAG_MODEL_START:
            rows.append(self._finish(device, model, steps, ts))
            steps.state = TAG_MODEL_END
        elif tag == TAG_ITERATION_END and state in (TAG_MODEL_START, TAG_ITERATION_END):
            rows.append(self._finish(device, model, steps, ts))
            steps.current = _Iteration(start=ts)
            steps.state = TAG_ITERATION_END

    def _finish(self, device: int, model: int, steps: _ModelSteps, end: int) -> list[Any]:
        it = steps.current
        assert it.start is not None
        fp_bp = it.bp - it.fp if it.fp and it.bp else None
        refresh = end - it.bp if it.bp else None
        reduces = [pair for pairs in it.reduces.values() for pair in pairs]
        row = self._row(device, model, steps.index, it.fp, it.bp, end, end - it.start, fp_bp, refresh, reduces)
        steps.index += 1
        steps.current = _Iteration()
        return row

    def _step_time(self, device: int, model: int, tag: int, ts: int, index: int, rows: list[list[Any]]) -> None:
        if tag == TAG_STEP_START:
            self.step_starts[(device, index)] = (model, ts)
        elif tag == TAG_STEP_END:
            begun = self.step_starts.pop((device, index), None)
            if begun is not None:
                rows.append(self._row(device, begun[0], index, None, None, ts, ts - begun[1], None, None, []))

    def _row(self, device: int, model: int, iteration: int, fp: int | None, bp: int | None, end: int,
             duration: int, fp_bp: int | None, refresh: int | None, reduces: list[list[int | None]]) -> list[Any]:
        ends = self.ends.setdefault(device, [])
        data_aug = None
        if fp:
            before = bisect.bisect_left(ends, fp)
            data_aug = fp - ends[before - 1] if before else None
        bisect.insort(ends, end)
        if len(ends) > ENDS_KEPT:
            del ends[0]
        return [device, model, iteration, fp or None, bp or None, end, duration, fp_bp or None, refresh or None,
                data_aug or None, reduces]
