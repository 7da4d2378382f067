"""Which raw file holds which record stream, and how it is framed: the board agent's copy of
``stages.formats.files`` and ``stages.formats.legacy`` (their name rules and record sizes), without numpy.

``tests/test_board_agent.py`` checks that both classify every file name alike on every platform.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class StreamKind(NamedTuple):
    """A family of raw files whose concatenated slices form one record stream."""

    name: str
    framing: str  # fixed, tlv, text, nul_text
    record_size: int = 0
    magic: bytes = b""
    magic_offset: int = 0
    whole_records_per_slice: bool = False


_ZZ = b"\x5a\x5a"
_HWTS = b"\xd3\x6b"
MINI_PLATFORM = 0
STARS_PLATFORMS = frozenset({5, 7, 8, 11, 15, 16})
STARS_V6_PLATFORMS = frozenset({15, 16})
MINI_TLV_TAG_SIZES = {3: 32, 4: 112, 10: 40}

HASH_DIC = StreamKind("hash_dic", "text", whole_records_per_slice=True)
HWTS = StreamKind("hwts", "fixed", 64, _HWTS, 2)
AICORE = StreamKind("aicore", "fixed", 128, _HWTS, 2)
TS_TRACK = StreamKind("ts_track", "fixed", 40)
# `training_trace.*.dev.profiler_default_tag` files: the 40-byte ts_track records of later CANN, or (MindSpore
# jobs of 2020) 20-byte step-trace records `<QHHQ` (tag, task id, stream id, syscnt). Which one, the file's own
# bytes tell (``settle``); the stream is framed as one of these two kinds once they have.
TRAINING_TRACE = StreamKind("training_trace", "fixed", 40)
LEGACY_STEP_TRACE = StreamKind("legacy_step_trace", "fixed", 20)
SETTLE_BYTES = 8 * 40  # the head of a training_trace stream that decides its record size
_TS_TRACK_TAGS = frozenset(range(10, 16))
MINI_TS_TRACK = StreamKind("mini_ts_track", "tlv")
MINI_AICORE = StreamKind("mini_aicore", "tlv")
AICPU_PREPROCESS = StreamKind("aicpu_preprocess", "nul_text", 128, b"ZZ<\x00", 0)
DEVICE_EXTRA_KINDS = {
    "aicpu.data": StreamKind("aicpu", "fixed", 256, _ZZ, 0),
    "DATA_PREPROCESS.AICPU": AICPU_PREPROCESS,
    "DATA_PREPROCESS.dev.AICPU": AICPU_PREPROCESS,
    "l2_cache.data": StreamKind("l2_cache", "fixed", 72),
    "lpmFreqConv.data": StreamKind("lpm_freq", "fixed", 888),
}
STARS_SOC = StreamKind("stars_soc", "fixed", 64, _HWTS, 2)
STARS_SOC_V6 = StreamKind("stars_soc_v6", "fixed", 32, _HWTS, 2)
FFTS_PROFILE = StreamKind("ffts_profile", "fixed", 128, _HWTS, 2)


def _host(name: str, size: int) -> StreamKind:
    return StreamKind(name, "fixed", size, _ZZ, 0, True)


HOST_KINDS = {
    "api_event.data": _host("api_event", 40),
    "compact.task_track": _host("task_track", 64),
    "compact.node_basic_info": _host("node_basic_info", 64),
    "additional.tensor_info": _host("tensor_info", 256),
    "additional.msproftx": _host("msproftx", 256),
    "additional.hash_dic": HASH_DIC,
    "additional.type_info_dic": StreamKind("type_info_dic", "text", whole_records_per_slice=True),
    "compact.node_attr_info": _host("node_attr_info", 64),
    "compact.memcpy_info": _host("memcpy_info", 64),
    "compact.hccl_op_info": _host("hccl_op_info", 64),
    "compact.capture_stream_info": _host("capture_stream_info", 64),
    "additional.context_id_info": _host("context_id_info", 256),
    "additional.graph_id_map": _host("graph_id_map", 256),
    "additional.fusion_op_info": _host("fusion_op_info", 256),
    "additional.hccl_info": _host("hccl_info", 256),
    "additional.Multi_Thread": _host("multi_thread", 256),
}


def _legacy(name: str, size: int) -> StreamKind:
    return StreamKind(name, "fixed", size, _ZZ, 0)


_DEV = r"\.(?P<dev>\d+)$"
LEGACY_NAMES = tuple((re.compile(pattern + _DEV), kind) for pattern, kind in (
    (r"^AclModule\.(?:acl_model|acl_op|acl_rts|acl_others)", _legacy("legacy_acl", 128)),
    (r"^(?:AclModule|Framework)\.hash_dic", HASH_DIC),
    (r"^Framework\.(?:host\.)?task_desc_info", _legacy("legacy_ge_task", 256)),
    (r"^Framework\.tensor_data_info", _legacy("legacy_ge_tensor", 256)),
    (r"^Framework\.step_info", _legacy("legacy_ge_step", 64)),
    (r"^Framework\.id_map_info", _legacy("legacy_ge_id_map", 32)),
    (r"^Framework\.(?:host\.)?model_load_info_\d+", _legacy("legacy_ge_model_load", 256)),
    (r"^Framework\.fusion_op_info_\d+", _legacy("legacy_ge_fusion", 256)),
    (r"^Framework\.(?:host\.)?model_time_info_\d+_\d+", _legacy("legacy_ge_model_time", 256)),
    (r"^Framework\.dynamic_op_execute", _legacy("legacy_ge_host_sched", 64)),
    (r"^[Rr]untime\.(?:task_track|host\.runtime|runtime)", _legacy("legacy_rt_track", 64)),
    (r"^[Rr]untime\.(?:api|runtime\.data)", _legacy("legacy_rt_api", 256)),
    (r"^hwts\.log\.data\.\d+(?:\.(?:dev|host)\.profiler_default_tag)?", HWTS),
    (r"^aicore\.data\.\d+(?:\.dev\.profiler_default_tag)?", AICORE),
    (r"^ts_track\.data\.\d+(?:\.dev\.profiler_default_tag)?", TS_TRACK),
    (r"^training_trace\.\d+\.dev\.profiler_default_tag", TRAINING_TRACE),
))
_MINI = {AICORE.name: MINI_AICORE, TS_TRACK.name: MINI_TS_TRACK, TRAINING_TRACE.name: MINI_TS_TRACK}


def settle(kind: StreamKind, head: bytes, final: bool) -> StreamKind | None:
    """The kind a stream is framed as, from its first bytes: ``kind`` itself unless it is TRAINING_TRACE, whose
    record size the bytes decide (None: too few bytes yet). The rule, on the first SETTLE_BYTES (or all the
    stream has, at its end):

    - read as 40-byte ts_track records, every record's byte 1 is a ts_track tag (10–15) and its bytes 4–7
      (reserved) are zero;
    - read as 20-byte `<QHHQ` records, every syscnt (bytes 12–19) is non-zero and none is below the one
      before it (one task scheduler writes them, in time order).

    Only the second holds: 20-byte records (LEGACY_STEP_TRACE); otherwise 40 (TS_TRACK: the current layout,
    whose decoder rejects records it cannot read by their tag)."""
    if kind.name != TRAINING_TRACE.name:
        return kind
    if len(head) < SETTLE_BYTES and not final:
        return None
    head = head[:SETTLE_BYTES]
    forty = len(head) >= 40 and all(head[at + 1] in _TS_TRACK_TAGS and not any(head[at + 4:at + 8])
                                    for at in range(0, len(head) - 39, 40))
    counts = [int.from_bytes(head[at + 12:at + 20], "little") for at in range(0, len(head) - 19, 20)]
    twenty = bool(counts) and all(counts) and all(a <= b for a, b in zip(counts, counts[1:]))
    return LEGACY_STEP_TRACE if twenty and not forty else TS_TRACK
_SLICE = re.compile(r"^(?P<base>.+)\.slice_(?P<index>\d+)$")
_INFER_SLICE = re.compile(r"^(?P<base>.+)\.(?P<index>\d+)$")
_HOST_DATA = re.compile(r"^(?:aging|unaging)\.(?P<kind>.+)$")
_DEVICE_DATA = re.compile(r"^(?P<kind>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2})\.(?P<dev>\d+)$")
SLICE_SEP, INFER_SEP = ".slice_", "."


def split_slice_name(file_name: str) -> tuple[str, int, str] | None:
    """(base, slice index, separator): `x.0.slice_3` → (`x.0`, 3, `.slice_`); legacy `AclModule.acl_model.0.3`
    → (`AclModule.acl_model.0`, 3, `.`); None for a file that is not a data slice."""
    match = _SLICE.match(file_name)
    if match:
        return match.group("base"), int(match.group("index")), SLICE_SEP
    match = _INFER_SLICE.match(file_name)
    if match and any(pattern.match(match.group("base")) for pattern, _ in LEGACY_NAMES):
        return match.group("base"), int(match.group("index")), INFER_SEP
    return None


def host_stream_kind(base: str) -> StreamKind | None:
    """Kind of a host slice base name such as `unaging.compact.task_track`."""
    match = _HOST_DATA.match(base)
    return HOST_KINDS.get(match.group("kind")) if match else None


def device_stream_kind(base: str, platform: int) -> tuple[StreamKind, int] | None:
    """Kind and device id of a device slice base name such as `hwts.data.0` on ``platform``."""
    mini = platform == MINI_PLATFORM
    for pattern, kind in LEGACY_NAMES:
        match = pattern.match(base)
        if match:
            if kind is HWTS and mini:
                return None  # the 310 writes no HWTS log
            return (_MINI.get(kind.name, kind) if mini else kind), int(match.group("dev"))
    match = _DEVICE_DATA.match(base)
    if match is None:
        return None
    name, device = match.group("kind"), int(match.group("dev"))
    if name == "hwts.data" and not mini:
        return HWTS, device
    if name == "aicore.data":
        return (MINI_AICORE if mini else AICORE), device
    if name == "ts_track.data":
        return (MINI_TS_TRACK if mini else TS_TRACK), device
    if name == "stars_soc.data" and platform in STARS_PLATFORMS:
        return (STARS_SOC_V6 if platform in STARS_V6_PLATFORMS else STARS_SOC), device
    if name == "ffts_profile.data" and platform in STARS_PLATFORMS - STARS_V6_PLATFORMS:
        return FFTS_PROFILE, device
    extra = DEVICE_EXTRA_KINDS.get(name)
    return (extra, device) if extra else None
