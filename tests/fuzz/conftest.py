"""Fixtures of the fuzzers: a per-example counter and watchdog (tests/conftest.py prints the counts at the end)."""

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
