"""`pipeline ctl start|stop|schedule|status TARGET`: open and close collection windows of a running job.

TARGET is the run's config, its output folder, or the control file itself; the ``windows`` stage of the
run reads the control file (pipeline/windows.py) and writes per-window statistics.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.errors import UserError
from pipeline.windows import CONTROL_NAME, Schedule, Window, read_control, update_control

STATUS_FILE = "windows.json"  # written by the windows stage in its directory

if TYPE_CHECKING:
    from pipeline.config import PipelineConfig


def control_file(target: str) -> tuple[Path, Path | None]:
    """(control file, the windows stage's status file if known) of ``target``."""
    path = Path(target).expanduser()
    if path.suffix == ".json" and not path.is_dir():  # the windows stage's status beside it, by its default name
        _refuse_a_run_without_windows(path.resolve().parent)
        status = path.resolve().parent / "windows" / STATUS_FILE
        return path, status if status.is_file() else None
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        from pipeline.config import load_config

        loaded = load_config(path)
        found = windows_files(loaded)
        if found is None:
            raise UserError(f"ctl: {loaded.path} has no enabled windows stage to read the control file",
                            "add one, as configs/board.yaml has")
        return found
    if path.is_dir():  # no imports: ctl starts fast
        recorded = _refuse_a_run_without_windows(path.resolve())
        if recorded is not None:
            return Path(recorded["control"]), Path(recorded["status"])
        return path.resolve() / CONTROL_NAME, path.resolve() / "windows" / STATUS_FILE  # the stage's defaults
    raise UserError(f"ctl: {target} is not a config, a run output folder or a control file",
                    "pass configs/board.yaml, the run's output folder, or its control.json")


def windows_files(config: PipelineConfig) -> tuple[Path, Path] | None:
    """(control file, status file) of the config's enabled windows stage; None when it has none."""
    from stages.sinks.windows import WindowsSink

    output = config.output_dir
    for spec in config.enabled_stages().values():
        settings = spec.config
        if issubclass(spec.cls, WindowsSink) and isinstance(settings, WindowsSink.Config):
            control, directory = Path(settings.control).expanduser(), Path(settings.directory)
            control = control if control.is_absolute() else output / control
            directory = directory if directory.is_absolute() else output / directory
            return control, directory / STATUS_FILE
    return None


def windows_record(config: PipelineConfig) -> dict[str, str] | None:
    """What run.json says of the run's windows stage, for ``pipeline ctl RUN_FOLDER``: its files, or None."""
    found = windows_files(config)
    return None if found is None else {"control": str(found[0]), "status": str(found[1])}


def _refuse_a_run_without_windows(folder: Path) -> dict[str, str] | None:
    """The windows stage's files that the run in ``folder`` recorded in run.json (None: no run.json, or one from
    before it recorded them); a run without a windows stage is refused: no window of it would get any data."""
    try:
        run_info = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(run_info, dict) or "windows" not in run_info:
        return None
    recorded = run_info["windows"]
    if not isinstance(recorded, dict):
        raise UserError(f"ctl: the run in {folder} has no windows stage: nothing there reads collection windows",
                        "add a windows stage to its config, as configs/board.yaml has, and run it again")
    return {"control": str(recorded["control"]), "status": str(recorded["status"])}


def _require_running(control: Path) -> None:
    """Start/stop only for a run that is going on in that folder (a window of an ended run gets no data)."""
    folder = control.parent
    run_file, report = folder / "run.json", folder / "run_report.json"
    if not run_file.is_file():
        raise UserError(f"ctl: no run has used {folder} (no run.json)", "start it with pipeline run CONFIG -- APP")
    if report.is_file() and report.stat().st_mtime_ns >= run_file.stat().st_mtime_ns:
        raise UserError(f"ctl: the run in {folder} has ended (run_report.json is there)",
                        "pipeline ctl status still shows its windows")


def _clock(ns: int | None) -> str:
    if ns is None:
        return "-"
    if ns == 0:
        return "job start"
    return time.strftime("%H:%M:%S", time.localtime(ns / 1e9)) + f".{ns // 1_000_000 % 1000:03d}"


def run_ctl(action: str, target: str, *, window_id: int | None = None, schedule: Schedule | None = None,
            as_json: bool = False, force: bool = False) -> int:
    control, status_file = control_file(target)
    if action == "status":
        return _status(control, status_file, as_json)
    if not force:
        _require_running(control)
    now = time.time_ns()
    window: Window
    if action == "start":
        window = update_control(control, lambda c: c.open_window(now))
        print(f"window {window.id} opened at {_clock(now)} ({control})")
    elif action == "schedule":
        window = update_control(control, lambda c: c.open_window(now, schedule))
        assert window.schedule is not None
        print(f"window {window.id} opened at {_clock(now)} with schedule {window.schedule.describe()}: steps count "
              f"from the next one to start ({control})")
    else:
        window = update_control(control, lambda c: c.close_window(now, window_id))
        assert window.end_ns is not None
        print(f"window {window.id} closed at {_clock(window.end_ns)} after "
              f"{(window.end_ns - window.start_ns) / 1e9:.3f} s ({control})")
    return 0


def _status(control: Path, status_file: Path | None, as_json: bool) -> int:
    windows = read_control(control).windows
    seen: dict[str, dict[str, Any]] = {}
    if status_file is not None and status_file.is_file():
        try:
            seen = {str(entry["id"]): entry for entry in json.loads(status_file.read_text())["windows"]}
        except (ValueError, KeyError, TypeError):
            seen = {}
    rows = []
    for window in windows:
        entry = dict(seen.get(str(window.id), {}))
        entry.update({"id": str(window.id), "start_ns": window.start_ns, "end_ns": window.end_ns,
                      "open": window.is_open, "schedule": window.schedule.describe() if window.schedule else None})
        rows.append(entry)
    rows += [entry for key, entry in seen.items() if not key.isdigit()]  # the config's schedule window
    if as_json:
        print(json.dumps({"control": str(control), "windows": rows}, indent=2))
        return 0
    if not rows:
        print(f"no windows yet ({control}); pipeline ctl start opens one")
        return 0
    print(f"{'window':<9} {'state':<7} {'from':<13} {'to':<13} {'tasks':>9} {'api calls':>10}  schedule")
    for row in rows:
        state = "open" if row.get("open") else "closed"
        api_calls = row.get("api_calls")
        print(f"{row['id']:<9} {state:<7} {_clock(row.get('start_ns')):<13} {_clock(row.get('end_ns')):<13} "
              f"{row.get('tasks', 0):>9,} {'-' if api_calls is None else format(api_calls, ','):>10}  "
              f"{row.get('schedule') or ''}")
        for cycle, info in (row.get("cycles") or {}).items():
            first, last = info["steps"]
            print(f"  cycle {cycle}: steps {first}–{last}, {info['tasks']:,} tasks")
    return 0
