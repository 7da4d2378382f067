"""Report types the simulated app registers, and the text of the two dictionaries (hash_dic, type_info_dic).

Type ids follow the CANN headers (hicann/runtime `aprof_pub.h`, runtime `profiling_agent.cc`):
runtime task types (task_track taskType) are the TS task type ids, runtime API types are
1000 + rtProfApiType, task_track's own header type is 802. ACL types are (class << 16) | index with
the class of CANN's report levels; the indices are this app's own registrations.
"""

from __future__ import annotations

from stages.formats import host_extra, raw

# ACL API (level 20000): name -> type.
ACL_MODEL, ACL_RTS, ACL_OTHERS = 2, 3, 4
ACL_APIS = {
    "aclmdlLoadFromFile": (ACL_MODEL << 16) | 1,
    "aclmdlExecute": (ACL_MODEL << 16) | 2,
    "aclmdlCreateDataset": (ACL_MODEL << 16) | 3,
    "aclmdlAddDatasetBuffer": (ACL_MODEL << 16) | 4,
    "aclmdlDestroyDataset": (ACL_MODEL << 16) | 5,
    "aclmdlUnload": (ACL_MODEL << 16) | 6,
    "aclrtMemcpy": (ACL_RTS << 16) | 1,
    "aclCreateDataBuffer": (ACL_OTHERS << 16) | 1,
    "aclDestroyDataBuffer": (ACL_OTHERS << 16) | 2,
}

# Runtime API (level 5000): name -> 1000 + rtProfApiType.
RUNTIME_APIS = {
    "KernelLaunch": 1003,
    "StreamCreate": 1006,
    "StreamDestroy": 1007,
    "StreamSynchronize": 1009,
    "DevMalloc": 1014,
    "DevFree": 1015,
    "MemCopySync": 1020,
    "ModelBindStream": 1036,
    "ModelExecute": 1039,
    "CpuKernelLaunch": 1072,
}

# Runtime task types (task_track.taskType) and the task_track header type.
TASK_KERNEL_AICORE, TASK_KERNEL_AICPU, TASK_FLIP = 0, 1, 98
TASK_KERNEL_AIVEC = 66  # TS_TASK_TYPE_KERNEL_AIVEC (hicann/runtime task_base.hpp)
TASK_FFTS_PLUS = 52  # TS_TASK_TYPE_FFTS_PLUS (same header)
TASK_TYPES = {TASK_KERNEL_AICORE: "KERNEL_AICORE", TASK_KERNEL_AICPU: "KERNEL_AICPU", TASK_FLIP: "FLIP_TASK",
              TASK_KERNEL_AIVEC: "KERNEL_AIVEC", TASK_FFTS_PLUS: "FFTS_PLUS"}
TASK_TRACK_TYPE = 802

# Node level (10000) and model level (15000) report types.
NODE_BASIC_INFO_TYPE, TENSOR_INFO_TYPE, NODE_LAUNCH_TYPE = 0, 1, 5
NODE_TYPES = {NODE_BASIC_INFO_TYPE: "node_basic_info", TENSOR_INFO_TYPE: "tensor_info", NODE_LAUNCH_TYPE: "launch",
              host_extra.NODE_CONTEXT_ID_INFO_TYPE: "context_id_info"}
MODEL_TYPES = {raw.MODEL_EXECUTE_TYPE: "ModelExecute", raw.MODEL_LOAD_TYPE: "ModelLoad"}
MSPROFTX_TYPE = 0


def type_info_lines() -> list[str]:
    """`{level}_{type}:{name}` lines of additional.type_info_dic."""
    table: list[tuple[int, int, str]] = []
    table += [(raw.LEVEL_ACL, type_, name) for name, type_ in ACL_APIS.items()]
    table += [(raw.LEVEL_MODEL, type_, name) for type_, name in MODEL_TYPES.items()]
    table += [(raw.LEVEL_NODE, type_, name) for type_, name in NODE_TYPES.items()]
    table += [(raw.LEVEL_RUNTIME, type_, name) for name, type_ in RUNTIME_APIS.items()]
    table += [(raw.LEVEL_RUNTIME, type_, name) for type_, name in TASK_TYPES.items()]
    table += [(raw.LEVEL_RUNTIME, TASK_TRACK_TYPE, "task_track"), (raw.LEVEL_MSPROFTX, MSPROFTX_TYPE, "msproftx"),
              (raw.LEVEL_RUNTIME, host_extra.RUNTIME_MEMCPY_INFO_TYPE, "memcpy_info"),
              (raw.LEVEL_MODEL, host_extra.MODEL_GRAPH_ID_MAP_TYPE, "graph_id_map")]
    return [f"{level}_{type_}:{name}" for level, type_, name in table]


def api_name(level: int, type_: int) -> str:
    """Name of an API record the way api_statistic names it (type dictionary)."""
    for lvl, type_id, name in _API_NAMES:
        if lvl == level and type_id == type_:
            return name
    raise KeyError((level, type_))


_API_NAMES = (
    [(raw.LEVEL_ACL, t, n) for n, t in ACL_APIS.items()]
    + [(raw.LEVEL_RUNTIME, t, n) for n, t in RUNTIME_APIS.items()]
    + [(raw.LEVEL_MODEL, t, n) for t, n in MODEL_TYPES.items()]
    + [(raw.LEVEL_NODE, NODE_LAUNCH_TYPE, "launch")]
)
