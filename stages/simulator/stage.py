"""`simulator` stage: a board that writes a live PROF_ directory for the collector to follow.

Example (YAML):

    board: {type: simulator, chip: mini, mode: launch, iterations: 200, rate: realtime, seed: 0, output: board,
            layout: current, model: face_mask_ssd, sleep_ms: 0, devices: 1}

chip: mini = Ascend 310 (TS timeline), cloud = Ascend 910 (HWTS log), 910b = Ascend 910B (STARS log,
FFTS context PMU with AI Core and AI Vector Core tasks, FFTS+ MIX_AIC tasks with subtask logs; keep
slice_bytes a multiple of 128 when msprof's Python parser is to read the directory:
it loses ffts_profile records across other slice sizes),
v6 = chip v6 (platform 15: 32-byte STARS log, 32-bit task ids, no PMU). layout: legacy (CANN 5/6
files) runs in launch mode on the 310 and 910 only. model: the workload variant (face_mask_ssd;
face_mask_ssd_mish and face_mask_ssd_fused are the before / after pair of the case studies,
workload.py); sleep_ms: the app sleeps this long inside its model-load msproftx range
(the face-mask SSD case study's sleep(5)); devices: the app drives this many devices, each with its own
inference loop (device_0 … device_N-1 in one PROF_ directory; iterations are per device, rate is the board's).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.checkpoint import LeftBehind
from pipeline.errors import UserError
from pipeline.stage import Batch, Source, StageConfig, StageContext
from stages.simulator.run import MAX_DEVICES, MIN_SLICE_BYTES, Simulation, records_per_second, simulate
from stages.simulator.truth import TRUTH_FILE
from stages.simulator.workload import Model

__all__ = ["SimulatorStage", "simulate"]

PROGRESS_EVERY_S = 0.1  # how often the stage's loop reports while the board writes

AicMetrics = Literal["PipeUtilization", "ArithmeticUtilization", "Memory", "ResourceConflictRatio",
                     "PipeUtilizationExct", "PipelineExecuteUtilization", "MemoryL0", "MemoryUB", "L2Cache",
                     "MemoryAccess"]


class SimulatorStage(Source):
    """Runs the simulated board in-process; emits no batches (its output is the directory)."""

    outputs = ()

    class Config(StageConfig):
        chip: Literal["mini", "cloud", "910b", "v6"] = "mini"  # Ascend 310 (TS timeline), 910 (HWTS), 910B (STARS), v6
        mode: Literal["launch", "static"] = "launch"  # op info at every launch, or once at model load (.om)
        iterations: int = Field(200, ge=0)  # images to run; 0 = until stopped
        rate: str = "realtime"  # pace to wall time, write as fast as possible ("max"), or records/s ("100k")
        seed: int = 0  # same seed, same records
        slice_bytes: int = Field(2 * 1024 * 1024, ge=MIN_SLICE_BYTES)  # slice rotation size
        output: str = "board"  # folder that receives PROF_…/ and simulator_truth.json; relative to the run
        burst_ms: int = Field(20, ge=1)  # records are appended in bursts this far apart (simulated time)
        aic_metrics: AicMetrics = "PipeUtilization"  # AI Core PMU metric group (sample.json ai_core_metrics)
        layout: Literal["current", "legacy"] = "current"  # legacy = CANN 5/6 AclModule/Framework/Runtime files
        model: Model = "face_mask_ssd"  # workload variant: face_mask_ssd, face_mask_ssd_mish, face_mask_ssd_fused
        sleep_ms: int = Field(0, ge=0)  # the app's sleep inside its model-load msproftx range (the case study's)
        devices: int = Field(1, ge=1, le=MAX_DEVICES)  # devices the app drives (device_0 … device_N-1)

        @field_validator("rate")
        @classmethod
        def _known_rate(cls, rate: str) -> str:
            records_per_second(rate)  # raises ValueError with the accepted forms
            return rate

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, SimulatorStage.Config):
            config = SimulatorStage.Config.model_validate(config)
        super().__init__(config, ctx)
        self.simulation = Simulation(ctx.resolve(config.output), config.chip, config.iterations, config.rate,
                                     config.seed, config.slice_bytes, config.burst_ms, mode=config.mode,
                                     aic_metrics=config.aic_metrics, layout=config.layout, model=config.model,
                                     sleep_ms=config.sleep_ms, devices=config.devices)

    def batches(self) -> Iterator[Batch | None]:
        """The board writes in a thread of its own; this loop keeps the stage's figures and heartbeat going
        (a board that ran longer than run.heartbeat_timeout_s in one call was shown as stuck)."""
        failure: list[BaseException] = []

        def write() -> None:
            try:
                self.simulation.run()
            except BaseException as exc:  # raised again in the stage's own thread, where the runner reports it
                failure.append(exc)

        writer = threading.Thread(target=write, name="simulated-board", daemon=True)
        writer.start()
        try:
            while writer.is_alive():
                writer.join(PROGRESS_EVERY_S)
                yield None
        finally:  # the loop left early (the runner failed, or closed this generator): the board stops too
            if writer.is_alive():
                self.simulation.stop()
                writer.join()
        if failure:
            raise failure[0]

    def stop(self) -> None:
        self.simulation.stop()

    def progress(self) -> dict[str, Any]:
        return {"iteration": self.simulation.iteration, "records_written": self.simulation.records_written}

    def accounting(self) -> dict[str, int]:
        return {"records_written": self.simulation.records_written}

    def input_warnings(self) -> list[str]:
        """A job stopped before its iterations were run (Ctrl-C, a failed run) is not the job configured."""
        sim = self.simulation
        if not sim.cut_short():
            return []
        return [f"the simulated job in {sim.prof_dir} was cut short: {sim.iteration} of {sim.iterations} iterations "
                "were run"]

    @classmethod
    def _settings(cls, config: Any, output_dir: Path) -> tuple[SimulatorStage.Config, Path]:
        """The stage's config and its output folder, outside a stage process (for the supervisor)."""
        settings = config if isinstance(config, cls.Config) else cls.Config.model_validate(config or {})
        folder = Path(settings.output).expanduser()
        return settings, folder if folder.is_absolute() else output_dir / folder

    @classmethod
    def left_behind(cls, config: Any, output_dir: Path) -> LeftBehind:
        """What the board of an earlier run left (a resumed run does not start it again), from its truth file:
        whether its job ended (end_info written) and whether it was cut short."""
        settings, folder = cls._settings(config, output_dir)
        truth_file = folder / TRUTH_FILE
        try:
            truth = json.loads(truth_file.read_text())
            prof, done = truth["prof_dir"], int(truth["iterations"])
        except (OSError, ValueError, KeyError, TypeError):
            return LeftBehind(False, f"the simulated board left no readable {truth_file}")
        planned = int(truth.get("iterations_planned", settings.iterations))
        of = f"{done} of {planned}" if planned else f"{done}"
        salvage = f", or parse what it wrote with `pipeline import {prof}`"
        if not truth.get("complete"):
            return LeftBehind(False, f"its simulated board was killed mid-job ({of} iterations in {prof}, no "
                                     "end_info)", salvage=salvage)
        if truth.get("cut_short", planned and done < planned):
            return LeftBehind(True, f"the simulated job in {prof} was cut short: {of} iterations were run",
                              cut_short=True)
        return LeftBehind(True, f"its job in {prof} had ended ({done} iterations)")

    @classmethod
    def set_aside_unfinished(cls, config: Any, output_dir: Path) -> list[str]:
        """Before a new job: a PROF_ directory an earlier board left without end_info (it was killed) would be taken
        by a collector following the folder for a job still running, and followed for ever. Each is renamed
        ``unfinished-PROF_…`` (kept for `pipeline import`); one line each says so."""
        _, folder = cls._settings(config, output_dir)
        lines = []
        for prof in sorted(folder.glob("PROF_*")) if folder.is_dir() else []:
            if prof.is_dir() and not any(prof.glob("device_*/end_info.*")):
                target = prof.with_name(f"unfinished-{prof.name}")
                try:
                    prof.rename(target)
                except OSError as exc:
                    raise UserError(f"simulator: cannot move {prof}, a job that never ended, aside to {target.name}: "
                                    f"{exc.strerror or exc}", f"move or remove {prof} yourself, or run with "
                                    "--fresh into another folder") from None
                lines.append(f"{prof} never ended (its simulated board was killed): moved to {target.name}, so that "
                             "the collector follows the new job")
        return lines
