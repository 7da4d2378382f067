"""One aggregator's stream from its partitions' (``partitions: N``; stages/aggregator/partition.py).

Row batches (task, api, tx …) pass as they come: each row is in one partition's stream. A statistics snapshot
(op_statistic, api_statistic) or a run_info batch holds only its partition's devices, and says so in its meta
(``partition``, ``partitions``): the sink keeps the latest of each partition and reads their merge instead, the
snapshots' rows one partition after the other, final once every partition's latest is final; run_info with the
devices of all. An API's api_statistic rows from several partitions (the legacy layout's API records are in each
device's folder) become one. A batch without those keys (an aggregator of one partition) passes as it is.
"""

from __future__ import annotations

from typing import Any

import msgpack

from pipeline.stage import Batch
from stages.schema import pack_rows, unpack_rows

STATISTICS = ("op_statistic", "api_statistic")


class PartitionMerge:
    """The latest snapshot and run_info of each aggregator partition, merged as one aggregator's."""

    def __init__(self) -> None:
        self.snapshots: dict[str, dict[int, Batch]] = {}
        self.run_infos: dict[int, dict[str, Any]] = {}

    def merged(self, batch: Batch) -> Batch:
        """``batch`` as one aggregator's: a partition's snapshot or run_info becomes the merge of every
        partition's latest; any other batch is returned as it is."""
        count = batch.meta.get("partitions")
        if not isinstance(count, int) or count <= 1 or batch.kind not in (*STATISTICS, "run_info"):
            return batch
        partition = int(batch.meta.get("partition", 0))
        if batch.kind == "run_info":
            rows = unpack_rows(batch)
            if rows and isinstance(rows[0][0], dict):
                self.run_infos[partition] = rows[0][0]
            return pack_rows("run_info", [[merged_run_info(self.run_infos)]], batch.port)
        latest = self.snapshots.setdefault(batch.kind, {})
        latest[partition] = batch
        final = len(latest) == count and all(bool(part.meta.get("final")) for part in latest.values())
        return _merged_snapshot(batch.kind, [latest[k] for k in sorted(latest)], batch.port, final)


def merged_run_info(parts: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The run's facts from every partition's: the lowest partition's session facts, every partition's devices
    (by device id), the latest end (each partition has the host's session facts)."""
    first = parts[min(parts)]
    devices: dict[str, Any] = {}
    for partition in sorted(parts):
        devices.update(parts[partition].get("devices") or {})
    ordered = dict(sorted(devices.items(), key=lambda item: _device_order(item[0])))
    return {**first, "devices": ordered, "end_ns": max(int(info.get("end_ns") or 0) for info in parts.values())}


def _device_order(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 30, key)


def _merged_snapshot(kind: str, parts: list[Batch], port: str, final: bool) -> Batch:
    combine = kind == "api_statistic" and sum(1 for part in parts if part.count) > 1
    if all(part.body[:4] == b"\xff\xff\xff\xff" for part in parts):  # Arrow IPC streams: concatenated as tables
        import pyarrow as pa

        from stages import tables

        merged = pa.concat_tables([tables.unpack_table(part) for part in parts])
        if combine:
            return tables.pack_columns(kind, _one_row_per_api(tables.rows_of_table(merged)), port, {"final": final})
        return tables.pack_table(kind, merged, port, {"final": final})
    rows = [row for part in parts for row in unpack_rows(part)]
    if combine:
        rows = _one_row_per_api(rows)
    return Batch(kind=kind, count=len(rows), meta={"final": final}, body=msgpack.packb(rows, use_bin_type=True),
                 port=port)


def _one_row_per_api(rows: list[list[Any]]) -> list[list[Any]]:
    """api_statistic rows (level, name, count, total, min, max, Σx²) with those of one API added together."""
    merged: dict[tuple[Any, Any], list[Any]] = {}
    for row in rows:
        found = merged.get((row[0], row[1]))
        if found is None:
            merged[(row[0], row[1])] = list(row)
            continue
        found[2] += row[2]
        found[3] += row[3]
        found[4], found[5] = min(found[4], row[4]), max(found[5], row[5])
        found[6] += row[6]
    return list(merged.values())
