"""Device records without a property round trip elsewhere: hwts.data and aicore.data (HWTS chips), the 310's
TLV ts_track/aicore streams, STARS BlockPmu (mixed with ContextPmu) and chip v6's 32-byte ACSQ log.

Records are packed with struct from the format strings of msprof's parser (not our dtypes), cut anywhere (device
slices split records), and every decoded field must come back: times through the device clock, stream
ids to their low 11 bits, the STARS id packing undone, states and core kinds as msprof maps them."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from roundtrip import arrays, decode_in_two_reads, local_ns

from stages.decoder import records
from stages.formats import files, raw

CNT0, MONO0, WALL0_US = 123_456, 6_000_000_000, 1_700_000_000_000_000
OFFSET = WALL0_US * 1000 - 5_000_000_000
SYSCNT = st.integers(CNT0, 2**48)
U8, U16, U32, U64 = st.integers(0, 2**8 - 1), st.integers(0, 2**16 - 1), st.integers(0, 2**32 - 1), \
    st.integers(0, 2**64 - 1)
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def _control(platform: int, hwts_mhz: int) -> dict[str, str]:
    return {
        "device_0/info.json.0": f'{{"platform_version": "{platform}", "DeviceInfo": [{{"hwts_frequency": '
                                f'"{hwts_mhz}", "ai_core_num": 8, "aic_frequency": "1000"}}]}}',
        "device_0/start_info.0": f'{{"collectionTimeBegin": "{WALL0_US}", "clockMonotonicRaw": "5000000000"}}',
        "device_0/dev_start.log.0": f"clock_monotonic_raw: 1\ncntvct: {CNT0}\n",
        "device_0/host_start.log.0": f"[Device0]\nclock_monotonic_raw: {MONO0}\ncntvct: 1\n",
        "device_0/sample.json": '{"ai_core_metrics": "PipeUtilization", "ai_core_profiling_events": "0x8"}',
    }


HWTS_CHIP, MINI_CHIP, STARS_CHIP, V6_CHIP = _control(1, 100), _control(0, 100), _control(5, 50), _control(15, 50)


def _ns(ticks: int, mhz: int) -> int:
    return local_ns(ticks, mhz * 1000, CNT0, MONO0, OFFSET)


def _lost(counters: list[int]) -> int:
    """Records the 4-bit rolling counter says never arrived."""
    return sum((b - a - 1) % 16 for a, b in pairwise(counters))


# -- hwts.data: `=BBHHHQ12I` -----------------------------------------------------------------------------------

HWTS_ROW = st.tuples(st.integers(0, 4), st.booleans(), st.integers(0, 15), U8, U16, U16, SYSCNT, U32)


@SETTINGS
@given(rows=st.lists(HWTS_ROW, min_size=1, max_size=30), cut=st.integers(0, 30 * 64))
def test_hwts_round_trip(rows: list[tuple[int, ...]], cut: int) -> None:
    body = b"".join(struct.pack("=BBHHHQ12I", log_type | warn << 3 | cnt << 4, byte1, raw.HWTS_MARKER, block, task,
                                syscnt, stream, *[0] * 11)
                    for log_type, warn, cnt, byte1, block, task, syscnt, stream in rows)
    batches, accounting = decode_in_two_reads(HWTS_CHIP, files.HWTS, body, cut, device=0)
    tasks = [row for row in rows if row[0] <= 1]  # types 2–4 are block-level logs, rejected
    logs = arrays(batches).get("task_log")
    assert [tuple(r) for r in (logs.tolist() if logs is not None else [])] == [
        (0, stream % 2048, task, records.STATE_START if log_type == 0 else records.STATE_END, _ns(syscnt, 100))
        for log_type, _, _, _, _, task, syscnt, stream in tasks]
    assert accounting["rejected"] == len(rows) - len(tasks)
    assert accounting["lost_on_device"] == _lost([row[2] for row in rows])


# -- aicore.data (task-based PMU): `=BBHHHII10Q8I` --------------------------------------------------------------

AICORE_ROW = st.tuples(st.integers(0, 15), U8, U16, U64, st.lists(U64, min_size=8, max_size=8), U32)


@SETTINGS
@given(rows=st.lists(AICORE_ROW, min_size=1, max_size=16), cut=st.integers(0, 16 * 128))
def test_aicore_round_trip(rows: list[tuple[Any, ...]], cut: int) -> None:
    body = b"".join(struct.pack("=BBHHHII10Q8I", cnt << 4, byte1, raw.HWTS_MARKER, 0, task, 0, 0, total, 0, *pmu,
                                stream, *[0] * 7)
                    for cnt, byte1, task, total, pmu, stream in rows)
    batches, accounting = decode_in_two_reads(HWTS_CHIP, files.AICORE, body, cut, device=0)
    pmu_out = arrays(batches)["pmu"]
    assert pmu_out["stream_id"].tolist() == [row[5] % 2048 for row in rows]
    assert pmu_out["task_id"].tolist() == [row[2] for row in rows]
    assert pmu_out["total_cycle"].tolist() == [row[3] for row in rows]
    assert pmu_out["pmu"].tolist() == [row[4] for row in rows]
    assert accounting["rejected"] == 0 and accounting["lost_on_device"] == _lost([row[0] for row in rows])


# -- the 310's TLV streams -------------------------------------------------------------------------------------

TIMELINE = st.tuples(st.just(raw.MINI_TAG_TIMELINE), st.integers(0, 1), U16, st.sampled_from([2, 3, 7, 8]), U16, U16,
                     SYSCNT, U32, U32)
STEP = st.tuples(st.just(raw.MINI_TAG_STEP_TRACE), st.integers(0, 1), SYSCNT, U64, U64, U16, U16, U16)


def _tlv(row: tuple[Any, ...]) -> bytes:
    tag, mode, *fields = row
    if tag == raw.MINI_TAG_TIMELINE:  # taskType, taskState, streamId, taskId, timestamp, thread, deviceId
        return struct.pack("=BBHLHHHHQLL", mode, tag, 32, 0, *fields)
    if tag == raw.MINI_TAG_STEP_TRACE:  # timestamp, indexId, modelId, streamId, taskId, tagId
        return struct.pack("=BBHLQQQHHHH", mode, tag, 40, 0, *fields, 0)
    # event count: taskType, streamId, taskId, overflow, overflowCycle, counters[8], taskCycles, timestamp, block
    task_type, stream, task, overflow, overflow_cycle, pmu, cycles, ts, block = fields
    return struct.pack("=BBHLHHHHQ8QQQH3H", mode, tag, 112, 0, task_type, stream, task, overflow, overflow_cycle, *pmu,
                       cycles, ts, block, 0, 0, 0)


@SETTINGS
@given(rows=st.lists(st.one_of(TIMELINE, STEP), min_size=1, max_size=30), cut=st.integers(0, 30 * 40))
def test_mini_ts_track_round_trip(rows: list[tuple[Any, ...]], cut: int) -> None:
    body = b"".join(_tlv(row) for row in rows)
    batches, accounting = decode_in_two_reads(MINI_CHIP, files.MINI_TS_TRACK, body, cut, device=0)
    out = arrays(batches)
    timeline = [row for row in rows if row[0] == raw.MINI_TAG_TIMELINE]
    steps = [row for row in rows if row[0] == raw.MINI_TAG_STEP_TRACE]
    assert ("task_log" in out, "step" in out) == (bool(timeline), bool(steps))
    if timeline:
        assert [tuple(r) for r in out["task_log"].tolist()] == [
            (0, stream % 2048, task, state, _ns(ts, 100)) for _, _, _, state, stream, task, ts, _, _ in timeline]
    if steps:
        assert [tuple(r) for r in out["step"].tolist()] == [
            (0, _ns(ts, 100), index, model, stream % 2048, task, tag_id)
            for _, _, ts, index, model, stream, task, tag_id in steps]
    assert accounting["decoded"] == len(rows) and accounting["rejected"] == 0


EVENT_COUNT = st.tuples(st.just(raw.MINI_TAG_EVENT_COUNT), st.integers(0, 1), U16, U16, U16, U16, U64,
                        st.lists(U64, min_size=8, max_size=8), U64, SYSCNT, U16)


@SETTINGS
@given(rows=st.lists(EVENT_COUNT, min_size=1, max_size=16), cut=st.integers(0, 16 * 112))
def test_mini_aicore_round_trip(rows: list[tuple[Any, ...]], cut: int) -> None:
    body = b"".join(_tlv(row) for row in rows)
    batches, accounting = decode_in_two_reads(MINI_CHIP, files.MINI_AICORE, body, cut, device=0)
    pmu = arrays(batches)["pmu"]
    assert pmu["stream_id"].tolist() == [row[3] % 2048 for row in rows]
    assert pmu["task_id"].tolist() == [row[4] for row in rows]
    assert pmu["pmu"].tolist() == [row[7] for row in rows]
    assert pmu["total_cycle"].tolist() == [row[8] for row in rows]  # taskCycles
    assert pmu["ts_ns"].tolist() == [_ns(row[9], 100) for row in rows]
    assert pmu["block"].tolist() == [row[10] for row in rows]
    assert accounting["decoded"] == len(rows) and accounting["rejected"] == 0


# -- STARS: ffts_profile.data ContextPmu / BlockPmu, chip v6 ACSQ ------------------------------------------------


def _stars_fields(stream: int, task: int, packing: int) -> tuple[int, int]:
    """(stream field, task field) of a (stream < 2048, task) pair, packed as msprof's stars_common.h reads it back:
    0 as is; 1 bit 12 set, task bits 13–15 in the stream field; 2 bit 13 set, the low 12 bits swapped."""
    if packing == 1:
        return 0x1000 | (task & 0xE000) | stream, task & 0x1FFF
    if packing == 2:
        return 0x2000 | (task & 0x0FFF), (task & 0xF000) | stream
    return stream, task


def _core(ffts_type: int, subtask_type: int) -> int:
    """As msprof maps them: FFTS type 0 AI Core, 5 MIX AIC, 4 FFTS+ by subtask type (0 AIC, 6 MIX AIC,
    7 MIX AIV, else AIV); any other FFTS type AI Vector Core."""
    if ffts_type == raw.FFTS_TYPE_AIC or (ffts_type == raw.FFTS_TYPE_PLUS and subtask_type == raw.SUBTASK_AIC):
        return records.CORE_AIC
    if ffts_type == raw.FFTS_TYPE_MIX_AIC or (ffts_type == raw.FFTS_TYPE_PLUS and subtask_type == raw.SUBTASK_MIX_AIC):
        return records.CORE_MIX_AIC
    if ffts_type == raw.FFTS_TYPE_PLUS and subtask_type == raw.SUBTASK_MIX_AIV:
        return records.CORE_MIX_AIV
    return records.CORE_AIV


PMU_ROW = st.tuples(st.sampled_from([raw.CONTEXT_PMU, raw.BLOCK_PMU]), st.integers(0, 2047), U16, st.integers(0, 2),
                    st.sampled_from([0, 1, 2, 3, 4, 5, 7]), st.sampled_from([0, 1, 6, 7, 9]), st.booleans(), U16, U8,
                    U16, U16, U64, st.lists(U64, min_size=8, max_size=8), SYSCNT, SYSCNT)


@SETTINGS
@given(rows=st.lists(PMU_ROW, min_size=1, max_size=12), cut=st.integers(0, 12 * 128))
def test_context_and_block_pmu_round_trip(rows: list[tuple[Any, ...]], cut: int) -> None:
    body = b""
    for func, stream, task, packing, ffts, subtask_type, overflow, subtask_id, core, sub_block, block, total, pmu, \
            start, end in rows:
        stream_field, task_field = _stars_fields(stream, task, packing)
        body += struct.pack("=4HQ2H2BHI2H12Q", func, raw.STARS_MARKER, stream_field, task_field, 0,
                            subtask_type | overflow << 10, subtask_id, core, ffts << 5, 0, 0, sub_block, block, total,
                            0, *pmu, start, end)
    batches, accounting = decode_in_two_reads(STARS_CHIP, files.FFTS_PROFILE, body, cut, device=0)
    out = arrays(batches)
    for kind, func in (("context_pmu", raw.CONTEXT_PMU), ("block_pmu", raw.BLOCK_PMU)):
        mine = [row for row in rows if row[0] == func]
        got = out.get(kind)
        assert (0 if got is None else len(got)) == len(mine)
        if not mine:
            continue
        assert got is not None
        assert got["stream_id"].tolist() == [row[1] for row in mine]
        assert got["task_id"].tolist() == [row[2] for row in mine]
        assert got["core"].tolist() == [_core(row[4], row[5]) for row in mine]
        assert got["total_cycle"].tolist() == [row[11] for row in mine]
        assert got["pmu"].tolist() == [row[12] for row in mine]
        assert got["start_ns"].tolist() == [_ns(row[13], 50) for row in mine]
        assert got["ts_ns"].tolist() == [_ns(row[14], 50) for row in mine]  # a PMU record is timed by its end
        if kind == "context_pmu":  # a context id only for FFTS+ tasks
            assert got["context_id"].tolist() == [row[7] if row[4] == raw.FFTS_TYPE_PLUS else 0xFFFFFFFF
                                                  for row in mine]
            assert got["overflow"].tolist() == [int(row[6]) for row in mine]
        else:  # byte 20: bit 0 core type, bits 1–7 core id
            assert got[["context_id", "core_type", "core_id", "sub_block_id", "block_id"]].tolist() == [
                (row[7], row[8] & 1, row[8] >> 1, row[9], row[10]) for row in mine]
    assert accounting["decoded"] == len(rows) and accounting["rejected"] == 0


ACSQ_V6_ROW = st.tuples(st.sampled_from([raw.ACSQ_START, raw.ACSQ_END, 0b100010, 0b011010]), st.integers(0, 15),
                        st.integers(0, 63), U32, SYSCNT)


@SETTINGS
@given(rows=st.lists(ACSQ_V6_ROW, min_size=1, max_size=30), cut=st.integers(0, 30 * 32))
def test_acsq_v6_round_trip(rows: list[tuple[int, ...]], cut: int) -> None:
    body = b"".join(struct.pack("=HHIQHH3I", func | cnt << 6 | sqe << 10, raw.STARS_MARKER, task, ts, 0, 0, 0, 0, 0)
                    for func, cnt, sqe, task, ts in rows)
    batches, accounting = decode_in_two_reads(V6_CHIP, files.STARS_SOC_V6, body, cut, device=0)
    logs = [row for row in rows if row[0] in (raw.ACSQ_START, raw.ACSQ_END)]
    got = arrays(batches).get("unique_task_log")
    assert [tuple(r) for r in (got.tolist() if got is not None else [])] == [
        (0, task, sqe, records.STATE_START if func == raw.ACSQ_START else records.STATE_END, _ns(ts, 50))
        for func, _, sqe, task, ts in logs]
    assert accounting["rejected"] == len(rows) - len(logs)  # other STARS logs: rejected by func type
