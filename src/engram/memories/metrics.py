"""Counters of memory work, ready for a Prometheus endpoint.

One :class:`MemoryMetrics` belongs to one :class:`~engram.Engram`; every
:class:`~engram.memories.Memories` it hands out shares it. Counters only grow
(Prometheus ``counter``); ``scopes_with_memories`` is a gauge, the number of
scopes this process has seen holding at least one memory. Thread-safe.
"""

from __future__ import annotations

import threading

#: Counter names, as :meth:`MemoryMetrics.snapshot` reports them.
COUNTERS = (
    "memories_created",
    "memories_duplicate_skipped",
    "memory_creation_failures",
    "compactions_llm",
    "compactions_fifo",
    "injections",
    "deferred",
    "deferred_completed",
    "flagged_kept_out",
)
#: Gauges, as :meth:`MemoryMetrics.snapshot` reports them.
GAUGES = ("scopes_with_memories",)


class MemoryMetrics:
    """Thread-safe counters of memory creation, compaction, injection and deferral."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._scope_sizes: dict[str, int] = {}

    def incr(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to the counter ``name`` (one of :data:`COUNTERS`).

        Raises:
            KeyError: unknown counter (a programming error).

        """
        if name not in self._counts:
            raise KeyError(f"unknown memory counter {name!r}")
        with self._lock:
            self._counts[name] += amount

    def scope_size(self, scope: str, count: int) -> None:
        """Record how many memories ``scope`` holds now (feeds the gauge)."""
        with self._lock:
            if count > 0:
                self._scope_sizes[scope] = count
            else:
                self._scope_sizes.pop(scope, None)

    def snapshot(self) -> dict[str, int]:
        """Every counter and gauge by name, read at one instant."""
        with self._lock:
            out = dict(self._counts)
            out["scopes_with_memories"] = len(self._scope_sizes)
        return out

    def prometheus(self, prefix: str = "engram_memory_") -> str:
        """The snapshot in Prometheus text exposition format."""
        lines = []
        for name, value in self.snapshot().items():
            kind = "gauge" if name in GAUGES else "counter"
            metric = prefix + name + ("_total" if kind == "counter" else "")
            lines.append(f"# TYPE {metric} {kind}")
            lines.append(f"{metric} {value}")
        return "\n".join(lines) + "\n"
