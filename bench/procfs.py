"""What Linux /proc says about a process, for the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_s(pid: int | str) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
