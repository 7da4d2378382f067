"""Pipeline configs: YAML → interpolated → validated stage graph, with located errors."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline import partitions
from pipeline.errors import UserError
from pipeline.interpolate import InterpolationError, interpolate_tree
from pipeline.plugins import load_stage_class
from pipeline.security import CurveKeys
from pipeline.stage import Stage, StageConfig

COMMON_STAGE_KEYS = ("type", "inputs", "endpoint", "enabled", "partitions")
STAGE_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


class BatchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_records: int = Field(1024, ge=1)
    max_bytes: int = Field(1 << 20, ge=1024, le=64 << 20)  # under transport.MAX_MESSAGE_BYTES
    flush_ms: int = Field(50, ge=1, le=10_000)


class CurveSettings(BaseModel):
    """CURVE keys for tcp endpoints (files from `pipeline keys generate`; paths relative to the working folder)."""

    model_config = ConfigDict(extra="forbid")
    secret_key: str  # this host's NAME.key_secret
    server_key: str | None = None  # public NAME.key of the host whose tcp endpoints this one connects to
    allowed_clients: str | None = None  # folder of public .key files allowed to connect to tcp endpoints bound here


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("live", pattern=r"^[A-Za-z0-9_.-]{1,40}$")
    output: str = "./out/live"
    socket_dir: str | None = None
    batch: BatchSettings = BatchSettings()  # type: ignore[call-arg]
    progress_s: float = Field(5.0, gt=0)
    drain_timeout_s: float = Field(60.0, gt=0)
    top_endpoint: str | None = None
    curve: CurveSettings | None = None
    metrics_port: int | None = Field(None, ge=1, le=65535)  # Prometheus text endpoint of the run (pipeline.metrics)
    metrics_host: str = "127.0.0.1"
    insecure_tcp: bool = False  # allow tcp endpoints without CURVE (anyone who reaches the port can feed or read)
    write_retry_s: float = Field(2.0, gt=0, le=600)  # a write the disk refused (full, read-only) is retried this often
    heartbeat_timeout_s: float = Field(30.0, gt=0)  # a stage silent this long is shown as stuck
    kill_stuck: bool = False  # kill a stuck stage (then handled as a crash) instead of only reporting it
    checkpoint_s: float = Field(2.0, ge=0)  # seconds between checkpoint epochs (crash recovery); 0 = off
    max_restarts: int = Field(3, ge=0)  # restarts after crashes, per stage and run, before the run fails


@dataclass
class StageSpec:
    """One stage of the graph. Its class is imported and its settings validated when first asked for: a stage
    process needs only its own (a sink then starts without numpy or the other stages' modules)."""

    stage_id: str
    type_name: str
    settings: dict[str, Any]  # the stage's own keys, interpolated, not validated yet
    inputs: list[tuple[str, str]]  # (producer stage id, port)
    endpoint: str | None
    enabled: bool
    where: str = ""  # `FILE: stages.ID`, for errors
    group: str = ""  # the stage id in the YAML file; a partition's id is `{group}-{partition}`
    partition: int = 0
    partitions: int = 1
    _cls: type[Stage] | None = field(default=None, repr=False)
    _config: StageConfig | None = field(default=None, repr=False)

    @property
    def cls(self) -> type[Stage]:
        if self._cls is None:
            self._cls = load_stage_class(self.type_name, self.where)
        return self._cls

    @property
    def config(self) -> StageConfig:
        if self._config is None:
            try:
                self._config = self.cls.Config.model_validate(self.settings)
            except ValidationError as exc:
                raise _format_validation(exc, self.where, self.cls) from None
        return self._config


@dataclass
class PipelineConfig:
    path: Path
    run: RunSettings
    stages: dict[str, StageSpec] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)  # the tree as read (with overrides), not interpolated

    @property
    def output_dir(self) -> Path:
        return Path(self.run.output).expanduser().resolve()

    def enabled_stages(self) -> dict[str, StageSpec]:
        return {sid: spec for sid, spec in self.stages.items() if spec.enabled}

    def tcp_endpoints(self) -> list[tuple[str, str]]:
        """(config key, endpoint) of every tcp endpoint the run binds or connects to."""
        found = [(f"stages.{sid}.endpoint", spec.endpoint) for sid, spec in self.enabled_stages().items()
                 if spec.endpoint and spec.endpoint.startswith("tcp://")]
        for sid, spec in self.enabled_stages().items():  # a stage's own sockets (the collector's tx_endpoint)
            found += [(f"stages.{sid}.{key}", value) for key, value in spec.settings.items()  # none by default
                      if key.endswith("_endpoint") and isinstance(value, str) and value.startswith("tcp://")]
        if self.run.top_endpoint and self.run.top_endpoint.startswith("tcp://"):
            found.append(("run.top_endpoint", self.run.top_endpoint))
        return found

    def curve_keys(self) -> CurveKeys | None:
        """The run's CURVE keys, read from their files (None: no curve section)."""
        curve = self.run.curve
        if curve is None:
            return None
        return CurveKeys.load(Path(curve.secret_key).expanduser(),
                              Path(curve.server_key).expanduser() if curve.server_key else None,
                              Path(curve.allowed_clients).expanduser() if curve.allowed_clients else None)

    def consumers(self, producer: str, port: str) -> list[str]:
        """Enabled stages that take ``producer.port`` as an input, in config order."""
        return [sid for sid, spec in self.enabled_stages().items() if (producer, port) in spec.inputs]

    def route(self, producer: str, consumer: str) -> tuple[int, int] | None:
        """How ``producer`` splits what it sends ``consumer`` (see pipeline.partitions): (partition, partitions) of a
        consumer that takes only its share of the devices; None when it takes everything (not partitioned, or
        paired with the producer partition of its own index)."""
        return partitions.route(self.stages[producer], self.stages[consumer])

    def partition_groups(self) -> dict[str, list[str]]:
        """Stage ids of every partitioned stage in the YAML file → its partitions' ids."""
        groups: dict[str, list[str]] = {}
        for sid, spec in self.stages.items():
            if spec.partitions > 1:
                groups.setdefault(spec.group, []).append(sid)
        return groups


def _located(where: str, message: str, hint: str = "") -> UserError:
    return UserError(f"{where}: {message}", hint)


def _parse_enabled(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("", "true", "yes", "on", "1"):
        return True  # empty: an interpolation such as ${PROF_DIR:+false} that left nothing
    if text in ("false", "no", "off", "0"):
        return False
    raise _located(where, f"enabled must be true or false, got {value!r}")


def _parse_input(ref: Any, where: str) -> tuple[str, str]:
    if not isinstance(ref, str) or not ref:
        raise _located(where, f"inputs entries are stage ids or 'stage.port', got {ref!r}")
    stage, _, port = ref.partition(".")
    return stage, port or "out"


def _sentence(message: str) -> str:
    """pydantic's message as the middle of our line: its first letter small, the rest (a pattern) as it is."""
    return message[:1].lower() + message[1:]


def _format_validation(exc: ValidationError, where: str, cls: type[Stage]) -> UserError:
    error = exc.errors()[0]
    key = ".".join(str(part) for part in error["loc"])
    allowed = ", ".join(list(COMMON_STAGE_KEYS) + list(cls.Config.model_fields))
    if error["type"] == "extra_forbidden":
        return _located(f"{where}.{key}", "unknown key", f"allowed keys: {allowed}")
    return _located(f"{where}.{key}" if key else where, _sentence(error["msg"]), f"allowed keys: {allowed}")


def parse_config(raw: Any, path: Path, env: Mapping[str, str] | None = None, only: str | None = None) -> PipelineConfig:
    """Validate a parsed YAML tree; every error names the file, the stage id and the key.

    ``only``: the process runs that one stage (the supervisor validated the whole graph before starting it), so
    only its class is imported and its settings validated; the others are read for their wiring."""
    where = str(path)
    if not isinstance(raw, dict):
        raise _located(where, "a pipeline config is a mapping with 'run' and 'stages'",
                       "configs/live.yaml is one to start from; docs/configuration.md has every key")
    unknown = set(raw) - {"run", "stages", "version"}
    if unknown:
        raise _located(f"{where}: {sorted(unknown)[0]}", "unknown top-level key", "allowed: version, run, stages")
    try:
        tree = interpolate_tree(raw, os.environ if env is None else env)
    except InterpolationError as exc:
        raise _located(where, str(exc)) from None
    if tree.get("version", 1) != 1:
        raise _located(f"{where}: version", f"unsupported config version {tree['version']!r}", "this release reads 1")
    try:
        run = RunSettings.model_validate(tree.get("run") or {})
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        message = "unknown key" if error["type"] == "extra_forbidden" else _sentence(error["msg"])
        raise _located(f"{where}: run.{key}", message,
                       f"allowed keys: {', '.join(RunSettings.model_fields)}") from None
    stages_tree = tree.get("stages")
    if not isinstance(stages_tree, dict) or not stages_tree:
        raise _located(where, "'stages' must map stage ids to stage settings")
    config = PipelineConfig(path=path, run=run, raw=raw)
    declared: dict[str, StageSpec] = {}
    for stage_id, body in stages_tree.items():
        if not STAGE_ID.match(str(stage_id)):
            raise _located(f"{where}: stages.{stage_id}", "stage ids use letters, digits, '_' and '-' (at most 40)")
        spec = declared[str(stage_id)] = _parse_stage(str(stage_id), body, where)
        if only is None or spec.stage_id == only or (spec.partitions > 1 and only.startswith(f"{spec.stage_id}-")):
            spec.config  # noqa: B018 (imports the class, validates the settings: errors in file order)
            if isinstance(body, dict) and "partitions" in body:
                partitions.check_partitionable(spec)
    config.stages = partitions.expand(declared, where)
    if only is None:
        _check_graph(config, where)
        partitions.check_reads(config, where)
    _check_tcp_security(config, where)
    return config


def _check_tcp_security(config: PipelineConfig, where: str) -> None:
    tcp = config.tcp_endpoints()
    if tcp and config.run.curve is None and not config.run.insecure_tcp:
        key, endpoint = tcp[0]
        raise _located(f"{where}: {key}", f"tcp endpoint {endpoint} without CURVE keys",
                       "set run.curve (keys from `pipeline keys generate`), or run.insecure_tcp: true on a "
                       "network you trust")


def _parse_stage(stage_id: str, body: Any, where: str) -> StageSpec:
    at = f"{where}: stages.{stage_id}"
    if not isinstance(body, dict):
        raise _located(at, "stage settings must be a mapping with at least 'type'")
    if "type" not in body:
        raise _located(at, "missing 'type'", "e.g. type: decoder")
    own = {key: value for key, value in body.items() if key not in COMMON_STAGE_KEYS}
    inputs_raw = body.get("inputs", [])
    if not isinstance(inputs_raw, list):
        raise _located(f"{at}.inputs", "must be a list of stage ids or 'stage.port'")
    endpoint = body.get("endpoint")
    if endpoint is not None and not str(endpoint).startswith(("tcp://", "ipc://")):
        raise _located(f"{at}.endpoint", f"unsupported endpoint {endpoint!r}", "use tcp://HOST:PORT or ipc://PATH")
    count = partitions.parse_count(body.get("partitions", 1), f"{at}.partitions")
    return StageSpec(stage_id, str(body["type"]), own, [_parse_input(ref, f"{at}.inputs") for ref in inputs_raw],
                     str(endpoint) if endpoint else None, _parse_enabled(body.get("enabled", True), f"{at}.enabled"),
                     at, group=stage_id, partitions=count)


def _check_graph(config: PipelineConfig, where: str) -> None:
    enabled = config.enabled_stages()
    for spec in enabled.values():
        at = f"{spec.where}.inputs"  # a partition's errors name its entry in the file
        if spec.cls.role in ("transform", "sink") and not spec.inputs:
            raise _located(at, f"a {spec.cls.role} needs at least one input")
        if spec.cls.role == "source" and spec.inputs:
            raise _located(at, "a source takes no inputs")
        for producer, port in spec.inputs:
            if producer not in config.stages:
                raise _located(at, f"unknown stage '{producer}'", f"stages: {', '.join(config.stages)}")
            if not config.stages[producer].enabled and not (spec.endpoint or "").startswith("tcp://"):
                raise _located(at, f"input '{producer}' is disabled",
                               "enable it, or give this stage a tcp endpoint to receive it from another host")
            ports = config.stages[producer].cls.outputs
            if port not in ports:
                raise _located(at, f"stage '{producer}' has no output '{port}'",
                               f"outputs: {', '.join(ports) or 'none'}")
    _check_acyclic(enabled, where)


def _check_acyclic(stages: dict[str, StageSpec], where: str) -> None:
    state: dict[str, int] = {}

    def visit(sid: str, trail: list[str]) -> None:
        if state.get(sid) == 2:
            return
        if state.get(sid) == 1:
            raise _located(f"{where}: stages", f"cycle in inputs: {' -> '.join(trail + [sid])}")
        state[sid] = 1
        for producer, _ in stages[sid].inputs:
            if producer in stages:  # a disabled producer runs elsewhere: not part of this graph
                visit(producer, trail + [sid])
        state[sid] = 2

    for sid in stages:
        visit(sid, [])


MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (plain YAML keeps the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue  # `<<: *base` may be overridden by a key of its own; odd keys are YAML's to judge
            key = self.construct_scalar(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice in one mapping",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None, only: str | None = None
                ) -> PipelineConfig:
    """Read, interpolate and validate a config file. ``overrides`` patch the parsed tree
    (``{"run.output": "...", "stages.collect.path": "..."}``) before validation; ``only``: see parse_config."""
    config_path = Path(path)
    if not config_path.is_file():
        raise UserError(f"config file not found: {config_path}", "pass the path of a pipeline YAML file")
    try:
        raw = yaml.load(config_path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"{config_path}:{mark.line + 1}:{mark.column + 1}" if mark else str(config_path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{place}: invalid YAML: {problem}", "fix the syntax at that line") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read config {config_path}: {exc}",
                        "a pipeline config is a YAML text file in UTF-8, such as configs/live.yaml") from None
    for dotted, value in (overrides or {}).items():
        node = raw
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return parse_config(raw, config_path, only=only)


def graph_text(config: PipelineConfig) -> str:
    """The stage graph as text: one line per edge, then stages without edges."""
    lines = [f"run {config.run.name} → {config.output_dir}"]
    for sid, spec in config.stages.items():
        state = "" if spec.enabled else "  (disabled)"
        if spec.partitions > 1:
            state += f"  (partition {spec.partition} of {spec.group}'s {spec.partitions})"
        lines.append(f"  [{spec.cls.role}] {sid} ({spec.type_name}){state}")
        for producer, port in spec.inputs:
            lines.append(f"      {producer}.{port} ──▶ {sid}")
    return "\n".join(lines)
