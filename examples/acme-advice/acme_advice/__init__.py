"""An example advice rule: operators on AI CPU take a large share of device time.

AI CPU runs the operators the AI Core has no kernel for (NonMaxSuppression, some casts and
reshapes …), far slower than the AI Core would. When they add up, the fix is usually to change
the model so the operators run on the AI Core.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.advice import Advice, AdviceRule, Statistics


class AiCpuShare(AdviceRule):
    name = "aicpu_share"

    class Config(AdviceRule.Config):
        max_share: float = Field(0.05, ge=0, le=1, description="AI CPU time / device time above which to warn")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        device_ns = stats.device_total_ns()
        aicpu = [op for op in stats.ops if op.core_type == "AI_CPU"]
        aicpu_ns = sum(op.total_ns for op in aicpu)
        share = aicpu_ns / device_ns if device_ns else 0.0
        if share <= self.config.max_share:
            return []
        heaviest = max(aicpu, key=lambda op: (op.total_ns, op.op_type))
        return [self.advice(
            "warning", f"AI CPU operators take {share:.1%} of device time",
            f"{len({op.op_type for op in aicpu})} operator type(s) ran on AI CPU; the heaviest is "
            f"{heaviest.op_type} ({heaviest.total_ns / 1e6:.2f} ms over {heaviest.count} call(s)).",
            "move them to the AI Core: replace the operator with one that has an AI Core kernel, or do that "
            "step on the host before or after the model.",
            share=round(share, 4), aicpu_ns=aicpu_ns, device_ns=device_ns, heaviest=heaviest.op_type)]
