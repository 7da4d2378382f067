"""Device data whose control files are missing or damaged: counted against the file by name, or
placed with a stand-in clock fact that is said as a warning."""

from __future__ import annotations

import numpy as np
import pytest
from chain import make_ctx

from pipeline.stage import Batch
from stages.decoder import DecoderStage, records
from stages.formats import raw

HOST_MONO, DEVICE_HOST_MONO, DEV_CNT = 5_000_000_000, 6_000_000_000, 1000
CONTROL = {
    "host/info.json": '{"CPU": [{"Frequency": "1000.000000"}], "DeviceInfo": [], "devices": "64"}',
    "host/start_info": '{"collectionTimeBegin": "1700000000000000", "clockMonotonicRaw": "5000000000"}',
    "host/host_start.log": "[Host]\nclock_monotonic_raw: 5000000000\ncntvct: 5000000000\n",
    "device_0/info.json.0": '{"platform_version": "1", "DeviceInfo": [{"hwts_frequency": "100"}]}',
    "device_0/start_info.0": '{"collectionTimeBegin": "1700000001000000", "clockMonotonicRaw": "6000000000"}',
    "device_0/end_info.0": '{"collectionTimeEnd": "1700000002000000", "clockMonotonicRaw": "7000000000"}',
    "device_0/dev_start.log.0": "clock_monotonic_raw: 1\ncntvct: 1000\n",
    "device_0/host_start.log.0": "[Device0]\nclock_monotonic_raw: 6000000000\ncntvct: 6000000000\n",
    "device_0/sample.json": "{}",
}
OFFSET = 1_700_000_000_000_000_000 - 5_000_000_000  # the same for every start_info and end_info above


def _hwts(n: int) -> Batch:
    arr = np.zeros(n, raw.HWTS_LOG)
    arr["head"] = raw.HWTS_TASK_START
    arr["marker"] = raw.HWTS_MARKER
    arr["syscnt"] = DEV_CNT + 100 * np.arange(n)  # 1 µs apart at 100 MHz
    return Batch("raw", n, {"kind": "hwts", "stream": "hwts.data.0", "device": 0, "size": 64}, arr.tobytes())


def _run(tmp_path, control: dict[str, str]) -> tuple[DecoderStage, list[int]]:  # type: ignore[no-untyped-def]
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    out = list(decoder.process(_hwts(5)))
    for path, text in control.items():
        out += decoder.process(Batch("control", 0, {"path": path, "text": text}))
    out += decoder.finish()
    times = [t for b in out if b.kind == "task_log" for t in records.from_batch(b)["ts_ns"].tolist()]
    assert decoder.check() == []
    return decoder, times


EXPECTED = [DEVICE_HOST_MONO + OFFSET + 1000 * i for i in range(5)]


def test_all_control_files_place_every_record_without_a_word(tmp_path) -> None:  # type: ignore[no-untyped-def]
    decoder, times = _run(tmp_path, CONTROL)
    assert times == EXPECTED
    assert decoder.input_problems() == [] and decoder.input_warnings() == []


@pytest.mark.parametrize("text", [None, "clock_monotonic_raw: 1\ncntvct: ten\n", "[Device0]\n"])
def test_a_missing_or_damaged_dev_start_log_fails_by_name_with_its_cost(tmp_path, text) -> None:  # type: ignore[no-untyped-def]
    """No other file holds a device tick count read at a known host instant: the records cannot be placed."""
    control = {k: v for k, v in CONTROL.items() if k != "device_0/dev_start.log.0"}
    if text is not None:
        control["device_0/dev_start.log.0"] = text
    decoder, times = _run(tmp_path, control)
    assert times == []
    (line,) = decoder.input_problems()
    state = "is missing" if text is None else "is damaged"
    assert line.startswith(f"decoder: device 0: device_0/dev_start.log.0 {state}")
    assert "so 5 records (5 hwts) could not be placed in time" in line
    assert decoder.ctx.rejected == {"hwts: no time base (control files missing)": 5}


def test_host_start_log_missing_uses_the_hosts_start_log_and_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    control = {k: v for k, v in CONTROL.items() if k != "device_0/host_start.log.0"}
    decoder, times = _run(tmp_path, control)
    assert times == [HOST_MONO + OFFSET + 1000 * i for i in range(5)]  # host/host_start.log's instant
    assert decoder.input_problems() == []
    assert decoder.input_warnings() == [
        "decoder: device 0: device_0/host_start.log.0 is missing: device times use host/host_start.log instead"]


def test_both_host_start_logs_missing_use_start_info_monotonic(tmp_path) -> None:  # type: ignore[no-untyped-def]
    control = {k: v for k, v in CONTROL.items() if "host_start.log" not in k}
    decoder, times = _run(tmp_path, control)
    assert times == EXPECTED  # start_info.0's clockMonotonicRaw is the device's collection start
    assert decoder.input_problems() == []
    (line,) = decoder.input_warnings()
    assert "host_start.log.0 is missing: device times use the clockMonotonicRaw of device_0/start_info.0" in line


def test_start_info_missing_everywhere_uses_end_info_and_says_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    control = {k: v for k, v in CONTROL.items() if "start_info" not in k}
    decoder, times = _run(tmp_path, control)
    assert times == EXPECTED
    assert decoder.input_warnings() == [
        "decoder: device 0: device_0/start_info.0 is missing: wall-clock times use device_0/end_info.0 instead"]


def test_no_wall_clock_anywhere_fails_naming_start_info(tmp_path) -> None:  # type: ignore[no-untyped-def]
    control = {k: v for k, v in CONTROL.items() if "start_info" not in k and "end_info" not in k}
    decoder, times = _run(tmp_path, control)
    assert times == []
    (line,) = decoder.input_problems()
    assert line.startswith("decoder: device 0: device_0/start_info.0 is missing (or could not be read), so 5 records")


def test_host_records_need_no_host_start_log_when_host_ticks_are_ns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """CPU Frequency 1000 MHz: host records carry monotonic ns already, so only start_info matters."""
    decoder = DecoderStage(DecoderStage.Config(), make_ctx("decode", tmp_path))
    for path, text in CONTROL.items():
        if path != "host/host_start.log":
            list(decoder.process(Batch("control", 0, {"path": path, "text": text})))
    clock = decoder.timebase.host_clock()
    assert clock is not None and clock.local_offset == OFFSET
