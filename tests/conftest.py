"""Test-wide settings: helper modules in tests/ are importable by name, and the project's bytecode is written
once before the tests start their stage processes."""

import compileall
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The tests start thousands of stage processes. Where the environment says not to write bytecode
    (PYTHONDONTWRITEBYTECODE), each of them would compile the project's modules from source again (about
    0.3 s of CPU per process); compileall writes it regardless, and reading it is always allowed."""
    for package in ("pipeline", "pipeline_board", "stages"):
        compileall.compile_dir(ROOT / package, quiet=1)
