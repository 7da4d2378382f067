"""Test-wide settings: helper modules in tests/ are importable by name, the project's bytecode is written
once before the tests start their stage processes, the socket folders of runs a test killed are removed at the
end, and the fuzzers' counts are printed at the end (added up over pytest-xdist's workers: the suite runs on
two, `-n 2` in pyproject.toml)."""

import compileall
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "fuzz"))

from fuzz_budget import TRIED  # noqa: E402
from pipeline_runs import run_socket_folders  # noqa: E402


def pytest_sessionstart(session: pytest.Session) -> None:
    """The tests start thousands of stage processes. Where the environment says not to write bytecode
    (PYTHONDONTWRITEBYTECODE), each of them would compile the project's modules from source again (about
    0.3 s of CPU per process); compileall writes it regardless, and reading it is always allowed."""
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller has written it
        return
    for package in ("pipeline", "pipeline_board", "stages"):
        compileall.compile_dir(ROOT / package, quiet=1)


@pytest.fixture(scope="session", autouse=True)
def remove_socket_folders_of_killed_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests that kill a supervisor leave its run's socket folder behind; at the end of the session (of each
    pytest-xdist worker) the folders of this session's runs go. Every test writes its runs' outputs under the
    session's temp folder, so another session's runs, running or not, are never touched."""
    yield
    for folder in run_socket_folders(tmp_path_factory.getbasetemp()):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker_output = getattr(session.config, "workeroutput", None)  # set in a pytest-xdist worker
    if worker_output is not None:
        worker_output["fuzz_tried"] = dict(TRIED)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """A pytest-xdist worker ended: its fuzzers' counts join the run's."""
    TRIED.update(getattr(node, "workeroutput", {}).get("fuzz_tried", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TRIED:
        return
    terminalreporter.section("fuzz budget")
    for name, count in sorted(TRIED.items()):
        terminalreporter.write_line(f"fuzz: {name} tried {count} inputs")
