"""Rules over host time: idle msproftx ranges (a sleep), model load, a device the host leaves idle."""

from __future__ import annotations

from pydantic import Field

from pipeline.advice import EXECUTE_APIS, Advice, AdviceRule, Statistics
from stages.advice import ms, share


class TxIdleRule(AdviceRule):
    """An msproftx range much longer than the work inside it: a sleep or a blocking wait."""

    name = "tx_idle"
    needs_timeline = True

    class Config(AdviceRule.Config):
        min_idle_ms: float = Field(1000, ge=0, description="idle time inside a range that is worth a look")
        min_idle_share: float = Field(0.5, ge=0, le=1, description="… and the part of the range it must be")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        assert stats.timeline is not None
        found, named = [], set()
        for tx in stats.timeline.longest_ranges:  # longest first: one finding per message, its worst range
            if tx.message in named or tx.idle_ns < self.config.min_idle_ms * 1e6 \
                    or tx.idle_ns < self.config.min_idle_share * tx.duration_ns:
                continue
            named.add(tx.message)
            found.append(self.advice(
                "warning", f"msproftx range '{tx.message}' is idle {ms(tx.idle_ns)} of its {ms(tx.duration_ns)}",
                f"No AscendCL call and no device task ran in {share(tx.idle_ns, tx.duration_ns):.0%} of it.",
                "look for a sleep, a blocking wait or unprofiled I/O in the code this range marks. msprof's face-mask "
                "SSD case study found a sleep(5) in CreateMultipleStreamsFromFile this way; "
                "without it the range took 642 ms, not 5,645 ms.",
                message=tx.message, start_ns=tx.start_ns, duration_ns=tx.duration_ns, idle_ns=tx.idle_ns))
        return found


class ModelLoadRule(AdviceRule):
    """Model load takes longer than every execution together."""

    name = "model_load"

    class Config(AdviceRule.Config):
        min_ratio: float = Field(1.0, gt=0, description="load time / execution time that counts as dominating")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        load = stats.api_prefix("aclmdlLoad", level="acl")
        runs = stats.api(*EXECUTE_APIS, level="acl")
        if not load.count or load.total_ns < self.config.min_ratio * runs.total_ns:
            return []
        return [self.advice(
            "info", f"Model load ({ms(load.total_ns)}) takes longer than all {runs.count:,} executions "
                    f"({ms(runs.total_ns)})",
            f"{load.count:,} aclmdlLoad* call(s) against {runs.count:,} aclmdlExecute call(s).",
            "loading reads and places the model: file I/O that runs once and that profiling cannot tune (CANN's "
            "profiling case studies leave it alone). Judge aclmdlExecute instead, over enough executions; "
            "in a service, load once and keep the model.",
            load_ns=load.total_ns, loads=load.count, execute_ns=runs.total_ns, executions=runs.count)]


class HostGapsRule(AdviceRule):
    """The device is idle most of the time between its first and last task: the host does not feed it."""

    name = "host_gaps"
    needs_timeline = True

    class Config(AdviceRule.Config):
        max_idle_share: float = Field(0.5, ge=0, le=1, description="device idle share above which it fires")
        min_span_ms: float = Field(100, ge=0, description="ignore devices busy for less than this")

    config: Config

    def evaluate(self, stats: Statistics) -> list[Advice]:
        assert stats.timeline is not None
        runs = stats.executions()
        repeated = [tx for tx in stats.timeline.tx if runs and tx.count >= runs / 2]  # ranges run per execution
        marked = ", ".join(f"'{tx.message}' {ms(tx.total_ns / runs)}" for tx in repeated[:3])
        found = []
        for device in stats.timeline.devices:
            idle = share(device.idle_ns, device.span_ns)
            if device.span_ns < self.config.min_span_ms * 1e6 or idle <= self.config.max_idle_share:
                continue
            per_run = f" ({ms(device.idle_ns / runs)} per execution)" if runs else ""
            detail = f"{ms(device.idle_ns)} of {ms(device.span_ns)} without a task{per_run}."
            if marked:
                detail += f" msproftx ranges per execution: {marked}."
            found.append(self.advice(
                "warning", f"Device {device.device} is idle {idle:.0%} of the time between its first and last task",
                detail,
                "the host's own work between executions dominates: overlap it with device work (aclmdlExecuteAsync, "
                "prepare the next input while the device runs, several threads or streams), batch inputs, or move "
                "pre- and post-processing to the device (AIPP, DVPP). Mark host code with msproftx ranges to see "
                "where the time goes.",
                device=device.device, idle_ns=device.idle_ns, span_ns=device.span_ns, idle_share=round(idle, 4)))
        return found
