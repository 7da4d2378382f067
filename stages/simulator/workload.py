"""The simulated workload: the face-mask SSD detector of msprof's case study (Ascend 310, before fusion).

A small SSD: AIPP, 8 conv blocks (Conv2D → BNInferenceD → Relu, MaxPoolV3 between them), 5 heads
with a class and a box conv each (Conv2D → TransData → Reshape), two Concats, Softmax, two Casts,
then box decoding and NMS on the AI CPU. Input 1×260×260×3 (NHWC, uint8), 5972 anchors.
Mean durations are chosen so that one aclmdlExecute takes ≈ 7 ms of device time on the 310,
dominated by Conv2D and BNInferenceD as in the case study's op_statistic. On the STARS chips (910B and
chip v6) the element-wise and layout ops (Relu, TransData, SoftmaxV2) run on the AI Vector Cores.
On the 910B the two first convolutions run as MIX_AIC ops launched as FFTS+ tasks, split into
several contexts; chip v6 keeps them plain AI Core tasks (msprof uses no context ids
there).

Two variants make the before/after pair of the case studies (`model` below):

- ``face_mask_ssd_mish``: each backbone activation is Mish, which the chip has no kernel for, so the
  model converter decomposes it into Softplus → Tanh → Mul (as in the CANN profiling guide for SVP boards),
  with a TransData into ND and back around the three element-wise ops: 26 TransData tasks per image instead
  of 10, ≈ 9.6 ms of device time per aclmdlExecute.
- ``face_mask_ssd_fused``: after operator fusion (the case study's "after"): Conv2D + BNInferenceD + a supported
  activation (LeakyRelu) run as one Conv2D, and the head convolutions write NHWC directly (no
  TransData). Durations are picked to land near the case study's 2.305 ms per aclmdlExecute.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Chip = Literal["mini", "cloud", "910b", "v6"]
Model = Literal["face_mask_ssd", "face_mask_ssd_mish", "face_mask_ssd_fused"]
MODELS: tuple[Model, ...] = ("face_mask_ssd", "face_mask_ssd_mish", "face_mask_ssd_fused")
CoreType = Literal["AI_CORE", "AI_CPU", "AI_VECTOR_CORE", "MIX_AIC"]
STARS_CHIPS = ("910b", "v6")

# GE enums as msprof decodes them (tensor_info format / data type fields).
FORMAT_NHWC, FORMAT_ND, FORMAT_NC1HWC0, FORMAT_FRACTAL_Z = 1, 2, 3, 4
DT_FLOAT, DT_FLOAT16, DT_INT32, DT_UINT8 = 0, 1, 3, 4

# Chip v6 is given the 910B's cores and speed (no public figures were found; the pipeline does not depend on them).
AI_CORE_NUM = {"mini": 2, "cloud": 32, "910b": 24, "v6": 24}
AIV_NUM = {"mini": 0, "cloud": 0, "910b": 48, "v6": 48}  # AI Vector Cores (info.json aiv_num)
AIC_MHZ = 1000  # AI Core clock (info.json aic_frequency) of the 310 and 910
STARS_AIC_MHZ = 1800  # the 910B's
# Device speed relative to the 310 (AI Core ops gain from 32 cores; AI CPU ops barely).
_STARS_SPEED = {"AI_CORE": 0.22, "AI_CPU": 0.7, "AI_VECTOR_CORE": 0.25, "MIX_AIC": 0.22}
SPEEDUP = {"mini": {"AI_CORE": 1.0, "AI_CPU": 1.0}, "cloud": {"AI_CORE": 0.3, "AI_CPU": 0.8},
           "910b": _STARS_SPEED, "v6": _STARS_SPEED}
# On the AI Vector Cores of the STARS chips:
VECTOR_OP_TYPES = frozenset({"Relu", "TransData", "SoftmaxV2", "Softplus", "Tanh", "Mul"})
FFTS_PLUS_OPS = {"conv2d_0/Conv2D": 4, "conv2d_1/Conv2D": 3}  # 910B: MIX_AIC ops and their FFTS+ context counts

AICORE_STREAM, AICPU_STREAM = 2, 3  # physical stream ids of the model's two streams
MODEL_ID = 1
ANCHORS_PER_CELL = 4
FEATURE_SIDES = (33, 17, 9, 5, 3)


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    dtype: int
    fmt: int


@dataclass(frozen=True)
class Op:
    name: str
    op_type: str
    core: CoreType
    block_dim: int
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    mean_us: float  # mean device duration on the 310
    stream_id: int
    contexts: int = 0  # FFTS+ contexts the task runs as (0: not an FFTS+ task)

    @property
    def kernel_name(self) -> str:
        """Kernel (binary) name the runtime reports in task_track (hashed)."""
        if self.core == "AI_CPU":
            return self.op_type
        return f"te_{self.op_type.lower()}_{hash_name(self.name) % 0xFFFFFF:06x}"


def aic_mhz(chip: str) -> int:
    return STARS_AIC_MHZ if chip in STARS_CHIPS else AIC_MHZ


def hash_name(text: str) -> int:
    """Stable 63-bit id of a string (op names, op types, kernel names); never 0."""
    value = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1
    return value or 1


def _fivehd(channels: int, side: int) -> Tensor:
    return Tensor((1, math.ceil(channels / 16), side, side, 16), DT_FLOAT16, FORMAT_NC1HWC0)


def _filter(cin: int, cout: int, k: int = 3) -> Tensor:
    return Tensor((math.ceil(cin / 16) * k * k, math.ceil(cout / 16), 16, 16), DT_FLOAT16, FORMAT_FRACTAL_Z)


def _vector(channels: int) -> Tensor:
    return Tensor((1, math.ceil(channels / 16), 1, 1, 16), DT_FLOAT16, FORMAT_NC1HWC0)


def _blocks(out: Tensor, cores: int) -> int:
    return int(min(cores, max(1, math.ceil(math.prod(out.shape) / 16384))))


class _Builder:
    def __init__(self, chip: Chip) -> None:
        self.cores = AI_CORE_NUM[chip]
        self.vector_cores = AIV_NUM[chip]
        self.ffts_plus = chip == "910b"
        self.ops: list[Op] = []

    def core(self, name: str, op_type: str, ins: tuple[Tensor, ...], out: Tensor, mean_us: float) -> Tensor:
        if self.ffts_plus and name in FFTS_PLUS_OPS:
            self.ops.append(Op(name, op_type, "MIX_AIC", _blocks(out, self.cores), ins, (out,), mean_us,
                               AICORE_STREAM, FFTS_PLUS_OPS[name]))
        elif self.vector_cores and op_type in VECTOR_OP_TYPES:
            self.ops.append(Op(name, op_type, "AI_VECTOR_CORE", _blocks(out, self.vector_cores), ins, (out,), mean_us,
                               AICORE_STREAM))
        else:
            self.ops.append(Op(name, op_type, "AI_CORE", _blocks(out, self.cores), ins, (out,), mean_us,
                               AICORE_STREAM))
        return out

    def cpu(self, name: str, op_type: str, ins: tuple[Tensor, ...], out: Tensor, mean_us: float) -> Tensor:
        self.ops.append(Op(name, op_type, "AI_CPU", 1, ins, (out,), mean_us, AICPU_STREAM))
        return out


# (out channels, input side, conv µs, BN µs, Relu µs, pool µs or 0 when no pool follows)
_BACKBONE = (
    (32, 260, 1320.0, 780.0, 360.0, 300.0),
    (64, 130, 960.0, 400.0, 190.0, 150.0),
    (64, 65, 420.0, 130.0, 62.0, 48.0),
    (64, 33, 150.0, 44.0, 22.0, 16.0),
    (128, 17, 82.0, 24.0, 12.0, 10.0),
    (128, 9, 46.0, 12.0, 7.0, 6.0),
    (64, 5, 24.0, 7.0, 5.0, 5.0),
    (64, 3, 16.0, 6.0, 4.0, 0.0),
)
_HEAD_CONV_US = (34.0, 16.0, 9.0, 6.0, 5.0)
_HEAD_TRANSDATA_US = (14.0, 7.0, 5.0, 4.0, 4.0)
# Mish decomposed (SVP profiling guide): per op, its time as a multiple of the block's Relu time.
_MISH_OPS = (("TransData", 0.6), ("Softplus", 1.5), ("Tanh", 1.2), ("Mul", 1.0), ("TransData", 0.6))
FUSED_BLOCK_FACTOR = 0.14  # fused Conv2D+BN+LeakyRelu time / the three ops' time (lands near the case study's 2.305 ms)
FUSED_POOL_FACTOR = 0.5


def _activation(b: _Builder, prefix: str, x: Tensor, cout: int, side: int, relu_us: float, model: Model) -> Tensor:
    if model == "face_mask_ssd":
        return b.core(f"{prefix}/Relu", "Relu", (x,), _fivehd(cout, side), relu_us)
    plain = Tensor((1, cout, side, side), DT_FLOAT16, FORMAT_ND)
    y = x
    for k, (op_type, factor) in enumerate(_MISH_OPS):
        if op_type == "TransData":
            out = plain if k == 0 else _fivehd(cout, side)
            y = b.core(f"{prefix}/Mish/TransData_{k}", op_type, (y,), out, relu_us * factor)
        else:
            inputs = (plain, y) if op_type == "Mul" else (y,)
            y = b.core(f"{prefix}/Mish/{op_type}", op_type, inputs, plain, relu_us * factor)
    return y


def face_mask_ssd(chip: Chip, model: Model = "face_mask_ssd") -> list[Op]:
    """The op list of one image, in launch order (`model`: the variant, see the module text)."""
    b = _Builder(chip)
    fused = model == "face_mask_ssd_fused"
    image = Tensor((1, 260, 260, 3), DT_UINT8, FORMAT_NHWC)
    x = b.core("data_1_aipp/Aipp", "Aipp", (image,), _fivehd(3, 260), 140.0)
    channels, heads = 3, []
    for i, (cout, side, conv_us, bn_us, relu_us, pool_us) in enumerate(_BACKBONE):
        prefix = f"conv2d_{i}"
        vec = _vector(cout)
        if fused:
            x = b.core(f"{prefix}/Conv2D", "Conv2D", (x, _filter(channels, cout), vec, vec), _fivehd(cout, side),
                       (conv_us + bn_us + relu_us) * FUSED_BLOCK_FACTOR)
        else:
            x = b.core(f"{prefix}/Conv2D", "Conv2D", (x, _filter(channels, cout)), _fivehd(cout, side), conv_us)
            x = b.core(f"{prefix}/BatchNorm/BNInferenceD", "BNInferenceD", (x, vec, vec, vec, vec),
                       _fivehd(cout, side), bn_us)
            x = _activation(b, prefix, x, cout, side, relu_us, model)
        channels = cout
        if side in FEATURE_SIDES:
            heads.append((x, cout, side))
        if pool_us:
            x = b.core(f"maxpool2d_{i}/MaxPoolV3", "MaxPoolV3", (x,), _fivehd(cout, math.ceil(side / 2)),
                       pool_us * (FUSED_POOL_FACTOR if fused else 1.0))
    locs: list[Tensor] = []
    confs: list[Tensor] = []
    for k, (feature, cin, side) in enumerate(heads):
        anchors = side * side * ANCHORS_PER_CELL
        for kind, per_anchor, sink in (("cls", 2, confs), ("loc", 4, locs)):
            cout = ANCHORS_PER_CELL * per_anchor
            nhwc = Tensor((1, side, side, cout), DT_FLOAT16, FORMAT_NHWC)
            conv_us = _HEAD_CONV_US[k] * (1.0 if kind == "cls" else 1.3)
            if fused:  # the convolution writes NHWC itself
                y = b.core(f"{kind}_{k}_conv/Conv2D", "Conv2D", (feature, _filter(cin, cout)), nhwc, conv_us)
            else:
                y = b.core(f"{kind}_{k}_conv/Conv2D", "Conv2D", (feature, _filter(cin, cout)), _fivehd(cout, side),
                           conv_us)
                y = b.core(f"{kind}_{k}_conv/TransData", "TransData", (y,), nhwc, _HEAD_TRANSDATA_US[k])
            sink.append(b.core(f"{kind}_{k}_reshape/Reshape", "Reshape", (y,),
                               Tensor((1, anchors, per_anchor), DT_FLOAT16, FORMAT_ND), 3.0))
    total = sum(t.shape[1] for t in locs)
    loc = b.core("loc_branch_concat/ConcatV2D", "ConcatV2D", tuple(locs), Tensor((1, total, 4), DT_FLOAT16, FORMAT_ND),
                 26.0)
    cls = b.core("cls_branch_concat/ConcatV2D", "ConcatV2D", tuple(confs),
                 Tensor((1, total, 2), DT_FLOAT16, FORMAT_ND), 22.0)
    cls = b.core("cls_branch_softmax/SoftmaxV2", "SoftmaxV2", (cls,), cls, 38.0)
    loc32 = b.core("loc_cast/Cast", "Cast", (loc,), Tensor(loc.shape, DT_FLOAT, FORMAT_ND), 12.0)
    cls32 = b.core("cls_cast/Cast", "Cast", (cls,), Tensor(cls.shape, DT_FLOAT, FORMAT_ND), 10.0)
    priors = Tensor((total, 4), DT_FLOAT, FORMAT_ND)
    boxes = b.cpu("decode_bbox/DecodeBbox", "DecodeBbox", (loc32, priors),
                  Tensor((total, 4), DT_FLOAT, FORMAT_ND), 330.0)
    scalar = Tensor((1,), DT_FLOAT, FORMAT_ND)
    b.cpu("nms/NonMaxSuppressionV3", "NonMaxSuppressionV3",
          (boxes, cls32, Tensor((1,), DT_INT32, FORMAT_ND), scalar, scalar), Tensor((100,), DT_INT32, FORMAT_ND),
          560.0)
    return b.ops


# AI Core PipeUtilization profile per op type: fraction of total cycles each counter slot counts, in the
# order of sample.json ai_core_profiling_events 0x8 vec, 0xa mac(cube), 0x9 scalar, 0xb mte1, 0xc mte2,
# 0xd mte3; icache requests / misses are derived separately.
PIPE_PROFILE: dict[str, tuple[float, float, float, float, float, float]] = {
    "Conv2D": (0.08, 0.62, 0.05, 0.30, 0.42, 0.10),
    "BNInferenceD": (0.52, 0.0, 0.06, 0.0, 0.64, 0.40),
    "Relu": (0.30, 0.0, 0.04, 0.0, 0.72, 0.52),
    "MaxPoolV3": (0.55, 0.0, 0.08, 0.0, 0.50, 0.25),
    "TransData": (0.20, 0.0, 0.22, 0.0, 0.70, 0.60),
    "Reshape": (0.05, 0.0, 0.30, 0.0, 0.45, 0.45),
    "ConcatV2D": (0.02, 0.0, 0.12, 0.0, 0.80, 0.78),
    "SoftmaxV2": (0.62, 0.0, 0.18, 0.0, 0.35, 0.20),
    "Cast": (0.40, 0.0, 0.10, 0.0, 0.55, 0.45),
    "Aipp": (0.45, 0.0, 0.15, 0.0, 0.60, 0.50),
    "Softplus": (0.58, 0.0, 0.10, 0.0, 0.55, 0.40),
    "Tanh": (0.55, 0.0, 0.10, 0.0, 0.55, 0.40),
    "Mul": (0.35, 0.0, 0.06, 0.0, 0.70, 0.50),
}
DEFAULT_PROFILE = (0.3, 0.0, 0.1, 0.0, 0.5, 0.4)


@dataclass(frozen=True)
class OpTable:
    """Column view of the op list, for vectorised per-image sampling."""

    ops: tuple[Op, ...]
    mean_us: np.ndarray  # float64, chip speed-up applied
    is_aicpu: np.ndarray  # bool
    is_aiv: np.ndarray  # bool: runs on the AI Vector Cores
    contexts: np.ndarray  # int64: FFTS+ contexts (0: a plain task)
    block_dim: np.ndarray  # int64
    stream_id: np.ndarray  # int64
    pipe: np.ndarray  # (n, 6) float64 PMU fractions

    @classmethod
    def build(cls, chip: Chip, model: Model = "face_mask_ssd") -> OpTable:
        if model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, not {model!r}")
        ops = tuple(face_mask_ssd(chip, model))
        speed = SPEEDUP[chip]
        return cls(
            ops=ops,
            mean_us=np.array([op.mean_us * speed[op.core] for op in ops]),
            is_aicpu=np.array([op.core == "AI_CPU" for op in ops]),
            is_aiv=np.array([op.core == "AI_VECTOR_CORE" for op in ops]),
            contexts=np.array([op.contexts for op in ops], dtype=np.int64),
            block_dim=np.array([op.block_dim for op in ops], dtype=np.int64),
            stream_id=np.array([op.stream_id for op in ops], dtype=np.int64),
            pipe=np.array([PIPE_PROFILE.get(op.op_type, DEFAULT_PROFILE) for op in ops]),
        )

    def __len__(self) -> int:
        return len(self.ops)


def sample_durations_us(table: OpTable, rng: np.random.Generator) -> np.ndarray:
    """One execution's device durations (µs): ~4 % log-normal jitter plus rare 1.2–1.6× stragglers."""
    n = len(table)
    jitter = np.exp(rng.normal(0.0, 0.04, n))
    straggler = np.where(rng.random(n) < 0.01, rng.uniform(1.2, 1.6, n), 1.0)
    return table.mean_us * jitter * straggler
