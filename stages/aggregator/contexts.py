"""FFTS+ contexts: an FFTS+ task's subtasks, each timed by its own start/end logs.

GE reports an op's context ids in a context_id_info record beside its node_basic_info; the device
logs each context's start and end in stars_soc.data (func types 100010 / 100011) and writes one
ContextPmu per context in ffts_profile.data. msprof makes one op_summary row per context id GE
reported, timed by that context's logs, with the ContextPmu of that context id; the task-level
ACSQ span of such a task makes no row (msprof cann_analysis_gear, ascend_task_generator,
op_summary_assembler). Only launches of the runtime task types msprof lists carry context ids,
and never on chip v6.

Context spans are paired per (device, stream, task, context, thread) in arrival order and kept
per (device, stream, task, context) until the task they belong to (the ACSQ span containing them)
is joined. Spans that end before every device task still to come are dropped, counted.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from stages.decoder import records
from stages.schema import CONTEXT_ID_NONE

INVALID_CONTEXT = CONTEXT_ID_NONE  # "not an FFTS+ context" (msprof DEFAULT_GE_CONTEXT_ID)
# msprof cann_analysis_gear CONTEXT_ID_WHITE_LIST: runtime task types whose launch carries its node's context ids.
CONTEXT_TASK_TYPES = frozenset({"KERNEL_AICORE", "KERNEL_AIVEC", "FFTS_PLUS", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV"})
FFTS_LAUNCH_TYPES = frozenset({"FFTS_PLUS", "KERNEL_MIX_AIC", "KERNEL_MIX_AIV"})  # whose launch waits for its ids

SpanKey = tuple[int, int, int, int]  # device, stream, task, context


@dataclass(frozen=True)
class ContextSpan:
    start: int
    end: int


def context_ids(record: Any) -> list[int]:
    """The context ids of a context_id_info record (its count is capped at the slots it has)."""
    ids = record["ctx_ids"]
    return [int(c) for c in ids[: min(int(record["ctx_id_num"]), len(ids))]]


class ContextSpans:
    def __init__(self) -> None:
        self._starts: dict[tuple[int, int, int, int, int], deque[int]] = {}
        self._spans: dict[SpanKey, deque[ContextSpan]] = {}
        self.unpaired_ends = 0
        self.stale = 0  # spans no joined task took

    def add(self, arr: np.ndarray) -> None:
        for record in arr:
            key = (int(record["device_id"]), int(record["stream_id"]), int(record["task_id"]),
                   int(record["context_id"]), int(record["thread_id"]))
            ts = int(record["ts_ns"])
            if int(record["state"]) == records.STATE_START:
                self._starts.setdefault(key, deque()).append(ts)
                continue
            starts = self._starts.get(key)
            if not starts or starts[0] > ts:  # its start was lost (a later start belongs to a later run)
                self.unpaired_ends += 1
                continue
            start = starts.popleft()
            if not starts:
                del self._starts[key]
            self._spans.setdefault(key[:4], deque()).append(ContextSpan(start, ts))

    def take(self, key: SpanKey, start: int, end: int) -> ContextSpan | None:
        """The span of context ``key`` inside the task run [start, end]; older spans of the key are stale."""
        spans = self._spans.get(key)
        while spans and spans[0].end < start:
            spans.popleft()
            self.stale += 1
        span = spans.popleft() if spans and spans[0].start <= end else None
        if spans is not None and not spans:
            del self._spans[key]
        return span

    def prune_before(self, ts: int) -> None:
        """Forget spans that ended before ``ts`` (no device task still to come contains them)."""
        for key in [k for k, spans in self._spans.items() if spans[0].end < ts]:
            spans = self._spans[key]
            while spans and spans[0].end < ts:
                spans.popleft()
                self.stale += 1
            if not spans:
                del self._spans[key]

    def leftovers(self) -> tuple[int, int]:
        """(spans never taken, start logs never ended) at the end of the run."""
        return (self.stale + sum(len(q) for q in self._spans.values()),
                sum(len(q) for q in self._starts.values()))
