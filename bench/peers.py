"""The peers the benchmark compares with: Perfetto's trace processor and msprof's own parser.

Each runs under ``/usr/bin/time`` (wall time and peak RSS of the process and its children).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # perfetto_tp: finds or installs trace_processor_shell

GROUP_BY = ("select name, count(*) as cnt, sum(dur) as total, min(dur) as mn, max(dur) as mx "
            "from slice group by name order by total desc")
_TIME = re.compile(r"^BENCHTIME (\S+) (\d+) (\S+) (\S+)$", re.M)
_LOADED = re.compile(r"Trace loaded: ([\d.]+) MB in ([\d.]+)s")


@dataclass
class Timed:
    wall_s: float
    peak_mb: float
    cpu_s: float
    output: str
    stdout: str


def timed(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
          timeout: float = 3600) -> Timed:
    """Run ``command`` under /usr/bin/time; raise RuntimeError with its output's tail when it fails."""
    wrapped = ["/usr/bin/time", "-f", "BENCHTIME %e %M %U %S", *command]
    started = time.monotonic()
    result = subprocess.run(wrapped, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} exited with {result.returncode}: {output.strip()[-1500:]}")
    found = _TIME.findall(result.stderr)
    if not found:
        return Timed(time.monotonic() - started, 0.0, 0.0, output, result.stdout)
    wall, peak_kb, user, system = found[-1]
    return Timed(float(wall), int(peak_kb) / 1024, float(user) + float(system), output, result.stdout)


@dataclass
class PerfettoRun:
    load_s: float  # the shell's own "Trace loaded … in" figure
    total_s: float  # load + GROUP BY, wall
    cpu_s: float
    peak_mb: float
    trace_mb: float
    slices: int
    names: int


def perfetto_group_by(trace: Path, work: Path) -> PerfettoRun | str:
    """trace_processor_shell loads ``trace`` and runs the op-statistics GROUP BY; or why it could not."""
    from perfetto_tp import trace_processor

    shell = trace_processor()
    if isinstance(shell, str):
        return f"no trace_processor_shell: {shell}"
    script = work / "group_by.sql"
    script.write_text(f"{GROUP_BY};\n")
    run = timed([str(shell), "-q", str(script), str(trace)])
    loaded = _LOADED.search(run.output)
    rows = list(csv.reader(line for line in run.stdout.splitlines() if line.strip()))[1:]
    return PerfettoRun(float(loaded.group(2)) if loaded else run.wall_s, run.wall_s, run.cpu_s, run.peak_mb,
                       trace.stat().st_size / 2**20, sum(int(row[1]) for row in rows), len(rows))


def merged_timeline(output: Path, into: Path) -> Path:
    """Our timeline as one JSON array (a rotated timeline is several files; Perfetto reads one)."""
    files = sorted((output / "mindstudio_profiler_output").glob("msprof_*.json"))
    if len(files) == 1:
        return files[0]
    with open(into, "w", encoding="utf-8") as merged:
        merged.write("[")
        first = True
        for path in files:
            body = path.read_text(encoding="utf-8").strip()[1:-1].strip()
            if body:
                merged.write(("" if first else ",") + "\n" + body)
                first = False
        merged.write("\n]")
    return into


@dataclass
class MsprofRun:
    wall_s: float
    cpu_s: float
    peak_mb: float


def msprof_parse(prof: Path, source: Path, work: Path) -> MsprofRun | str:
    """msprof.py import, export summary and export timeline of a copy of ``prof`` (msprof writes into it)."""
    script = next((source / c for c in ("analysis/msprof/msprof.py", "msprof/msprof.py") if (source / c).is_file()),
                  None)
    if script is None:
        return f"no msprof source at {source} (git clone https://github.com/Ascend/msprof {source})"
    copy = work / prof.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(prof, copy)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(script.parent.parent)
    runs = [timed([sys.executable, script.name, *step, "-dir", str(copy)], cwd=script.parent, env=env)
            for step in (["import"], ["export", "summary"], ["export", "timeline"])]
    return MsprofRun(sum(r.wall_s for r in runs), sum(r.cpu_s for r in runs), max(r.peak_mb for r in runs))
