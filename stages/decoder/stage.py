"""The decoder stage: raw chunks → typed columnar record batches, times in local wall-clock ns.

Every input record becomes exactly one output record or is counted as rejected with a
reason (and its bytes kept aside); the stage never raises on bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from pydantic import Field

from pipeline.stage import Batch, StageConfig, Transform
from stages.decoder import checks, host_extra, legacy, records
from stages.decoder.device import DeviceDecoder
from stages.decoder.host import HostDecoder
from stages.decoder.host_extra import ExtraHostDecoder
from stages.decoder.legacy import LegacyDecoder
from stages.decoder.stars import STARS_KINDS, StarsDecoder

SAMPLE_WAIT_S = 2.0  # how long a device's data waits for its sample.json (PMU event list) after its clocks
HOST_KINDS = {"api_event", "task_track", "node_basic_info", "tensor_info", "msproftx", "hash_dic", "type_info_dic"}
HOST_KINDS |= host_extra.KINDS


class DecoderStage(Transform):
    """Decodes every record kind the collector ships."""

    partitionable = True  # each partition decodes its devices' chunks and all of the host's

    class Config(StageConfig):
        max_pending_chunks: int = Field(10_000, ge=1, description="chunks held while a time base is unknown")

    def __init__(self, config: Any, ctx: Any) -> None:
        super().__init__(config, ctx)
        self.timebase = checks.CheckedTimeBase()  # a control file value that is not a number: clock unknown
        self.screen = checks.Screen(self.timebase, self._reject)  # records whose fields are impossible
        self.host = HostDecoder(self.timebase, self._reject)
        self.device = DeviceDecoder(self.timebase, self._reject, self._lost, self.screen)
        self.host_extra = ExtraHostDecoder(self.timebase)
        self.legacy = LegacyDecoder(self.timebase, self._reject)
        self.stars = StarsDecoder(self.timebase, self._reject)
        # stream kind → its decoder (the rest are device kinds); later entries win
        self.decoders: dict[str, Callable[[str, Batch], list[tuple[str, np.ndarray | Batch]]]] = {
            **dict.fromkeys(STARS_KINDS, self.stars.decode), **dict.fromkeys(HOST_KINDS, self.host.decode),
            **dict.fromkeys(legacy.KINDS, self.legacy.decode),
            **dict.fromkeys(host_extra.KINDS, self.host_extra.decode)}
        self.pending: list[Batch] = []
        self.records_in = 0
        self.decoded = 0
        self.rejected = 0
        self.lost = 0  # records the device never delivered (counter gaps): reported, outside the one-for-one count
        self.announced: set[int] = set()
        self.session: dict[str, Any] = {}  # run-level facts last sent (TimeBase.session)
        self.clock_known_at: dict[int, float] = {}
        self.finishing = False
        self.untimed: dict[tuple[str, int], dict[str, int]] = {}  # clock key → kind → records no clock placed
        self.clocks_used: set[tuple[str, int]] = set()  # clock keys that placed records

    def _reject(self, reason: str, count: int, data: bytes = b"") -> None:
        self.rejected += count
        self.ctx.reject(reason, count, data)

    def _lost(self, reason: str, count: int) -> None:
        self.lost += count
        self.ctx.reject(reason, count)

    def process(self, batch: Batch) -> Iterable[Batch]:
        if batch.kind == "control":
            problem = checks.control_problem(batch.meta)
            if problem is not None:
                self.ctx.reject(problem, 1)
                return ()
            self.timebase.learn(batch.meta["path"], batch.meta["text"])
            return list(self._announce_session()) + list(self._announce()) + list(self._release())
        if batch.kind != "raw":
            self.ctx.reject(f"unexpected batch kind '{batch.kind}'", batch.count)
            self.rejected += batch.count
            self.records_in += batch.count
            return ()
        self.records_in += batch.count
        problem = checks.raw_problem(batch)  # a chunk no collector sends: rejected whole
        if problem is not None:
            self._reject(problem, batch.count, batch.body)
            return ()
        if not self._ready(batch):
            if len(self.pending) >= self.config.max_pending_chunks:
                self._untimed(batch)
            else:
                self.pending.append(batch)
            return ()
        return self._decode(batch)

    def _ready(self, batch: Batch) -> bool:
        kind = batch.meta.get("kind")
        if kind in ("hash_dic", "type_info_dic"):
            return True
        if kind in HOST_KINDS:
            return self.timebase.host_clock() is not None
        device = batch.meta.get("device")
        if kind in legacy.KINDS:  # legacy host records in a device folder: host time, that folder's offset
            return device is not None and self.timebase.legacy_host_clock(int(device)) is not None
        return device is not None and self._device_ready(int(device))

    def _device_ready(self, device: int) -> bool:
        """Clocks known, and the PMU event list too (or it is not coming: a short wait, then go on)."""
        if self.timebase.device_clock(device) is None:
            return False
        if f"device_{device}/sample.json" in self.timebase.files or self.finishing:
            return True
        first_seen = self.clock_known_at.setdefault(device, self.clock())
        return self.clock() - first_seen > SAMPLE_WAIT_S

    def _release(self) -> Iterator[Batch]:
        waiting, self.pending = self.pending, []
        for batch in waiting:
            if self._ready(batch):
                yield from self._decode(batch)
            else:
                self.pending.append(batch)

    def _announce_session(self) -> Iterator[Batch]:
        """The run's facts (pid, host, start and end time) for the aggregator, each time a control file
        changes them (end_info comes last, when the run ends)."""
        session = self.timebase.session()
        if session and session != self.session:
            self.session = session
            yield Batch("session_info", 0, {"facts": dict(session)})

    def _announce(self) -> Iterator[Batch]:
        """A device's facts (chip, clocks, PMU events) for the aggregator, once known."""
        for rel in list(self.timebase.files):
            if not rel.startswith("device_") or "/info.json." not in rel:
                continue
            device = int(rel.split("/")[0].removeprefix("device_"))
            if device in self.announced or not self._device_ready(device):
                continue
            self.announced.add(device)
            info, sample = self.timebase.device_info(device), self.timebase.sample(device)
            # Control file values are checked: one that is not a number falls back to its default.
            facts = {"device": device, "platform": checks.as_int(info.get("platform_version") or 1, 1),
                     "ai_core_num": checks.as_int(info.get("ai_core_num") or 1, 1),
                     "aic_frequency_mhz": checks.as_float(info.get("aic_frequency") or 1000, 1000.0),
                     "hwts_frequency_mhz": checks.as_float(info.get("hwts_frequency") or 100, 100.0),
                     "metric": str(sample.get("ai_core_metrics", "")),
                     "pmu_events": _event_ids(sample.get("ai_core_profiling_events")),
                     "aiv_num": checks.as_int(info.get("aiv_num") or 0, 0),
                     "aiv_metric": str(sample.get("aiv_metrics", "")),
                     "aiv_pmu_events": _event_ids(sample.get("aiv_profiling_events")),
                     "pid": checks.as_int(info.get("pid") or 0, 0), "hostname": str(info.get("hostname") or ""),
                     **_extra_facts(sample)}
            yield Batch("device_info", 0, {"facts": facts})

    def _decode(self, batch: Batch) -> list[Batch]:
        kind = batch.meta["kind"]
        key = _clock_key(batch)
        if key is not None:
            self.clocks_used.add(key)
        if kind not in checks.SCREENED_BY_DECODER:
            batch = self._screened(batch, key)
            if not batch.count:
                return []
        decode = self.decoders.get(kind, self.device.decode)
        try:
            outputs = decode(kind, batch)
        except (ValueError, TypeError) as exc:  # bytes that slipped past framing: counted, never fatal
            self._reject(f"{kind}: undecodable chunk ({exc})", batch.count, batch.body)
            return []
        stream, device = batch.meta.get("stream"), batch.meta.get("device")
        produced: list[Batch] = []
        for out_kind, payload in outputs:
            if isinstance(payload, np.ndarray):
                if len(payload):
                    self.decoded += len(payload)
                    produced.append(records.to_batch(out_kind, payload, {"stream": stream, "device": device}))
            else:
                self.decoded += payload.count
                payload.meta.update(stream=stream, device=device)
                produced.append(payload)
        # One raw chunk may become several batches (steps and flips, APIs and events): the
        # aggregator acts on a stream's progress only once all of them are in.
        for batch in produced[:-1]:
            batch.meta["chunk_end"] = False
        return produced

    def _screened(self, batch: Batch, key: tuple[str, int] | None) -> Batch:
        """The chunk without the records whose fields are impossible (rejected, each with its reason)."""
        kind = batch.meta["kind"]
        kept = self.screen(kind, key, str(batch.meta.get("stream", "")), batch.body)
        if kept is None:
            return batch
        return Batch(batch.kind, len(kept) // checks.RAW_KINDS[kind].record_size, batch.meta, kept)

    def tick(self, now: float) -> Iterable[Batch]:
        if not self.pending:
            return ()
        return list(self._announce()) + list(self._release())

    def finish(self) -> Iterable[Batch]:
        self.finishing = True  # nothing more is coming: stop waiting for sample.json
        released = list(self._announce()) + list(self._release())
        for batch in self.pending:
            self._untimed(batch)
        self.pending = []
        return released

    def _untimed(self, batch: Batch) -> None:
        """A chunk no clock can place: rejected, and counted against the clock (so against its missing files)."""
        kind = str(batch.meta.get("kind"))
        self._reject(f"{kind}: no time base (control files missing)", batch.count, batch.body)
        key = _clock_key(batch)
        if key is not None:
            cost = self.untimed.setdefault(key, {})
            cost[kind] = cost.get(kind, 0) + batch.count

    def input_problems(self) -> list[str]:
        """One line per clock that records waited for in vain: the control files it lacks, what that cost."""
        lines = []
        for key, cost in sorted(self.untimed.items()):
            story = self.timebase.story(key)
            what = ("host records" if key[0] == "host" else
                    f"device {key[1]}'s legacy host records" if key[0] == "legacy" else f"device {key[1]}")
            if story.missing:
                lacks = " and ".join(_absent_file(self.timebase.files, rel) for rel in story.missing)
            else:  # every file came: one holds a value that is not a number, or too large for the arithmetic
                lacks = "its control files hold a clock value that is not a usable number"
            counts = ", ".join(f"{n:,} {kind}" for kind, n in sorted(cost.items()))
            lines.append(f"decoder: {what}: {lacks}, so {sum(cost.values()):,} records ({counts}) could not be "
                         "placed in time and are missing from the outputs (copy the file again from the board's "
                         "PROF_… directory; docs/troubleshooting.md lists what each output needs)")
        return lines

    def input_warnings(self) -> list[str]:
        """One line per stand-in for a missing control file behind a clock that placed records."""
        lines = []
        for key in sorted(self.clocks_used):
            if key in self.untimed:
                continue
            what = "host" if key[0] == "host" else f"device {key[1]}"
            lines += [f"decoder: {what}: {line}" for line in self.timebase.story(key).substitutes]
        return lines

    def progress(self) -> dict[str, Any]:
        return {"pending_chunks": len(self.pending)}

    def accounting(self) -> dict[str, int]:
        return {"records_in": self.records_in, "decoded": self.decoded, "rejected": self.rejected,
                "lost_on_device": self.lost}

    def check(self) -> list[str]:
        if self.records_in != self.decoded + self.rejected:
            return [f"stage '{self.ctx.stage_id}': {self.records_in} records in but {self.decoded} decoded + "
                    f"{self.rejected} rejected"]
        return []


def _clock_key(batch: Batch) -> tuple[str, int] | None:
    """The clock a raw chunk's times need (TimeBase.story keys); None: it needs none."""
    kind, device = batch.meta.get("kind"), batch.meta.get("device")
    if kind in ("hash_dic", "type_info_dic"):
        return None
    if kind in HOST_KINDS:
        return ("host", 0)
    if not isinstance(device, int):
        return None
    return ("legacy", device) if kind in legacy.KINDS else ("device", device)


def _absent_file(files: dict[str, str], rel: str) -> str:
    return (f"{rel} is damaged (it lacks the values read from it)" if rel in files
            else f"{rel} is missing (or could not be read)")


def _extra_facts(sample: dict) -> dict[str, Any]:
    """Which optional device streams the collection switched on (AI CPU trace, L2 cache task counters)."""
    l2_on = str(sample.get("l2CacheTaskProfiling", "")).lower() == "on"
    return {"aicpu_trace": str(sample.get("aicpuTrace", "")).lower() == "on",
            "l2_events": _event_ids(sample.get("l2CacheTaskProfilingEvents")) if l2_on else []}


def _event_ids(text: object) -> list[int]:
    """`"0x8,0xa,…"` (sample.json) → event ids in counter-slot order; an id that is not hex ends the list
    (the counters after it cannot be named)."""
    ids: list[int] = []
    for item in str(text or "").split(","):
        try:
            event = int(item, 16)
        except ValueError:
            break
        if not 0 <= event < 2**32:
            break
        ids.append(event)
    return ids
