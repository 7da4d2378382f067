"""Decoder: records that frame well but whose fields are impossible (a damaged record whose magic survived) are
rejected with their reason and their bytes; the simulator's normal output loses nothing to these checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chain import decode_dir, make_ctx
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.stage import Batch
from stages.decoder import DecoderStage, checks, records
from stages.formats import raw
from stages.simulator.run import simulate

MONO0 = 10_000_000_000_000  # host CLOCK_MONOTONIC_RAW at the collection start (ns)
WALL0_US = 1_700_000_000_000_000
RUN_NS = 10_000_000_000  # the collection lasts 10 s
HOUR, DAY = 3600 * 10**9, 24 * 3600 * 10**9
START_INFO = f'{{"collectionTimeBegin": "{WALL0_US}", "clockMonotonicRaw": "{MONO0}"}}'
END_INFO = f'{{"collectionTimeEnd": "{WALL0_US + RUN_NS // 1000}", "clockMonotonicRaw": "{MONO0 + RUN_NS}"}}'
CONTROL = {
    "host/info.json": '{"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": [], "devices": "0"}',
    "host/start_info": START_INFO,
    "host/host_start.log": f"clock_monotonic_raw: {MONO0}\ncntvct: {MONO0}\n",
    "device_0/info.json.0": '{"platform_version": "1", "DeviceInfo": [{"hwts_frequency": "100"}]}',
    "device_0/start_info.0": START_INFO,
    "device_0/dev_start.log.0": "cntvct: 1000\n",  # syscnt 1000 at MONO0; 100 MHz: 10 ns a tick
    "device_0/host_start.log.0": f"clock_monotonic_raw: {MONO0}\n",
    "device_0/sample.json": "{}",
}
OFFSET = WALL0_US * 1000 - MONO0  # local ns − monotonic ns
GARBAGE = 2**63 + 12_345  # a time whose top bytes were overwritten


def _decoder(tmp_path: Path, ended: bool = True) -> DecoderStage:
    decoder = DecoderStage(DecoderStage.Config.model_validate({}), make_ctx("decode", tmp_path))
    control = {**CONTROL, "host/end_info": END_INFO, "device_0/end_info.0": END_INFO} if ended else CONTROL
    for path, text in control.items():
        list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    return decoder


def _raw(kind: str, rows: np.ndarray, stream: str = "", device: int | None = None) -> Batch:
    return Batch("raw", len(rows), {"kind": kind, "stream": stream or kind, "device": device}, rows.tobytes())


def _decoded(decoder: DecoderStage, batch: Batch) -> dict[str, np.ndarray]:
    return {out.kind: records.from_batch(out) for out in decoder.process(batch)}


def _aside(tmp_path: Path, reason: str) -> bytes:
    """The bytes the decoder kept aside for ``reason``."""
    safe = "".join(c if c.isalnum() else "_" for c in reason)[:60]
    return (tmp_path / "rejected" / f"decode.{safe}.bin").read_bytes()


def _apis(rows: list[tuple[int, int, int]]) -> np.ndarray:
    """api_event records (level, begin, end) in host ticks (monotonic ns here)."""
    arr = np.zeros(len(rows), raw.API_EVENT)
    arr["magic"] = raw.HOST_MAGIC
    arr["type"] = 5
    arr["level"], arr["begin"], arr["end"] = zip(*rows, strict=True)
    return arr


def test_impossible_api_records_are_rejected_with_their_reason_and_bytes(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    arr = _apis([(raw.LEVEL_NODE, MONO0 + 100, MONO0 + 150),  # a launch
                 (raw.LEVEL_MODEL, MONO0 + 200, raw.EVENT_FLAG),  # an event: no end
                 (19877, MONO0 + 300, MONO0 + 350),  # a level CANN does not define
                 (raw.LEVEL_NODE, MONO0 + 400, MONO0 + 399),  # ends before it begins
                 (raw.LEVEL_NODE, MONO0 - HOUR, MONO0 + 10),  # begins an hour before the collection
                 # the launch that made 15,678,261,577,479,726 µs: its end overwritten
                 (raw.LEVEL_NODE, MONO0 + 500, MONO0 + 500 + 15_678_261_577_479_726_000),
                 (raw.LEVEL_ACL, GARBAGE, GARBAGE + 10)])
    out = _decoded(decoder, _raw("api_event", arr, "unaging.api_event.data"))
    assert out["api"]["start_ns"].tolist() == [MONO0 + 100 + OFFSET]
    assert out["api"]["end_ns"].tolist() == [MONO0 + 150 + OFFSET]
    assert out["event"]["ts_ns"].tolist() == [MONO0 + 200 + OFFSET]
    assert decoder.ctx.rejected == {
        "api_event: level is not a report level (damaged record)": 1,
        "api_event: end time before its begin time (damaged record)": 1,
        "api_event: begin time outside the collection window (damaged record)": 2,
        "api_event: end time outside the collection window (damaged record)": 1}
    assert _aside(tmp_path, "api_event: level is not a report level (damaged record)") == arr[2].tobytes()
    assert _aside(tmp_path, "api_event: begin time outside the collection window (damaged record)") == \
        arr[4].tobytes() + arr[6].tobytes()
    assert decoder.accounting()["rejected"] == 5 and decoder.check() == []


def test_zero_begin_keeps_its_own_reason(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    _decoded(decoder, _raw("api_event", _apis([(raw.LEVEL_ACL, 0, 7), (raw.LEVEL_ACL, MONO0 + 1, MONO0 + 2)])))
    assert decoder.ctx.rejected == {"api_event: zero begin time": 1}


def test_until_end_info_comes_the_window_is_open_a_year(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path, ended=False)
    late = _apis([(raw.LEVEL_ACL, MONO0 + 30 * DAY, MONO0 + 30 * DAY + 5),  # a month-long live run
                  (raw.LEVEL_ACL, MONO0 + 800 * DAY, MONO0 + 800 * DAY + 5)])
    assert len(_decoded(decoder, _raw("api_event", late))["api"]) == 1
    assert decoder.ctx.rejected == {"api_event: begin time outside the collection window (damaged record)": 1}
    list(decoder.process(Batch("control", 0, {"path": "host/end_info", "text": END_INFO})))
    after_end = _apis([(raw.LEVEL_ACL, MONO0 + RUN_NS + 60 * 10**9, MONO0 + RUN_NS + 61 * 10**9),  # the margin
                       (raw.LEVEL_ACL, MONO0 + RUN_NS + HOUR, MONO0 + RUN_NS + HOUR + 5)])
    assert len(_decoded(decoder, _raw("api_event", after_end))["api"]) == 1
    assert decoder.ctx.rejected["api_event: begin time outside the collection window (damaged record)"] == 2


def test_end_info_after_a_wall_clock_step_back_still_covers_the_run(tmp_path: Path) -> None:
    """The wall clock went back an hour during the run: the end is where CLOCK_MONOTONIC_RAW puts it."""
    decoder = _decoder(tmp_path, ended=False)
    stepped = f'{{"collectionTimeEnd": "{WALL0_US + RUN_NS // 1000 - HOUR // 1000}", ' \
              f'"clockMonotonicRaw": "{MONO0 + RUN_NS}"}}'
    list(decoder.process(Batch("control", 0, {"path": "host/end_info", "text": stepped})))
    _decoded(decoder, _raw("api_event", _apis([(raw.LEVEL_ACL, MONO0 + RUN_NS - 5, MONO0 + RUN_NS - 1)])))
    assert decoder.ctx.rejected == {}


def _host_records(layout: np.dtype, stamps: list[int]) -> np.ndarray:
    arr = np.zeros(len(stamps), layout)
    arr["magic"], arr["level"], arr["timestamp"] = raw.HOST_MAGIC, raw.LEVEL_RUNTIME, stamps
    return arr


def test_registrations_may_predate_the_collection_but_nothing_follows_it(tmp_path: Path) -> None:
    """unaging records may be a model's registrations from its load, before the collection; aging ones may not."""
    decoder = _decoder(tmp_path)
    registered = _host_records(raw.TASK_TRACK, [MONO0 - HOUR, MONO0 + 5, MONO0 + RUN_NS + DAY])
    assert len(_decoded(decoder, _raw("task_track", registered, "unaging.compact.task_track"))["task_track"]) == 2
    launched = _host_records(raw.TASK_TRACK, [MONO0 - HOUR, MONO0 + 5])
    assert len(_decoded(decoder, _raw("task_track", launched, "aging.compact.task_track"))["task_track"]) == 1
    assert decoder.ctx.rejected == {"task_track: timestamp outside the collection window (damaged record)": 2}


def test_a_tx_range_that_ends_before_it_starts_is_rejected(tmp_path: Path) -> None:
    decoder = _decoder(tmp_path)
    arr = _host_records(raw.MSPROFTX, [MONO0 + 10] * 3)
    arr["start_time"], arr["end_time"] = [MONO0 + 1, MONO0 + 5, MONO0 + 5], [MONO0 + 2, 0, MONO0 + 4]
    assert len(_decoded(decoder, _raw("msproftx", arr, "unaging.additional.msproftx"))["tx"]) == 2
    assert decoder.ctx.rejected == {"msproftx: end time before its start time (damaged record)": 1}


def test_a_device_log_outside_the_window_is_rejected_not_lost(tmp_path: Path) -> None:
    """hwts: the rolling counter reads every record first, so the rejected one is no gap."""
    decoder = _decoder(tmp_path)
    arr = np.zeros(4, raw.HWTS_LOG)
    arr["head"] = (np.arange(4, dtype=np.uint8) << 4) | raw.HWTS_TASK_START
    arr["marker"], arr["task_id"] = raw.HWTS_MARKER, [1, 2, 3, 4]
    arr["syscnt"] = [1000, 2000, GARBAGE, 3000]
    out = _decoded(decoder, _raw("hwts", arr, "hwts.data.0", device=0))
    assert out["task_log"]["task_id"].tolist() == [1, 2, 4]
    assert out["task_log"]["ts_ns"].tolist() == [MONO0 + OFFSET, MONO0 + 10_000 + OFFSET, MONO0 + 20_000 + OFFSET]
    assert decoder.ctx.rejected == {"hwts: syscnt outside the collection window (damaged record)": 1}
    assert decoder.lost == 0


@pytest.mark.parametrize(("kind", "layout", "field"), [("ts_track", raw.TS_TASK_FLIP, "timestamp"),
                                                       ("stars_soc", raw.ACSQ_LOG, "timestamp"),
                                                       ("ffts_profile", raw.FFTS_PMU, "end_cnt")])
def test_device_times_outside_the_window_are_rejected(tmp_path: Path, kind: str, layout: np.dtype,
                                                      field: str) -> None:
    decoder = _decoder(tmp_path)
    arr = np.zeros(3, layout)
    if kind == "ts_track":
        arr["tag"] = raw.TS_TAG_TASK_FLIP
    else:
        arr["marker"] = raw.STARS_MARKER
        arr["head"] = raw.CONTEXT_PMU if kind == "ffts_profile" else raw.ACSQ_START
    arr[field] = [1000, GARBAGE, 1000 + (RUN_NS + DAY) // 10]  # the start; garbage; a day after the end
    outputs = decoder.process(_raw(kind, arr, f"{kind}.data.0", device=0))
    assert sum(batch.count for batch in outputs) == 1
    told = {"timestamp": "timestamp", "end_cnt": "end count"}[field]
    assert decoder.ctx.rejected == {f"{kind}: {told} outside the collection window (damaged record)": 2}


@pytest.mark.parametrize(("chip", "options"), [("cloud", {}), ("910b", {}), ("mini", {}), ("v6", {}),
                                               ("cloud", {"mode": "static"}), ("mini", {"layout": "legacy"})])
def test_the_simulators_records_are_all_plausible(tmp_path: Path, chip: str, options: dict) -> None:
    prof = simulate(tmp_path / "board", chip=chip, iterations=3, rate="max", seed=3, **options)
    _, _, decoder = decode_dir(prof, tmp_path / "out")
    assert decoder.accounting()["records_in"] > 0
    assert decoder.ctx.rejected == {}


def test_every_rule_reads_a_kind_the_decoder_knows() -> None:
    assert set(checks.RULES) <= set(checks.RAW_KINDS)
    for kind, rule in checks.RULES.items():
        assert rule.layout.itemsize == checks.RAW_KINDS[kind].record_size, kind


# Times near every edge of a window, and the values a damaged or special record holds.
_EDGES = [0, 1, 999, 1000, 1001, 5000, 5001, 5002, 2**63, raw.EVENT_FLAG - 1, raw.EVENT_FLAG]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(kind=st.sampled_from(sorted(checks.RULES)), stream=st.sampled_from(["aging.x", "unaging.x"]),
       values=st.lists(st.one_of(st.sampled_from(_EDGES), st.integers(0, 2**64 - 1)), min_size=12, max_size=12),
       levels=st.lists(st.sampled_from([*checks.REPORT_LEVELS, 0, 19877, 65535]), min_size=4, max_size=4),
       low=st.sampled_from([0, 1000]))
def test_the_quick_test_of_a_chunk_finds_every_problem(kind: str, stream: str, values: list[int],
                                                       levels: list[int], low: int) -> None:
    """A chunk passes the quick test (a few reductions) exactly when no record has a problem."""
    rule, window = checks.RULES[kind], checks.TickWindow.between(low, 5001)
    rows = np.zeros(4, rule.layout)
    times = [name for name in rule.layout.names or () if name != "level"]
    for i, name in enumerate(times):
        rows[name] = values[4 * i:4 * i + 4]  # up to three time fields
    if "level" in (rule.layout.names or ()):
        rows["level"] = levels
    problems = rule.problems(rows, window, stream)
    assert rule.suspect(rows, window, stream) == any(bool(which.any()) for _, which in problems)


def test_a_restored_decoder_screens_as_before(tmp_path: Path) -> None:
    """The checkpointed decoder (its windows learned) rejects into the restored stage's counts."""
    decoder = _decoder(tmp_path)
    _decoded(decoder, _raw("api_event", _apis([(raw.LEVEL_ACL, MONO0 + 1, MONO0 + 2)])))
    restored = DecoderStage(DecoderStage.Config.model_validate({}), make_ctx("decode", tmp_path / "again"))
    restored.restore(decoder.snapshot())
    out = _decoded(restored, _raw("api_event", _apis([(19877, MONO0 + 1, MONO0 + 2),
                                                      (raw.LEVEL_ACL, MONO0 + 3, MONO0 + 4)])))
    assert len(out["api"]) == 1
    assert restored.ctx.rejected == {"api_event: level is not a report level (damaged record)": 1}
    assert restored.check() == [] and decoder.ctx.rejected == {}
