"""A stage reports its own peak memory, not its parent's: a process started by fork and exec keeps the parent's
peak in ``ru_maxrss``, so every stage of a run reported at least its supervisor's size."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = "import resource; from pipeline.runner import _peak_rss_mb; " \
        "print(_peak_rss_mb(resource.getrusage(resource.RUSAGE_SELF)))"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_a_child_of_a_large_parent_reports_its_own_peak() -> None:
    held = bytearray(400 * 2**20)
    held[::4096] = b"\x01" * len(held[::4096])  # touched: 400 MB resident in this process
    child = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert float(child.stdout) < 300, f"the child reported {child.stdout.strip()} MB: its parent's peak"
    del held
