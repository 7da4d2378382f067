"""`pipeline top`: attach to a running pipeline's view (SUB, newest snapshot only), or show the final figures of
a run that has ended."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import zmq

from pipeline.errors import UserError
from pipeline.security import CurveKeys
from pipeline.transport import secure_connect
from pipeline.views import output_console, records_out, render_view


def _connectable(endpoint: str) -> str:
    """A bind address such as tcp://*:5555 or tcp://0.0.0.0:5555 is reached on this host's loopback."""
    return endpoint.replace("tcp://*:", "tcp://127.0.0.1:").replace("tcp://0.0.0.0:", "tcp://127.0.0.1:")


def run_file_of(target: str) -> Path | None:
    """The run.json that ``target`` (a config, a run's output folder or its run.json) names; None for an endpoint."""
    if target.startswith(("ipc://", "tcp://")):
        return None
    path = Path(target).expanduser()
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        from pipeline.config import load_config

        config = load_config(path)
        path = config.output_dir  # the running supervisor wrote run.json there
    return path / "run.json" if path.is_dir() else path


def ended_run(run_file: Path | None) -> Path | None:
    """The run_report.json of the run that run.json describes, if that run has ended (the report is newer)."""
    if run_file is None or not run_file.is_file():
        return None
    report = run_file.parent / "run_report.json"
    if report.is_file() and report.stat().st_mtime_ns >= run_file.stat().st_mtime_ns:
        return report
    return None


def resolve_endpoint(target: str, secret_key: str | None = None,
                     server_key: str | None = None) -> tuple[str, CurveKeys | None]:
    """The top endpoint of ``target`` and the CURVE keys to reach it (None: plain)."""
    run_file = run_file_of(target)
    if run_file is None:
        return _connectable(target), _keys(secret_key, server_key)
    if run_file.is_file():
        run_info = json.loads(run_file.read_text())
        curve = run_info.get("curve") or {}
        return _connectable(run_info["top_endpoint"]), _keys(secret_key or curve.get("secret_key"),
                                                             server_key or curve.get("server_key"))
    raise UserError(f"top: {target} is not a config, a run output folder (with run.json) or an endpoint",
                    "pass configs/live.yaml, the run's output folder, or ipc://…")


def _keys(secret_key: str | None, server_key: str | None) -> CurveKeys | None:
    if secret_key is None and server_key is None:
        return None
    if secret_key is None or server_key is None:
        raise UserError("top: CURVE needs both --secret-key and --server-key", "pass both key files")
    return CurveKeys.load(Path(secret_key), Path(server_key), None)


def run_top(target: str, once: bool = False, as_json: bool = False, timeout_s: float = 10.0,
            secret_key: str | None = None, server_key: str | None = None) -> int:
    report = ended_run(run_file_of(target))
    if report is not None:
        return _show_ended(report, as_json)
    endpoint, curve = resolve_endpoint(target, secret_key, server_key)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.CONFLATE, 1)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    secure_connect(sub, endpoint, curve)
    sub.connect(endpoint)
    try:
        return _loop(sub, endpoint, once, as_json, timeout_s)
    except KeyboardInterrupt:
        return 0
    finally:
        sub.close(0)
        ctx.term()


def _receive(sub: zmq.Socket[bytes], timeout_s: float) -> dict[str, Any] | None:
    if not sub.poll(int(timeout_s * 1000)):
        return None
    view: dict[str, Any] = msgpack.unpackb(sub.recv(), raw=False)
    return view


def _loop(sub: zmq.Socket[bytes], endpoint: str, once: bool, as_json: bool, timeout_s: float) -> int:
    first = _receive(sub, timeout_s)
    if first is None:
        raise UserError(f"top: no pipeline is publishing on {endpoint}", "is `pipeline run` running with that config?")
    if once or as_json or not sys.stdout.isatty():
        view: dict[str, Any] | None = first
        while view is not None:
            if as_json:
                print(json.dumps(view), flush=True)
            else:
                output_console().print(render_view(view, fit_screen=False))
            if once or view.get("state") == "ended":
                return 0
            time.sleep(1.0)
            view = _receive(sub, timeout_s)
        return 0
    from rich.live import Live

    with Live(render_view(first), refresh_per_second=4) as live:
        while True:
            view = _receive(sub, timeout_s)
            if view is None:
                continue
            live.update(render_view(view))
            if view.get("state") == "ended":
                return 0


def _show_ended(report_file: Path, as_json: bool) -> int:
    """A run that has ended publishes nothing: its final figures, from its run report and its outputs."""
    view = final_view(report_file)
    if as_json:
        print(json.dumps(view), flush=True)
        return 0
    console = output_console()
    console.print(f"run {view['run_id']} has ended ({view['outcome']} after {view['elapsed_s']:.1f} s): its final "
                  f"figures, from {report_file} and the run's outputs", highlight=False)
    console.print(render_view(view, fit_screen=False))
    return 0


def final_view(report_file: Path) -> dict[str, Any]:
    """The view of an ended run, as `pipeline top --json` gives it: state ``ended``, ``outcome`` the run's
    (completed, interrupted, failed …), rates averaged over each stage's time, statistics from the outputs."""
    try:
        report = json.loads(report_file.read_text(encoding="utf-8"))
        stages = {sid: _final_stage(final) for sid, final in report.get("stages", {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"top: cannot read the ended run's report {report_file}: {exc!r}",
                        "the run may have been cut off while writing it; `pipeline import` of its PROF directory "
                        "makes the outputs again") from None
    stats: dict[str, Any] = {"ops": _final_ops(report_file.parent, str(report.get("stamp", "")))}
    advice = report_file.parent / "advice.json"
    if advice.is_file():
        stats["advice"] = json.loads(advice.read_text(encoding="utf-8")).get("advice", [])
    return {"run_id": report.get("run_id", "?"), "state": "ended", "outcome": report.get("state", "?"),
            "elapsed_s": float(report.get("wall_s", 0.0)), "stages": stages, "stats": stats}


def _final_stage(final: dict[str, Any] | None) -> dict[str, Any]:
    if final is None:
        return {"role": "?", "in": 0, "out": 0, "out_ports": {}, "inputs": [], "rejected": 0, "rate_in": 0.0,
                "rate_out": 0.0, "progress": {}, "rss_mb": 0.0, "status": "no report (crashed or killed)"}
    wall_s = float(final.get("wall_s") or 0.0)
    written = final.get("accounting", {}).get("records_written", 0)
    out = records_out({"out": final["out"], "progress": {"records_written": written}})
    status = "done" if final.get("ok") else f"failed: {str(final.get('error') or '?').removeprefix('error: ')}"
    return {"role": final["role"], "in": final["in"], "out": out, "out_ports": final["out"],
            "inputs": [row["from"] for row in final.get("reconcile", [])],
            "rejected": sum(final["rejected"].values()), "rate_in": final["in"] / wall_s if wall_s else 0.0,
            "rate_out": out / wall_s if wall_s else 0.0, "progress": {}, "rss_mb": final.get("peak_rss_mb", 0.0),
            "status": status}


def _final_ops(folder: Path, stamp: str) -> list[list[Any]]:
    """op_statistic's rows as the live view's (device, op type, core, count, total, min, max in ns)."""
    from pipeline.results import count, locate, micros, read_rows  # only here: `top` of a live run starts fast

    results = locate(folder)
    if results is None or results.stamp != stamp or results.op_statistic is None:
        return []
    return [[int(count(row.get("Device_id", "0"))), row.get("OP Type", ""), row.get("Core Type", ""),
             count(row.get("Count", "0")), int(micros(row.get("Total Time(us)", "")) * 1000),
             int(micros(row.get("Min Time(us)", "")) * 1000), int(micros(row.get("Max Time(us)", "")) * 1000)]
            for row in read_rows(results.op_statistic)]
