"""Garbage-collector settings for stages that hold many small long-lived objects."""

from __future__ import annotations

import gc

GC_YOUNG_THRESHOLD = 50_000  # allocations between young-generation collections (Python's default: 700)


def collect_young_less_often() -> None:
    """Young collections every 50,000 allocations instead of 700, in this stage's own process.

    A stage that keeps hundreds of thousands of small objects alive while records stream through (the
    aggregator's join queues, the timeline's host spans) spent 10–15 % of its CPU in collections that found
    nothing to free. Garbage without reference cycles is freed as before, at once; only the search for cycles
    runs less often. No output depends on it."""
    young, *older = gc.get_threshold()
    if young < GC_YOUNG_THRESHOLD:
        gc.set_threshold(GC_YOUNG_THRESHOLD, *older)
