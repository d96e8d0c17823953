"""The memory block of a scope's prompts, read from the store at each prompt.

A function, not a :class:`~engram.memories.Memories` method: every
``context()`` calls it, and reading needs neither the scope's write lock nor a
model client.
"""

from __future__ import annotations

import logging
from typing import Any

from engram.memories.metrics import MemoryMetrics
from engram.memories.rendering import format_memories
from engram.models import MemoryRecord
from engram.store import Store

logger = logging.getLogger("engram.memories")


def memory_block(
    store: Store, scope: str, metrics: MemoryMetrics, *, label: str | None = None, tz: Any = None
) -> str:
    """The memory block of ``scope`` for its prompts ("" when it has none).

    Counts one injection when there is something to inject. A function, not a
    ``Memories`` method only: every ``context()`` calls it, and reading needs
    neither the scope's write lock nor a model client.
    """
    return shown_memories(store, scope, metrics, label=label, tz=tz)[0]


def shown_memories(
    store: Store, scope: str, metrics: MemoryMetrics, *, label: str | None = None, tz: Any = None
) -> tuple[str, list[MemoryRecord]]:
    """The memory block of ``scope`` (see :func:`memory_block`) and the memories in it."""
    memories = store.list_memories(scope)
    text = format_memories(label or scope, memories, tz=tz)
    if text:
        metrics.incr("injections")
        logger.debug("retrieved %d memories for scope %s", len(memories), scope)
    return text, memories
