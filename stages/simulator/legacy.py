"""The simulated board in the CANN 5/6 layout (its legacy file names and host records).

The board produces the current reporter's records; `to_legacy` rewrites one batch of them as the older
components wrote them, into per-device files beside the device data (`device_0/data/`):

    api_event ACL records     → AclModule.{acl_op,acl_model,acl_rts,acl_others}.0 (API name inline)
    api_event runtime records → Runtime.api.0 (name inline)
    ModelExecute event pair   → Framework.step_info.0 (tag 0 begin, 1 end)
    graph_id_map              → Framework.id_map_info.0
    hash_dic                  → Framework.hash_dic.0 (only the names GE hashes)
Node-level launch APIs, the type dictionary, msproftx and memcpy_info have no legacy counterpart and
are left out. Tasks are written by `tasks()`: per launch, Runtime.task_track.0 (task type as text),
then Framework.task_desc_info.0 (GE reports an op just after the runtime launched it) and
Framework.tensor_data_info.0.
"""

from __future__ import annotations

import numpy as np

from stages.formats import host_extra, legacy, raw
from stages.simulator import names
from stages.simulator.records import Chunk, merge

Part = tuple[np.ndarray, np.ndarray]
Emission = dict[str, Chunk]
# GE writes an op name inline up to the MsprofMixData text size (119 characters) and hashes longer ones;
# the simulated model's names are all short, so the simulator hashes from this length on, to write both forms.
INLINE_NAME_MAX = 24
GE_REPORT_DELAY_NS = 300  # GE reports an op this long after the runtime's task track
ACL_FILES = {1: "acl_op", 2: "acl_model", 3: "acl_rts", 4: "acl_others"}
SHAPE_STATIC = 0


def streams(device_id: int) -> dict[str, str]:
    """Legacy stream → file base (`{base}.slice_K` in device_N/data)."""
    bases = {f"acl.{cls}": f"AclModule.{name}" for cls, name in ACL_FILES.items()}
    bases.update(rt_api="Runtime.api", rt_track="Runtime.task_track", ge_task="Framework.task_desc_info",
                 ge_tensor="Framework.tensor_data_info", ge_step="Framework.step_info",
                 ge_id_map="Framework.id_map_info", ge_hash="Framework.hash_dic")
    return {key: f"{base}.{device_id}" for key, base in bases.items()}


def hashed(name: str) -> bool:
    """Does GE report this op name as a hash_dic key (else inline)?"""
    return len(name) >= INLINE_NAME_MAX


def _names(level: int, types: np.ndarray) -> np.ndarray:
    return np.array([names.api_name(level, int(t)).encode() for t in types], dtype="S64")


def _apis(recs: np.ndarray, emit: np.ndarray, pid: int, bases: dict[str, str]) -> list[tuple[str, Part]]:
    parts: list[tuple[str, Part]] = []
    acl = recs["level"] == raw.LEVEL_ACL
    for cls in ACL_FILES:
        sel = acl & (recs["type"] >> 16 == cls)
        if sel.any():
            out = np.zeros(int(sel.sum()), legacy.ACL)
            out["magic"] = raw.HOST_MAGIC
            out["data_tag"] = legacy.ACL_TAG
            out["api_type"] = cls
            out["begin"] = recs["begin"][sel]
            out["end"] = recs["end"][sel]
            out["process_id"] = pid
            out["thread_id"] = recs["thread_id"][sel]
            out["api_name"] = _names(raw.LEVEL_ACL, recs["type"][sel])
            parts.append((bases[f"acl.{cls}"], (emit[sel], out)))
    sel = recs["level"] == raw.LEVEL_RUNTIME
    if sel.any():
        out = np.zeros(int(sel.sum()), legacy.RT_API)
        out["magic"] = raw.HOST_MAGIC
        out["data_tag"] = legacy.RT_API_TAG
        out["thread_id"] = recs["thread_id"][sel]
        out["entry"] = recs["begin"][sel]
        out["exit"] = recs["end"][sel]
        out["api_name"] = _names(raw.LEVEL_RUNTIME, recs["type"][sel])
        parts.append((bases["rt_api"], (emit[sel], out)))
    return parts


def _steps(events: np.ndarray, emit: np.ndarray, stream_id: int, bases: dict[str, str]) -> list[tuple[str, Part]]:
    """ModelExecute begin/end events (first of a (model, iteration) pair begins) → step_info."""
    sel = (events["level"] == raw.LEVEL_MODEL) & (events["type"] == raw.MODEL_EXECUTE_TYPE)
    if not sel.any():
        return []
    events, emit = events[sel], emit[sel]
    pair = events["item_id"].astype(np.int64) * (1 << 32) + events["reserve"]
    _, first = np.unique(pair, return_index=True)
    tag = np.full(len(events), legacy.GE_STEP_END, np.uint8)
    tag[first] = legacy.GE_STEP_BEGIN
    out = np.zeros(len(events), legacy.GE_STEP)
    out["magic"] = raw.HOST_MAGIC
    out["data_tag"] = legacy.GE_STEP_TAG
    out["model_id"] = events["item_id"]
    out["stream_id"] = stream_id
    out["timestamp"] = events["begin"]
    out["cur_iter"] = events["reserve"]
    out["thread_id"] = events["thread_id"]
    out["tag"] = tag
    return [(bases["ge_step"], (emit, out))]


def _id_maps(chunk: Chunk, bases: dict[str, str]) -> list[tuple[str, Part]]:
    recs = np.frombuffer(chunk.data, host_extra.GRAPH_ID_MAP)
    out = np.zeros(len(recs), legacy.GE_ID_MAP)
    out["magic"] = raw.HOST_MAGIC
    out["data_tag"] = legacy.GE_ID_MAP_TAG
    out["graph_id"] = recs["graph_id"]
    out["model_id"] = recs["model_id"]
    out["timestamp"] = recs["timestamp"]
    return [(bases["ge_id_map"], (chunk.emit, out))]


def to_legacy(emission: Emission, device_id: int, pid: int, stream_id: int) -> Emission:
    """The legacy files' share of a batch of current-reporter records (`stream_id`: the model's first stream)."""
    bases = streams(device_id)
    parts: list[tuple[str, Part]] = []
    legacy_chunks: Emission = {}
    for key, chunk in emission.items():
        if not chunk.count:
            continue
        if key.endswith(".api_event.data"):
            recs = np.frombuffer(chunk.data, raw.API_EVENT)
            is_event = recs["end"] == np.uint64(raw.EVENT_FLAG)
            parts += _apis(recs[~is_event], chunk.emit[~is_event], pid, bases)
            parts += _steps(recs[is_event], chunk.emit[is_event], stream_id, bases)
        elif key.endswith(".graph_id_map"):
            parts += _id_maps(chunk, bases)
        elif key.endswith(".hash_dic"):
            lines = chunk.data.decode().splitlines()
            kept = [i for i, line in enumerate(lines) if hashed(line.partition(":")[2])]
            data = "".join(f"{lines[i]}\n" for i in kept).encode()
            ends = np.cumsum([len(lines[i]) + 1 for i in kept], dtype=np.int64)
            legacy_chunks[bases["ge_hash"]] = Chunk(chunk.emit[kept], ends, data)
        elif key in bases.values():
            legacy_chunks[key] = chunk  # already legacy (tasks()), or device data
        elif not key.startswith(("aging.", "unaging.")):
            legacy_chunks[key] = chunk
    by_stream: dict[str, list[Part]] = {}
    for base, part in parts:
        by_stream.setdefault(base, []).append(part)
    legacy_chunks.update({base: merge(group) for base, group in by_stream.items()})
    return legacy_chunks


def tasks(bases: dict[str, str], tid: int, track_ts: np.ndarray, stream: np.ndarray, ids: np.ndarray,
          batches: np.ndarray, task_type: np.ndarray, ge_task_type: np.ndarray, op_names: list[str],
          op_hash: np.ndarray, op_types: list[str], block_dim: np.ndarray, model_id: int, iteration: int,
          tensor_rows: np.ndarray, tensor_row_op: np.ndarray, tensor_row_num: np.ndarray) -> Emission:
    """Runtime track, GE task description and GE tensor records of one execution (op order)."""
    n = len(ids)
    track = np.zeros(n, legacy.RT_TRACK)
    track["magic"] = raw.HOST_MAGIC
    track["data_tag"] = legacy.RT_TRACK_TAG
    track["thread_id"] = tid
    track["timestamp"] = track_ts
    track["task_type"] = np.array([names.TASK_TYPES[int(t)].encode() for t in task_type], dtype="S32")
    track["task_id"] = ids
    track["batch_id"] = batches
    track["stream_id"] = stream
    desc_ts = track_ts + GE_REPORT_DELAY_NS
    desc = np.zeros(n, legacy.GE_TASK)
    desc["magic"] = raw.HOST_MAGIC
    desc["data_tag"] = legacy.GE_TASK_TAG
    desc["task_type"] = ge_task_type
    inline = np.array([not hashed(name) for name in op_names])
    desc["op_name_kind"] = np.where(inline, legacy.MIX_STRING, legacy.MIX_HASH)
    desc["op_name"] = np.where(inline, np.array([name.encode() for name in op_names], dtype="S120"), b"")
    desc["op_name_hash"] = np.where(inline, desc["op_name_hash"], op_hash)  # the union's other member
    desc["op_type_kind"] = legacy.MIX_STRING
    desc["op_type"] = np.array([name.encode() for name in op_types], dtype="S56")
    desc["cur_iter"] = iteration
    desc["timestamp"] = desc_ts
    desc["shape_type"] = SHAPE_STATIC
    desc["block_dims"] = block_dim
    desc["model_id"] = model_id
    desc["stream_id"] = stream
    desc["task_id"] = ids
    desc["batch_id"] = batches
    desc["thread_id"] = tid
    desc["context_id"] = 0xFFFFFFFF
    rows = tensor_row_op
    tensor = np.zeros(len(rows), legacy.GE_TENSOR)
    tensor["magic"] = raw.HOST_MAGIC
    tensor["data_tag"] = legacy.GE_TENSOR_TAG
    tensor["model_id"] = model_id
    tensor["cur_iter"] = iteration
    tensor["stream_id"] = stream[rows]
    tensor["task_id"] = ids[rows]
    tensor["batch_id"] = batches[rows]
    tensor["tensor_num"] = tensor_row_num
    tensor["tensors"] = tensor_rows
    return {bases["rt_track"]: merge([(track_ts, track)]), bases["ge_task"]: merge([(desc_ts, desc)]),
            bases["ge_tensor"]: merge([(desc_ts[rows], tensor)])}
