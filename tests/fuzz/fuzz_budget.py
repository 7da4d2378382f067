"""The fuzzers' budget and watchdog (tests/conftest.py reports the counts, over every test worker).

Fuzzing with a fixed budget: every fuzzer runs ``FUZZ_EXAMPLES`` inputs (hypothesis ``max_examples``),
each under a watchdog, and counts the inputs it tried; the run ends with one line per fuzzer
(``fuzz: <name> tried N inputs``) so CI logs show how much was tried.

    FUZZ_EXAMPLES=2000 pytest tests/fuzz        # a longer run
    FUZZ_RANDOM=1 pytest tests/fuzz             # new inputs each run (default: the same inputs every run)
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from hypothesis import HealthCheck, settings

DEFAULT_EXAMPLES = 120  # sized so the whole fuzz suite stays under a minute on a busy 2-core machine
HANG_S = 20  # one input taking this long is a hang, not slowness

TRIED: Counter[str] = Counter()


def budget(scale: float = 1.0) -> settings:
    """Hypothesis settings of one fuzzer: ``scale`` × FUZZ_EXAMPLES inputs, no timing checks."""
    examples = max(1, round(int(os.environ.get("FUZZ_EXAMPLES", DEFAULT_EXAMPLES)) * scale))
    return settings(max_examples=examples, deadline=None, derandomize=os.environ.get("FUZZ_RANDOM") != "1",
                    database=None, suppress_health_check=list(HealthCheck))


class Hang(Exception):
    """One fuzz input ran past the watchdog."""


@contextmanager
def watchdog(seconds: int = HANG_S) -> Iterator[None]:
    """Raise :class:`Hang` in the test if the block runs longer than ``seconds`` (an infinite loop
    never returns, so hypothesis's own deadline, checked after the call, cannot catch it)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
