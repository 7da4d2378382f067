"""Fixtures of the sink tests (builders live in sink_batches.py, importable by the tests)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sink_batches import Feed

from pipeline.stage import StageContext


@pytest.fixture
def feed() -> Feed:
    return Feed()


@pytest.fixture
def ctx(tmp_path: Path) -> StageContext:
    return StageContext(stage_id="sink", run_id="test", output_dir=tmp_path)
