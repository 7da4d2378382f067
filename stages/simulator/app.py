"""A simulated inference application, for `pipeline run CONFIG -- python -m stages.simulator.app …`.

It does what a CANN application does with profiling: reads acl.json (its path as the argument, as
``acl.init(path)`` takes it, else ``$PIPELINE_ACL_JSON``; else ``PROFILING_MODE`` / ``PROFILING_OPTIONS``),
and when the profiler switch is on writes a ``PROF_…`` directory under its ``output`` while it runs,
with the AI Core metric group of ``aic_metrics`` (the SVP profiling guide's ``aac_metrics`` spelling is read too). Its
host clock is this machine's CLOCK_MONOTONIC_RAW, so annotations made with ``pipeline.tx`` in this
process line up with its records: it marks every ``--mark-every``-th image and wraps its run in a
``pipeline.tx`` range.

``--exit-code`` ends it with that status after a clean run; ``--crash-after N`` ends it abruptly after
image N (no end_info, queued records lost), as a crashing job would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from stages.simulator.run import AIC_METRICS, CHIPS, MAX_DEVICES, Simulation
from stages.simulator.workload import MODELS

ACL_JSON_ENV = "PIPELINE_ACL_JSON"


def profiling_settings(acl_json: str | None, env: dict[str, str]) -> dict[str, str] | None:
    """{output, aic_metrics} when profiling is switched on, else None."""
    path = acl_json or env.get(ACL_JSON_ENV)
    if path:
        profiler = json.loads(Path(path).read_text(encoding="utf-8")).get("profiler") or {}
        if str(profiler.get("switch", "")).lower() != "on" or not profiler.get("output"):
            return None
        metrics = profiler.get("aic_metrics") or profiler.get("aac_metrics") or "PipeUtilization"
        return {"output": str(profiler["output"]), "aic_metrics": str(metrics)}
    if env.get("PROFILING_MODE", "").lower() == "true":
        options = json.loads(env.get("PROFILING_OPTIONS") or "{}")
        if options.get("output"):
            return {"output": str(options["output"]), "aic_metrics": str(options.get("aic_metrics")
                                                                         or "PipeUtilization")}
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stages.simulator.app", description=__doc__.splitlines()[0])
    parser.add_argument("acl_json", nargs="?", help="acl.json (default: $PIPELINE_ACL_JSON)")
    parser.add_argument("--iterations", type=int, default=100, help="images to infer")
    parser.add_argument("--chip", choices=CHIPS, default="mini")
    parser.add_argument("--model", choices=MODELS, default=MODELS[0])
    parser.add_argument("--rate", choices=("realtime", "max"), default="realtime")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--devices", type=int, choices=range(1, MAX_DEVICES + 1), default=1, metavar="N",
                        help=f"devices the app drives, each with its own inference loop (1 to {MAX_DEVICES})")
    parser.add_argument("--slice-bytes", type=int, default=1 << 20)
    parser.add_argument("--mark-every", type=int, default=10, help="a pipeline.tx marker every N images (0: none)")
    parser.add_argument("--exit-code", type=int, default=0, help="exit status after a clean run")
    parser.add_argument("--crash-after", type=int, default=0, help="end abruptly after this image (0: never)")
    args = parser.parse_args(argv)
    try:
        settings = profiling_settings(args.acl_json, dict(os.environ))
    except (OSError, ValueError) as exc:
        print(f"app: cannot read the profiling configuration: {exc}", file=sys.stderr)
        return 2
    if settings is None:
        print("app: profiling is off (no acl.json with switch on): nothing to write", flush=True)
        return args.exit_code
    if settings["aic_metrics"] not in AIC_METRICS:
        print(f"app: unsupported aic_metrics {settings['aic_metrics']!r}", file=sys.stderr)
        return 2
    from pipeline import tx  # switched on by the same acl.json

    simulation = Simulation(Path(settings["output"]), args.chip, args.iterations, args.rate, args.seed,
                            args.slice_bytes, aic_metrics=settings["aic_metrics"], model=args.model,
                            devices=args.devices, start_time_ns=time.time_ns(),
                            host_mono0=time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW))
    state: dict[str, Any] = {"range": None}

    def after_image(image: int) -> None:
        if image == 1:
            state["range"], _ = tx.range_start("app: inference loop")
        if args.mark_every and image % args.mark_every == 0:
            tx.mark(f"app: image {image}")
        if image == args.iterations:
            if state["range"] is not None:
                tx.range_stop(state["range"])
            tx.flush()  # the last annotations reach the collector before the job's end_info, as a finalize sends them
        if image == args.crash_after:
            print(f"app: crashing after image {image}", file=sys.stderr, flush=True)
            os._exit(args.exit_code or 1)

    prof = simulation.run(on_iteration=after_image)
    print(f"app: wrote {prof} ({simulation.iteration} images)", flush=True)
    return args.exit_code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C (pipeline run passes it on): stop as a real job would, without a traceback
        sys.exit(130)
