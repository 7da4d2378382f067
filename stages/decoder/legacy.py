"""Legacy host records (CANN ≤ 6): AclModule, Framework task/tensor/step/id-map, Runtime track and API.

They sit beside the device data (`device_N/data/<name>.N.slice_K`, or `JOB…/data/`), so each chunk names
its device; their times are host monotonic ns (TimeBase.legacy_host_clock). A record whose data tag
is not its struct's is rejected with the tag it carried.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pipeline.stage import Batch
from stages.decoder import host_records, records
from stages.decoder.timebase import Clock, TimeBase
from stages.formats import legacy, raw

Reject = Callable[[str, int, bytes], None]
Output = list[tuple[str, "np.ndarray | Batch"]]
LAYOUTS = {legacy.LEGACY_ACL.name: legacy.ACL, legacy.LEGACY_GE_TASK.name: legacy.GE_TASK,
           legacy.LEGACY_GE_TENSOR.name: legacy.GE_TENSOR, legacy.LEGACY_GE_STEP.name: legacy.GE_STEP,
           legacy.LEGACY_GE_ID_MAP.name: legacy.GE_ID_MAP, legacy.LEGACY_RT_TRACK.name: legacy.RT_TRACK,
           legacy.LEGACY_RT_API.name: legacy.RT_API, legacy.LEGACY_GE_MODEL_LOAD.name: legacy.GE_MODEL_LOAD,
           legacy.LEGACY_GE_FUSION.name: legacy.GE_FUSION, legacy.LEGACY_GE_MODEL_TIME.name: legacy.GE_MODEL_TIME,
           legacy.LEGACY_GE_HOST_SCHED.name: legacy.GE_HOST_SCHED}
# Model-level GE records no output uses yet: stream kind → (decoded kind, fields copied as they are)
_MODEL_RECORDS = {legacy.LEGACY_GE_MODEL_LOAD.name: ("ge_model_load", ("model_id",)),
                  legacy.LEGACY_GE_FUSION.name: ("ge_fusion", ("model_id", "input_mem", "output_mem", "weight_mem",
                                                               "workspace_mem", "total_mem", "fusion_op_num",
                                                               "fusion_ops")),
                  legacy.LEGACY_GE_MODEL_TIME.name: ("ge_model_time", ("model_id", "request_id", "thread_id")),
                  legacy.LEGACY_GE_HOST_SCHED.name: ("ge_host_sched", ("thread_id", "element", "event"))}
KINDS = frozenset(LAYOUTS)
STREAM_ID_MODULO = 2048  # msprof keeps the low 11 bits of a stream id


class LegacyDecoder:
    def __init__(self, timebase: TimeBase, reject: Reject) -> None:
        self.timebase = timebase
        self.reject = reject

    def decode(self, kind: str, batch: Batch) -> Output:
        device = int(batch.meta["device"])
        clock = self.timebase.legacy_host_clock(device)
        assert clock is not None
        arr = np.frombuffer(batch.body, dtype=LAYOUTS[kind])
        arr = self._keep(kind, arr, arr["data_tag"] == legacy.DATA_TAGS[kind],
                         f"data tag is not {legacy.DATA_TAGS[kind]}")
        if kind == legacy.LEGACY_ACL.name:
            return [("named_api", self._apis(kind, arr, raw.LEVEL_ACL, arr["api_type"].astype(np.uint32) << 16,
                                             arr["begin"], arr["end"], clock))]
        if kind == legacy.LEGACY_RT_API.name:
            return [("named_api", self._apis(kind, arr, raw.LEVEL_RUNTIME, 0, arr["entry"], arr["exit"], clock))]
        if kind == legacy.LEGACY_GE_TASK.name:
            return [("ge_task", self._ge_tasks(kind, arr, device, clock))]
        if kind == legacy.LEGACY_GE_TENSOR.name:
            out = np.zeros(len(arr), host_records.GE_TENSOR)
            for name in ("model_id", "stream_id", "task_id", "batch_id", "tensor_num", "tensors"):
                out[name] = arr[name]
            out["stream_id"] %= STREAM_ID_MODULO
            out["iteration"] = arr["cur_iter"]
            out["device_id"] = device
            return [("ge_tensor", out)]
        if kind == legacy.LEGACY_GE_STEP.name:
            return [("event", self._steps(kind, arr, clock))]
        if kind in _MODEL_RECORDS:
            return [self._model_records(kind, arr, device, clock)]
        if kind == legacy.LEGACY_GE_ID_MAP.name:
            out = np.zeros(len(arr), host_records.GE_ID_MAP)
            for name in ("graph_id", "model_id", "session_id", "mode"):
                out[name] = arr[name]
            out["device_id"] = device
            out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
            return [("ge_id_map", out)]
        out = np.zeros(len(arr), host_records.RT_TRACK)
        for name in ("thread_id", "task_id", "batch_id", "task_type"):
            out[name] = arr[name]
        out["stream_id"] = arr["stream_id"] % STREAM_ID_MODULO
        out["device_id"] = device
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return [("rt_track", out)]

    def _keep(self, kind: str, arr: np.ndarray, ok: np.ndarray, reason: str) -> np.ndarray:
        """The records where ``ok``; the others are rejected with ``reason``."""
        if ok.all():
            return arr
        self.reject(f"{kind}: {reason}", int((~ok).sum()), arr[~ok].tobytes())
        kept: np.ndarray = arr[ok]
        return kept

    def _apis(self, kind: str, arr: np.ndarray, level: int, type_: np.ndarray | int, begin: np.ndarray,
              end: np.ndarray, clock: Clock) -> np.ndarray:
        keep = begin != 0
        arr = self._keep(kind, arr, keep, "zero begin time")
        if isinstance(type_, np.ndarray):
            type_ = type_[keep]
        out = np.zeros(len(arr), host_records.NAMED_API)
        out["thread_id"] = arr["thread_id"]
        out["level"] = level
        out["type"] = type_
        out["process_id"] = arr["process_id"] if "process_id" in (arr.dtype.names or ()) else 0
        out["start_ns"] = clock.to_local_ns(begin[keep])
        out["end_ns"] = clock.to_local_ns(end[keep])
        out["name"] = arr["api_name"]
        return out

    def _ge_tasks(self, kind: str, arr: np.ndarray, device: int, clock: Clock) -> np.ndarray:
        mixed = (arr["op_name_kind"] <= legacy.MIX_STRING) & (arr["op_type_kind"] <= legacy.MIX_STRING)
        arr = self._keep(kind, arr, mixed, "op name or type is neither a hash (0) nor text (1)")
        out = np.zeros(len(arr), host_records.GE_TASK)
        for name in ("thread_id", "model_id", "task_id", "batch_id", "context_id", "task_type", "shape_type"):
            out[name] = arr[name]
        out["stream_id"] = arr["stream_id"] % STREAM_ID_MODULO
        out["device_id"] = device
        out["iteration"] = arr["cur_iter"]
        out["block_num"] = arr["block_dims"]
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        for side in ("name", "type"):
            inline = arr[f"op_{side}_kind"] == legacy.MIX_STRING
            out[f"{side}_inline"] = inline
            out[f"op_{side}"] = np.where(inline, 0, arr[f"op_{side}_hash"])
            out[f"op_{side}_text"] = np.where(inline, arr[f"op_{side}"], b"")
        return out

    def _model_records(self, kind: str, arr: np.ndarray, device: int, clock: Clock) -> tuple[str, np.ndarray]:
        out_kind, fields = _MODEL_RECORDS[kind]
        named = "name_kind" in (arr.dtype.names or ())
        if named:
            arr = self._keep(kind, arr, arr["name_kind"] <= legacy.MIX_STRING, "name is neither a hash (0) nor text")
        out = np.zeros(len(arr), host_records.DTYPES[out_kind])
        for name in fields:
            out[name] = arr[name]
        out["device_id"] = device
        if named:
            inline = arr["name_kind"] == legacy.MIX_STRING
            out["name_inline"] = inline
            out["name"] = np.where(inline, 0, arr["name_hash"])
            out["name_text"] = np.where(inline, arr["name"], b"")
        for raw_name, name in (("times", "times_ns"), ("start", "start_ns"), ("end", "end_ns")):
            if name in (out.dtype.names or ()):
                out[name] = clock.to_local_ns(arr[raw_name])
        return out_kind, out

    def _steps(self, kind: str, arr: np.ndarray, clock: Clock) -> np.ndarray:
        """Model execution begin/end (tag 0/1): the ModelExecute event pair of the current reporter."""
        arr = self._keep(kind, arr, arr["tag"] <= legacy.GE_STEP_END, "step tag is neither begin (0) nor end (1)")
        out = np.zeros(len(arr), records.EVENT)
        out["thread_id"] = arr["thread_id"]
        out["level"] = raw.LEVEL_MODEL
        out["type"] = raw.MODEL_EXECUTE_TYPE
        out["item_id"] = arr["model_id"]
        out["request_id"] = arr["cur_iter"]
        out["ts_ns"] = clock.to_local_ns(arr["timestamp"])
        return out

