"""Launching the profiled application: `pipeline run CONFIG -- APP …` and `pipeline acl-json`.

CANN switches profiling on for an application in one of two ways, as its profiling guides describe:

* ``acl.json`` passed to ``aclInit`` / ``acl.init`` / ``svp_acl_init``::

      {"profiler": {"switch": "on", "output": DIR, "aic_metrics": "ArithmeticUtilization",
                    "aicpu": "on", "acl_api": "on", "interval": "0"}}

  (the CANN profiling guide for SVP boards prints their AI CPU and metric keys as ``aacpu`` / ``aac_metrics``;
  CANN's own acl.json spells them ``aicpu`` / ``aic_metrics``, as written here).
* the environment of GE-based frameworks: ``PROFILING_MODE=true`` and ``PROFILING_OPTIONS`` holding
  the same switches as JSON (the ``profiling_options`` keys of CANN's TensorFlow profiling guide: output, task_trace,
  training_trace, aic_metrics, aicpu).

CANN's profiling guides pass acl.json's path in the application's own code, so no standard variable names it:
``PIPELINE_ACL_JSON`` does, for the application to hand to ``acl.init`` (``pipeline.tx`` and the
simulated application read it too). The runtime writes ``PROF_…`` under ``output``, which is what
the run's collector follows. When the application exits, the supervisor writes the collector's end
marker (``app_exit.json``): the collector then reads what is on disk and ends, even when the
application died before CANN wrote ``end_info``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import UserError

ACL_JSON_ENV = "PIPELINE_ACL_JSON"
TX_ENDPOINT_ENV = "PIPELINE_TX_ENDPOINT"  # pipeline.tx sends its records to this collector socket
SINCE_ENV = "PIPELINE_PROFILE_SINCE"  # epoch s: PROF_ directories older than this are an earlier job's (pipeline.tx)
ACL_JSON_NAME = "acl.json"
END_MARKER_NAME = "app_exit.json"
DEFAULT_PROF_DIR = "profiling"  # under the run output: the SVP profiling guide suggests a project's profiling/ folder
SWITCHES = ("on", "off")


@dataclass(frozen=True)
class ProfilerSwitches:
    """The ``profiler`` section of acl.json (values as the strings CANN reads)."""

    output: str
    switch: str = "on"
    aic_metrics: str = "ArithmeticUtilization"  # the SVP profiling guide's default (its boards have only it)
    aicpu: str = "on"
    acl_api: str = "on"
    interval: int = 0  # collect every N-th inference (0: every one)
    msproftx: str = "off"  # the runtime's own msproftx (acl.prof.mark …); pipeline.tx does not need it

    def __post_init__(self) -> None:
        for name in ("switch", "aicpu", "acl_api", "msproftx"):
            if getattr(self, name) not in SWITCHES:
                raise UserError(f"acl.json: {name} must be on or off, not {getattr(self, name)!r}")
        if self.interval < 0:
            raise UserError(f"acl.json: interval must be 0 or more, not {self.interval}")

    def profiler(self) -> dict[str, str]:
        section = {"switch": self.switch, "output": self.output, "aic_metrics": self.aic_metrics,
                   "aicpu": self.aicpu, "acl_api": self.acl_api, "interval": str(self.interval)}
        if self.msproftx == "on":
            section["msproftx"] = "on"
        return section

    def profiling_options(self) -> dict[str, str]:
        """The same switches as ``PROFILING_OPTIONS`` keys (profiling_options of CANN's TensorFlow profiling guide)."""
        options = {"output": self.output, "task_trace": "on", "training_trace": "off",
                   "aic_metrics": self.aic_metrics, "aicpu": self.aicpu}
        if self.msproftx == "on":
            options["msproftx"] = "on"
        return options


def write_acl_json(path: Path, switches: ProfilerSwitches) -> Path:
    """Write acl.json (other top-level sections of an existing file are kept); returns its path."""
    document: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserError(f"acl-json: {path} exists but is not JSON ({exc})",
                            "fix or remove it; its other sections would be lost") from None
        if not isinstance(loaded, dict):
            raise UserError(f"acl-json: {path} exists but is not a JSON object", "fix or remove it")
        document = loaded
    document["profiler"] = switches.profiler()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    try:
        temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:  # named by the file the user asked for, not by its temporary twin
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    return path


def app_environment(acl_json: Path, switches: ProfilerSwitches, base: dict[str, str] | None = None,
                    tx_endpoint: str | None = None) -> dict[str, str]:
    """The application's environment: the caller's, plus where acl.json is and PROFILING_MODE/OPTIONS (and the
    collector socket for pipeline.tx annotations, when one is configured)."""
    env = dict(os.environ if base is None else base)
    if tx_endpoint:
        env[TX_ENDPOINT_ENV] = tx_endpoint
    env[ACL_JSON_ENV] = str(acl_json)
    env[SINCE_ENV] = f"{time.time():.3f}"
    env["PROFILING_MODE"] = "true" if switches.switch == "on" else "false"
    env["PROFILING_OPTIONS"] = json.dumps(switches.profiling_options(), separators=(",", ":"))
    return env


def exit_status(returncode: int) -> int:
    """A shell's view of a child's status: its code, or 128 + the signal that ended it."""
    return 128 - returncode if returncode < 0 else returncode


class Application:
    """The profiled job: started in its own session, so signals reach it and every process it starts."""

    def __init__(self, command: list[str], env: dict[str, str], end_marker: Path) -> None:
        if not command:
            raise UserError("run: nothing to launch after '--'", "e.g. pipeline run CONFIG -- python infer.py")
        self.command = command
        self.env = env
        self.end_marker = end_marker
        self.popen: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.ended: float | None = None

    def reset(self) -> None:
        """Before the stages start: an earlier run's end marker would end this run's collectors at once."""
        self.end_marker.unlink(missing_ok=True)

    def start(self) -> None:
        try:
            self.popen = subprocess.Popen(self.command, env=self.env, start_new_session=True)
        except OSError as exc:
            raise UserError(f"run: cannot start {self.command[0]!r}: {exc.strerror}",
                            "check the command after '--' (a path, or a program on PATH)") from None
        self.started = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def poll(self) -> int | None:
        """The exit status once the application has ended (the end marker is written then), else None."""
        if self.popen is None:
            return None
        code = self.popen.poll()
        if code is None:
            return None
        if self.ended is None:
            self.ended = time.monotonic()
            self._write_marker(exit_status(code))
        return exit_status(code)

    def _write_marker(self, status: int) -> None:
        temporary = self.end_marker.with_name(self.end_marker.name + ".tmp")
        temporary.write_text(json.dumps({"exit_status": status, "pid": self.pid, "ended": time.time()}))
        temporary.replace(self.end_marker)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the application's process group (it may have started helpers)."""
        if self.popen is None or self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        self.signal(signal.SIGKILL)

    def summary(self) -> dict[str, Any]:
        code = self.popen.returncode if self.popen is not None else None
        return {"command": self.command, "pid": self.pid,
                "exit_status": None if code is None else exit_status(code),
                "wall_s": (self.ended or time.monotonic()) - self.started if self.started else 0.0}


def combined_exit_code(pipeline_code: int, app_status: int | None) -> int:
    """`pipeline run -- APP` exits with the application's status; with the pipeline's own code (1, or 130 when
    aborted) only when the application succeeded. When both fail, the application's status wins and the
    pipeline's problems are on stderr and in run_report.json."""
    if app_status is None or app_status == 0:
        return pipeline_code
    return app_status
