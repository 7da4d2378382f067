"""The tables of msprof's ``msprof_{timestamp}.db`` that this pipeline writes (msprof's ``msprof_db.cpp``).

Names, column order, declared types and primary keys are msprof's (its exporter's table
definitions, schema version 1.2.0), so that ``PRAGMA table_info`` of each table equals msprof's.
msprof writes a table only when it has rows for it, except the run-level and enum tables, which
every export has; :attr:`Table.always` marks those. ``OP_STATISTIC`` and ``API_STATISTIC`` are
ours (the live statistics). The enum tables' contents are the id/name pairs msprof writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from stages.sinks._format import MSTX_EVENT_TYPES, NA

INTEGER, TEXT, NUMERIC, REAL = "INTEGER", "TEXT", "NUMERIC", "REAL"
SCHEMA_VERSION = ("1", "2", "0")  # META_DATA: SCHEMA_VERSION_MAJOR / MINOR / MICRO
NA_ID, INVALID_ID = 65534, 65535  # the HCCL enums' "N/A" and "INVALID_TYPE" (UINT16_MAX − 1, UINT16_MAX)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]
    primary_key: str | None = None
    always: bool = False  # in every export, rows or not; else created with its first row

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def create_sql(self) -> str:
        body = ", ".join(f"{name} {kind}{' PRIMARY KEY' if name == self.primary_key else ''}"
                         for name, kind in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({body})"

    def insert_sql(self, verb: str = "INSERT", rows: int = 1) -> str:
        """An INSERT of ``rows`` rows (a multi-row statement when more than one)."""
        values = f"({', '.join('?' * len(self.columns))})"
        return f"{verb} INTO {self.name} ({', '.join(self.column_names)}) VALUES {', '.join([values] * rows)}"


def _table(name: str, spec: str, primary_key: str | None = None, always: bool = False) -> Table:
    """``spec``: "column:TYPE column:TYPE …" in msprof's order."""
    columns = tuple((column, kind) for column, kind in (item.split(":") for item in spec.split()))
    return Table(name, columns, primary_key, always)


def _ints(name: str, columns: str, primary_key: str | None = None) -> Table:
    return _table(name, " ".join(f"{column}:{INTEGER}" for column in columns.split()), primary_key)


def _enum(name: str) -> Table:
    return _table(name, "id:INTEGER name:TEXT", "id", always=True)


STRING_IDS = _table("STRING_IDS", "id:INTEGER value:TEXT", "id", always=True)
SESSION_TIME_INFO = _table("SESSION_TIME_INFO", "startTimeNs:INTEGER endTimeNs:INTEGER", always=True)
NPU_INFO = _table("NPU_INFO", "id:INTEGER name:TEXT", always=True)
RANK_DEVICE_MAP = _table("RANK_DEVICE_MAP", "rankId:INTEGER deviceId:INTEGER", always=True)
HOST_INFO = _table("HOST_INFO", "hostUid:TEXT hostName:TEXT", always=True)
META_DATA = _table("META_DATA", "name:TEXT value:TEXT", always=True)
TASK = _ints("TASK", "startNs endNs deviceId connectionId globalTaskId globalPid taskType contextId streamId taskId "
                     "modelId")
TASK_INDEX = ("TaskIndex", ("startNs", "globalTaskId"))
COMPUTE_TASK_INFO = _ints("COMPUTE_TASK_INFO", "name globalTaskId blockNum mixBlockNum taskType opType inputFormats "
                                               "inputDataTypes inputShapes outputFormats outputDataTypes outputShapes "
                                               "attrInfo opState hf32Eligible gridDim blockDim", "globalTaskId")
COMMUNICATION_SCHEDULE_TASK_INFO = _ints("COMMUNICATION_SCHEDULE_TASK_INFO", "name globalTaskId taskType opType",
                                         "globalTaskId")
CANN_API = _ints("CANN_API", "startNs endNs type globalTid connectionId name", "connectionId")
MSTX_EVENTS = _ints("MSTX_EVENTS", "startNs endNs eventType rangeId category message globalTid endGlobalTid domainId "
                                   "connectionId")
AICORE_FREQ = _table("AICORE_FREQ", "deviceId:INTEGER timestampNs:NUMERIC freq:INTEGER dieId:NUMERIC")
TASK_PMU_INFO = _table("TASK_PMU_INFO", "globalTaskId:INTEGER name:INTEGER value:NUMERIC")
OP_STATISTIC = _table("OP_STATISTIC", "deviceId:INTEGER opType:TEXT coreType:TEXT count:INTEGER totalTimeUs:REAL "
                                      "minTimeUs:REAL avgTimeUs:REAL maxTimeUs:REAL ratio:REAL")
API_STATISTIC = _table("API_STATISTIC", "deviceId:TEXT level:TEXT apiName:TEXT timeUs:REAL count:INTEGER avgUs:REAL "
                                        "minUs:REAL maxUs:REAL variance:REAL")

# -- enums (id → name) -----------------------------------------------------------------------------
# ENUM_API_TYPE as msprof's db reference lists it: the CANN levels and torch_npu's PYTORCH_API types.
API_TYPES = {20000: "acl", 15000: "model", 10000: "node", 5500: "communication", 5000: "runtime",
             50001: "op", 50002: "queue", 50003: "trace", 50004: "mstx"}
MODULES = dict(enumerate(("SLOG", "IDEDD", "SCC", "HCCL", "FMK", "CCU", "DVPP", "RUNTIME", "CCE", "HDC", "DRV",
                          "NET"))) | dict(zip(range(22, 26), ("DEVMM", "KERNEL", "LIBMEDIA", "CCECPU"), strict=True)) \
    | dict(zip(range(27, 46), ("ROS", "HCCP", "ROCE", "TEFUSION", "PROFILING", "DP", "APP", "TS", "TSDUMP", "AICPU",
                               "LP", "TDT", "FE", "MD", "MB", "ME", "IMU", "IMP", "GE"), strict=True)) \
    | dict(zip(range(47, 59), ("CAMERA", "ASCENDCL", "TEEOS", "ISP", "SIS", "HSM", "DSS", "PROCMGR", "BBOX",
                               "AIVECTOR", "TBE", "FV"), strict=True)) \
    | dict(zip(range(60, 78), ("TUNE", "HSS", "FFTS", "OP", "UDF", "HICAID", "TSYNC", "AUDIO", "TPRT",
                               "ASCENDCKERNEL", "ASYS", "ATRACE", "RTC", "SYSMONITOR", "AMP", "ADETECT", "MBUFF",
                               "CUSTOM"), strict=True))
_HCCL_TAIL = {255: "RESERVED", NA_ID: NA, INVALID_ID: "INVALID_TYPE"}
HCCL_DATA_TYPES = dict(enumerate(("INT8", "INT16", "INT32", "FP16", "FP32", "INT64", "UINT64", "UINT8", "UINT16",
                                  "UINT32", "FP64", "BFP16", "INT128"))) \
    | {14: "HIF8", 15: "FP8E4M3", 16: "FP8E5M2", 17: "FP8E8M0"} | _HCCL_TAIL
HCCL_LINK_TYPES = dict(enumerate(("ON_CHIP", "HCCS", "PCIE", "ROCE", "SIO", "HCCS_SW", "STANDARD_ROCE", "UB",
                                  "UBoE"))) | _HCCL_TAIL
HCCL_TRANSPORT_TYPES = dict(enumerate(("SDMA", "RDMA", "LOCAL", "UB", "ROCE"))) | _HCCL_TAIL
HCCL_RDMA_TYPES = {0: "RDMA_SEND_NOTIFY", 1: "RDMA_SEND_PAYLOAD"} | _HCCL_TAIL
MEMCPY_OPERATIONS = dict(enumerate(("host to host", "host to device", "device to host", "device to device",
                                    "managed memory", "addr device to device", "host to device ex",
                                    "device to host ex"))) | {65535: "other"}
OVERLAP_ANALYSIS_TYPES = {0: "COMPUTE", 1: "COMMUNICATION", 2: "COMM_NOT_OVERLAP_COMP", 3: "FREE", 65535: "RESERVE"}

ENUMS: dict[str, dict[int, str]] = {
    "ENUM_API_TYPE": API_TYPES, "ENUM_MODULE": MODULES, "ENUM_HCCL_DATA_TYPE": HCCL_DATA_TYPES,
    "ENUM_HCCL_LINK_TYPE": HCCL_LINK_TYPES, "ENUM_HCCL_TRANSPORT_TYPE": HCCL_TRANSPORT_TYPES,
    "ENUM_HCCL_RDMA_TYPE": HCCL_RDMA_TYPES, "ENUM_MSTX_EVENT_TYPE": MSTX_EVENT_TYPES,
    "ENUM_MEMCPY_OPERATION": MEMCPY_OPERATIONS, "ENUM_OVERLAP_ANALYSIS_TYPE": OVERLAP_ANALYSIS_TYPES,
}
ENUM_TABLES = tuple(_enum(name) for name in ENUMS)

TABLES: dict[str, Table] = {table.name: table for table in (
    STRING_IDS, SESSION_TIME_INFO, NPU_INFO, RANK_DEVICE_MAP, HOST_INFO, TASK, COMPUTE_TASK_INFO,
    COMMUNICATION_SCHEDULE_TASK_INFO, CANN_API, MSTX_EVENTS, TASK_PMU_INFO, AICORE_FREQ, META_DATA, *ENUM_TABLES,
    OP_STATISTIC, API_STATISTIC)}

# -- TASK_PMU_INFO metric names ---------------------------------------------------------------------
GIB = 1024**3
# op_summary columns that are not PMU metrics of the task (derived, AI CPU, L2 cache): not in TASK_PMU_INFO
NOT_PMU_METRICS = frozenset({"memory_bound", "cube_utilization(%)", "aicpu_compute_time(us)", "aicpu_memcpy_time(us)",
                             "aicpu_task_time(us)", "aicpu_dispatch_time(us)", "aicpu_total_time(us)",
                             "l2_cache_hit_rate", "l2_cache_victim_rate"})


def pmu_metric(column: str, stars: bool) -> tuple[str, float] | None:
    """TASK_PMU_INFO name and value scale of an op_summary PMU column; None for a column that is no PMU metric.

    The names are msprof's own metric names, before its op_summary adds units: the AI Core time is
    ``total_time`` (``aic_total_time`` on STARS chips, beside ``aiv_total_time``); times (``…_time``) go from
    µs to ns and bandwidths from GB/s to B/s, as msprof's exporter converts them.
    """
    if column in NOT_PMU_METRICS:
        return None
    if column == "aicore_time(us)":
        return ("aic_total_time" if stars else "total_time"), 1000.0
    if column == "aiv_time(us)":
        return "aiv_total_time", 1000.0
    if column.endswith("(GB/s)"):
        return column.removesuffix("(GB/s)"), float(GIB)
    name = column.removesuffix("(us)")
    return name, 1000.0 if name.endswith("_time") else 1.0
