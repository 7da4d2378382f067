"""The timeline's step trace layer: one finished iteration (a ``step_trace`` row) as msprof's timeline events.

As current msprof writes it (its C++ step-trace assembler): on the device's "Ascend Hardware" process,
a thread per model, tid = 70000 + model id, named ``Step Trace(Model ID:{m})``. Per iteration n:

* ``Iteration n`` (cat "Iteration Time") from iteration end − iteration time to the iteration end;
* with an FP start and a BP end: ``FP_BP Time n`` (FP start → BP end), ``Iteration Refresh n``
  (BP end → iteration end), and the Data_aug Bound flow: a step ``t`` named n−1 at the FP start and a
  start ``s`` named n at BP end + Data Aug Bound / 2 (a missing bound counts 0, as msprof stores it);
* ``Reduce_n_k`` (cat "Reduce") per all-reduce pair, args ``Reduce Start k`` / ``Reduce End k`` as integer ns.

Times in args are µs strings (``N/A`` when missing), durations µs numbers. msprof gives every flow of a track
one id, "Data_aug Bound {pid}_{tid}"; Perfetto rejects it twice (flow_invalid_id: not an integer;
flow_duplicate_id: a start while the last flow of that id is open), so ours is an odd integer per start/step
pair (HostToDevice ids are multiples of 2^32). A step that no start precedes (the track's first iteration, or a
start placed after it) is left out: Perfetto counts that as an import error too.
"""

from __future__ import annotations

from typing import Any

from stages.sinks._format import NA, us
from stages.sinks._tracks import start_seen_at, viewer_end, viewer_ns

STEP_TID_OFFSET = 70000
ITERATION, PHASE, REDUCE = 0, 1, 2  # levels: iterations; FP_BP then Refresh; the all-reduces inside Refresh


def step_tid(model_id: int) -> int:
    return STEP_TID_OFFSET + model_id


def step_thread_name(model_id: int) -> str:
    return f"Step Trace(Model ID:{model_id})"


def _at(ns: int | None) -> str:
    return f'"{NA}"' if ns is None else f'"{us(ns)}"'


def _complete(name: str, cat: str, pid: int, tid: int, span: tuple[int, int], args: str) -> str:
    start, end = span
    return (f'{{"name":"{name}","pid":{pid},"tid":{tid},"ts":"{us(start)}","dur":{us(end - start)},'
            f'"ph":"X","cat":"{cat}","args":{{{args}}}}}')


def _flow(ph: str, name: str, pid: int, tid: int, flow_id: int, ts: int, args: str) -> str:
    return (f'{{"name":"{name}","pid":{pid},"tid":{tid},"ph":"{ph}","cat":"Data_aug Bound",'
            f'"id":"{flow_id}","ts":"{us(ts)}","args":{{{args}}}}}')


class StepTrack:
    """One model's step-trace track: each level's spans one after another, each inside its parent.

    Iterations touch (one ends where the next starts), and so do FP_BP and Refresh; a viewer that reads ``ts``
    as a double rounds such neighbours across each other (see :mod:`._tracks`). A span that would start
    before its previous sibling ended, in either time domain, starts at that end instead; a child is cut at
    its parent's end. Spans only move later at their start or earlier at their end.
    """

    __slots__ = ("ends", "parents", "adjusted", "dropped")

    def __init__(self) -> None:
        self.ends = [(-1, -1)] * 3  # per level: the last span's end, exact and as a viewer sees it
        self.parents: list[tuple[int, int] | None] = [None] * 3  # per level: the span it must stay inside
        self.adjusted = 0
        self.dropped = 0

    def place(self, level: int, start: int, end: int) -> tuple[int, int] | None:
        wanted = (start, end)
        parent = self.parents[level]
        last_end, last_seen_end = self.ends[level]
        start = max(start, last_end, parent[0] if parent else start)
        start = start_seen_at(start, last_seen_end)
        end = max(start, end)
        if parent is not None:
            limit = viewer_end(*parent)
            end = min(end, parent[1], start + max(0, limit - viewer_ns(start)))
            while end > start and viewer_end(start, end) > limit:
                end -= 1
            if start > parent[1] or viewer_ns(start) > limit:
                self.dropped += 1
                return None
        if (start, end) != wanted:
            self.adjusted += 1
        self.ends[level] = (end, viewer_end(start, end))
        for child in range(level + 1, len(self.ends)):
            self.parents[child] = (start, end)
            self.ends[child] = (-1, -1)
        return start, end


class StepLayer:
    """Events of finished iterations; remembers per track the last Data_aug start written."""

    def __init__(self) -> None:
        self.tracks: dict[tuple[int, int], StepTrack] = {}
        # (pid, tid) → the last ``s``: iteration, ts, flow id
        self.flow_started: dict[tuple[int, int], tuple[int, int, int]] = {}
        self.slices = 0
        self.flow_starts = 0
        self.flow_steps = 0

    def events(self, row: list[Any], pid: int, out: list[str]) -> None:
        """Append the events of one ``step_trace`` row (columns of ``schema.STEP_TRACE_COLUMNS``)."""
        _device, model, iteration, fp, bp, end, duration, fp_bp, refresh, data_aug, reduces = row
        tid = step_tid(model)
        head = f'"Iteration ID":{iteration}'
        track = self.tracks.get((pid, tid))
        if track is None:
            track = self.tracks[(pid, tid)] = StepTrack()

        def add(level: int, name: str, cat: str, start: int, stop: int, args: str) -> None:
            span = track.place(level, start, stop)
            if span is not None:
                out.append(_complete(name, cat, pid, tid, span, args))
                self.slices += 1

        add(ITERATION, f"Iteration {iteration}", "Iteration Time", end - duration, end,
            f'{head},"FP Start":{_at(fp)},"BP End":{_at(bp)},"Iteration End":{_at(end)},'
            f'"Iteration Time(us)":{us(duration)}')
        if fp is not None and bp is not None:
            add(PHASE, f"FP_BP Time {iteration}", "FP_BP Time", fp, bp,
                f'{head},"FP Start":{_at(fp)},"BP End":{_at(bp)},"FP_BP Time(us)":{us(fp_bp or 0)}')
            add(PHASE, f"Iteration Refresh {iteration}", "Iteration Refresh", bp, end,
                f'{head},"BP End":{_at(bp)},"Iteration End":{_at(end)},"Iteration Refresh(us)":{us(refresh or 0)}')
            started = self.flow_started.get((pid, tid))
            if started is not None and started[0] == iteration - 1 and started[1] <= fp:
                out.append(_flow("t", f"Data_aug Bound {iteration - 1}", pid, tid, started[2], fp, head))
                self.flow_steps += 1
            bound = data_aug or 0
            at = bp + bound // 2
            self.flow_starts += 1
            flow_id = 2 * self.flow_starts - 1
            out.append(_flow("s", f"Data_aug Bound {iteration}", pid, tid, flow_id, at,
                             f'"Data_aug Bound(us)":{us(bound)}'))
            self.flow_started[(pid, tid)] = (iteration, at, flow_id)
        for k, (start, stop) in enumerate(reduces):
            if stop is not None:
                add(REDUCE, f"Reduce_{iteration}_{k}", "Reduce", start, stop,
                    f'{head},"Reduce Start {k}":"{start}","Reduce End {k}":"{stop}"')
