"""A collector that runs on a board (``python -m pipeline_board.agent``) and pushes to its consumers itself.

In a config it stands where the collector would, so the decoder knows its producer: ``pipeline run`` starts
no process for it (``remote``), and the decoder binds a tcp endpoint the agent connects to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from pydantic import Field

from pipeline.errors import UserError
from pipeline.stage import Batch, Source, StageConfig


class BoardAgentStage(Source):
    remote: ClassVar[bool] = True  # runs elsewhere: the supervisor does not start it

    class Config(StageConfig):
        board: str = Field("", description="where the agent runs (for the graph and the docs; not used)")

    def batches(self) -> Iterator[Batch | None]:
        raise UserError("this stage runs on the board, not here",
                        "start `python -m pipeline_board.agent PROF_DIR --connect tcp://…` on the board")
