"""Host task_tracks waiting to be described, and what the host index says about a window of them at once.

A window is the rest of one decoded chunk of task_tracks. For each task it takes, by a search per thread
(HostIndex's numpy columns), what HostIndex's per-task lookups give: its Node API (the latest at or before it,
still open at its time), its node_basic_info since that API's start, the op's tensor_info and context_id_info
entries, and the ModelExecute window holding it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stages.aggregator.join import HostIndex, latest_positions


@dataclass(slots=True)
class TrackChunk:
    """A decoded chunk of task_tracks (``legacy``: runtime tracks of the legacy layout), from row ``at`` on."""

    rows: np.ndarray
    legacy: bool = False
    at: int = 0


@dataclass
class HostQueue:
    """Host task_tracks still to be described, in arrival order; its length counts tracks, not chunks."""

    chunks: deque[TrackChunk] = field(default_factory=deque)
    count: int = 0

    def __len__(self) -> int:
        return self.count

    def add(self, rows: np.ndarray, legacy: bool = False) -> None:
        if len(rows):
            self.chunks.append(TrackChunk(rows, legacy))
            self.count += len(rows)

    def advance(self, chunk: TrackChunk, done: int) -> None:
        """``done`` more tracks of the first chunk are described (the chunk goes once it has none left)."""
        chunk.at += done
        self.count -= done
        if chunk.at >= len(chunk.rows):
            self.chunks.popleft()

    def first_ts(self) -> int | None:
        return int(self.chunks[0].rows["ts_ns"][self.chunks[0].at]) if self.chunks else None


@dataclass
class TrackLookups:
    """For each task of a window: its Node API (``api``: found; its start, item and connection id), its
    node_basic_info (``node``: found; ``node_*``: its fields), ``op_hash`` (the node's op name, else the API's
    item, else 0), its tensor entry's key id (-1: none), its context_id_info (``context``: found, by position in
    its thread's log: ``context_at``), and its model window (``model``: found; ``model_id``, ``iteration``)."""

    api: np.ndarray
    api_start: np.ndarray
    api_item: np.ndarray
    api_connection: np.ndarray
    node: np.ndarray
    node_fields: dict[str, np.ndarray]
    op_hash: np.ndarray
    tensor_key: np.ndarray
    context: np.ndarray
    context_at: np.ndarray
    model: np.ndarray
    model_id: np.ndarray
    iteration: np.ndarray


NODE_COLUMNS = ("op_name", "op_type", "task_type", "block_num", "op_state", "op_flag")


def look_up(index: HostIndex, threads: np.ndarray, ts: np.ndarray) -> TrackLookups:
    """The host index's entries for tasks on ``threads`` at ``ts``, thread by thread."""
    count = len(ts)
    found = TrackLookups(
        np.zeros(count, bool), np.zeros(count, np.int64), np.zeros(count, np.uint64), np.zeros(count, np.int64),
        np.zeros(count, bool), {name: np.zeros(count, np.uint64 if name in ("op_name", "op_type") else np.int64)
                                for name in NODE_COLUMNS},
        np.zeros(count, np.uint64), np.full(count, -1, np.int64), np.zeros(count, bool),
        np.full(count, -1, np.int64), np.zeros(count, bool), np.zeros(count, np.uint64), np.zeros(count, np.int64))
    first = int(threads[0]) if count else 0
    if count and bool((threads == first).all()):
        _look_up_thread(index, first, ts, found, slice(None))
        return found
    for thread in np.unique(threads).tolist():
        chosen = np.flatnonzero(threads == thread)
        _look_up_thread(index, thread, ts[chosen], found, chosen)
    return found


def _latest(columns: dict[str, np.ndarray], ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions (clipped to 0) of the latest entries at or before ``ts``, and whether there is one."""
    at = latest_positions(columns["time"], ts)
    return np.maximum(at, 0), at >= 0


def _look_up_thread(index: HostIndex, thread: int, ts: np.ndarray, found: TrackLookups, chosen: Any) -> None:
    apis = index.api_columns(thread)
    at, api = _latest(apis, ts)
    if len(apis["time"]):
        api &= apis["end"][at] >= ts
        found.api[chosen] = api
        found.api_start[chosen] = since = np.where(api, apis["time"][at], 0)
        found.api_item[chosen] = api_item = np.where(api, apis["item"][at], np.uint64(0))
        found.api_connection[chosen] = np.where(api, apis["connection"][at], 0)
    else:
        api, since, api_item = api & False, np.zeros(len(ts), np.int64), np.zeros(len(ts), np.uint64)
    nodes = index.node_columns(thread)
    at, node = _latest(nodes, ts)
    if len(nodes["time"]):
        node &= nodes["time"][at] >= since
        found.node[chosen] = node
        for name in NODE_COLUMNS:
            found.node_fields[name][chosen] = np.where(node, nodes[name][at], 0)
        op_hash = np.where(node, nodes["op_name"][at], api_item)
    else:
        node, op_hash = node & False, api_item
    found.op_hash[chosen] = op_hash
    tensors = index.tensor_columns(thread)
    at, tensor = _latest(tensors, ts)
    if len(tensors["time"]):
        tensor &= node & (tensors["op_name"][at] == op_hash) & (tensors["time"][at] >= since)
        found.tensor_key[chosen] = np.where(tensor, tensors["key"][at], -1)
    contexts = index.context_columns(thread)
    at, context = _latest(contexts, ts)
    if len(contexts["time"]):
        context &= (contexts["op_name"][at] == op_hash) & (contexts["time"][at] >= since)
        found.context[chosen] = context
        found.context_at[chosen] = np.where(context, at, -1)
    models = index.model_columns(thread)
    at, model = _latest(models, ts)
    if len(models["time"]):
        model &= models["end"][at] >= ts
        found.model[chosen] = model
        found.model_id[chosen] = np.where(model, models["model"][at], np.uint64(0))
        found.iteration[chosen] = np.where(model, models["iteration"][at], 0)
