"""Memories addressed by a caller's key, with an optional time to live.

::

    keyed = KeyedMemories(engram.memories("users.42"))
    keyed.put("theme", "The user prefers a dark theme.", {"value": {"theme": "dark"}})
    keyed.get("theme")                      # the memory, or None
    keyed.put("otp", "code 1234", ttl=5)    # gone 5 minutes after its last use

Frameworks whose long-term memory is a key-value store (LangGraph's
``BaseStore``) write through this class, so their items are ordinary memories
of the scope: in its prompts, its search, the dashboard and the audit trail.

A keyed memory carries ``key`` in its metadata. A memory written without one
(by Engram from a conversation, or through the REST API) answers to its id as
text. :meth:`KeyedMemories.put` replaces the memory holding the key, or adds
one without the duplicate check (the key, not the wording, names a memory).
A key-value store must not lose an entry behind its caller's back, so a new
key past the scope's cap is refused (``InvalidQuery``) instead of evicting
another; deleting one or raising ``memory_cap`` makes room.

Time to live: ``expires_at`` (ISO-8601, UTC) and ``ttl_minutes`` in the
metadata. An expired memory is never returned; it is deleted, and the
deletion audited, the next time its scope is read here, or by :meth:`sweep`.
Reading refreshes the expiry when asked to (``refresh=True``) without an audit
entry: a read is not an edit.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from engram import telemetry
from engram.errors import InvalidQuery
from engram.memories.records import check_content, check_metadata
from engram.memories.service import Memories, scope_lock
from engram.models import JSON, MemoryRecord

#: Metadata field holding a memory's key.
KEY = "key"
#: Metadata field holding when a memory expires (ISO-8601, UTC).
EXPIRES_AT = "expires_at"
#: Metadata field holding the time to live, in minutes, that reads refresh.
TTL_MINUTES = "ttl_minutes"


def key_of(memory: MemoryRecord) -> str:
    """The key a memory answers to: its ``key`` metadata, else its id as text."""
    key = memory.metadata.get(KEY)
    return key if isinstance(key, str) else str(memory.id)


def expires_at(memory: MemoryRecord) -> datetime | None:
    """When the memory expires, or None when it lives until deleted."""
    value = memory.metadata.get(EXPIRES_AT)
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _expiry(ttl: float, now: datetime) -> str:
    return (now + timedelta(minutes=ttl)).isoformat()


def _now() -> datetime:
    return datetime.now(UTC)


class KeyedMemories:
    """The memories of one scope as a key-value map (see the module docs)."""

    def __init__(self, memories: Memories) -> None:
        """Address ``memories`` (one scope's) by key."""
        self.memories = memories
        self.store = memories.store
        self.scope = memories.scope
        self._lock = scope_lock(memories.store, memories.scope)

    def items(self, *, now: datetime | None = None) -> list[MemoryRecord]:
        """The scope's live memories, oldest first; expired ones are deleted on the way."""
        now = now or _now()
        live: list[MemoryRecord] = []
        expired: list[MemoryRecord] = []
        for memory in self.store.list_memories(self.scope):
            ends = expires_at(memory)
            (expired if ends is not None and ends <= now else live).append(memory)
        if expired:
            self._expire(expired)
        return live

    def get(
        self, key: str, *, refresh: bool = False, now: datetime | None = None
    ) -> MemoryRecord | None:
        """The live memory answering to ``key``, its expiry pushed back when ``refresh``."""
        now = now or _now()
        found = self._find(self.items(now=now), key)
        if found is None or not refresh:
            return found
        return self.touch(found, now=now)

    def touch(self, memory: MemoryRecord, *, now: datetime | None = None) -> MemoryRecord:
        """Push back the expiry of a memory that has a time to live (no audit entry)."""
        ttl = memory.metadata.get(TTL_MINUTES)
        if not isinstance(ttl, int | float) or isinstance(ttl, bool):
            return memory
        meta = {**memory.metadata, EXPIRES_AT: _expiry(float(ttl), now or _now())}
        with self._lock:
            updated = self.store.update_memory(self.scope, memory.id, metadata=meta)
        return updated or memory

    def put(
        self,
        key: str,
        content: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
        now: datetime | None = None,
    ) -> MemoryRecord:
        """Replace the memory answering to ``key``, or add one; audited either way.

        Args:
            key: The memory's name in the scope.
            content: The memory's text (what prompts and search see).
            metadata: Further metadata (validated like any memory's); ``key`` and
                the expiry fields are set here.
            ttl: Minutes the memory lives after its last write or refreshed read
                (None: until deleted).
            now: The current time (tests).

        Raises:
            InvalidQuery: bad key, content or metadata, a non-positive ttl, or a new
                key when the scope already holds its cap of memories.

        """
        if not isinstance(key, str) or not key:
            raise InvalidQuery("a memory key must be non-empty text")
        if ttl is not None and not ttl > 0:
            raise InvalidQuery(f"a time to live must be a positive number of minutes, got {ttl}")
        now = now or _now()
        text = check_content(content)
        meta: JSON = {**(metadata or {}), KEY: key}
        meta.pop(EXPIRES_AT, None)
        meta.pop(TTL_MINUTES, None)
        if ttl is not None:
            meta[TTL_MINUTES] = ttl
            meta[EXPIRES_AT] = _expiry(ttl, now)
        meta = check_metadata(meta)
        with telemetry.memory_span("upsert_memory", self.scope, count=1) as traced:
            record = self._put(key, text, meta, now)
            telemetry.memory_written(traced, record)
        return record

    def _put(self, key: str, text: str, meta: JSON, now: datetime) -> MemoryRecord:
        with self._lock:
            current = self.items(now=now)
            existing = self._find(current, key)
            if existing is not None:
                updated = self.store.update_memory(
                    self.scope, existing.id, content=text, metadata=meta
                )
                if updated is not None:
                    self._audit("update", updated, key)
                    return updated
            elif len(current) >= self.memories.cap:
                raise InvalidQuery(
                    f"scope {self.scope!r} holds {len(current)} memories, its cap; delete one"
                    f" or open Engram with a larger memory_cap to store key {key!r}"
                )
            record = self.store.add_memory(self.scope, text, metadata=meta, created_at=now)
            self._audit("create", record, key)
            self.memories.metrics.incr("memories_created")
            self.memories.metrics.scope_size(self.scope, len(current) + 1)
            return record

    def delete(self, key: str) -> bool:
        """Delete the memory answering to ``key``; False when there is none."""
        with telemetry.memory_span("delete_memory", self.scope, count=1) as traced, self._lock:
            found = self._find(self.items(), key)
            if found is None or not self.store.delete_memory(self.scope, found.id):
                return False
            traced.set({"gen_ai.memory.record.id": str(found.id)})
            self.store.add_audit(self.scope, {"event": "delete", "memory": found.id, "key": key})
            return True

    def sweep(self, *, now: datetime | None = None) -> int:
        """Delete the scope's expired memories now; returns how many."""
        before = self.store.list_memories(self.scope)
        return len(before) - len(self.items(now=now))

    def _find(self, memories: list[MemoryRecord], key: str) -> MemoryRecord | None:
        # A memory that names the key wins over one whose id merely spells it.
        named = [m for m in memories if m.metadata.get(KEY) == key]
        if named:
            return named[0]
        return next((m for m in memories if KEY not in m.metadata and str(m.id) == key), None)

    def _expire(self, expired: list[MemoryRecord]) -> None:
        with self._lock:
            for memory in expired:
                if self.store.delete_memory(self.scope, memory.id):
                    self._audit("expired", memory, key_of(memory))

    def _audit(self, event: str, memory: MemoryRecord, key: str) -> None:
        self.store.add_audit(
            self.scope, {"event": event, "memory": memory.id, "key": key, "content": memory.content}
        )
