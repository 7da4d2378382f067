"""Cutting a raw byte stream into whole records, resynchronising past garbage: the board agent's framer
(``pipeline_board.framing``, stdlib only), which the collector shares.
"""

from pipeline_board.framing import MAX_LINE_BYTES, Framed, frame

__all__ = ["MAX_LINE_BYTES", "Framed", "frame"]
