"""Scope-level data of the PostgreSQL backend: memories, their audit trail, LLM usage.

``memories`` rows are keyed by ``scope`` with an identity id, ``jsonb``
metadata and ``updated_at`` never before its previous value;
``memory_audit`` is an append-only trail of ``jsonb`` events per scope (kept
when memories are purged); ``usage`` holds one row per LLM call with its scope
and, if any, session (kept when the session is deleted).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

from engram.models import JSON, MemoryRecord, UsageRecord, frozen_metadata
from engram.store.batch_check import json_value
from engram.store.common import (
    AUDIT_TEXT_FIELDS,
    redacted_audit_event,
    split_audit_event,
    storable_id,
)
from engram.store.common import clamp as _clamp
from engram.store.common import utc as _utc
from engram.store.postgres.connection import Conn, Jsonb, PostgresConnections
from engram.store.postgres.rows import MEMORY_COLUMNS as _MEMORY_COLUMNS
from engram.store.postgres.rows import memory as _memory
from engram.store.usage_totals import usage_summary


class PostgresScopeData(PostgresConnections):
    """The scope-level methods of :class:`~engram.store.postgres.backend.PostgresStore`."""

    def add_memory(
        self,
        scope: str,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> MemoryRecord:
        """Store a new memory for the scope."""
        stamp = _utc(created_at) if created_at is not None else datetime.now(UTC)

        def work(conn: Conn) -> MemoryRecord:
            row = conn.execute(
                f"""
                INSERT INTO memories
                    (scope, content, source_session, metadata, created_at, updated_at)
                VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_MEMORY_COLUMNS}
                """,
                (
                    scope,
                    content,
                    source_session,
                    Jsonb(json_value(frozen_metadata(metadata), "memory metadata")),
                    stamp,
                    stamp,
                ),
            ).fetchone()
            assert row is not None
            return _memory(row)

        return self._write(work)

    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""

        def work(conn: Conn) -> list[MemoryRecord]:
            rows = conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE scope = %s ORDER BY created_at, id",
                (scope,),
            ).fetchall()
            return [_memory(row) for row in rows]

        return self._read(work)

    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        if not storable_id(int(memory_id)):
            return None

        def work(conn: Conn) -> MemoryRecord | None:
            row = conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = %s AND scope = %s",
                (int(memory_id), scope),
            ).fetchone()
            return None if row is None else _memory(row)

        return self._read(work)

    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata; bumps ``updated_at``. None if not in scope."""
        if not storable_id(int(memory_id)):
            return None

        def work(conn: Conn) -> MemoryRecord | None:
            row = conn.execute(
                f"""
                UPDATE memories SET
                    content = COALESCE(%s, content),
                    metadata = COALESCE(%s, metadata),
                    updated_at = GREATEST(clock_timestamp(), updated_at)
                WHERE id = %s AND scope = %s
                RETURNING {_MEMORY_COLUMNS}
                """,
                (
                    content,
                    None
                    if metadata is None
                    else Jsonb(json_value(dict(metadata), "memory metadata")),
                    int(memory_id),
                    scope,
                ),
            ).fetchone()
            return None if row is None else _memory(row)

        return self._write(work)

    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        if not storable_id(int(memory_id)):
            return False

        def work(conn: Conn) -> bool:
            cur = conn.execute(
                "DELETE FROM memories WHERE id = %s AND scope = %s", (int(memory_id), scope)
            )
            return cur.rowcount > 0

        return self._write(work)

    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""

        def work(conn: Conn) -> int:
            return conn.execute("DELETE FROM memories WHERE scope = %s", (scope,)).rowcount

        return self._write(work)

    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's audit trail (an ISO ``at`` in the event is kept)."""
        body, at = split_audit_event(event)

        def work(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO memory_audit (scope, at, event) VALUES (%s, %s, %s)",
                (scope, at, Jsonb(json_value(body, "audit event"))),
            )

        self._write(work)

    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added."""

        def work(conn: Conn) -> list[JSON]:
            rows = conn.execute(
                "SELECT id, at, event FROM memory_audit WHERE scope = %s ORDER BY id DESC LIMIT %s",
                (scope, _clamp(limit)),
            ).fetchall()
            return [
                {**dict(row[2]), "id": int(row[0]), "at": _utc(row[1]).isoformat()} for row in rows
            ]

        return self._read(work)

    def redact_audit(self, scope: str, keep: Collection[int]) -> int:
        """Erase the memory text of audit events about memories not in ``keep``; how many."""

        def work(conn: Conn) -> int:
            rows = conn.execute(
                "SELECT id, event FROM memory_audit WHERE scope = %s AND event ?| %s",
                (scope, list(AUDIT_TEXT_FIELDS)),
            ).fetchall()
            changed = 0
            for aid, event in rows:
                redacted = redacted_audit_event(dict(event), keep)
                if redacted is not None:
                    conn.execute(
                        "UPDATE memory_audit SET event = %s WHERE id = %s",
                        (Jsonb(json_value(redacted, "audit event")), aid),
                    )
                    changed += 1
            return changed

        return self._write(work)

    # -- usage --------------------------------------------------------------------

    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any)."""

        def work(conn: Conn) -> None:
            conn.execute(
                """
                INSERT INTO usage (scope, session, model, purpose, input_tokens, output_tokens,
                                   cost_usd, created_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
                """,
                (
                    scope,
                    session,
                    usage.model,
                    usage.purpose,
                    int(usage.input_tokens),
                    int(usage.output_tokens),
                    usage.cost_usd,
                    _utc(usage.created_at),
                ),
            )

        self._write(work)

    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too."""
        where = "scope = %s" + (" AND session = %s" if session is not None else "")
        params: list[Any] = [scope] + ([session] if session is not None else [])

        def work(conn: Conn) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"""
                SELECT purpose, count(*), coalesce(sum(input_tokens), 0),
                       coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0)
                FROM usage WHERE {where} GROUP BY purpose ORDER BY purpose
                """,
                params,
            ).fetchall()

        return usage_summary(
            (str(r[0]), int(r[1]), int(r[2]), int(r[3]), float(r[4])) for r in self._read(work)
        )
