"""FIFO queues under keys, as the join keeps them: a key is forgotten once its queue is empty (bounded state)."""

from __future__ import annotations

from collections import deque
from typing import Any


def take(table: dict[Any, deque[Any]], key: Any) -> Any:
    """Oldest entry waiting under ``key``, or None."""
    waiting = table.get(key)
    if not waiting:
        return None
    item = waiting.popleft()
    if not waiting:
        del table[key]
    return item


def put(table: dict[Any, deque[Any]], key: Any, item: Any) -> None:
    """Queue ``item`` under ``key`` (newest last)."""
    waiting = table.get(key)
    if waiting is None:
        table[key] = deque((item,))
    else:
        waiting.append(item)
