"""Deletions of the SQLite backend: messages of a session (edit, regenerate) and whole scopes.

Both run in one write transaction. The search index follows through the
``messages_fts_delete`` trigger; a session's totals are brought back in step
in the same transaction (counts by subtraction, first and last message time
from the ``(session_id, created_at)`` index). Ids are ``AUTOINCREMENT``, so a
deleted id is never handed out again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from zoneinfo import ZoneInfo

from engram.models import Message
from engram.store.common import storable_id
from engram.store.sqlite.archive import ARCHIVE_TABLES
from engram.store.sqlite.connection import SQLiteConnections
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.rows import MSG_COLUMNS as _MSG
from engram.store.sqlite.rows import message as _message
from engram.store.sqlite.rows import now as _now
from engram.store.sqlite.rows import ts as _ts
from engram.store.sqlite.search import refresh_context

#: Ids per ``IN (...)`` list: well under SQLite's limit on bound parameters.
_CHUNK = 500

_RETOTAL = """UPDATE sessions SET
    message_count = message_count - ?1,
    token_count = token_count - ?2,
    first_message_at = (SELECT min(created_at) FROM messages WHERE session_id = ?4),
    last_message_at = (SELECT max(created_at) FROM messages WHERE session_id = ?4),
    updated_at = ?3
WHERE id = ?4"""

_SESSIONS_OF = "(SELECT id FROM sessions WHERE scope_id = ?)"


class SQLiteEdits(SQLiteConnections):
    """The :class:`~engram.store.base.MessageEditor` verbs of the SQLite store."""

    zone: ZoneInfo  # time zone of the date words (set by the store)
    # The vector half's: drops a session's vectors cached in this process.
    _forget_vectors: Callable[[int], None]

    @_guarded
    def delete_messages(self, scope: str, session: str, ids: Sequence[int]) -> list[Message]:
        """Delete these messages of the session, atomically; returns those deleted, oldest first."""
        wanted = sorted({int(i) for i in ids if storable_id(int(i))})
        if not wanted:
            return []
        with self._write() as tx:
            pk = self._lookup_session(tx.conn, scope, session)
            if pk is None:
                return []
            rows = []
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows += tx.conn.execute(
                    f"SELECT {_MSG} FROM messages m WHERE m.session_id = ? AND m.id IN ({marks})",
                    (pk, *chunk),
                ).fetchall()
                tx.conn.execute(
                    f"DELETE FROM messages WHERE session_id = ? AND id IN ({marks})", (pk, *chunk)
                )
            gone = sorted((_message(scope, session, row) for row in rows), key=lambda m: m.id)
            refresh_context(tx.conn, pk, [m.id for m in gone], self.zone)
            if gone:
                tx.conn.execute(_RETOTAL, (len(gone), sum(m.tokens for m in gone), _ts(_now()), pk))
        if gone:
            self._forget_vectors(pk)  # the cached matrix must not keep the deleted rows
        return gone

    @_guarded
    def delete_scope(self, scope: str) -> dict[str, int]:
        """Forget the scope: sessions, messages, states, memories, audit trail, usage, jobs."""
        counts = {"sessions": 0, "messages": 0, "memories": 0}
        with self._write() as tx:
            conn = tx.conn
            row = conn.execute("SELECT id FROM scopes WHERE name = ?", (scope,)).fetchone()
            if row is None:
                return counts
            scope_pk = int(row[0])
            sessions = [r[0] for r in conn.execute(_SESSIONS_OF[1:-1], (scope_pk,))]
            conn.execute(
                f"DELETE FROM message_vectors WHERE session_id IN {_SESSIONS_OF}", (scope_pk,)
            )
            counts["messages"] = conn.execute(
                f"DELETE FROM messages WHERE session_id IN {_SESSIONS_OF}", (scope_pk,)
            ).rowcount
            for table in ("session_state", *ARCHIVE_TABLES):
                conn.execute(f"DELETE FROM {table} WHERE session_id IN {_SESSIONS_OF}", (scope_pk,))
            conn.execute(
                f"DELETE FROM jobs WHERE scope_id = ? OR session_id IN {_SESSIONS_OF}",
                (scope_pk, scope_pk),
            )
            conn.execute("DELETE FROM llm_usage WHERE scope_id = ?", (scope_pk,))
            counts["memories"] = conn.execute(
                "DELETE FROM memories WHERE scope_id = ?", (scope_pk,)
            ).rowcount
            conn.execute("DELETE FROM memory_audit WHERE scope_id = ?", (scope_pk,))
            counts["sessions"] = conn.execute(
                "DELETE FROM sessions WHERE scope_id = ?", (scope_pk,)
            ).rowcount
        for key in [key for key in self._sessions if key[0] == scope]:
            self._sessions.pop(key, None)
        for pk in sessions:
            self._forget_vectors(pk)
        return counts


__all__ = ["SQLiteEdits"]
