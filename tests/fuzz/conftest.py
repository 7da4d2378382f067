"""Fixtures of the fuzzers: a per-example counter and watchdog, and the count lines at the end of the run."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "stages"))  # chain.make_ctx

from fuzz_budget import TRIED, watchdog  # noqa: E402


@pytest.fixture
def tried(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Call once per example: counts its inputs (one, or ``inputs``) under the fuzzer's name and returns
    a watchdog for its run."""
    name = request.node.originalname

    def example(inputs: int = 1) -> Any:
        TRIED[name] += inputs
        return watchdog()

    return example


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TRIED:
        return
    terminalreporter.section("fuzz budget")
    for name, count in sorted(TRIED.items()):
        terminalreporter.write_line(f"fuzz: {name} tried {count} inputs")
