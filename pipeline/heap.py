"""Heap settings of stage processes: the garbage collector's pace, and where large buffers come from."""

from __future__ import annotations

import ctypes
import gc

GC_YOUNG_THRESHOLD = 50_000  # allocations between young-generation collections (Python's default: 700)
M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
LARGE_BUFFER_BYTES = 128 << 10  # glibc's initial mmap threshold, kept fixed


def collect_young_less_often() -> None:
    """Young collections every 50,000 allocations instead of 700, in this stage's own process (every stage
    process: StageRunner; the aggregator and the timeline also when run in another process, as in tests).

    A stage that keeps hundreds of thousands of small objects alive while records stream through (the
    aggregator's join queues, the timeline's host spans) spent 10–15 % of its CPU in collections that found
    nothing to free; the summary and SQLite sinks, which build a batch's rows as thousands of lists and
    tuples, 10–18 %. Garbage without reference cycles is freed as before, at once; only the search for cycles
    runs less often. No output depends on it."""
    young, *older = gc.get_threshold()
    if young < GC_YOUNG_THRESHOLD:
        gc.set_threshold(GC_YOUNG_THRESHOLD, *older)


def skip_collections_at_exit() -> None:
    """For a process about to end: collect its garbage once, then exempt every object still alive from the cycle
    collector (``gc.freeze``).

    The interpreter's shutdown otherwise runs several collections over every live object (the modules, their
    classes and functions, numpy's, pyarrow's and pydantic's): 0.1-0.15 s of CPU in each stage process, against
    0.03 s for this one collection. Shutdown is otherwise as before: atexit handlers and ``weakref.finalize``
    callbacks run, and what the modules hold is freed as their references go; only reference cycles still alive
    at the end are left to the operating system with the rest of the memory."""
    gc.collect()
    gc.freeze()


def return_large_buffers() -> bool:
    """Keep glibc's mmap threshold at 128 KiB, so every large buffer is its own mapping, given back when freed.

    Stages allocate and free large buffers all the time (received messages, a batch's joined CSV or JSON text,
    a few hundred KiB each). glibc raises its mmap threshold to the size of each mapped block that is freed, up
    to 32 MiB, so after the first few such buffers the later ones come from the heap, where the small
    long-lived objects allocated between them keep the freed space from being returned: a long run's RSS then
    crept up by megabytes a minute (bench/soak.py) with no object alive to show for it. Fixing the threshold
    (which also stops the dynamic adjustment) keeps it flat. False where the C library is not glibc.

    ``mallopt`` is looked up among the symbols the process has loaded (its C library's), not by
    ``ctypes.util.find_library``, which runs ``ldconfig -p`` in a child process: 0.1-0.2 s of CPU per stage."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGE_BUFFER_BYTES))
    except (OSError, AttributeError):
        return False
