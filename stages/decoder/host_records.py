"""Decoded kinds of the legacy host records (CANN ≤ 6) and of the host records the join does not
need yet: numpy dtypes, times in local wall-clock ns. Registered in records.DTYPES."""

from __future__ import annotations

import numpy as np

# Legacy (CANN ≤ 6). An API record whose name travels inline (AclModule, Runtime.api); `type` holds the
# ACL api class in its high 16 bits, as the current type ids do.
NAMED_API = np.dtype([("thread_id", "<u4"), ("level", "<u2"), ("type", "<u4"), ("item_id", "<u8"),
                      ("request_id", "<u4"), ("start_ns", "<i8"), ("end_ns", "<i8"), ("process_id", "<u4"),
                      ("name", "S64")])
# Framework.task_desc_info: an op's description, keyed by (device, stream, task, batch); names as a hash_dic
# key or inline text (`*_inline` says which).
GE_TASK = np.dtype([("thread_id", "<u4"), ("ts_ns", "<i8"), ("device_id", "<u2"), ("model_id", "<u4"),
                    ("iteration", "<u8"), ("stream_id", "<u2"), ("task_id", "<u2"), ("batch_id", "<u2"),
                    ("context_id", "<u4"), ("task_type", "<u4"), ("shape_type", "<u4"), ("block_num", "<u4"),
                    ("op_name", "<u8"), ("op_type", "<u8"), ("name_inline", "u1"), ("type_inline", "u1"),
                    ("op_name_text", "S120"), ("op_type_text", "S56")])
GE_TENSOR = np.dtype([("device_id", "<u2"), ("model_id", "<u4"), ("iteration", "<u8"), ("stream_id", "<u2"),
                      ("task_id", "<u2"), ("batch_id", "<u2"), ("tensor_num", "<u4"), ("tensors", "<u4", (5, 11))])
# Runtime.task_track (legacy): the runtime's record of one task launch, task type as text.
RT_TRACK = np.dtype([("thread_id", "<u4"), ("ts_ns", "<i8"), ("device_id", "<u2"), ("stream_id", "<u2"),
                     ("task_id", "<u2"), ("batch_id", "<u2"), ("task_type", "S32")])
GE_ID_MAP = np.dtype([("ts_ns", "<i8"), ("device_id", "<u2"), ("graph_id", "<u4"), ("model_id", "<u4"),
                      ("session_id", "<u4"), ("mode", "<u2")])
# Framework.model_load_info / fusion_op_info / model_time_info / dynamic_op_execute: the model or fused op
# name as a hash_dic key or inline text (`name_inline`).
_GE_NAMED = [("device_id", "<u2"), ("model_id", "<u4"), ("name_inline", "u1"), ("name", "<u8"), ("name_text", "S120")]
GE_MODEL_LOAD = np.dtype(_GE_NAMED + [("start_ns", "<i8"), ("end_ns", "<i8")])
GE_FUSION = np.dtype(_GE_NAMED + [("input_mem", "<u8"), ("output_mem", "<u8"), ("weight_mem", "<u8"),
                                  ("workspace_mem", "<u8"), ("total_mem", "<u8"), ("fusion_op_num", "<u8"),
                                  ("fusion_ops", "<u8", (8,))])
# times: input data start/end, inference start/end, output data start/end
GE_MODEL_TIME = np.dtype(_GE_NAMED + [("request_id", "<u4"), ("thread_id", "<u4"), ("times_ns", "<i8", (6,))])
GE_HOST_SCHED = np.dtype([("device_id", "<u2"), ("thread_id", "<u4"), ("element", "<u8"), ("event", "<u8"),
                          ("start_ns", "<i8"), ("end_ns", "<i8")])

# Current compact / additional records not joined yet.
_HEAD = [("thread_id", "<u4"), ("ts_ns", "<i8")]
NODE_ATTR = np.dtype(_HEAD + [("op_name", "<u8"), ("attr_type", "<u4"), ("hash_id", "<u8")])
MEMCPY = np.dtype(_HEAD + [("data_size", "<u8"), ("direction", "<u2"), ("device_id", "<u2"), ("stream_id", "<u4")])
HCCL_OP = np.dtype(_HEAD + [("relay", "u1"), ("retry", "u1"), ("data_type", "u1"), ("alg_type", "<u8"),
                            ("count", "<u8"), ("group_name", "<u8")])
CAPTURE_STREAM = np.dtype(_HEAD + [("capture_status", "<u2"), ("model_stream_id", "<u2"),
                                   ("original_stream_id", "<u2"), ("model_id", "<u2"), ("device_id", "<u2")])
CONTEXT_ID = np.dtype(_HEAD + [("op_name", "<u8"), ("ctx_id_num", "<u4"), ("ctx_ids", "<u4", (55,))])
GRAPH_ID_MAP = np.dtype(_HEAD + [("model_name", "<u8"), ("graph_id", "<u4"), ("model_id", "<u4")])
FUSION_OP = np.dtype(_HEAD + [("op_name", "<u8"), ("fusion_op_num", "<u4"), ("input_mem", "<u8"),
                              ("output_mem", "<u8"), ("weight_mem", "<u8"), ("workspace_mem", "<u8"),
                              ("total_mem", "<u8"), ("fusion_op_ids", "<u8", (8,))])
HCCL_INFO = np.dtype(_HEAD + [("item_id", "<u8"), ("ccl_tag", "<u8"), ("group_name", "<u8"), ("local_rank", "<u4"),
                              ("remote_rank", "<u4"), ("rank_size", "<u4"), ("work_flow_mode", "<u4"),
                              ("plane_id", "<u4"), ("ctx_id", "<u4"), ("notify_id", "<u8"), ("stage", "<u4"),
                              ("role", "<u4"), ("duration_estimated", "<f8"), ("src_addr", "<u8"),
                              ("dst_addr", "<u8"), ("data_size", "<u8"), ("op_type", "<u4"), ("data_type", "<u4"),
                              ("link_type", "<u4"), ("transport_type", "<u4"), ("rdma_type", "<u4")])
MULTI_THREAD = np.dtype(_HEAD + [("thread_num", "<u4"), ("thread_ids", "<u4", (25,))])

# Stream kind (host_extra) → decoded kind
EXTRA_KINDS = {"node_attr_info": "node_attr", "memcpy_info": "memcpy", "hccl_op_info": "hccl_op",
               "capture_stream_info": "capture_stream", "context_id_info": "context_id",
               "graph_id_map": "graph_id_map", "fusion_op_info": "fusion_op", "hccl_info": "hccl_info",
               "multi_thread": "multi_thread"}
DTYPES = {"named_api": NAMED_API, "ge_task": GE_TASK, "ge_tensor": GE_TENSOR, "rt_track": RT_TRACK,
          "ge_id_map": GE_ID_MAP, "ge_model_load": GE_MODEL_LOAD, "ge_fusion": GE_FUSION,
          "ge_model_time": GE_MODEL_TIME, "ge_host_sched": GE_HOST_SCHED, "node_attr": NODE_ATTR, "memcpy": MEMCPY,
          "hccl_op": HCCL_OP,
          "capture_stream": CAPTURE_STREAM, "context_id": CONTEXT_ID, "graph_id_map": GRAPH_ID_MAP,
          "fusion_op": FUSION_OP, "hccl_info": HCCL_INFO, "multi_thread": MULTI_THREAD}
