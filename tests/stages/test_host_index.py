"""The host index's bulk intake equals its record-by-record intake (stages/aggregator/join.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.aggregator.join import HostIndex

TENSOR = st.fixed_dictionaries({"thread_id": st.integers(1, 2), "ts_ns": st.integers(0, 6),
                                "op_name": st.integers(7, 8), "tensor_num": st.integers(1, 7)})


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.lists(TENSOR, max_size=12), max_size=4), drift=st.booleans())
def test_tensor_records_in_bulk_make_the_entries_one_by_one_makes(chunks: list[list[dict[str, Any]]],
                                                                   drift: bool) -> None:
    """Records of one op and time stamp make one entry, out-of-order records included."""
    bulk, one_by_one = HostIndex(), HostIndex()
    clock = 0
    for chunk in chunks:
        records = []
        for record in chunk:
            clock += record["ts_ns"] if drift else 0  # drift: mostly in time order; else times jump back and forth
            records.append({**record, "ts_ns": clock + record["ts_ns"] if drift else record["ts_ns"]})
        bulk.add_tensors([dict(record) for record in records])
        for record in [dict(record) for record in records]:
            one_by_one.add_tensor(record["thread_id"], record["ts_ns"], record)
    assert bulk.tensors.keys() == one_by_one.tensors.keys()
    for thread, log in bulk.tensors.items():
        assert log.times == one_by_one.tensors[thread].times
        assert log.items == one_by_one.tensors[thread].items
