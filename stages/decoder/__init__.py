"""The decoder: raw chunks → typed columnar record batches, times in local wall-clock ns.

The stage is :mod:`stages.decoder.stage` (``stages.decoder:DecoderStage`` names it too). The package's record
layouts (:mod:`~stages.decoder.records`, :mod:`~stages.decoder.host_records`) are what the aggregator reads:
importing them leaves the stage and its decoders out of a process that does not decode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stages.decoder.stage import DecoderStage

__all__ = ["DecoderStage"]


def __getattr__(name: str) -> Any:
    if name == "DecoderStage":
        from stages.decoder.stage import DecoderStage

        return DecoderStage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
