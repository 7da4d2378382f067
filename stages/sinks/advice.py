"""The ``advice`` sink: evaluates the advice rules (pipeline/advice.py) as the statistics change.

Example config::

    advice:
      type: advice
      inputs: [aggregate.stats, aggregate.tasks]   # without aggregate.tasks the timeline rules stay quiet
      rules: null                  # rule names or module:Class; default: every registered rule
      disable: [top_op_types]      # registered rules to leave out
      options: {transdata: {max_per_execution: 4}}
      every_s: 1.0                 # at most one evaluation per interval (and one at the end)
      path: advice                 # writes advice.json and advice.txt, relative to the run output

Whenever the findings change, ``advice.json`` and ``advice.txt`` are replaced atomically and the
findings go to the supervisor, so ``pipeline top`` shows them in its Advice panel.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from pipeline.advice import Advice, AdviceRule, Statistics, advice_text, build_rules, evaluate_rules
from pipeline.errors import UserError
from pipeline.stage import Batch, Sink, StageConfig, StageContext
from stages.schema import unpack_rows
from stages.sinks._activity import TimelineTracker
from stages.sinks._op_summary import write_atomic
from stages.sinks._partitions import PartitionMerge
from stages.tables import unpack_table


class AdviceSink(Sink):
    """Keeps the latest statistics and timeline facts, runs the rules, writes the findings."""

    class Config(StageConfig):
        rules: list[str] | None = Field(None, description="rule names or module:Class; default: all registered")
        disable: list[str] = Field(default_factory=list, description="rules to leave out")
        options: dict[str, dict[str, Any]] = Field(default_factory=dict, description="per rule: its settings")
        every_s: float = Field(1.0, gt=0, description="minimum seconds between two evaluations")
        path: str = Field("advice", description="advice.json / advice.txt path without suffix, run-relative")

        @model_validator(mode="after")
        def _rules_exist(self) -> AdviceSink.Config:
            try:
                build_rules(self.rules, self.disable, self.options)
            except UserError as exc:
                raise ValueError(exc.line().removeprefix("error: ")) from None
            return self

    def __init__(self, config: Any, ctx: StageContext) -> None:
        if not isinstance(config, self.Config):
            config = self.Config.model_validate(config or {})
        super().__init__(config, ctx)
        self.config: AdviceSink.Config = config
        self.rules: list[AdviceRule] = build_rules(config.rules, config.disable, config.options)
        self.timeline = TimelineTracker()
        self.ops: list[list[Any]] = []
        self.apis: list[list[Any]] = []
        self.final = False
        self.changed = False
        self.last_evaluation = float("-inf")
        self.current: list[Advice] | None = None
        self.counts = {"evaluations": 0, "advice_writes": 0}
        self.partitions = PartitionMerge()  # a partitioned aggregator's snapshots, merged

    def open(self) -> None:
        self.base = self.ctx.resolve(self.config.path)
        self.ctx.output_guard.attempt(self.base.parent, lambda: self.base.parent.mkdir(parents=True, exist_ok=True))

    def write_batch(self, batch: Batch) -> None:
        batch = self.partitions.merged(batch)
        kind = batch.kind
        if kind == "op_statistic":  # the statistics: small tables (a row per operator type), kept as rows
            self.ops = unpack_rows(batch)
            self.final = bool(batch.meta.get("final"))
        elif kind == "api_statistic":
            self.apis = unpack_rows(batch)
        elif kind == "task":
            self.timeline.add_tasks(unpack_table(batch))
        elif kind == "api":
            self.timeline.add_apis(unpack_table(batch))
        elif kind == "tx":
            self.timeline.add_tx(unpack_table(batch))
        else:
            return
        self.changed = True
        self._evaluate(force=False)

    def flush(self) -> None:
        self._evaluate(force=False)

    def close(self) -> None:
        self.changed = True
        self._evaluate(force=True)

    def accounting(self) -> dict[str, int]:
        return {"advice": len(self.current or []), **self.counts}

    # -------------------------------------------------------------------------------------

    def statistics(self) -> Statistics:
        """The rules' view; timeline facts when this sink takes the aggregator's task rows."""
        takes_tasks = self.timeline.seen or any(ref.endswith(".tasks") for ref in self.ctx.upstream)
        return Statistics.from_rows(self.ops, self.apis, self.timeline.facts() if takes_tasks else None, self.final)

    def _evaluate(self, force: bool) -> None:
        now = time.monotonic()
        if not self.changed or (not force and now - self.last_evaluation < self.config.every_s):
            return
        self.last_evaluation = now
        self.changed = False
        self.counts["evaluations"] += 1
        found = evaluate_rules(self.rules, self.statistics())
        if found == self.current and not force:
            return
        self.current = found
        self._write(found)
        if self.ctx.report_view is not None:
            self.ctx.report_view({"advice": [item.to_json() for item in found]})

    def _write(self, found: list[Advice]) -> None:
        document = {"run_id": self.ctx.run_id, "final": self.final, "advice": [item.to_json() for item in found]}
        guard = self.ctx.output_guard  # a full disk pauses the stage until it takes the files
        write_atomic(Path(f"{self.base}.json"), [json.dumps(document, indent=2, ensure_ascii=False) + "\n"], guard)
        write_atomic(Path(f"{self.base}.txt"), [advice_text(found)], guard)
        self.counts["advice_writes"] += 1
