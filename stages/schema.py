"""What the aggregator sends its sinks: positional rows, names interned to ints.

Port ``tasks`` carries batches of kind ``run_info``, ``task``, ``api``, ``tx``, ``step_trace``,
``aicpu``, ``l2_cache`` and ``aicore_freq``; port ``stats`` carries full snapshots of kind ``op_statistic``
and ``api_statistic``. Their bodies are Arrow tables with the columns below, in this order (typed schemas in
stages/tables.py); ``run_info`` is one msgpack row holding a dict of the run's facts.
Text columns (``*_TEXT_COLUMNS``) are symbol ids; each batch's ``meta["symbols"]`` lists the
``[id, text]`` pairs its port has not sent before, so a sink keeps a :class:`SymbolTable`.
New columns are only ever appended, so a sink that reads the first ones keeps working.

All times are integer nanoseconds of local wall clock.
"""

from __future__ import annotations

from typing import Any

import msgpack

from pipeline.stage import Batch

TASK_COLUMNS = (
    "device_id", "model_id", "iteration", "stream_id", "task_id", "batch_id", "start_ns", "end_ns",
    "op_name", "op_type", "task_type", "op_state", "block_dim", "mix_block_dim", "connection_id",
    "thread_id", "input_shapes", "input_dtypes", "input_formats", "output_shapes", "output_dtypes",
    "output_formats", "pmu", "context_id", "kernel_name", "runtime_task_type", "hf32_eligible",
)
# Symbol-valued task columns; ``pmu`` is a list of float|None aligned with meta["pmu_columns"], then (STARS chips)
# meta["hidden_pmu_columns"]: metrics msprof keeps out of op_summary but writes to its database. ``context_id``
# is an FFTS+ task's context (the row times that context) or CONTEXT_ID_NONE. ``kernel_name``: the runtime's
# kernel name (task_track → hash_dic), "N/A" when not in the dictionary, "" when the data has none (legacy).
# ``task_type`` is the op's core type (op_summary's Task Type: AI_CORE …), ``runtime_task_type`` the runtime's
# name of the task (task_track type: KERNEL_AICORE …; msprof's TASK.taskType); ``hf32_eligible`` YES / NO from
# GE's op flag, N/A without node_basic_info.
TASK_TEXT_COLUMNS = ("op_name", "op_type", "task_type", "op_state", "input_shapes", "input_dtypes",
                     "input_formats", "output_shapes", "output_dtypes", "output_formats", "kernel_name",
                     "runtime_task_type", "hf32_eligible")

API_COLUMNS = ("start_ns", "end_ns", "level", "struct_type", "name", "thread_id", "connection_id", "item_id")
API_TEXT_COLUMNS = ("struct_type", "name")

TX_COLUMNS = ("start_ns", "end_ns", "process_id", "thread_id", "category", "event_type", "payload_type",
              "payload_value", "message_type", "message", "domain", "mark_id")
TX_TEXT_COLUMNS: tuple[str, ...] = ()  # the message travels as text: messages often number what they mark

# One finished iteration of a (device, model) from the step-trace keypoints (stages/aggregator/steps.py);
# None where the keypoint is absent; ``reduces`` is a list of [start_ns, end_ns | None] (all-reduce tags).
STEP_TRACE_COLUMNS = ("device_id", "model_id", "iteration_id", "fp_start_ns", "bp_end_ns", "iteration_end_ns",
                      "iteration_ns", "fp_bp_ns", "refresh_ns", "data_aug_ns", "reduces")
# One AI CPU kernel record; ``node`` (a symbol) is the op name of the AI_CPU task it joined, "" when none.
# Durations are None where the record has none.
AICPU_COLUMNS = ("device_id", "start_ns", "node", "compute_ns", "memcpy_ns", "task_ns", "dispatch_ns",
                 "total_ns", "stream_id", "task_id")
AICPU_TEXT_COLUMNS = ("node",)
# One L2 cache record; ``sequence`` is its arrival index on the device (msprof keeps file order); rates are
# None where msprof shows N/A (hit rate on STARS chips); ``op_name`` "" when no task took the record.
L2_CACHE_COLUMNS = ("device_id", "stream_id", "task_id", "hit_rate", "victim_rate", "op_name", "sequence")
L2_CACHE_TEXT_COLUMNS = ("op_name",)
# AI Core frequency change points, on the chips where msprof exports them (AICORE_FREQ: 910B and 310B class)
AICORE_FREQ_COLUMNS = ("device_id", "ts_ns", "freq_mhz")
AICORE_FREQ_PLATFORMS = frozenset({5, 7})

OP_STATISTIC_COLUMNS = ("device_id", "op_type", "core_type", "count", "total_ns", "min_ns", "max_ns")
API_STATISTIC_COLUMNS = ("level", "name", "count", "total_ns", "min_ns", "max_ns", "sum_sq_us2")

MODEL_ID_NONE = 4294967295
CONTEXT_ID_NONE = 4294967295


class SymbolTable:
    """Run-level string interning on the sending side; lookup on the receiving side."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {"": 0}
        self._texts: list[str] = [""]
        self._unsent: list[list[Any]] = []

    def intern(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = len(self._texts)
            self._ids[text] = found
            self._texts.append(text)
            self._unsent.append([found, text])
        return found

    def take_unsent(self) -> list[list[Any]]:
        unsent, self._unsent = self._unsent, []
        return unsent

    def learn(self, pairs: list[list[Any]]) -> None:
        for sym_id, text in pairs:
            while len(self._texts) <= sym_id:
                self._texts.append("")
            self._texts[sym_id] = text
            self._ids[text] = sym_id

    def __getitem__(self, sym_id: int) -> str:
        return self._texts[sym_id]

    @property
    def texts(self) -> list[str]:
        """Every text by its id (read only): indexing it costs a hot loop less than ``table[sym_id]``."""
        return self._texts


def pack_rows(kind: str, rows: list[tuple[Any, ...]] | list[list[Any]], port: str,
              meta: dict[str, Any] | None = None) -> Batch:
    return Batch(kind=kind, count=len(rows), meta=meta or {}, body=msgpack.packb(rows, use_bin_type=True),
                 port=port)


def unpack_rows(batch: Batch) -> list[list[Any]]:
    """Positional rows of a batch: msgpack rows, or the rows of a column batch (stages/tables.py)."""
    if batch.body[:4] == b"\xff\xff\xff\xff":  # an Arrow IPC stream (msgpack rows never open so)
        from stages import tables  # pyarrow: only for the readers of column batches

        return tables.rows_of_table(tables.unpack_table(batch))
    rows: list[list[Any]] = msgpack.unpackb(batch.body, raw=False, use_list=True)
    return rows
