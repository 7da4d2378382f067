"""The built-in advice rules (pipeline/advice.py), registered under ``ascend_pipeline.advice``.

Wording and thresholds come from two published case studies: msprof's face-mask SSD case (inference on
an Ascend 310: msprof's "please check and reduce the transData", a sleep found through msproftx,
operator fusion taking aclmdlExecute from 7.209 ms to 2.305 ms) and the CANN profiling guide for SVP boards (Mish
decomposed into Softplus + Tanh + Mul, replaced by LeakyRelu: 23.299 ms to 14.190 ms).
"""

from __future__ import annotations


def ms(ns: float) -> str:
    """Nanoseconds as milliseconds for a sentence: ``5,645.052 ms``."""
    return f"{ns / 1e6:,.3f} ms"


def share(part: float, whole: float) -> float:
    return part / whole if whole else 0.0
