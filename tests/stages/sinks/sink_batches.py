"""Batch builders shared by the sink tests: rows as the aggregator sends them (stages.schema, stages.tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.stage import Batch
from stages.schema import (
    API_COLUMNS,
    API_TEXT_COLUMNS,
    CONTEXT_ID_NONE,
    MODEL_ID_NONE,
    TASK_COLUMNS,
    TASK_TEXT_COLUMNS,
    TX_COLUMNS,
    TX_TEXT_COLUMNS,
    SymbolTable,
    pack_rows,
)
from stages.tables import SCHEMAS, pack_columns

SAMPLES = Path(__file__).resolve().parents[3].parent / "shared" / "samples"
TRACE_VIEW = SAMPLES / "mstt_torch_npu_outputs" / "trace_view.json"
TIMESTAMP = "20240101120000"


class Feed:
    """Builds positional rows with interned text, and batches that carry the new symbols."""

    def __init__(self) -> None:
        self.symbols = SymbolTable()
        self.connection = 0

    def _row(self, columns: tuple[str, ...], text: tuple[str, ...], values: dict[str, Any]) -> list[Any]:
        return [self.symbols.intern(values[c]) if c in text else values[c] for c in columns]

    def task(self, start: int, end: int, **fields: Any) -> list[Any]:
        values: dict[str, Any] = dict(
            device_id=0, model_id=MODEL_ID_NONE, iteration=1, stream_id=3, task_id=1, batch_id=0,
            start_ns=start, end_ns=end, op_name="MatMul_1", op_type="MatMul", task_type="AI_CORE",
            op_state="static", block_dim=8, mix_block_dim=0, connection_id=None, thread_id=100,
            input_shapes="16,16;16,16", input_dtypes="FLOAT16;FLOAT16", input_formats="ND;ND",
            output_shapes="16,16", output_dtypes="FLOAT16", output_formats="ND", pmu=[], context_id=CONTEXT_ID_NONE,
            kernel_name="", runtime_task_type="KERNEL_AICORE", hf32_eligible="NO",
        )
        values.update(fields)
        return self._row(TASK_COLUMNS, TASK_TEXT_COLUMNS, values)

    def api(self, start: int, end: int, **fields: Any) -> list[Any]:
        values: dict[str, Any] = dict(
            start_ns=start, end_ns=end, level=10000, struct_type="ACL_OP", name="MatMul_1", thread_id=100,
            connection_id=None, item_id=0,
        )
        values.update(fields)
        return self._row(API_COLUMNS, API_TEXT_COLUMNS, values)

    def tx(self, start: int, end: int, **fields: Any) -> list[Any]:
        values: dict[str, Any] = dict(
            start_ns=start, end_ns=end, process_id=4242, thread_id=100, category=0, event_type=2,
            payload_type=0, payload_value=0, message_type=0, message="step", domain=0, mark_id=0,
        )
        values.update(fields)
        return self._row(TX_COLUMNS, TX_TEXT_COLUMNS, values)

    def batch(self, kind: str, rows: list[Any], **meta: Any) -> Batch:
        """A batch as the aggregator sends it: a column batch of a row kind, msgpack for ``run_info``."""
        port = "stats" if kind.endswith("statistic") else "tasks"
        pack = pack_columns if kind in SCHEMAS else pack_rows
        return pack(kind, rows, port, {"symbols": self.symbols.take_unsent(), **meta})

    def run_info(self, pid: int = 4242, **extra: Any) -> Batch:
        info = {"pid": pid, "hostname": "board", "devices": {"0": {"platform": 5, "chip": "Ascend910B"}},
                "start_ns": 1_700_000_000_000_000_000, "end_ns": 0, **extra}
        return self.batch("run_info", [[info]])
