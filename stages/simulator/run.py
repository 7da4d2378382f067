"""Drive a simulated board: generate images, write bursts, pace to wall time, stop cleanly.

`simulate()` is the CLI entry (`pipeline simulate OUT_DIR …`); `Simulation` is the same loop with
live counters and a `stop()` safe to call from a signal handler (it only sets a flag, polled at
least every 10 ms). However the run ends, the PROF directory is completed: queued records are
written, the last slices closed with `.done`, end_info written, and the truth file beside it.

With ``devices`` N > 1 one app process drives N devices, each with its own inference loop (board.py)
and its own device clock (its syscnt started at another moment); the loops advance together in
simulated time (the one furthest behind runs its next image), so the host files get every device's
records in the order they were reported. ``iterations`` is the images each device runs; a rate of
records per second is the whole board's.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import cast

import structlog

from stages.formats.raw import PMU_EVENT_SETS
from stages.simulator.board import APP_PID, LAYOUTS, MODES, Board, Layout, Mode
from stages.simulator.timebase import HWTS_MHZ, STARS_HWTS_MHZ, TimeBase
from stages.simulator.truth import TRUTH_FILE, board_truth, write_truth
from stages.simulator.workload import MODELS, STARS_CHIPS, Chip, Model
from stages.simulator.writer import ProfWriter, Rate

CHIPS = ("mini", "cloud", "910b", "v6")
AIC_METRICS = tuple(PMU_EVENT_SETS)  # --aic-metrics choices (msprof's metric groups)
MIN_SLICE_BYTES = 1024
MAX_DEVICES = 16
DEVICE_CLOCK_STEP_TICKS = 1_234_567_891  # device N's syscnt reads N × this more at collection start (booted earlier)
TRUTH_REFRESH_NS = 1_000_000_000
POLL_S = 0.01
_RECORDS_PER_S = re.compile(r"(\d+(?:\.\d*)?)([kKmM]?)")

log = structlog.get_logger()


class Simulation:
    def __init__(self, out_dir: Path, chip: str = "mini", iterations: int = 200, rate: Rate = "realtime",
                 seed: int = 0, slice_bytes: int = 2 * 1024 * 1024, burst_ms: int = 20, *,
                 first_task_id: int = 0, start_time_ns: int | None = None, mode: str = "launch",
                 aic_metrics: str = "PipeUtilization", layout: str = "current", model: str = "face_mask_ssd",
                 sleep_ms: int = 0, host_mono0: int | None = None, batch_ids: bool = False, devices: int = 1) -> None:
        if chip not in CHIPS:
            raise ValueError(f"chip must be one of {CHIPS}, not {chip!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if aic_metrics not in AIC_METRICS:
            raise ValueError(f"aic_metrics must be one of {AIC_METRICS}, not {aic_metrics!r}")
        self.aic_metrics = aic_metrics
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        if mode == "static" and layout == "legacy":
            raise ValueError("static mode is not supported with the legacy layout (CANN 5/6 files): use one of them")
        if chip in STARS_CHIPS and layout == "legacy":
            raise ValueError(f"chip {chip!r} came after the legacy layout (CANN 5/6 files): use layout 'current'")
        self.layout = cast(Layout, layout)
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, not {model!r}")
        if sleep_ms < 0:
            raise ValueError(f"sleep_ms must be >= 0, not {sleep_ms}")
        self.model, self.sleep_ms = cast(Model, model), sleep_ms
        if not 1 <= devices <= MAX_DEVICES:
            raise ValueError(f"devices must be from 1 to {MAX_DEVICES}, not {devices}")
        self.devices = devices
        self.records_per_s = records_per_second(rate)
        if iterations < 0 or burst_ms < 1 or slice_bytes < MIN_SLICE_BYTES:
            raise ValueError(f"need iterations >= 0, burst_ms >= 1, slice_bytes >= {MIN_SLICE_BYTES}")
        self.out_dir = Path(out_dir)
        self.chip, self.iterations, self.rate, self.seed = cast(Chip, chip), iterations, rate, seed
        self.slice_bytes, self.burst_ns = slice_bytes, burst_ms * 1_000_000
        self.first_task_id, self.start_time_ns = first_task_id, start_time_ns
        self.host_mono0 = host_mono0  # the host clock at collection start (default: timebase.HOST_MONO0_NS)
        self.batch_ids = batch_ids  # kernel task_tracks carry their batch id (default 0, as a real runtime may)
        self.mode = cast(Mode, mode)
        self.iteration = 0
        self.records_written = 0
        self.prof_dir: Path | None = None
        self._stopping = False
        self._should_stop: Callable[[], bool] = lambda: False

    def stop(self) -> None:
        """Finish soon (signal-handler safe)."""
        self._stopping = True

    def stopped(self) -> bool:
        return self._stopping or self._should_stop()

    def cut_short(self) -> bool:
        """The job ended before the iterations it was given were run (it was stopped)."""
        return self.prof_dir is not None and self.iteration < self.iterations

    def run(self, should_stop: Callable[[], bool] | None = None,
            on_iteration: Callable[[int], None] | None = None) -> Path:
        """Write the whole PROF directory (iterations = 0: until stopped); returns its path. `on_iteration` is
        called with the image number after each image (after every device has run it; the simulated app annotates its
        steps there)."""
        if should_stop is not None:
            self._should_stop = should_stop
        hwts_mhz = STARS_HWTS_MHZ if self.chip in STARS_CHIPS else HWTS_MHZ
        wall0 = self.start_time_ns if self.start_time_ns is not None else time.time_ns()
        tb = TimeBase(wall0_ns=wall0, hwts_mhz=hwts_mhz) if self.host_mono0 is None else \
            TimeBase(wall0_ns=wall0, host_mono0=self.host_mono0, hwts_mhz=hwts_mhz)
        clocks = {dev: dataclasses.replace(tb, dev_cnt0=tb.dev_cnt0 + dev * DEVICE_CLOCK_STEP_TICKS)
                  for dev in range(self.devices)}
        boards = [Board(self.chip, self.seed, clock, device_id=dev, first_task_id=self.first_task_id, mode=self.mode,
                        metrics=self.aic_metrics, layout=self.layout, model=self.model, sleep_ms=self.sleep_ms,
                        batch_ids=self.batch_ids, reports_names=dev == 0 or self.layout == "legacy")
                  for dev, clock in clocks.items()]
        writer = ProfWriter(self.out_dir, self.chip, tb, self.seed, self.slice_bytes, APP_PID,
                            metrics=self.aic_metrics, layout=self.layout, devices=clocks)
        self.prof_dir = writer.prof_dir
        log.info("simulator.start", prof_dir=str(writer.prof_dir), chip=self.chip, mode=self.mode,
                 iterations=self.iterations, rate=self.rate, seed=self.seed, layout=self.layout, model=self.model,
                 devices=self.devices)
        self._boards, self._writer, self._host_mono0 = boards, writer, tb.host_mono0
        self._wall0 = time.monotonic()
        self._next_burst = tb.host_mono0 + self.burst_ns
        self._next_truth = tb.host_mono0 + TRUTH_REFRESH_NS
        for board in boards:
            writer.add(board.start(), board.device_id)
        for board in boards:
            writer.add(board.load_model(), board.device_id)
        self._advance(min(board.now for board in boards))
        running = self._run_images(boards, on_iteration)
        for board in running:  # stopped before their images were run
            writer.add(board.unload_model(), board.device_id)
        self.records_written += writer.finish(max(board.now for board in boards))
        self._write_truth(complete=True)
        log.info("simulator.done", prof_dir=str(writer.prof_dir), iterations=self.iteration,
                 records=self.records_written, stopped=self.stopped())
        return writer.prof_dir

    def _run_images(self, boards: list[Board], on_iteration: Callable[[int], None] | None) -> list[Board]:
        """Run each device's images until they are all run (iterations = 0: until stopped); the device furthest
        behind in simulated time goes next. A device unloads its model once its images are run; returns the
        devices still running (the run was stopped)."""
        running, images = list(boards), [0] * len(boards)
        while running and not self.stopped():
            board = min(running, key=lambda b: b.now)
            dev = board.device_id
            images[dev] += 1
            self._writer.add(board.run_image(images[dev]), dev)
            self._advance(min(b.now for b in running))  # every record up to there is queued
            if self.iterations and images[dev] >= self.iterations:
                running.remove(board)
                self._writer.add(board.unload_model(), dev)
            if min(images) > self.iteration:
                self.iteration = min(images)
                if on_iteration is not None:
                    on_iteration(self.iteration)
        return running

    def _advance(self, now_ns: int) -> None:
        """Write every burst whose boundary simulated time has passed, pacing to wall time if realtime, or
        to the records written so far at a fixed rate of records per second."""
        while self._next_burst <= now_ns and not self.stopped():
            if self.rate == "realtime" and not self._wait_until(self._next_burst):
                return
            if self.records_per_s and not self._sleep_until(self._wall0 + self.records_written / self.records_per_s):
                return
            self.records_written += self._writer.flush_until(self._next_burst)
            if self._next_burst >= self._next_truth:
                self._write_truth(complete=False)
                self._next_truth += TRUTH_REFRESH_NS
            self._next_burst += self.burst_ns

    def _wait_until(self, mono_ns: int) -> bool:
        """Sleep until wall time catches up with simulated `mono_ns`; False if asked to stop."""
        return self._sleep_until(self._wall0 + (mono_ns - self._host_mono0) / 1e9)

    def _sleep_until(self, due: float) -> bool:
        """Sleep until time.monotonic() reaches ``due``; False if asked to stop."""
        while (left := due - time.monotonic()) > 0:
            if self.stopped():
                return False
            time.sleep(min(left, POLL_S))
        return True

    def _write_truth(self, complete: bool) -> None:
        writer = self._writer
        truth = board_truth([board.truth for board in self._boards], Counter(writer.record_counts()),
                            Counter(writer.slice_counts()), writer.prof_dir, self.chip, complete, self.iterations)
        write_truth(self.out_dir / TRUTH_FILE, truth)


def records_per_second(rate: str) -> float | None:
    """Records per second of a fixed rate ("100k", "2.5M", "50000"); None for "realtime" and "max"."""
    if rate in ("realtime", "max"):
        return None
    match = _RECORDS_PER_S.fullmatch(str(rate).strip())
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"rate must be 'realtime', 'max' or records per second such as '100k', not {rate!r}")
    return float(match.group(1)) * {"": 1.0, "k": 1e3, "m": 1e6}[match.group(2).lower()]


def simulate(out_dir: Path, chip: str = "mini", iterations: int = 200, rate: Rate = "realtime", seed: int = 0,
             slice_bytes: int = 2 * 1024 * 1024, burst_ms: int = 20, stop_event: threading.Event | None = None,
             *, first_task_id: int = 0, start_time_ns: int | None = None, mode: str = "launch",
             aic_metrics: str = "PipeUtilization", layout: str = "current", model: str = "face_mask_ssd",
             sleep_ms: int = 0, batch_ids: bool = False, devices: int = 1) -> Path:
    """Write one PROF_ directory under `out_dir` (and `out_dir/simulator_truth.json`); returns its path.

    `first_task_id`: task ids already used on each stream when profiling starts (reach a 16-bit wrap
    sooner); `start_time_ns`: wall clock of the collection start (default now; fix it for byte-identical
    control files); `mode`: "launch" (op information at every launch) or "static" (an offline model
    reports it once at load and every execution reuses its task ids, board.py); `layout`: "current"
    (CANN ≥ 6.3 reporter) or "legacy" (CANN 5/6 files; launch mode only); `model`: the workload
    variant (workload.MODELS); `sleep_ms`: the app's sleep inside its model-load msproftx range (board.py);
    `batch_ids`: kernel task_tracks carry their real batch id (default 0, as a real runtime may write: the
    batch comes from the FLIP task_tracks, as msprof takes it); `devices`: how many devices the app drives
    (device_0 … device_{N-1} in the one directory, each running `iterations` images).
    """
    sim = Simulation(out_dir, chip, iterations, rate, seed, slice_bytes, burst_ms, first_task_id=first_task_id,
                     start_time_ns=start_time_ns, mode=mode, aic_metrics=aic_metrics, layout=layout, model=model,
                     sleep_ms=sleep_ms, batch_ids=batch_ids, devices=devices)
    return sim.run(stop_event.is_set if stop_event is not None else None)
