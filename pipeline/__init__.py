"""Live profile-data pipeline for Huawei Ascend (CANN / msprof compatible)."""

__version__ = "0.1.0"
