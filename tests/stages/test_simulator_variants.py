"""The case-study variants of the simulated workload and the app's sleep inside msproftx (workload.py,
board.py): what differs from the default model is exactly what the module texts describe."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from stages.simulator.run import simulate
from stages.simulator.workload import MODELS, Model, OpTable

START = 1_700_000_000_000_000_000


def _types(model: Model) -> Counter[str]:
    return Counter(op.op_type for op in OpTable.build("mini", model).ops)


def test_mish_variant_replaces_each_relu_by_the_decomposition() -> None:
    base, mish = _types("face_mask_ssd"), _types("face_mask_ssd_mish")
    blocks = base["Relu"]
    assert blocks and mish["Relu"] == 0
    assert mish["Softplus"] == mish["Tanh"] == mish["Mul"] == blocks
    assert mish["TransData"] == base["TransData"] + 2 * blocks  # into ND and back around the three ops
    rest = {t: n for t, n in base.items() if t not in ("Relu", "TransData")}
    assert {t: mish[t] for t in rest} == rest


def test_fused_variant_has_one_conv_per_block_and_no_transdata() -> None:
    base, fused = _types("face_mask_ssd"), _types("face_mask_ssd_fused")
    assert fused["BNInferenceD"] == fused["Relu"] == fused["TransData"] == 0
    assert fused["Conv2D"] == base["Conv2D"]
    assert sum(fused.values()) == sum(base.values()) - base["BNInferenceD"] - base["Relu"] - base["TransData"]


def test_device_time_per_execution_follows_the_case_studies() -> None:
    per_run = {model: OpTable.build("mini", model).mean_us.sum() / 1000 for model in MODELS}
    assert per_run["face_mask_ssd_mish"] > per_run["face_mask_ssd"] > per_run["face_mask_ssd_fused"]
    assert per_run["face_mask_ssd_fused"] == pytest.approx(2.305, rel=0.05)  # the face-mask SSD case study after fusion


def test_unknown_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        simulate(tmp_path, model="resnet", iterations=1, rate="max")


def _tx_ranges(out: Path) -> dict[str, dict[str, int]]:
    truth = json.loads((out / "simulator_truth.json").read_text())
    return {entry["message"]: entry for entry in truth["msproftx"]}


def test_sleep_lengthens_the_load_range_and_default_runs_have_none(tmp_path: Path) -> None:
    simulate(tmp_path / "slept", iterations=2, rate="max", seed=1, start_time_ns=START, sleep_ms=700)
    simulate(tmp_path / "fused", iterations=2, rate="max", seed=1, start_time_ns=START, model="face_mask_ssd_fused")
    simulate(tmp_path / "plain", iterations=2, rate="max", seed=1, start_time_ns=START)
    slept = _tx_ranges(tmp_path / "slept")["CreateMultipleStreamsFromFile"]
    awake = _tx_ranges(tmp_path / "fused")["CreateMultipleStreamsFromFile"]
    assert slept["count"] == awake["count"] == 1
    assert 700_000_000 < slept["total_ns"] and awake["total_ns"] < 100_000_000
    assert slept["total_ns"] - awake["total_ns"] == pytest.approx(700_000_000, abs=10_000_000)
    assert "CreateMultipleStreamsFromFile" not in _tx_ranges(tmp_path / "plain")
