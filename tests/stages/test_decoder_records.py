"""The decoder's output-building helpers (stages/decoder/records.py) against plain numpy indexing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.decoder import host, host_extra, records, ts_track
from stages.formats import host_extra as host_extra_formats
from stages.formats import raw

# (raw layout, decoded dtype, fields) as the decoders copy them
COPIES = [(layout, records.DTYPES[kind], fields) for layout, kind, fields in host._COPIED.values()]
COPIES += [(layout, records.DTYPES[kind], fields) for layout, kind, fields in ts_track._TAGS.values()]
COPIES += [(host_extra_formats.LAYOUTS[k], records.DTYPES[records.host_records.EXTRA_KINDS[k]], fields)
           for k, fields in host_extra._SHARED.items()]
COPIES += [(raw.AICORE_PMU, records.PMU, ("task_id", "total_cycle", "pmu")),
           (raw.FFTS_PMU, records.BLOCK_PMU, ("total_cycle", "pmu", "block_id", "sub_block_id"))]


@pytest.mark.parametrize("layout, dtype, fields", COPIES)
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_copy_fields_equals_field_by_field_assignment(layout: np.dtype, dtype: np.dtype, fields: tuple[str, ...],
                                                      data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 40))
    body = data.draw(st.binary(min_size=n * layout.itemsize, max_size=n * layout.itemsize))
    arr = np.frombuffer(body, layout)
    if data.draw(st.booleans()):  # a strided view, as a field selection can give
        arr = np.frombuffer(body + body, layout)[::2]
    expected = np.zeros(len(arr), dtype)
    for name in fields:
        expected[name] = arr[name]
    got = np.zeros(len(arr), dtype)
    records.copy_fields(got, arr, fields)
    assert got.tobytes() == expected.tobytes()


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 50), device=st.integers(0, 63), data=st.data())
def test_blank_is_zeroed_with_the_device_and_never_shared(n: int, device: int, data: st.DataObject) -> None:
    first = records.blank(records.TASK_LOG, n, device)
    expected = np.zeros(n, records.TASK_LOG)
    expected["device_id"] = device
    assert first.tobytes() == expected.tobytes()
    first["task_id"] = 7  # writing one blank leaves the next untouched
    assert records.blank(records.TASK_LOG, n, device).tobytes() == expected.tobytes()
    big = data.draw(st.integers(1025, 3000))  # longer than any blank made so far
    assert records.blank(records.STEP, big, device)["device_id"].tolist() == [device] * big


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_pick_equals_boolean_indexing(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 40))
    body = data.draw(st.binary(min_size=n * 40, max_size=n * 40))
    arr = np.frombuffer(body, raw.TS_STEP_TRACE)
    which = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    picked = records.pick(arr, which)
    assert picked.dtype == arr.dtype and picked.tobytes() == arr[which].tobytes()
