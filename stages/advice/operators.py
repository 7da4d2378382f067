"""Rules over op_statistic: TransData count, decomposed activations, the costliest op types."""

from __future__ import annotations

from pydantic import Field

from pipeline.advice import Advice, AdviceRule, Statistics
from stages.advice import ms, share


class TransDataRule(AdviceRule):
    """More TransData (layout conversion) tasks per model execution than msprof tolerates."""

    name = "transdata"

    class Config(AdviceRule.Config):
        max_per_execution: float = Field(2, ge=0, description="msprof prof_rule condition_transData_2: count > 2")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        found = stats.op_types().get("TransData")
        if found is None or not found.count:
            return []
        runs = stats.executions()
        per_run = found.count / runs if runs else float(found.count)
        if per_run <= self.config.max_per_execution:
            return []
        where = f"per model execution ({found.count:,} in {runs:,})" if runs else "in the run (no aclmdlExecute seen)"
        part = share(found.total_ns, stats.device_total_ns())
        return [self.advice(
            "warning", f"{per_run:,.1f} TransData tasks {where}",
            f"TransData converts tensors between layouts (NC1HWC0, ND, NHWC …); here it took {ms(found.total_ns)}, "
            f"{part:.1%} of device time.",
            "please check and reduce the transData: feed each operator the layout it computes in (ATC "
            "--input_format, layout-preserving operators), or fuse the conversions away. msprof gives this advice "
            "above 2 per execution (rule_transData_1), as it did for the face-mask SSD of its case study.",
            count=found.count, executions=runs, per_execution=round(per_run, 3), total_ns=found.total_ns,
            device_share=round(part, 4))]


class DecomposedActivationRule(AdviceRule):
    """An activation the chip has no operator for, run as several element-wise operators."""

    name = "decomposed_activation"

    class Config(AdviceRule.Config):
        patterns: dict[str, list[str]] = Field(default_factory=lambda: {"Mish": ["Softplus", "Tanh", "Mul"]},
                                               description="activation → the op types it decomposes into")
        supported: list[str] = Field(default_factory=lambda: ["Relu", "LeakyRelu", "PRelu", "Elu"],
                                     description="activations to suggest instead")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        types = stats.op_types()
        runs = stats.executions()
        found = []
        for activation, parts in self.config.patterns.items():
            if not parts or any(types.get(part) is None or not types[part].count for part in parts):
                continue
            instances = min(types[part].count for part in parts)
            total = sum(types[part].total_ns for part in parts)
            per_run = f" ({instances / runs:,.1f} per execution)" if runs else ""
            part = share(total, stats.device_total_ns())
            found.append(self.advice(
                "warning", f"{activation} decomposed into {' + '.join(parts)}",
                f"{instances:,} of each{per_run}; together {ms(total)}, {part:.1%} of device time. "
                f"The chip has no {activation} operator, so the model converter runs it as {len(parts)} "
                "element-wise operators.",
                f"use a supported activation ({', '.join(self.config.supported)}) and convert the model again: "
                "the CANN profiling guide for SVP boards replaced Mish with LeakyRelu and inference went "
                "from 23.299 ms to 14.190 ms.",
                activation=activation, parts=list(parts), instances=instances, total_ns=total,
                device_share=round(part, 4)))
        return found


class TopOpTypesRule(AdviceRule):
    """The op types with the most device time: where tuning starts."""

    name = "top_op_types"

    class Config(AdviceRule.Config):
        top: int = Field(3, ge=1, description="how many op types to name")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        device = stats.device_total_ns()
        if not device:
            return []
        ranked = sorted(stats.op_types().items(), key=lambda item: -item[1].total_ns)[: self.config.top]
        names = ", ".join(f"{name} {share(t.total_ns, device):.1%}" for name, t in ranked)
        detail = "; ".join(f"{name}: {t.count:,} tasks, {ms(t.total_ns)}, avg {t.total_ns / t.count / 1e3:,.3f} µs"
                           for name, t in ranked if t.count)
        return [self.advice(
            "info", f"Top operator types by device time: {names}", detail,
            "tune these first: read their op_summary rows (shapes, formats, PMU ratios) and fuse neighbours. In "
            "msprof's face-mask SSD case study Conv2D and BNInferenceD led op_statistic; fusing Conv2D + "
            "BNInferenceD + Relu took aclmdlExecute from 7.209 ms to 2.305 ms.",
            top=[{"op_type": name, "count": t.count, "total_ns": t.total_ns,
                  "device_share": round(share(t.total_ns, device), 4)} for name, t in ranked])]
