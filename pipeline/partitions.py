"""Partitions by device: a stage entry with ``partitions: N`` runs as N stage processes, ``{id}-0`` … ``{id}-{N-1}``.

Partition k takes the devices whose id is k modulo N, and every record that belongs to no device (the host's).
A producer sends a batch whose ``meta["device"]`` is an int only to the partition of that device, and a batch
without one to every partition. A stage reading a partitioned producer with the same number of partitions reads
only the producer partition of its own index (paired: no routing needed); otherwise it reads all of them (fan-in).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import TYPE_CHECKING, Any

from pipeline.errors import UserError

if TYPE_CHECKING:
    from pipeline.config import PipelineConfig, StageSpec

MAX_PARTITIONS = 64
AUTO_MAX = 8  # `partitions: auto`: one per CPU core, at most this many
SEPARATOR = "-"  # a partition's id is `{stage id}-{k}`: letters of a stage id, safe in socket and file names
_DEVICE_PATH = re.compile(r"device_([0-9]{1,5})/")
HINT = "partitions: N (1 to 64), or auto for one per CPU core (at most 8)"


def auto_count() -> int:
    """What ``partitions: auto`` means: one partition per CPU core, at least 1, at most AUTO_MAX. The devices of
    a board are not known when a live run starts, so the cores decide."""
    return max(1, min(AUTO_MAX, os.cpu_count() or 1))


def parse_count(value: Any, where: str) -> int:
    """The ``partitions`` key: ``auto`` or a whole number from 1 to MAX_PARTITIONS (digits from `${VAR}` too)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return auto_count()
    count: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        count = value
    elif isinstance(value, str) and value.strip().isdigit():
        count = int(value.strip())
    if count is None or not 1 <= count <= MAX_PARTITIONS:
        raise UserError(f"{where}: must be 'auto' or a whole number from 1 to {MAX_PARTITIONS}, got {value!r}", HINT)
    return count


def partition_id(stage_id: str, partition: int) -> str:
    return f"{stage_id}{SEPARATOR}{partition}"


def check_partitionable(spec: StageSpec) -> None:
    """Only stages that keep devices apart (the decoder, the aggregator) run in partitions."""
    if not spec.cls.partitionable:
        raise UserError(f"{spec.where}.partitions: a {spec.cls.role} of type '{spec.type_name}' does not run in "
                        "partitions", "give partitions to decoder and aggregator stages only")


def expand(declared: dict[str, StageSpec], where: str) -> dict[str, StageSpec]:
    """The stage graph with every partitioned stage replaced by its partitions, inputs rewritten: a reference to a
    partitioned stage reads its paired partition, or all of them."""
    from pipeline.config import STAGE_ID

    stages: dict[str, StageSpec] = {}
    for sid, spec in declared.items():
        if spec.partitions == 1:
            stages[sid] = spec
            continue
        if spec.endpoint:
            raise UserError(f"{spec.where}.endpoint: a stage of {spec.partitions} partitions binds one input socket "
                            "per partition", "leave endpoint out (each partition gets a private ipc socket), or "
                            "run the stage unpartitioned")
        for k in range(spec.partitions):
            pid = partition_id(sid, k)
            if pid in declared:
                raise UserError(f"{where}: stages.{pid}: this id is partition {k}'s of '{sid}' "
                                f"(partitions: {spec.partitions})", "rename one of the two stages")
            if not STAGE_ID.match(pid):
                raise UserError(f"{where}: stages.{sid}: a partitioned stage's id takes '-{k}' and must stay within "
                                "40 letters, digits, '_' and '-'", "use a shorter stage id")
            stages[pid] = dataclasses.replace(spec, stage_id=pid, partition=k, inputs=list(spec.inputs))
    for spec in stages.values():
        spec.inputs = [ref for producer, port in spec.inputs for ref in _references(declared, spec, producer, port)]
    return stages


def _references(declared: dict[str, StageSpec], consumer: StageSpec, producer: str, port: str
                ) -> list[tuple[str, str]]:
    source = declared.get(producer)
    if source is None or source.partitions == 1:
        return [(producer, port)]
    if consumer.partitions == source.partitions:
        return [(partition_id(producer, consumer.partition), port)]
    return [(partition_id(producer, k), port) for k in range(source.partitions)]


def check_reads(config: PipelineConfig, where: str) -> None:
    """A partitioned stage whose partitions each hold the host's records (the decoder) may be read only by
    stages paired with it: reading all its partitions would take the host's records once per partition."""
    for spec in config.enabled_stages().values():
        for producer, _port in spec.inputs:
            source = config.stages.get(producer)
            if source is None or source.partitions == 1 or source.cls.partition_fan_in:
                continue
            if spec.partitions != source.partitions:
                raise UserError(f"{spec.where}.inputs: '{source.group}' runs as {source.partitions} partitions, each "
                                "with the host's records", f"give '{spec.group}' partitions: {source.partitions} "
                                "too (partition k then reads partition k), or run "
                                f"'{source.group}' unpartitioned")


def route(producer: StageSpec, consumer: StageSpec) -> tuple[int, int] | None:
    """(partition, partitions) of a consumer that takes only its devices' batches from ``producer``; None when it
    takes all (it is not partitioned, or it is paired with this producer partition)."""
    if consumer.partitions == 1 or producer.partitions == consumer.partitions:
        return None
    return consumer.partition, consumer.partitions


def device_of(meta: dict[str, Any]) -> int | None:
    """The device a batch belongs to: ``meta["device"]``, or the folder of the file it carries (a control file's
    ``path``, ``device_N/…``); None: the host's, or no device."""
    device = meta.get("device")
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    path = meta.get("path")
    if device is None and isinstance(path, str):
        match = _DEVICE_PATH.match(path)
        if match is not None:
            return int(match.group(1))
    return None


def takes(route_to: tuple[int, int] | None, meta: dict[str, Any]) -> bool:
    """Whether a batch with ``meta`` goes on a link routed ``route_to``: a device's batch to its partition only,
    a batch of no device (the host's) to every partition."""
    if route_to is None:
        return True
    device = device_of(meta)
    if device is None:
        return True
    partition, partitions = route_to
    return device % partitions == partition
