"""Which raw file holds which record stream, and how that stream is framed (msprof's file-name patterns)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from pipeline_board import kinds as board_kinds  # the file-name rules, shared with the board agent
from stages.formats import raw

Framing = Literal["fixed", "tlv", "text", "nul_text"]


@dataclass(frozen=True)
class StreamKind:
    """A family of raw files whose concatenated slices form one record stream."""

    name: str
    framing: Framing
    record_size: int = 0  # fixed framing only
    magic: bytes = b""  # bytes expected at magic_offset of every record (resync anchor)
    magic_offset: int = 0
    whole_records_per_slice: bool = False  # host slices never split a record


API_EVENT = StreamKind("api_event", "fixed", 40, b"\x5a\x5a", 0, True)
TASK_TRACK = StreamKind("task_track", "fixed", 64, b"\x5a\x5a", 0, True)
NODE_BASIC_INFO = StreamKind("node_basic_info", "fixed", 64, b"\x5a\x5a", 0, True)
TENSOR_INFO = StreamKind("tensor_info", "fixed", 256, b"\x5a\x5a", 0, True)
MSPROFTX = StreamKind("msproftx", "fixed", 256, b"\x5a\x5a", 0, True)
HASH_DIC = StreamKind("hash_dic", "text", whole_records_per_slice=True)
TYPE_INFO_DIC = StreamKind("type_info_dic", "text", whole_records_per_slice=True)
HWTS = StreamKind("hwts", "fixed", 64, b"\xd3\x6b", 2)
AICORE = StreamKind("aicore", "fixed", 128, b"\xd3\x6b", 2)
TS_TRACK = StreamKind("ts_track", "fixed", raw.TS_TRACK_SIZE)
# training_trace files: framed as TS_TRACK or legacy.LEGACY_STEP_TRACE once their bytes tell which
# (pipeline_board.kinds.settle); never shipped as this kind.
TRAINING_TRACE = StreamKind("training_trace", "fixed", raw.TS_TRACK_SIZE)
MINI_TS_TRACK = StreamKind("mini_ts_track", "tlv")
MINI_AICORE = StreamKind("mini_aicore", "tlv")
AICPU = StreamKind("aicpu", "fixed", raw.AICPU_NODE.itemsize, b"\x5a\x5a", 0)
# DATA_PREPROCESS.AICPU: bare MsprofAicpuProfData records, or (older CANN) NUL-separated text lines.
AICPU_PREPROCESS = StreamKind("aicpu_preprocess", "nul_text", raw.AICPU_PROF.itemsize, raw.AICPU_PROF_HEAD, 0)
L2_CACHE = StreamKind("l2_cache", "fixed", raw.L2_CACHE.itemsize)
LPM_FREQ = StreamKind("lpm_freq", "fixed", raw.LPM_FREQ.itemsize)
DEVICE_EXTRA_KINDS = {"aicpu.data": AICPU, "DATA_PREPROCESS.AICPU": AICPU_PREPROCESS,
                      "DATA_PREPROCESS.dev.AICPU": AICPU_PREPROCESS, "l2_cache.data": L2_CACHE,
                      "lpmFreqConv.data": LPM_FREQ}
# STARS chips: 0x6BD3 at bytes 2..3 is the resync anchor (as CANN's collector writes it;
# msprof's Python reader drops stars_soc records without it, its C++ reader does not look).
STARS_SOC = StreamKind("stars_soc", "fixed", 64, b"\xd3\x6b", 2)
STARS_SOC_V6 = StreamKind("stars_soc_v6", "fixed", 32, b"\xd3\x6b", 2)
FFTS_PROFILE = StreamKind("ffts_profile", "fixed", 128, b"\xd3\x6b", 2)

HOST_KINDS = {
    "api_event.data": API_EVENT,
    "compact.task_track": TASK_TRACK,
    "compact.node_basic_info": NODE_BASIC_INFO,
    "additional.tensor_info": TENSOR_INFO,
    "additional.msproftx": MSPROFTX,
    "additional.hash_dic": HASH_DIC,
    "additional.type_info_dic": TYPE_INFO_DIC,
}

MINI_PLATFORM = board_kinds.MINI_PLATFORM


def host_stream_kind(base: str) -> StreamKind | None:
    """Kind of a host slice base name such as `unaging.compact.task_track`."""
    found = board_kinds.host_stream_kind(base)
    return None if found is None else _kinds_by_name()[found.name]


def device_stream_kind(base: str, platform: int) -> tuple[StreamKind, int] | None:
    """Kind and device id of a device slice base name such as `hwts.data.0` on `platform` (legacy names
    included)."""
    found = board_kinds.device_stream_kind(base, platform)
    return None if found is None else (_kinds_by_name()[found[0].name], found[1])


@functools.cache
def _kinds_by_name() -> dict[str, StreamKind]:
    """The kinds the name rules (``pipeline_board.kinds``) can name, as defined here."""
    from stages.formats import host_extra, legacy  # both import this module

    known = (*HOST_KINDS.values(), *host_extra.FILE_TAGS.values(), *legacy.HOST_KINDS,
             *DEVICE_EXTRA_KINDS.values(), HWTS, AICORE, TS_TRACK, TRAINING_TRACE, legacy.LEGACY_STEP_TRACE,
             MINI_TS_TRACK, MINI_AICORE, STARS_SOC,
             STARS_SOC_V6, FFTS_PROFILE)
    return {kind.name: kind for kind in known}
