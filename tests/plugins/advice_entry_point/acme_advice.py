"""A third-party advice rule, registered through the entry-point group by the dist-info beside it
(put this folder on PYTHONPATH and `ascend_pipeline.advice` lists `acme_task_count`)."""

from __future__ import annotations

from pydantic import Field

from pipeline.advice import Advice, AdviceRule, Statistics


class TaskCount(AdviceRule):
    name = "acme_task_count"

    class Config(AdviceRule.Config):
        label: str = Field("device tasks", description="how the finding names the tasks")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        tasks = sum(op.count for op in stats.ops)
        return [self.advice("info", f"{tasks} {self.config.label}", "counted by a third-party rule", "none",
                            tasks=tasks)]
