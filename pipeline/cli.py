"""`pipeline` command line: run, stage, validate, graph, simulate, import, export, show, compare, report, top,
keys, plugins, acl-json, ctl."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pipeline import __version__
from pipeline.errors import UserError, refused_path

if TYPE_CHECKING:
    from pipeline.config import PipelineConfig
    from pipeline.launch import Application, ProfilerSwitches

# `pipeline simulate --aic-metrics` choices: the metric groups of stages.formats.raw.PMU_EVENT_SETS (msprof's
# --aic-metrics groups), listed here so the CLI starts without importing numpy.
AIC_METRICS = ("PipeUtilization", "ArithmeticUtilization", "Memory", "ResourceConflictRatio", "PipeUtilizationExct",
               "PipelineExecuteUtilization", "MemoryL0", "MemoryUB", "L2Cache", "MemoryAccess")
EXPORT_KINDS = ("summary", "timeline", "db", "advice")  # pipeline.offline.EXPORT_STAGES
SIM_MODELS = ("face_mask_ssd", "face_mask_ssd_mish", "face_mask_ssd_fused")  # stages.simulator.workload.MODELS


def _switches(args: argparse.Namespace, output: Path) -> ProfilerSwitches:
    from pipeline.launch import ProfilerSwitches

    return ProfilerSwitches(output=str(output), switch=getattr(args, "switch", None) or "on",
                            aic_metrics=args.aic_metrics or "ArithmeticUtilization", aicpu=args.aicpu or "on",
                            acl_api=args.acl_api or "on", interval=0 if args.interval is None else args.interval,
                            msproftx=args.msproftx or "off")


def _cmd_run(args: argparse.Namespace) -> int:
    from pipeline.config import load_config
    from pipeline.supervisor import run_pipeline

    overrides: dict[str, object] = {"run.output": args.output} if args.output else {}
    config = load_config(args.config, overrides)
    app = None
    if args.app:
        if args.no_follow:
            raise UserError("run: --no-follow cannot follow an application", "drop --no-follow: the collectors "
                            "read until the application exits")
        app, launch_overrides = _prepare_launch(args, config)
        overrides.update(launch_overrides)
    else:
        given = [flag for flag, value in (("--prof-dir", args.prof_dir), ("--aic-metrics", args.aic_metrics),
                                          ("--aicpu", args.aicpu), ("--acl-api", args.acl_api),
                                          ("--interval", args.interval), ("--msproftx", args.msproftx))
                 if value is not None]
        if given:
            raise UserError(f"run: {given[0]} applies when launching an application",
                            "pipeline run CONFIG [flags] -- python infer.py …")
    if args.no_follow:
        overrides.update({f"stages.{sid}.follow": False for sid, spec in config.stages.items()
                          if "follow" in type(spec.config).model_fields})
    if overrides:
        config = load_config(args.config, overrides)
    live = None if args.live == "auto" else args.live == "on"
    return run_pipeline(config, live=live, app=app, fresh=args.fresh)


def _prepare_launch(args: argparse.Namespace, config: PipelineConfig) -> tuple[Application, dict[str, object]]:
    """acl.json, the application's environment, and the config overrides that point every collector at the
    application's profiling output (simulator stages off: the application is the board)."""
    from pipeline.launch import (
        ACL_JSON_NAME,
        DEFAULT_PROF_DIR,
        END_MARKER_NAME,
        Application,
        app_environment,
        write_acl_json,
    )
    from stages.collector import CollectorStage
    from stages.simulator.stage import SimulatorStage

    out = config.output_dir
    prof_dir = Path(args.prof_dir).expanduser().resolve() if args.prof_dir else out / DEFAULT_PROF_DIR
    collectors = [sid for sid, spec in config.enabled_stages().items() if issubclass(spec.cls, CollectorStage)]
    if not collectors:
        raise UserError(f"{config.path}: no enabled collector stage to follow the application's profiling output",
                        "add a stage of type collector (see configs/board.yaml)")
    _check_executable(args.app[0])
    prof_dir.mkdir(parents=True, exist_ok=True)
    switches = _switches(args, prof_dir)
    acl_json = write_acl_json(out / ACL_JSON_NAME, switches)
    end_marker = out / END_MARKER_NAME
    overrides: dict[str, object] = {}
    for sid in collectors:
        overrides[f"stages.{sid}.path"] = str(prof_dir)
        overrides[f"stages.{sid}.end_marker"] = str(end_marker)
    for sid, spec in config.stages.items():
        if issubclass(spec.cls, SimulatorStage):
            overrides[f"stages.{sid}.enabled"] = False
    tx_endpoints = [getattr(config.stages[sid].config, "tx_endpoint", None) for sid in collectors]
    tx_endpoint = next((endpoint for endpoint in tx_endpoints if endpoint), None)
    return Application(list(args.app), app_environment(acl_json, switches, tx_endpoint=tx_endpoint),
                       end_marker), overrides


def _check_executable(program: str) -> None:
    if os.sep in program:
        if not os.access(program, os.X_OK) or not Path(program).is_file():
            raise UserError(f"run: {program} is not an executable file", "check the command after '--'")
    elif shutil.which(program) is None:
        raise UserError(f"run: {program!r} is not on PATH", "check the command after '--'")


def _cmd_acl_json(args: argparse.Namespace) -> int:
    from pipeline.launch import app_environment, write_acl_json

    output = Path(args.output).expanduser().resolve()
    output.mkdir(parents=True, exist_ok=True)  # the runtime wants it to exist (CANN profiling guide)
    switches = _switches(args, output)
    try:
        path = write_acl_json(Path(args.path).expanduser(), switches)
    except OSError as exc:
        raise refused_path(exc) from None
    if args.env:
        env = app_environment(path.resolve(), switches, base={})
        for name, value in env.items():
            print(f"export {name}={shlex.quote(value)}")
    else:
        print(f"wrote {path} (profiling output: {output}; pass the file to acl.init, or export "
              f"PIPELINE_ACL_JSON={path.resolve()})")
    return 0


def _import_structlog_without_rich() -> None:
    """structlog imports rich (about 0.1 s) for pretty tracebacks on a terminal; a stage process has no use for
    it, and the test suite and every run start many stage processes."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # import rich → ImportError: structlog goes without
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


def _die_with_supervisor() -> None:
    """A supervised stage is killed by the kernel when its supervisor dies (Linux): one busy in a long piece of work
    would otherwise not notice for as long as that work lasts. Its last checkpoint stays for a resume, and its
    outputs are valid at every moment."""
    if not sys.platform.startswith("linux"):
        return  # elsewhere the stage notices between batches (its parent changes)
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the supervisor died before the signal was asked for: it will never come
        os._exit(1)


def _cmd_stage(args: argparse.Namespace) -> int:
    if args.control:
        _die_with_supervisor()
    # Signals that arrive while the stage is still importing are kept and replayed, not fatal.
    early: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(signum, lambda number, frame: early.append(number))

    _import_structlog_without_rich()
    from pipeline.config import load_config
    from pipeline.runner import run_stage

    overrides = {"run.output": args.output} if args.output else {}
    config = load_config(args.config, overrides, only=args.stage_id)
    return run_stage(config, args.stage_id, args.run_id or f"{config.run.name}-standalone", args.control,
                     args.stamp, early, Path(args.heartbeat) if args.heartbeat else None, args.resume)


def _cmd_validate(args: argparse.Namespace) -> int:
    from pipeline.config import load_config

    config = load_config(args.config)
    enabled = len(config.enabled_stages())
    noun = "stage" if enabled == 1 else "stages"
    print(f"{args.config}: valid ({enabled} {noun} enabled, {len(config.stages) - enabled} disabled)")
    return 0


def _cmd_graph(args: argparse.Namespace) -> int:
    from pipeline.config import graph_text, load_config

    print(graph_text(load_config(args.config)))
    return 0


FRESH_HELP = "start over even if the output folder holds checkpoints of an unfinished run (default: resume it)"
CHIP_ALIASES = {"310": "mini", "910": "cloud"}  # the chips' own names for the simulator's families


def _cmd_simulate(args: argparse.Namespace) -> int:
    from pipeline.logs import quiet_command_logging
    from stages.simulator.run import MAX_DEVICES, MIN_SLICE_BYTES, records_per_second
    from stages.simulator.writer import simulate

    quiet_command_logging()  # `wrote PROF_…` says it; the simulator's info lines are for a stage's log
    if args.iterations < 0:
        raise UserError(f"--iterations must be 0 or more, not {args.iterations}")
    if not 0 <= args.seed < 2**32:
        raise UserError(f"--seed must be from 0 to 2**32 - 1, not {args.seed}")
    if args.subscribe is not None:
        return _simulate_subscription(args)
    if args.out_dir is None:
        raise UserError("pipeline simulate needs OUT_DIR (or --subscribe FIFO)")
    if args.mode == "static" and args.layout == "legacy":
        raise UserError("--mode static is not supported with --layout legacy", "the legacy layout is launch mode only")
    if args.sleep_ms < 0:
        raise UserError(f"--sleep-ms must be 0 or more, not {args.sleep_ms}")
    if not 0 <= args.first_task_id < 2**16:
        raise UserError(f"--first-task-id must be from 0 to 65535, not {args.first_task_id}")
    if args.slice_bytes < MIN_SLICE_BYTES:
        raise UserError(f"--slice-bytes must be at least {MIN_SLICE_BYTES}, not {args.slice_bytes}")
    if not 1 <= args.devices <= MAX_DEVICES:
        raise UserError(f"--devices must be from 1 to {MAX_DEVICES}, not {args.devices}")
    try:
        records_per_second(args.rate)
    except ValueError as exc:
        raise UserError(f"--rate: {exc}") from None
    chip = CHIP_ALIASES.get(args.chip, args.chip)
    if chip in ("910b", "v6") and args.layout == "legacy":
        raise UserError(f"--chip {chip} is not supported with --layout legacy",
                        "the legacy layout (CANN 5/6 files) predates the STARS chips: use --layout current")
    try:
        prof = simulate(Path(args.out_dir), chip=chip, iterations=args.iterations, rate=args.rate, seed=args.seed,
                        slice_bytes=args.slice_bytes, aic_metrics=args.aic_metrics, mode=args.mode,
                        layout=args.layout, model=args.model, sleep_ms=args.sleep_ms,
                        first_task_id=args.first_task_id, devices=args.devices)
    except OSError as exc:  # the folder it writes: a file in the way, no permission, a full disk
        raise refused_path(exc) from None
    print(f"wrote {prof}")
    return 0


def _simulate_subscription(args: argparse.Namespace) -> int:
    from stages.simulator.run import records_per_second
    from stages.simulator.subscribe import simulate_subscription

    if args.out_dir is not None:
        raise UserError("pipeline simulate takes OUT_DIR or --subscribe FIFO, not both")
    if args.devices != 1:
        raise UserError("--devices is for a PROF_… directory: the --subscribe stream is one device's")
    if args.corrupt_every < 0:
        raise UserError(f"--corrupt-every must be 0 or more, not {args.corrupt_every}")
    if args.rate != "realtime":
        try:
            records_per_second(args.rate)
        except ValueError as exc:
            raise UserError(f"--rate: {exc}") from None
    chip = CHIP_ALIASES.get(args.chip, args.chip)
    fifo = Path(args.subscribe)
    truth = simulate_subscription(fifo, Path(args.resolver) if args.resolver else None,
                                  Path(args.truth) if args.truth else None, chip=chip, model=args.model,
                                  iterations=args.iterations, seed=args.seed, op_desc_size=args.op_desc_size,
                                  corrupt_every=args.corrupt_every, rate=args.rate)
    print(f"wrote {truth.records_written} ProfOpDesc records to {fifo} ({truth.corrupted} with a spoilt signature)")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from pipeline.offline import checked_prof_dir, run_import

    prof = checked_prof_dir(args.prof_dir, "import")
    again = ["--partitions", args.partitions] if args.partitions else []
    return run_import(prof, Path(args.output).expanduser() if args.output else None, fresh=args.fresh,
                      command=_again("import", *again, args.prof_dir, args.output), partitions=args.partitions)


def _again(verb: str, *args: str | None) -> str:
    """The command line that runs an import again (named in the lines on resuming and starting over)."""
    *words, output = args
    return shlex.join(["pipeline", verb, *filter(None, words), *(["--output", output] if output else [])])


def _partitions(text: str) -> str:
    from pipeline.partitions import parse_count

    try:
        parse_count(text, "--partitions")
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--partitions: ")) from None
    return text


def _export_kind(text: str) -> str:
    if text not in EXPORT_KINDS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a kind to export: name one or more of {', '.join(EXPORT_KINDS)} before the PROF_… "
            "directory")
    return text


def _cmd_export(args: argparse.Namespace) -> int:
    from pipeline.offline import EXPORT_STAGES, checked_prof_dir, run_import

    if args.format and "summary" not in args.what:
        raise UserError("export: --format applies to the summary export", "e.g. pipeline export summary PROF_DIR "
                        "--format json")
    prof = checked_prof_dir(args.prof_dir, "export")
    only = sorted({EXPORT_STAGES[what] for what in args.what})
    return run_import(prof, Path(args.output).expanduser() if args.output else None, only=only,
                      summary_format=args.format, verb="export", fresh=args.fresh,
                      command=_again("export", *args.what, args.prof_dir, args.output))


def _cmd_show(args: argparse.Namespace) -> int:
    from pipeline.show import run_show

    if args.top < 1:
        raise UserError(f"show: --top must be 1 or more, not {args.top}")
    return run_show(args.target, top=args.top, output=Path(args.output).expanduser() if args.output else None)


def _cmd_compare(args: argparse.Namespace) -> int:
    from pipeline.compare import run_compare

    if args.top < 1:
        raise UserError(f"compare: --top must be 1 or more, not {args.top}")
    return run_compare(args.run_a, args.run_b, csv_path=args.csv, top=args.top)


def _cmd_report(args: argparse.Namespace) -> int:
    from pipeline.html_report import run_report_verb

    return run_report_verb(args.target, html_path=Path(args.html).expanduser() if args.html else None,
                           output=Path(args.output).expanduser() if args.output else None)


def _cmd_top(args: argparse.Namespace) -> int:
    from pipeline.top import run_top

    return run_top(args.target, once=args.once, as_json=args.json, timeout_s=args.timeout,
                   secret_key=args.secret_key, server_key=args.server_key)


def _cmd_collect(args: argparse.Namespace) -> int:
    from pipeline.board_ssh import collect_over_ssh
    from pipeline.launch import ProfilerSwitches

    switches = ProfilerSwitches(output="profiling", aic_metrics=args.aic_metrics)
    return collect_over_ssh(Path(args.ssh).expanduser(), args.app, Path(args.output).expanduser().resolve(),
                            [Path(p).expanduser() for p in args.copy], switches,
                            Path(args.config) if args.config else None)


def _cmd_keys(args: argparse.Namespace) -> int:
    from pipeline.security import generate_keys

    try:
        public, secret = generate_keys(Path(args.folder), args.name)
    except OSError as exc:
        raise refused_path(exc) from None
    print(f"wrote {public} (public: give it to the hosts that connect to this one, or put it in their "
          f"allowed_clients folder)\nwrote {secret} (secret, mode 0600: keep it on this host)")
    return 0


def _cmd_ctl(args: argparse.Namespace) -> int:
    from pipeline.ctl import run_ctl
    from pipeline.windows import Schedule

    schedule = None
    if args.ctl_command == "schedule":
        schedule = Schedule(wait=args.wait, active=args.active, warmup=args.warmup, skip_first=args.skip_first,
                            repeat=args.repeat)
    return run_ctl(args.ctl_command, args.target, window_id=getattr(args, "window", None), schedule=schedule,
                   as_json=getattr(args, "json", False), force=getattr(args, "force", False))


def _cmd_plugins(args: argparse.Namespace) -> int:
    from pipeline.plugins import available_types

    types = sorted(available_types().items())
    width = max((len(name) for name, _ in types), default=0)
    for name, target in types:
        print(f"{name:<{width}}  {target}")
    return 0


def _add_switch_flags(parser: argparse.ArgumentParser, with_switch: bool) -> None:
    """acl.json's profiler switches (the `msprof.pyc collect` flags of the CANN profiling guide for SVP boards)."""
    on_off = ("on", "off")
    if with_switch:
        parser.add_argument("--switch", choices=on_off, help="profiling on or off (default: on)")
    parser.add_argument("--aic-metrics", choices=AIC_METRICS,
                        help="AI Core metric group (default: ArithmeticUtilization, the only one SVP boards support)")
    parser.add_argument("--aicpu", choices=on_off, help="AI CPU data (default: on)")
    parser.add_argument("--acl-api", choices=on_off, help="AscendCL API data (default: on)")
    parser.add_argument("--interval", type=int, help="profile every N-th inference (default: 0, every one)")
    parser.add_argument("--msproftx", choices=on_off,
                        help="the runtime's own msproftx switch, for acl.prof.mark … (default: off; "
                             "pipeline.tx annotations do not need it)")


class _OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors as the rest of the tool's: one `error:` line saying what to do, status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (`{self.prog} -h` shows the usage)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="pipeline", description="Live Ascend profile-data pipeline")
    parser.add_argument("--version", action="version", version=f"pipeline {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run every stage of a config, each as its own process",
                         usage="pipeline run [-h] [flags] CONFIG [-- APP ARGS…]",
                         epilog="-- APP ARGS… launches the application to profile (its acl.json, environment "
                                "and PROF_… folder set up) and follows what it writes: docs/cli.md")
    run.add_argument("config", help="pipeline YAML, e.g. configs/live.yaml")
    run.add_argument("--output", help="override run.output")
    run.add_argument("--live", choices=("auto", "on", "off"), default="auto",
                     help="show the live view (default: when stdout is a terminal)")
    run.add_argument("--no-follow", action="store_true",
                     help="collectors read what is on disk and end, instead of waiting for the job to finish")
    run.add_argument("--fresh", action="store_true", help=FRESH_HELP)
    run.add_argument("--prof-dir", help="with -- APP: the application's profiling output, which the collectors "
                                        "follow (default: RUN_OUTPUT/profiling)")
    _add_switch_flags(run, with_switch=False)
    run.set_defaults(func=_cmd_run, app=[])

    acl = sub.add_parser("acl-json", help="write acl.json's profiler section (what `run -- APP` hands the app)")
    acl.add_argument("path", nargs="?", default="acl.json", help="the file to write (default: ./acl.json); "
                                                                 "other sections of an existing file are kept")
    acl.add_argument("--output", default="profiling",
                     help="where the runtime writes PROF_… (default: ./profiling, written as an absolute path)")
    acl.add_argument("--env", action="store_true",
                     help="print the environment (PIPELINE_ACL_JSON, PIPELINE_PROFILE_SINCE, PROFILING_MODE, "
                          "PROFILING_OPTIONS) as shell export lines, instead of the summary line")
    _add_switch_flags(acl, with_switch=True)
    acl.set_defaults(func=_cmd_acl_json)

    collect = sub.add_parser("collect", help="profile an application on a board over SSH: copy, run, stream back")
    collect.add_argument("--ssh", required=True, metavar="BOARD_INI",
                         help="the board's [ssh_config] ini (ip, username, port; key, workdir, python)")
    collect.add_argument("--output", default="./out/board-ssh", help="the run's output folder")
    collect.add_argument("--copy", action="append", default=[], metavar="PATH",
                         help="a file or folder to put beside the application on the board (repeatable)")
    collect.add_argument("--config", help="the workstation's pipeline config (default: the built-in board-ssh.yaml)")
    collect.add_argument("--aic-metrics", choices=AIC_METRICS, default="ArithmeticUtilization",
                         help="acl.json aic_metrics")
    collect.set_defaults(func=_cmd_collect)

    stage = sub.add_parser("stage", help="run one stage alone (e.g. the collector on the board)")
    stage.add_argument("stage_id")
    stage.add_argument("--config", required=True)
    stage.add_argument("--output", help="override run.output")
    stage.add_argument("--run-id", help="run id for logs (default: <run name>-standalone)")
    stage.add_argument("--control", help="supervisor control endpoint (set by `pipeline run`)")
    stage.add_argument("--stamp", help="YYYYmmddHHMMSS of output file names (default: when the stage starts)")
    stage.add_argument("--heartbeat", help="file touched twice a second while the stage runs (container health checks)")
    stage.add_argument("--resume", type=int, metavar="EPOCH",
                       help="restore the stage from checkpoint EPOCH of its run (0: start over); set by `pipeline run` "
                            "when it restarts stages after a crash")
    stage.set_defaults(func=_cmd_stage)

    for name, func, text in (("validate", _cmd_validate, "check a config and say what is wrong"),
                             ("graph", _cmd_graph, "print the stage graph")):
        command = sub.add_parser(name, help=text)
        command.add_argument("config")
        command.set_defaults(func=func)

    sim = sub.add_parser("simulate", help="write a PROF_… directory as a simulated Ascend board would")
    sim.add_argument("out_dir", nargs="?", help="where the PROF_… directory goes (not with --subscribe)")
    sim.add_argument("--chip", choices=(*CHIP_ALIASES, "mini", "cloud", "910b", "v6"), default="mini",
                     help="mini (or 310) = Ascend 310, cloud (or 910) = Ascend 910, 910b = Ascend 910B (STARS), "
                          "v6 = chip v6 (platform 15: 32-byte STARS log, 32-bit task ids)")
    sim.add_argument("--mode", choices=("launch", "static"), default="launch",
                     help="launch = op info reported at every launch; static = an offline model (.om) reports it "
                          "once at model load and every execution reuses its task ids")
    sim.add_argument("--iterations", type=int, default=200, help="images to infer (one aclmdlExecute each)")
    sim.add_argument("--rate", default="max",
                     help="realtime (paced to simulated time), max (as fast as possible), or records per second "
                          "(100k, 2.5M, 50000)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--slice-bytes", type=int, default=2 * 1024 * 1024, help="rotate slices at this size")
    sim.add_argument("--aic-metrics", default="PipeUtilization", choices=AIC_METRICS,
                     help="AI Core PMU metric group written in sample.json (msprof's --aic-metrics)")
    sim.add_argument("--layout", choices=("current", "legacy"), default="current",
                     help="current = CANN ≥ 6.3 host reporter; legacy = CANN 5/6 AclModule/Framework/Runtime files")
    sim.add_argument("--legacy", dest="layout", action="store_const", const="legacy", help="same as --layout legacy")
    sim.add_argument("--model", choices=SIM_MODELS, default=SIM_MODELS[0],
                     help="workload: the face-mask SSD; _mish = its activations are Mish decomposed into "
                          "Softplus+Tanh+Mul with TransData around them (the case-study 'before'); _fused = "
                          "Conv2D+BN+activation fused, no TransData (the 'after')")
    sim.add_argument("--sleep-ms", type=int, default=0,
                     help="the app sleeps this long inside an msproftx range around the model load "
                          "(as in msprof's face-mask SSD case study)")
    sim.add_argument("--first-task-id", type=int, default=0, metavar="N",
                     help="task ids already used on each stream when profiling starts: near 65535 the 16-bit ids "
                          "wrap soon (FLIP tasks, batch ids), e.g. 65500 wraps the AI Core stream in the first image")
    sim.add_argument("--devices", type=int, default=1, metavar="N",
                     help="devices the app drives, each with its own inference loop (device_0 … device_N-1 in the "
                          "one PROF_… directory, 1 to 16); --iterations is per device, --rate the whole board's")
    sim.add_argument("--subscribe", metavar="FIFO",
                     help="write aclprofModelSubscribe ProfOpDesc records into FIFO (made when absent) instead of "
                          "a PROF_… directory, op names to the resolver file, the truth next to it")
    sim.add_argument("--resolver", help="with --subscribe: the op names file (default: FIFO.ndjson)")
    sim.add_argument("--truth", help="with --subscribe: the truth file (default: FIFO.truth.json)")
    sim.add_argument("--op-desc-size", type=int, choices=(72, 80), default=80,
                     help="with --subscribe: ProfOpDesc size (72: older collectors, 80: current)")
    sim.add_argument("--corrupt-every", type=int, default=0, metavar="N",
                     help="with --subscribe: spoil the signature of every N-th record (0: none)")
    sim.set_defaults(func=_cmd_simulate)

    imp = sub.add_parser("import", help="run the same stages over a finished PROF_… directory")
    imp.add_argument("prof_dir")
    imp.add_argument("--output", help="output folder (default: PROF_DIR/pipeline_output)")
    imp.add_argument("--fresh", action="store_true", help=FRESH_HELP)
    imp.add_argument("--partitions", type=_partitions, metavar="N",
                     help="run the decoder and the aggregator as N partitions by device (auto: one per CPU core, at "
                          "most 8; default 1)")
    imp.set_defaults(func=_cmd_import)

    export = sub.add_parser("export", help="run only the chosen sinks over a finished PROF_… directory")
    export.add_argument("what", nargs="+", type=_export_kind, metavar="KIND",
                        help="summary, timeline, db and/or advice")
    export.add_argument("prof_dir")
    export.add_argument("--output", help="output folder (default: PROF_DIR/pipeline_output)")
    export.add_argument("--format", choices=("csv", "json"), help="summary files as csv (default) or json")
    export.add_argument("--fresh", action="store_true", help=FRESH_HELP)
    export.set_defaults(func=_cmd_export)

    show = sub.add_parser("show", help="print a run's statistics as tables (parses a PROF_… directory first)")
    show.add_argument("target", help="a run's output folder, or a PROF_… directory")
    show.add_argument("--top", type=int, default=20, help="rows per table (op_summary: the longest tasks)")
    show.add_argument("--output", help="where to parse a PROF_… directory not parsed yet "
                                       "(default: PROF_DIR/pipeline_output)")
    show.set_defaults(func=_cmd_show)

    compare = sub.add_parser("compare", help="per op type and API: run A against run B")
    compare.add_argument("run_a", help="output folder or PROF_… directory (before)")
    compare.add_argument("run_b", help="output folder or PROF_… directory (after)")
    compare.add_argument("--csv", help="also write every row as CSV to this file ('-': CSV on stdout, no table)")
    compare.add_argument("--top", type=int, default=30, help="rows per table on the terminal")
    compare.set_defaults(func=_cmd_compare)

    report = sub.add_parser("report", help="write report.html: a run's summary, charts and advice, for a browser")
    report.add_argument("target", help="a run's output folder, or a PROF_… directory")
    report.add_argument("--html", help="where the page goes (default: report.html in the run's folder)")
    report.add_argument("--output", help="where to parse a PROF_… directory not parsed yet "
                                         "(default: PROF_DIR/pipeline_output)")
    report.set_defaults(func=_cmd_report)

    top = sub.add_parser("top", help="attach to a running pipeline and show live statistics")
    top.add_argument("target", help="the run's config, its output folder, or a top endpoint (ipc://… tcp://…)")
    top.add_argument("--once", action="store_true", help="print one snapshot and exit")
    top.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    top.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the first snapshot")
    top.add_argument("--secret-key", help="this host's NAME.key_secret, for a tcp endpoint with CURVE")
    top.add_argument("--server-key", help="the run host's public NAME.key, for a tcp endpoint with CURVE")
    top.set_defaults(func=_cmd_top)

    keys = sub.add_parser("keys", help="CURVE key pairs for tcp endpoints")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    generate = keys_sub.add_parser("generate", help="write NAME.key (public) and NAME.key_secret in FOLDER")
    generate.add_argument("folder")
    generate.add_argument("--name", default="pipeline", help="file name stem (default: pipeline)")
    generate.set_defaults(func=_cmd_keys)

    ctl = sub.add_parser("ctl", help="open and close collection windows while the job runs (per-window statistics)")
    ctl_sub = ctl.add_subparsers(dest="ctl_command", required=True)
    target_help = "the run's config, its output folder, or its control.json"
    for name, text in (("start", "open a window now"), ("stop", "close the newest open window now"),
                       ("schedule", "open a window that keeps the active steps of a schedule"),
                       ("status", "list the windows and what they hold")):
        command = ctl_sub.add_parser(name, help=text)
        command.add_argument("target", help=target_help)
        if name != "status":
            command.add_argument("--force", action="store_true",
                                 help="edit the control file even when no run is going on in that folder")
        command.set_defaults(func=_cmd_ctl)
        if name == "stop":
            command.add_argument("--window", type=int, help="close this window instead of the newest open one")
        elif name == "schedule":
            command.add_argument("--wait", type=int, required=True, help="steps skipped at the start of a cycle")
            command.add_argument("--active", type=int, required=True, help="steps collected per cycle")
            command.add_argument("--warmup", type=int, default=0, help="steps between wait and active (not kept)")
            command.add_argument("--skip-first", type=int, default=0, help="steps skipped before the first cycle")
            command.add_argument("--repeat", type=int, default=0, help="cycles (default 0: until the window closes)")
        elif name == "status":
            command.add_argument("--json", action="store_true", help="print JSON instead of a table")

    plugins = sub.add_parser("plugins", help="list registered stage types")
    plugins.set_defaults(func=_cmd_plugins)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `pipeline` program. Called without ``argv`` it is the process's whole work (the console script,
    ``python -m pipeline``): the heap is then left to the process's exit, not collected again at shutdown."""
    code = _main(argv)
    if argv is None:
        from pipeline.heap import skip_collections_at_exit

        skip_collections_at_exit()
    return code


def _main(argv: list[str] | None) -> int:
    from pipeline.logs import whole_lines_on_stderr
    from pipeline.security import restrict_umask

    whole_lines_on_stderr()  # the supervisor's lines and its stages' share one pipe
    restrict_umask()  # outputs, sockets and keys are never readable by other users
    argv = list(sys.argv[1:] if argv is None else argv)
    app: list[str] | None = None
    if "--" in argv:  # `pipeline run CONFIG [flags] -- APP ARGS…`: everything after -- is the application
        split = argv.index("--")
        argv, app = argv[:split], argv[split + 1:]
    args = build_parser().parse_args(argv)
    if args.command == "collect" and not app:
        print("error: collect: nothing to run after '--' (e.g. pipeline collect --ssh board.ini -- ./main)",
              file=sys.stderr)
        return 2
    if app is not None:
        if args.command not in ("run", "collect"):
            print(f"error: only `pipeline run` and `pipeline collect` take an application after '--' "
                  f"(not `pipeline {args.command}`)", file=sys.stderr)
            return 2
        if not app:
            print("error: run: nothing to launch after '--' (e.g. pipeline run CONFIG -- python infer.py)",
                  file=sys.stderr)
            return 2
        args.app = app
    try:
        code: int = args.func(args)
        return code
    except UserError as exc:
        print(exc.line(), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `pipeline graph … | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
