"""API records → API rows and api_statistic durations, a batch at a time.

A batch of API records is resolved as columns: its names are looked up once per distinct (level, type, item)
key, not per record, and its rows leave as numpy columns (:class:`stages.aggregator.columns.ColumnRows`). The
order things happen in is the per-record order: symbols are interned by first occurrence, statistics keys
grow in first-occurrence order and take their durations in record order, and a record whose name is not known
yet holds back the records after it (hash_dic and type_info carry no times: a name is waited for until it
comes or the job ends).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stages.decoder import host_records
from stages.formats import raw

NAMED_LEVELS = frozenset(level for level in raw.LEVEL_NAMES if level != raw.LEVEL_HCCL)  # named by type_info
API_NAMES_LIMIT = 65_536  # distinct API names remembered with their symbol ids
StatKey = tuple[str, str]  # (level name, API name): an api_statistic row


@dataclass
class ApiChunk:
    """One batch of API records as columns, resolved from ``cursor`` on in arrival order."""

    levels: np.ndarray  # int64, like every column here
    types: np.ndarray
    items: np.ndarray  # uint64
    starts: np.ndarray
    ends: np.ndarray
    threads: np.ndarray
    names: list[str] | None  # legacy records name themselves
    first_connection: int
    cursor: int = 0

    @classmethod
    def of(cls, arr: np.ndarray, first_connection: int) -> ApiChunk:
        names = None
        if arr.dtype == host_records.NAMED_API:
            names = [bytes(text).split(b"\0", 1)[0].decode("utf-8", errors="replace") or "N/A"
                     for text in arr["name"].tolist()]
        return cls(arr["level"].astype(np.int64), arr["type"].astype(np.int64), arr["item_id"].astype(np.uint64),
                   arr["start_ns"].astype(np.int64), arr["end_ns"].astype(np.int64),
                   arr["thread_id"].astype(np.int64), names, first_connection)

    def __len__(self) -> int:
        return len(self.levels)


@dataclass
class ResolvedApis:
    """What :class:`ApiResolver` made of the records it could name: their row columns (API_COLUMNS order),
    durations per statistics key (keys in first-occurrence order), and how many waits it gave up."""

    columns: list[np.ndarray]
    durations: dict[StatKey, list[int]]
    gave_up: int


class ApiResolver:
    """Names API records: type_info for the named levels, hash_dic for the others, a legacy record its own."""

    def __init__(self, intern: Callable[[str], int]) -> None:
        self.intern = intern
        # (level, type, name) → symbol ids of its struct type and name, and its statistics key
        self.named: dict[tuple[int, int, str], tuple[int, int, StatKey]] = {}

    def resolve(self, chunk: ApiChunk, types: dict[tuple[int, int], str], hashes: dict[int, str],
                durations: dict[StatKey, list[int]], expired: bool) -> tuple[list[np.ndarray], int]:
        """The rows of ``chunk`` from its cursor up to the first record whose name is not known (all of them
        when ``expired``: those are named by their id), its cursor moved past them; their durations are added
        to ``durations``. Returns the row columns and how many records went on without their name."""
        if len(self.named) > API_NAMES_LIMIT:
            self.named.clear()
        at = chunk.cursor
        levels, types_, items = chunk.levels[at:], chunk.types[at:], chunk.items[at:]
        if chunk.names is not None:
            names = chunk.names[at:]
            count, unnamed = len(names), 0
            keys = list(zip(levels.tolist(), types_.tolist(), names, strict=True))
            firsts, inverse = _first_occurrences(keys)
            unique = [keys[i] for i in firsts]
        else:
            count, unique, inverse, unnamed = self._names(levels, types_, items, types, hashes, expired)
        if count == 0:
            return [], 0
        inverse = inverse[:count]
        struct_ids = np.empty(len(unique), np.uint32)
        name_ids = np.empty(len(unique), np.uint32)
        stat_keys: list[StatKey] = []
        for index, key in enumerate(unique):
            found = self.named.get(key)
            if found is None:
                level, type_id, name = key
                struct_type = raw.ACL_API_CLASS.get(type_id >> 16, "") if level == raw.LEVEL_ACL else ""
                found = self.named[key] = (self.intern(struct_type), self.intern(name),
                                           (raw.LEVEL_NAMES.get(level) or str(level), name))
            struct_ids[index], name_ids[index] = found[0], found[1]
            stat_keys.append(found[2])
        starts, ends = chunk.starts[at:at + count], chunk.ends[at:at + count]
        _add_durations(durations, stat_keys, inverse, (ends - starts).tolist())
        first = chunk.first_connection + at
        columns = [starts, ends, levels[:count], struct_ids[inverse], name_ids[inverse], chunk.threads[at:at + count],
                   np.arange(first, first + count, dtype=np.int64), items[:count]]
        chunk.cursor = at + count
        return columns, unnamed

    @staticmethod
    def _names(levels: np.ndarray, types_: np.ndarray, items: np.ndarray, types: dict[tuple[int, int], str],
               hashes: dict[int, str], expired: bool) -> tuple[int, list[tuple[int, int, str]], np.ndarray, int]:
        """How many records from the start can be named, their distinct (level, type, name) keys in order of
        first occurrence, each record's index into them, and how many went on unnamed (``expired`` only)."""
        firsts, inverse = _distinct(levels << 32 | types_, items)
        keys: list[tuple[int, int, str]] = []
        missing: list[int] = []  # indices of keys whose name is not known
        for level, type_id, item in zip(levels[firsts].tolist(), types_[firsts].tolist(), items[firsts].tolist(),
                                        strict=True):
            name = types.get((level, type_id)) if level in NAMED_LEVELS else hashes.get(item)
            if not name:
                if name is None:
                    missing.append(len(keys))
                name = str(item if level not in raw.LEVEL_NAMES else type_id)
            keys.append((level, type_id, name))
        if not missing:
            return len(levels), keys, inverse, 0
        waiting = np.isin(inverse, missing)
        if expired:
            return len(levels), keys, inverse, int(waiting.sum())
        count = int(np.argmax(waiting))  # the first record still waiting for its name holds the rest back
        used = np.unique(inverse[:count])  # sorted ranks: first occurrences keep their order
        remap = np.full(len(keys), -1, np.int64)
        remap[used] = np.arange(len(used))
        return count, [keys[i] for i in used.tolist()], remap[inverse[:count]], 0


def _distinct(major: np.ndarray, minor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (major, minor) pairs: the index of each one's first occurrence, in order of first occurrence,
    and each row's index among them (one stable sort of the pairs)."""
    order = np.lexsort((minor, major))
    sorted_major, sorted_minor = major[order], minor[order]
    starts = np.empty(len(order), bool)
    starts[:1] = True
    starts[1:] = (sorted_major[1:] != sorted_major[:-1]) | (sorted_minor[1:] != sorted_minor[:-1])
    group = np.cumsum(starts) - 1
    firsts = order[starts]  # stable: a group's first row in sorted order is its first occurrence
    by_first = np.argsort(firsts, kind="stable")
    rank = np.empty(len(by_first), np.int64)
    rank[by_first] = np.arange(len(by_first))
    inverse = np.empty(len(order), np.int64)
    inverse[order] = rank[group]
    return firsts[by_first], inverse


def _first_occurrences(keys: list[tuple[int, int, str]]) -> tuple[list[int], np.ndarray]:
    """Indices of the first occurrence of each distinct key, in order, and each key's index among them."""
    seen: dict[tuple[int, int, str], int] = {}
    firsts: list[int] = []
    inverse = np.empty(len(keys), np.int64)
    for i, key in enumerate(keys):
        index = seen.get(key)
        if index is None:
            index = seen[key] = len(firsts)
            firsts.append(i)
        inverse[i] = index
    return firsts, inverse


def _add_durations(durations: dict[StatKey, list[int]], stat_keys: list[StatKey], inverse: np.ndarray,
                   spans: list[int]) -> None:
    """Each record's duration under its statistics key, in record order, keys new to ``durations`` in order
    of first occurrence (distinct API keys may share a statistics key: their records stay interleaved)."""
    index_of: dict[StatKey, int] = {}
    stat_of = np.array([index_of.setdefault(key, len(index_of)) for key in stat_keys], np.int64)
    by_stat = stat_of[inverse]
    order = np.argsort(by_stat, kind="stable")
    bounds = np.searchsorted(by_stat[order], np.arange(len(index_of) + 1)).tolist()
    ordered = [spans[i] for i in order.tolist()]
    for key, index in index_of.items():
        part = ordered[bounds[index]:bounds[index + 1]]
        found = durations.get(key)
        if found is None:
            durations[key] = part
        else:
            found.extend(part)
