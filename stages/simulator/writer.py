"""Writes one growing PROF_ directory, laid out as CANN's collector does: control files, then bursts of raw slices.

    PROF_{NNNNNN}_{YYYYMMDDhhmmssmmm}_{A–R ×16}/
      host/      info.json sample.json start_info host_start.log end_info (+ .done each)
      host/data/ unaging.{api_event.data,compact.*,additional.*}.slice_K (+ .done when closed)
      device_0/  info.json.0 sample.json start_info.0 dev_start.log.0 host_start.log.0 end_info.0 (+ .done)
      device_0/data/ {hwts,aicore,ts_track}.data.0.slice_K (+ .done when closed)
      device_1/ …    the same for each further device of a multi-device job

Layout "legacy" (CANN 5/6): no host/ folder; the host-reported files sit in device_N/data/ as
AclModule.*.N, Framework.*.N and Runtime.*.N slices (stages/simulator/legacy.py).

Records are queued with the host time they are reported and appended when a burst boundary passes
that time, so a reader sees files grow burst by burst.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path

from stages.simulator import control
from stages.simulator.board import Emission, Layout, device_streams, host_streams
from stages.simulator.records import Chunk, interleave
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
    """``devices``: the clock of each device the job profiles (device id → its time base; default: ``device_id``
    on ``tb``). One host/ folder takes the host records of all of them, interleaved in the order they are
    reported; each device writes its own device_N/ folder."""

    def __init__(self, out_dir: Path, chip: str, tb: TimeBase, seed: int, slice_bytes: int, pid: int,
                 device_id: int = 0, metrics: str = control.AI_CORE_METRICS, layout: Layout = "current", *,
                 devices: Mapping[int, TimeBase] | None = None) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.tb = tb
        self.chip = chip
        self.devices = dict(devices) if devices else {device_id: tb}
        self.device_id = next(iter(self.devices))  # the first device (the only one of a one-device job)
        self.metrics = metrics
        self.with_host_dir = layout == "current"
        self.prof_dir = out_dir / control.prof_dir_name(next_job_index(out_dir), tb.wall0_ns, seed)
        self.host_dir = self.prof_dir / "host"
        self.device_dirs = {dev: self.prof_dir / f"device_{dev}" for dev in self.devices}
        self.device_dir = self.device_dirs[self.device_id]
        self.streams: dict[str, SliceStream] = {}
        for dev, device_dir in self.device_dirs.items():
            host_data = self.host_dir / "data" if self.with_host_dir else device_dir / "data"
            for d in {host_data, device_dir / "data"}:
                d.mkdir(parents=True, exist_ok=d == host_data)
            for key in host_streams(layout, dev):
                self.streams.setdefault(key, SliceStream(host_data, key, slice_bytes, True))
            self.streams.update({key: SliceStream(device_dir / "data", key, slice_bytes, False)
                                 for key in device_streams(chip, dev)})
        # records queued per device (each device's chunks of a stream arrive in emit order)
        self.queues: dict[int, dict[str, list[Chunk]]] = {dev: {key: [] for key in self.streams}
                                                          for dev in self.devices}
        self.pending = self.queues[self.device_id]
        self._write_start(pid)

    def _write_start(self, pid: int) -> None:
        tb, chip, host = self.tb, self.chip, self.host_dir
        if self.with_host_dir:
            write_control(host / "info.json", control.info_json(chip, tb, pid, None))
            write_control(host / "sample.json", control.sample_json(chip, f"{host}/", None, self.metrics))
            write_control(host / "start_info", control.start_info(tb))
            write_control(host / "host_start.log", control.host_start_log(tb, "Host"))
        for dev, device in self.device_dirs.items():
            dev_tb = self.devices[dev]
            write_control(device / f"info.json.{dev}", control.info_json(chip, dev_tb, pid, dev))
            write_control(device / "sample.json", control.sample_json(chip, f"{device}/", dev, self.metrics))
            write_control(device / f"start_info.{dev}", control.start_info(dev_tb))
            write_control(device / f"dev_start.log.{dev}", control.dev_start_log(dev_tb))
            write_control(device / f"host_start.log.{dev}", control.host_start_log(dev_tb, f"Device{dev}"))

    def add(self, emission: Emission, device: int | None = None) -> None:
        """Queue records of ``device`` (default: the first) (each stream's chunks arrive in emit order)."""
        queue = self.queues[self.device_id if device is None else device]
        for key, chunk in emission.items():
            if chunk.count:
                queue[key].append(chunk)

    def flush_until(self, until_ns: int) -> int:
        """Append every queued record reported at or before `until_ns`; returns how many. A stream several devices
        report into (the host's) gets their records in the order they were reported."""
        written = 0
        for key, stream in self.streams.items():
            heads = [chunks for queue in self.queues.values() if (chunks := _take_until(queue[key], until_ns))]
            if len(heads) > 1:
                heads = [[interleave([chunk for chunks in heads for chunk in chunks])]]
            for head in heads[0] if heads else ():
                stream.write(head.data, head.ends)
                self.wrote(key, head)
                written += head.count
        return written

    def wrote(self, key: str, chunk: Chunk) -> None:
        """Called after each chunk ``flush_until`` appended to stream ``key`` (for writers that count)."""

    def finish(self, end_mono_ns: int) -> int:
        """Write everything queued, close the last slices, then end_info (the directory is complete)."""
        written = self.flush_until(2**63 - 1)
        for stream in self.streams.values():
            stream.close()
        end = control.end_info(self.tb, end_mono_ns)
        for dev, device_dir in self.device_dirs.items():
            write_control(device_dir / f"end_info.{dev}", end)
        if self.with_host_dir:
            write_control(self.host_dir / "end_info", end)
        return written

    def record_counts(self) -> dict[str, int]:
        return {key: s.records for key, s in self.streams.items() if s.records}

    def slice_counts(self) -> dict[str, int]:
        return {key: s.slices for key, s in self.streams.items() if s.slices}


def _take_until(chunks: list[Chunk], until_ns: int) -> list[Chunk]:
    """Take the records emitted at or before ``until_ns`` off the front of an emit-ordered queue of chunks."""
    taken = []
    while chunks:
        head, tail = chunks[0].split(until_ns)
        if head.count:
            taken.append(head)
        if tail.count:
            chunks[0] = tail
            break
        chunks.pop(0)
    return taken


def simulate(out_dir: Path, chip: str = "mini", iterations: int = 200, rate: Rate = "realtime", seed: int = 0,
             slice_bytes: int = 2 * 1024 * 1024, burst_ms: int = 20, stop_event: threading.Event | None = None,
             *, first_task_id: int = 0, start_time_ns: int | None = None, mode: str = "launch",
             aic_metrics: str = control.AI_CORE_METRICS, layout: str = "current", model: str = "face_mask_ssd",
             sleep_ms: int = 0, batch_ids: bool = False, devices: int = 1) -> Path:
    """`stages.simulator.run.simulate`, also reachable from here (the `pipeline simulate` command)."""
    from stages.simulator.run import simulate as run_simulate  # run imports this module

    return run_simulate(out_dir, chip, iterations, rate, seed, slice_bytes, burst_ms, stop_event,
                        first_task_id=first_task_id, start_time_ns=start_time_ns, mode=mode,
                        aic_metrics=aic_metrics, layout=layout, model=model, sleep_ms=sleep_ms,
                        batch_ids=batch_ids, devices=devices)
