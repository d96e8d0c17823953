"""Deletions of the PostgreSQL backend: messages of a session (edit, regenerate) and whole scopes.

Each is one transaction. Deleting messages first locks the session row (as an
append does), so a concurrent append and a deletion serialize and the totals
stay exact. The search column lives in the message row, so it goes with it.
Identity ids are never handed out again.
"""

from __future__ import annotations

from collections.abc import Sequence
from zoneinfo import ZoneInfo

from engram.models import Message
from engram.store.common import storable_id
from engram.store.postgres.connection import Conn, PostgresConnections
from engram.store.postgres.rows import MESSAGE_COLUMNS as _MESSAGE_COLUMNS
from engram.store.postgres.rows import message as _message
from engram.store.postgres.search import refresh_context

_RETOTAL = """
    UPDATE sessions SET
        message_count = message_count - %(count)s,
        token_count = token_count - %(tokens)s,
        first_message_at = (SELECT min(created_at) FROM messages
                            WHERE scope = %(scope)s AND session = %(session)s),
        last_message_at = (SELECT max(created_at) FROM messages
                           WHERE scope = %(scope)s AND session = %(session)s),
        updated_at = clock_timestamp()
    WHERE scope = %(scope)s AND id = %(session)s
"""


class PostgresEdits(PostgresConnections):
    """The :class:`~engram.store.base.MessageEditor` verbs of the PostgreSQL store."""

    zone: ZoneInfo  # time zone of the date words (set by the store)

    def delete_messages(self, scope: str, session: str, ids: Sequence[int]) -> list[Message]:
        """Delete these messages of the session, atomically; returns those deleted, oldest first."""
        wanted = sorted({int(i) for i in ids if storable_id(int(i))})
        if not wanted:
            return []

        def work(conn: Conn) -> list[Message]:
            locked = conn.execute(
                "SELECT 1 FROM sessions WHERE scope = %s AND id = %s FOR UPDATE", (scope, session)
            ).fetchone()
            if locked is None:
                return []
            rows = conn.execute(
                f"DELETE FROM messages WHERE scope = %s AND session = %s AND id = ANY(%s)"
                f" RETURNING {_MESSAGE_COLUMNS}",
                (scope, session, wanted),
            ).fetchall()
            gone = sorted((_message(row) for row in rows), key=lambda m: m.id)
            refresh_context(conn, scope, session, [m.id for m in gone], self.zone)
            if gone:
                conn.execute(
                    _RETOTAL,
                    {
                        "count": len(gone),
                        "tokens": sum(m.tokens for m in gone),
                        "scope": scope,
                        "session": session,
                    },
                )
            return gone

        return self._write(work)

    def delete_scope(self, scope: str) -> dict[str, int]:
        """Forget the scope: sessions, messages, states, memories, audit trail, usage, jobs."""

        def work(conn: Conn) -> dict[str, int]:
            messages = conn.execute("DELETE FROM messages WHERE scope = %s", (scope,)).rowcount
            conn.execute("DELETE FROM states WHERE scope = %s", (scope,))
            conn.execute("DELETE FROM jobs WHERE scope = %s", (scope,))
            conn.execute("DELETE FROM usage WHERE scope = %s", (scope,))
            memories = conn.execute("DELETE FROM memories WHERE scope = %s", (scope,)).rowcount
            conn.execute("DELETE FROM memory_audit WHERE scope = %s", (scope,))
            sessions = conn.execute("DELETE FROM sessions WHERE scope = %s", (scope,)).rowcount
            return {"sessions": sessions, "messages": messages, "memories": memories}

        return self._write(work)


__all__ = ["PostgresEdits"]
