"""Writes one growing PROF_ directory, laid out as CANN's collector does: control files, then bursts of raw slices.

    PROF_{NNNNNN}_{YYYYMMDDhhmmssmmm}_{A–R ×16}/
      host/      info.json sample.json start_info host_start.log end_info (+ .done each)
      host/data/ unaging.{api_event.data,compact.*,additional.*}.slice_K (+ .done when closed)
      device_0/  info.json.0 sample.json start_info.0 dev_start.log.0 host_start.log.0 end_info.0 (+ .done)
      device_0/data/ {hwts,aicore,ts_track}.data.0.slice_K (+ .done when closed)

Layout "legacy" (CANN 5/6): no host/ folder; the host-reported files sit in device_0/data/ as
AclModule.*.0, Framework.*.0 and Runtime.*.0 slices (stages/simulator/legacy.py).

Records are queued with the host time they are reported and appended when a burst boundary passes
that time, so a reader sees files grow burst by burst.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from stages.simulator import control
from stages.simulator.board import Emission, Layout, device_streams, host_streams
from stages.simulator.records import Chunk
from stages.simulator.slices import SliceStream, write_done, write_whole
from stages.simulator.timebase import TimeBase

_PROF_DIR = re.compile(r"^PROF_\d{6}_")
Rate = str  # "realtime", "max", or records per second: "100k", "2.5M", "50000" (run.records_per_second)


def next_job_index(out_dir: Path) -> int:
    return 1 + sum(1 for p in out_dir.iterdir() if p.is_dir() and _PROF_DIR.match(p.name))


def write_control(path: Path, text: str) -> None:
    write_whole(path, text)
    write_done(path, len(text.encode()))


class ProfWriter:
    def __init__(self, out_dir: Path, chip: str, tb: TimeBase, seed: int, slice_bytes: int, pid: int,
                 device_id: int = 0, metrics: str = control.AI_CORE_METRICS, layout: Layout = "current") -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.tb = tb
        self.chip = chip
        self.device_id = device_id
        self.metrics = metrics
        self.with_host_dir = layout == "current"
        self.prof_dir = out_dir / control.prof_dir_name(next_job_index(out_dir), tb.wall0_ns, seed)
        self.host_dir = self.prof_dir / "host"
        self.device_dir = self.prof_dir / f"device_{device_id}"
        host_data = self.host_dir / "data" if self.with_host_dir else self.device_dir / "data"
        for d in {host_data, self.device_dir / "data"}:
            d.mkdir(parents=True)
        self.streams = {key: SliceStream(host_data, key, slice_bytes, True) for key in host_streams(layout, device_id)}
        self.streams.update({key: SliceStream(self.device_dir / "data", key, slice_bytes, False)
                             for key in device_streams(chip, device_id)})
        self.pending: dict[str, list[Chunk]] = {key: [] for key in self.streams}
        self._write_start(pid)

    def _write_start(self, pid: int) -> None:
        tb, chip, dev = self.tb, self.chip, self.device_id
        host, device = self.host_dir, self.device_dir
        if self.with_host_dir:
            write_control(host / "info.json", control.info_json(chip, tb, pid, None))
            write_control(host / "sample.json", control.sample_json(chip, f"{host}/", None, self.metrics))
            write_control(host / "start_info", control.start_info(tb))
            write_control(host / "host_start.log", control.host_start_log(tb, "Host"))
        write_control(device / f"info.json.{dev}", control.info_json(chip, tb, pid, dev))
        write_control(device / "sample.json", control.sample_json(chip, f"{device}/", dev, self.metrics))
        write_control(device / f"start_info.{dev}", control.start_info(tb))
        write_control(device / f"dev_start.log.{dev}", control.dev_start_log(tb))
        write_control(device / f"host_start.log.{dev}", control.host_start_log(tb, f"Device{dev}"))

    def add(self, emission: Emission) -> None:
        """Queue records (each stream's chunks arrive in emit order)."""
        for key, chunk in emission.items():
            if chunk.count:
                self.pending[key].append(chunk)

    def flush_until(self, until_ns: int) -> int:
        """Append every queued record reported at or before `until_ns`; returns how many."""
        written = 0
        for key, chunks in self.pending.items():
            while chunks:
                head, tail = chunks[0].split(until_ns)
                if head.count:
                    self.streams[key].write(head.data, head.ends)
                    self.wrote(key, head)
                    written += head.count
                if tail.count:
                    chunks[0] = tail
                    break
                chunks.pop(0)
        return written

    def wrote(self, key: str, chunk: Chunk) -> None:
        """Called after each chunk ``flush_until`` appended to stream ``key`` (for writers that count)."""

    def finish(self, end_mono_ns: int) -> int:
        """Write everything queued, close the last slices, then end_info (the directory is complete)."""
        written = self.flush_until(2**63 - 1)
        for stream in self.streams.values():
            stream.close()
        end = control.end_info(self.tb, end_mono_ns)
        write_control(self.device_dir / f"end_info.{self.device_id}", end)
        if self.with_host_dir:
            write_control(self.host_dir / "end_info", end)
        return written

    def record_counts(self) -> dict[str, int]:
        return {key: s.records for key, s in self.streams.items() if s.records}

    def slice_counts(self) -> dict[str, int]:
        return {key: s.slices for key, s in self.streams.items() if s.slices}


def simulate(out_dir: Path, chip: str = "mini", iterations: int = 200, rate: Rate = "realtime", seed: int = 0,
             slice_bytes: int = 2 * 1024 * 1024, burst_ms: int = 20, stop_event: threading.Event | None = None,
             *, first_task_id: int = 0, start_time_ns: int | None = None, mode: str = "launch",
             aic_metrics: str = control.AI_CORE_METRICS, layout: str = "current", model: str = "face_mask_ssd",
             sleep_ms: int = 0, batch_ids: bool = False) -> Path:
    """`stages.simulator.run.simulate`, also reachable from here (the `pipeline simulate` command)."""
    from stages.simulator.run import simulate as run_simulate  # run imports this module

    return run_simulate(out_dir, chip, iterations, rate, seed, slice_bytes, burst_ms, stop_event,
                        first_task_id=first_task_id, start_time_ns=start_time_ns, mode=mode,
                        aic_metrics=aic_metrics, layout=layout, model=model, sleep_ms=sleep_ms,
                        batch_ids=batch_ids)
