"""Tensor records in the join keep their slots as the bytes of their texts key, shared between equal records."""

from __future__ import annotations

import pickle

import numpy as np

from stages import aggregator
from stages.decoder import records
from stages.formats import raw


def _tensor_batch() -> np.ndarray:
    arr = np.zeros(3, dtype=records.DTYPES["tensor"])
    arr["tensor_num"] = [2, 2, 3]
    arr["tensors"][:, :3, :] = np.arange(33, dtype=np.uint32).reshape(3, 11)  # slots 0-2 of every record
    arr["tensors"][2, 0, 3] = 99  # the third record: another first dimension
    return arr


def test_the_slot_layout_is_the_decoders() -> None:
    field = records.DTYPES["tensor"]["tensors"]
    assert field.base == aggregator.TENSOR_SLOT_TYPE and field.shape[0] == raw.TENSOR_SLOTS


def test_slots_read_back_from_the_key_are_the_records_and_equal_keys_are_one_object() -> None:
    arr = _tensor_batch()
    keys = aggregator._tensor_keys(arr)
    assert keys[0] == keys[1] and keys[0] is keys[1]  # one shared copy in memory and in a checkpoint
    assert keys[2] != keys[0]
    for row, key in zip(arr, keys, strict=True):
        record = {"tensor_num": int(row["tensor_num"]), "texts_key": key}
        assert np.array_equal(aggregator._tensor_slots(record), row["tensors"])
    state = pickle.loads(pickle.dumps([{"texts_key": key} for key in keys]))
    assert state[0]["texts_key"] is state[1]["texts_key"]


def test_texts_of_a_record_without_its_numpy_slots_match_the_numpy_record() -> None:
    arr = _tensor_batch()
    key = aggregator._tensor_keys(arr)[2]
    from_numpy = aggregator._tensor_texts_of(arr[2])
    from_key = aggregator._tensor_texts_of({"tensor_num": 3, "texts_key": key})
    assert from_key == from_numpy
    assert from_key["input_shapes"] != "N/A" and "99" in from_key["input_shapes"] + from_key["output_shapes"]
