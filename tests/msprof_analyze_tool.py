"""Finds, or installs into a venv in the cache folder, msprof-analyze (PyPI) for tests/test_msprof_analyze.py.

msprof-analyze brings pandas and its own numpy, so it lives in a venv of its own, never in the
project's. Order: ``$MSPROF_ANALYZE``, ``msprof-analyze`` on PATH, the cached venv, then a
``pip install`` into that venv. Run as a script (``.ci/run`` does) to install it ahead; it
always exits 0 and says what it found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = "msprof-analyze==26.2.0"


def venv_dir() -> Path:
    default = Path.home() / ".cache" / "ascend-live-pipeline"
    return Path(os.environ.get("PIPELINE_TEST_CACHE", default)) / "msprof-analyze-venv"


def _runs(path: Path) -> bool:
    try:
        result = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and "cluster" in result.stdout


def find_msprof_analyze() -> Path | None:
    named = os.environ.get("MSPROF_ANALYZE")
    candidates = [Path(named)] if named else []
    on_path = shutil.which("msprof-analyze")
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(venv_dir() / "bin" / "msprof-analyze")
    return next((path for path in candidates if path.is_file() and _runs(path)), None)


def install_msprof_analyze(timeout: float = 600) -> Path | str:
    """The command's path, or a sentence saying why it could not be had."""
    venv = venv_dir()
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, capture_output=True,
                       timeout=120)
        result = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", PACKAGE],
                                capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"installing {PACKAGE} took longer than {timeout:.0f} s"
    except subprocess.CalledProcessError as err:
        return f"cannot make a venv at {venv}: {err.stderr.strip()[-300:]}"
    command = venv / "bin" / "msprof-analyze"
    if result.returncode != 0:
        return f"pip install {PACKAGE} failed: {result.stderr.strip()[-300:]}"
    return command if _runs(command) else f"{command} does not run here"


def msprof_analyze() -> Path | str:
    return find_msprof_analyze() or install_msprof_analyze()


if __name__ == "__main__":
    print(f"msprof-analyze: {msprof_analyze()}")
