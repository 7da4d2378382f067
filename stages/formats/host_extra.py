"""Compact and additional host records beyond those the join needs (CANN's prof_common.h).

Layouts: the payload structs of CANN's `aprof_pub.h` / `prof_common.h` (MsprofAttrInfo, MsprofMemcpyInfo,
MsprofHCCLOPInfo, MsprofCaptureStreamInfo, MsprofContextIdInfo, MsprofGraphIdInfo, ProfFusionOpInfo,
MsprofHcclInfo, MsprofMultiThread) behind the common 24-byte header, at the sizes msprof's format
strings give (`StructFmt` NODE_ATTR_INFO_FMT, MEMCPY_INFO_FMT, HCCL_OP_INFO_FMT, CAPTURE_STREAM_INFO_FMT,
CTX_ID_FMT, GRAPH_ADD_INFO_FMT, FUSION_ADD_INFO_FMT, HCCL_INFO_FMT, MULTI_THREAD_FMT). Every field is at
the offset msprof reads it from; trailing padding is left out of the field lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stages.formats.files import StreamKind

COMPACT_SIZE, ADDITIONAL_SIZE = 64, 256
HEADER = [("magic", "<u2"), ("level", "<u2"), ("type", "<u4"), ("thread_id", "<u4"), ("data_len", "<u4"),
          ("timestamp", "<u8")]


def _record(fields: list, size: int) -> np.dtype:
    """Header + payload fields (packed), padded to ``size``."""
    packed = np.dtype(HEADER + fields)
    assert packed.itemsize <= size, (fields, packed.itemsize, size)
    names = list(packed.names or ())
    layout: Any = packed.fields
    spec: Any = {"names": names, "formats": [layout[n][0] for n in names], "offsets": [layout[n][1] for n in names],
                 "itemsize": size}
    return np.dtype(spec)


# Compact (64 B)
NODE_ATTR_INFO = _record([("op_name", "<u8"), ("attr_type", "<u4"), ("hash_id", "<u8")], COMPACT_SIZE)
MEMCPY_INFO = _record([("data_size", "<u8"), ("direction", "<u2"), ("device_id", "<u2"), ("stream_id", "<u4")],
                      COMPACT_SIZE)
HCCL_OP_INFO = _record([("flags", "u1"), ("data_type", "u1"), ("alg_type", "<u8"), ("count", "<u8"),
                        ("group_name", "<u8")], COMPACT_SIZE)  # flags: bit 0 relay, bit 1 retry
CAPTURE_STREAM_INFO = _record([("capture_status", "<u2"), ("model_stream_id", "<u2"), ("original_stream_id", "<u2"),
                               ("model_id", "<u2"), ("device_id", "<u2")], COMPACT_SIZE)
# Additional (256 B)
CTX_ID_MAX = 55
CONTEXT_ID_INFO = _record([("op_name", "<u8"), ("ctx_id_num", "<u4"), ("ctx_ids", "<u4", (CTX_ID_MAX,))],
                          ADDITIONAL_SIZE)
GRAPH_ID_MAP = _record([("model_name", "<u8"), ("graph_id", "<u4"), ("model_id", "<u4")], ADDITIONAL_SIZE)
FUSION_OP_MAX = 8
FUSION_OP_INFO = _record([("op_name", "<u8"), ("fusion_op_num", "<u4"), ("input_mem", "<u8"), ("output_mem", "<u8"),
                          ("weight_mem", "<u8"), ("workspace_mem", "<u8"), ("total_mem", "<u8"),
                          ("fusion_op_ids", "<u8", (FUSION_OP_MAX,))], ADDITIONAL_SIZE)
# MsprofHcclInfo (pack 4): the header's timestamp is followed by the HCCL task fields.
HCCL_INFO = _record([("item_id", "<u8"), ("ccl_tag", "<u8"), ("group_name", "<u8"), ("local_rank", "<u4"),
                     ("remote_rank", "<u4"), ("rank_size", "<u4"), ("work_flow_mode", "<u4"), ("plane_id", "<u4"),
                     ("ctx_id", "<u4"), ("notify_id", "<u8"), ("stage", "<u4"), ("role", "<u4"),
                     ("duration_estimated", "<f8"), ("src_addr", "<u8"), ("dst_addr", "<u8"), ("data_size", "<u8"),
                     ("op_type", "<u4"), ("data_type", "<u4"), ("link_type", "<u4"), ("transport_type", "<u4"),
                     ("rdma_type", "<u4")], ADDITIONAL_SIZE)
MULTI_THREAD_MAX = 25
MULTI_THREAD = _record([("thread_num", "<u4"), ("thread_ids", "<u4", (MULTI_THREAD_MAX,))], ADDITIONAL_SIZE)

# Report types (aprof_pub.h MSPROF_REPORT_*, runtime RT_PROFILE_TYPE_*)
NODE_ATTR_INFO_TYPE, NODE_CONTEXT_ID_INFO_TYPE, NODE_FUSION_OP_INFO_TYPE, NODE_HCCL_OP_INFO_TYPE = 9, 4, 2, 10
MODEL_GRAPH_ID_MAP_TYPE = 0
RUNTIME_MEMCPY_INFO_TYPE, RUNTIME_CAPTURE_STREAM_INFO_TYPE = 801, 803
COMPACT_DATA_LEN, ADDITIONAL_DATA_LEN = COMPACT_SIZE - 24, ADDITIONAL_SIZE - 24

# Stream kind name → raw layout; file tag (after `aging.`/`unaging.`) → stream kind.
LAYOUTS = {"node_attr_info": NODE_ATTR_INFO, "memcpy_info": MEMCPY_INFO, "hccl_op_info": HCCL_OP_INFO,
           "capture_stream_info": CAPTURE_STREAM_INFO, "context_id_info": CONTEXT_ID_INFO,
           "graph_id_map": GRAPH_ID_MAP, "fusion_op_info": FUSION_OP_INFO, "hccl_info": HCCL_INFO,
           "multi_thread": MULTI_THREAD}
_GROUP = {"node_attr_info": "compact", "memcpy_info": "compact", "hccl_op_info": "compact",
          "capture_stream_info": "compact", "context_id_info": "additional", "graph_id_map": "additional",
          "fusion_op_info": "additional", "hccl_info": "additional", "multi_thread": "additional"}
STREAM_KINDS = {name: StreamKind(name, "fixed", layout.itemsize, b"\x5a\x5a", 0, True)
                for name, layout in LAYOUTS.items()}
FILE_TAGS = {f"{_GROUP[name]}.{'Multi_Thread' if name == 'multi_thread' else name}": kind
             for name, kind in STREAM_KINDS.items()}
