"""Advice rules: small plugins that read the live statistics and say what to look at.

A rule is a subclass of :class:`AdviceRule` registered under the entry-point group
``ascend_pipeline.advice`` (the built-in rules register there too, pyproject.toml). The
``advice`` sink (stages/sinks/advice.py) builds a :class:`Statistics` view as the run goes,
evaluates every rule at most once a second and writes ``advice.json`` / ``advice.txt``;
``pipeline top`` shows the result. A third-party rule::

    from pipeline.advice import Advice, AdviceRule, Statistics

    class SlowCast(AdviceRule):
        name = "slow_cast"

        class Config(AdviceRule.Config):
            max_share: float = 0.05

        config: Config

        def evaluate(self, stats: Statistics) -> list[Advice]:
            cast = stats.op_types().get("Cast")
            share = cast.total_ns / stats.device_total_ns() if cast and stats.device_total_ns() else 0.0
            if share <= self.config.max_share:
                return []
            return [self.advice("warning", f"Cast takes {share:.0%} of device time", "…", "…")]

    # pyproject.toml:  [project.entry-points."ascend_pipeline.advice"]  slow_cast = "acme_rules:SlowCast"
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import UserError

ADVICE_GROUP = "ascend_pipeline.advice"
Severity = Literal["info", "warning", "error"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
EXECUTE_APIS = ("aclmdlExecute", "aclmdlExecuteAsync", "aclmdlExecuteV2", "aclmdlExecuteAsyncV2")


@dataclass(frozen=True)
class OpStat:
    """One op_statistic row: an op type on one device and core type."""

    device: int
    op_type: str
    core_type: str
    count: int
    total_ns: int
    min_ns: int = 0
    max_ns: int = 0

    @property
    def avg_ns(self) -> float:
        return self.total_ns / self.count if self.count else 0.0


@dataclass(frozen=True)
class ApiStat:
    """One api_statistic row: an API of one level (``acl``, ``runtime``, ``node`` …)."""

    level: str
    name: str
    count: int
    total_ns: int
    min_ns: int = 0
    max_ns: int = 0


@dataclass(frozen=True)
class Totals:
    """Count and time summed over several rows."""

    count: int = 0
    total_ns: int = 0

    def __add__(self, other: Totals) -> Totals:
        return Totals(self.count + other.count, self.total_ns + other.total_ns)


@dataclass(frozen=True)
class DeviceSpan:
    """A device's tasks: from the first start to the last end, and the time they were running."""

    device: int
    tasks: int
    first_ns: int
    last_ns: int
    busy_ns: int  # Σ task durations (tasks on one device rarely overlap), at most the span

    @property
    def span_ns(self) -> int:
        return self.last_ns - self.first_ns

    @property
    def idle_ns(self) -> int:
        return max(0, self.span_ns - self.busy_ns)


@dataclass(frozen=True)
class TxRange:
    """One msproftx range (push/pop or range_start/stop) and how much of it had no profiled work."""

    message: str
    start_ns: int
    end_ns: int
    idle_ns: int  # no AscendCL call and no device task inside (approximate: time is kept in buckets)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class TxStat:
    """msproftx ranges of one message."""

    message: str
    count: int
    total_ns: int
    max_ns: int


@dataclass(frozen=True)
class TimelineFacts:
    """What the advice sink learns from the task rows (present when it takes ``aggregate.tasks``)."""

    devices: tuple[DeviceSpan, ...] = ()
    tx: tuple[TxStat, ...] = ()
    longest_ranges: tuple[TxRange, ...] = ()  # the longest msproftx ranges of the run, longest first


@dataclass(frozen=True)
class Statistics:
    """The live statistics a rule reads: op_statistic and api_statistic rows so far, and timeline facts."""

    ops: tuple[OpStat, ...] = ()
    apis: tuple[ApiStat, ...] = ()
    timeline: TimelineFacts | None = None
    final: bool = False  # the run has ended: these are the whole run's figures

    def op_types(self) -> dict[str, Totals]:
        """Per op type, summed over devices and core types."""
        out: dict[str, Totals] = {}
        for op in self.ops:
            out[op.op_type] = out.get(op.op_type, Totals()) + Totals(op.count, op.total_ns)
        return out

    def device_total_ns(self) -> int:
        return sum(op.total_ns for op in self.ops)

    def api(self, *names: str, level: str | None = None) -> Totals:
        """Calls of the named APIs (of one level, if given), summed."""
        wanted = set(names)
        return sum((Totals(a.count, a.total_ns) for a in self.apis
                    if a.name in wanted and (level is None or a.level == level)), Totals())

    def api_prefix(self, prefix: str, level: str | None = None) -> Totals:
        return sum((Totals(a.count, a.total_ns) for a in self.apis
                    if a.name.startswith(prefix) and (level is None or a.level == level)), Totals())

    def executions(self) -> int:
        """Model executions seen (aclmdlExecute and its variants); 0 when the app runs no model."""
        return self.api(*EXECUTE_APIS, level="acl").count

    @classmethod
    def from_rows(cls, op_rows: Iterable[Sequence[Any]], api_rows: Iterable[Sequence[Any]],
                  timeline: TimelineFacts | None = None, final: bool = False) -> Statistics:
        """From the aggregator's snapshot rows (stages/schema.py OP_STATISTIC_COLUMNS, API_STATISTIC_COLUMNS)."""
        ops = tuple(OpStat(int(d), str(t), str(c), int(n), int(total), int(low), int(high))
                    for d, t, c, n, total, low, high in op_rows)
        apis = tuple(ApiStat(str(level), str(name), int(n), int(total), int(low), int(high))
                     for level, name, n, total, low, high, *_ in api_rows)
        return cls(ops, apis, timeline, final)


@dataclass(frozen=True)
class Advice:
    """One finding: what was seen (title, detail), what to do (suggestion), and the figures behind it."""

    rule: str
    severity: Severity
    title: str
    detail: str
    suggestion: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Advice:
        return cls(str(data["rule"]), data["severity"], str(data["title"]), str(data.get("detail", "")),
                   str(data.get("suggestion", "")), dict(data.get("evidence", {})))


class AdviceRule:
    """Base class of a rule. Set ``name``; put thresholds in a nested ``Config`` (pydantic, unknown keys
    refused; the sink's ``options.<name>`` sets them); return findings from :meth:`evaluate`."""

    name: ClassVar[str] = ""
    needs_timeline: ClassVar[bool] = False  # evaluate only when the sink takes aggregate.tasks

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def __init__(self, config: Any = None) -> None:
        self.config = config if isinstance(config, self.Config) else self.Config.model_validate(config or {})

    def evaluate(self, stats: Statistics) -> Iterable[Advice]:
        raise NotImplementedError

    def advice(self, severity: Severity, title: str, detail: str, suggestion: str, **evidence: Any) -> Advice:
        return Advice(self.name, severity, title, detail, suggestion, evidence)


@functools.cache
def _registered() -> tuple[EntryPoint, ...]:
    """The group's entry points, read once per process (each read scans every installed distribution, and a
    rule set names several rules)."""
    return tuple(entry_points(group=ADVICE_GROUP))


def available_rules() -> dict[str, str]:
    """Registered rule name → ``module:Class`` (not imported)."""
    return {ep.name: ep.value for ep in _registered()}


def load_rule_class(name: str) -> type[AdviceRule]:
    """A registered rule name, or ``package.module:Class``."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            found = getattr(importlib.import_module(module_name), attr, None)
        except ImportError as exc:
            raise UserError(f"cannot import module '{module_name}' for advice rule '{name}': {exc}") from None
    else:
        matches = [ep for ep in _registered() if ep.name == name]
        if not matches:
            known = ", ".join(sorted(available_rules())) or "none installed"
            raise UserError(f"unknown advice rule '{name}'", f"known rules: {known}; or use 'package.module:Class'")
        try:
            found = matches[0].load()
        except Exception as exc:  # one broken plugin is reported, not fatal to the others
            raise UserError(f"advice rule '{name}' failed to load: {exc}") from None
    if not (isinstance(found, type) and issubclass(found, AdviceRule)):
        raise UserError(f"'{name}' is not an advice rule class (subclass pipeline.advice.AdviceRule)")
    return found


def build_rules(selected: Sequence[str] | None = None, disabled: Sequence[str] = (),
                options: Mapping[str, Mapping[str, Any]] | None = None) -> list[AdviceRule]:
    """Instances of the selected rules (default: every registered one) less the disabled ones."""
    names = list(selected) if selected is not None else sorted(available_rules())
    options = options or {}
    rules: list[AdviceRule] = []
    for name in names:
        if name in disabled:
            continue
        cls = load_rule_class(name)
        key = name if name in options else cls.name
        try:
            rules.append(cls(options.get(key)))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise UserError(f"advice rule '{name}' option {where}: {error['msg'].lower()}",
                            f"options: {', '.join(cls.Config.model_fields) or 'none'}") from None
    unknown = [name for name in options if name not in {r.name for r in rules} | set(names) | set(disabled)]
    if unknown:
        raise UserError(f"options for advice rule '{unknown[0]}', which is not selected",
                        f"selected: {', '.join(r.name for r in rules)}")
    return rules


def evaluate_rules(rules: Iterable[AdviceRule], stats: Statistics) -> list[Advice]:
    """Every rule's findings, errors first, then warnings, then notes. A rule that raises gives one
    ``error`` finding naming it instead of stopping the others."""
    found: list[Advice] = []
    for rule in rules:
        if rule.needs_timeline and stats.timeline is None:
            continue
        try:
            found.extend(rule.evaluate(stats))
        except Exception as exc:  # a third-party rule's bug must not stop the sink
            found.append(Advice(rule.name, "error", f"rule {rule.name} failed", f"{type(exc).__name__}: {exc}",
                                "fix or disable the rule (advice sink: disable: [name])"))
    return sorted(found, key=lambda a: SEVERITY_ORDER.get(a.severity, 3))


def advice_text(advice: Sequence[Advice]) -> str:
    """advice.txt: one paragraph per finding."""
    if not advice:
        return "no advice: no rule found anything to point out\n"
    parts = []
    for item in advice:
        lines = [f"[{item.severity}] {item.title}  ({item.rule})"]
        if item.detail:
            lines.append(f"  {item.detail}")
        if item.suggestion:
            lines.append(f"  → {item.suggestion}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
