"""Scope-level data of the SQLite backend: memories, their audit trail, LLM usage.

Memories belong to a scope, not to a session: rows of ``memories`` keyed by
``scope_id`` with an integer id, ``created_at`` and ``updated_at`` (never before
``created_at``), the session they came from (text, kept when that session is
purged) and JSON metadata (NULL when empty). ``memory_audit`` is an append-only
trail of JSON events per scope, kept when memories are purged. ``llm_usage``
holds one row per LLM call, with the scope and, if any, the session; purging a
session leaves its usage counted in the scope.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from engram.models import JSON, MemoryRecord, UsageRecord
from engram.store.common import clamp as _clamp
from engram.store.common import now as _now
from engram.store.common import redacted_audit_event, split_audit_event
from engram.store.common import utc as _utc
from engram.store.sqlite.connection import SQLiteConnections
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.rows import MEMORY_COLUMNS as _MEMORY_COLS
from engram.store.sqlite.rows import dump as _dump
from engram.store.sqlite.rows import json_dict as _json_dict
from engram.store.sqlite.rows import memory as _memory
from engram.store.sqlite.rows import ts as _ts
from engram.store.usage_totals import usage_summary

_SCOPE_OF = "(SELECT id FROM scopes WHERE name = ?)"


class SQLiteScopeData(SQLiteConnections):
    """The scope-level methods of :class:`~engram.store.sqlite.backend.SQLiteStore`."""

    @_guarded
    def add_memory(
        self,
        scope: str,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> MemoryRecord:
        """Store a new memory for the scope (``updated_at`` starts equal to ``created_at``)."""
        when = _utc(created_at) if created_at is not None else _now()
        meta = dict(metadata) if metadata else {}
        meta_json = _dump(meta, "memory metadata") if meta else None
        with self._write() as tx:
            scope_pk = self._scope_for_write(tx, scope)
            cur = tx.conn.execute(
                "INSERT INTO memories(scope_id, content, created_at, updated_at, source_session,"
                " metadata) VALUES (?, ?, ?, ?, ?, ?)",
                (scope_pk, content, _ts(when), _ts(when), source_session, meta_json),
            )
            mid = cur.lastrowid
        assert mid is not None
        return MemoryRecord(
            id=mid,
            scope=scope,
            content=content,
            created_at=when,
            updated_at=when,
            source_session=source_session,
            metadata=meta,
        )

    @_guarded
    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""
        rows = self._conn().execute(
            f"SELECT {_MEMORY_COLS} FROM memories WHERE scope_id = {_SCOPE_OF}"
            " ORDER BY created_at, id",
            (scope,),
        )
        return [_memory(scope, row) for row in rows]

    def _get_memory(
        self, conn: sqlite3.Connection, scope: str, memory_id: int
    ) -> MemoryRecord | None:
        row = conn.execute(
            f"SELECT {_MEMORY_COLS} FROM memories WHERE id = ? AND scope_id = {_SCOPE_OF}",
            (memory_id, scope),
        ).fetchone()
        return None if row is None else _memory(scope, row)

    @_guarded
    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        return self._get_memory(self._conn(), scope, memory_id)

    @_guarded
    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata (metadata is replaced); bumps ``updated_at``.

        None if the memory is not in the scope. With nothing to change, the
        memory is returned as it is.
        """
        if content is None and metadata is None:
            return self._get_memory(self._conn(), scope, memory_id)
        meta_json = None if metadata is None else _dump(dict(metadata), "memory metadata")
        with self._write() as tx:
            current = self._get_memory(tx.conn, scope, memory_id)
            if current is None:
                return None
            # Never before created_at, even if the clock went back or created_at was given.
            now = max(_now(), current.created_at)
            tx.conn.execute(
                "UPDATE memories SET content = ?, metadata = ?, updated_at = ? WHERE id = ?",
                (
                    current.content if content is None else content,
                    (_dump(current.metadata, "memory metadata") if current.metadata else None)
                    if meta_json is None
                    else (meta_json if metadata else None),
                    _ts(now),
                    memory_id,
                ),
            )
            return self._get_memory(tx.conn, scope, memory_id)

    @_guarded
    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        with self._write() as tx:
            cur = tx.conn.execute(
                f"DELETE FROM memories WHERE id = ? AND scope_id = {_SCOPE_OF}", (memory_id, scope)
            )
            return cur.rowcount == 1

    @_guarded
    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""
        with self._write() as tx:
            cur = tx.conn.execute(f"DELETE FROM memories WHERE scope_id = {_SCOPE_OF}", (scope,))
            return cur.rowcount

    @_guarded
    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's memory audit trail.

        An ISO-8601 ``at`` in the event is kept as its time (imports replay old
        trails); otherwise the time is now. An ``id`` in the event is dropped.
        """
        body, when = split_audit_event(event)
        text = _dump(body, "audit event")
        with self._write() as tx:
            scope_pk = self._scope_for_write(tx, scope)
            tx.conn.execute(
                "INSERT INTO memory_audit(scope_id, at, event) VALUES (?, ?, ?)",
                (scope_pk, _ts(when), text),
            )

    @_guarded
    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added.

        ``at`` is ISO-8601 UTC text, so the events stay plain JSON.
        """
        rows = self._conn().execute(
            f"SELECT id, at, event FROM memory_audit WHERE scope_id = {_SCOPE_OF}"
            " ORDER BY id DESC LIMIT ?",
            (scope, _clamp(limit)),
        )
        out: list[JSON] = []
        for aid, at, event in rows:
            item = _json_dict(event, f"audit event {aid}")
            item["id"] = aid
            item["at"] = at
            out.append(item)
        return out

    @_guarded
    def redact_audit(self, scope: str, keep: Collection[int]) -> int:
        """Erase the memory text of audit events about memories not in ``keep``; how many."""
        changed = 0
        with self._write() as tx:
            rows = tx.conn.execute(
                f"SELECT id, event FROM memory_audit WHERE scope_id = {_SCOPE_OF}", (scope,)
            ).fetchall()
            for aid, event in rows:
                redacted = redacted_audit_event(_json_dict(event, f"audit event {aid}"), keep)
                if redacted is not None:
                    tx.conn.execute(
                        "UPDATE memory_audit SET event = ? WHERE id = ?",
                        (_dump(redacted, "audit event"), aid),
                    )
                    changed += 1
        return changed

    # -- LLM usage -------------------------------------------------------------------------

    @_guarded
    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any).

        A session named here is created if absent, like any write to a session.
        """
        with self._write() as tx:
            scope_pk = self._scope_for_write(tx, scope)
            session_pk = None if session is None else self._session_for_write(tx, scope, session)
            tx.conn.execute(
                "INSERT INTO llm_usage(scope_id, session_id, model, purpose, input_tokens,"
                " output_tokens, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    scope_pk,
                    session_pk,
                    usage.model,
                    usage.purpose,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cost_usd,
                    _ts(usage.created_at),
                ),
            )

    @_guarded
    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too.

        ``by_purpose`` maps each purpose to the same four sums. Unknown costs
        (None) count as 0.
        """
        conn = self._conn()
        scope_pk = self._scope_pk(conn, scope)
        if scope_pk is None:
            return usage_summary(())
        where, params = "u.scope_id = ?", [scope_pk]
        if session is not None:
            session_pk = self._lookup_session(conn, scope, session)
            if session_pk is None:
                return usage_summary(())
            where += " AND u.session_id = ?"
            params.append(session_pk)
        rows = conn.execute(
            "SELECT u.purpose, count(*), sum(u.input_tokens), sum(u.output_tokens),"
            f" total(u.cost_usd) FROM llm_usage u WHERE {where}"
            " GROUP BY u.purpose ORDER BY u.purpose",
            params,
        )
        return usage_summary(rows)


__all__ = ["SQLiteScopeData"]
