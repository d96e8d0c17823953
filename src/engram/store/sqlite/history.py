"""The SQLite backend's history reads for the prompt builder: raw rows, totals.

:meth:`SQLiteHistory.history_rows` is one walk down the ``(session_id, id)``
index returning ``(id, role, content, tokens)``: the columns a prompt needs.
A message that is not plain (a tool call or result, a name, images) comes back
with its id negated, the flag costing no extra column, and is then read whole
by id. Stored messages never change (only deletion), so whole messages read
after the rows are the rows' own; one deleted in between makes the read start
over. See :class:`engram.store.base.RowHistory`.
"""

from __future__ import annotations

import sqlite3

from engram.errors import StoreError
from engram.limits import MAX_ID
from engram.models import Message
from engram.store.base import MessageRow
from engram.store.common import clamp as _clamp
from engram.store.sqlite.connection import SQLiteConnections
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.rows import MSG_COLUMNS as _MSG
from engram.store.sqlite.rows import message as _message

_ROWS = (
    "SELECT CASE WHEN m.role <> 'tool' AND m.name IS NULL AND m.tool_calls IS NULL"
    " AND m.tool_call_id IS NULL AND m.parts IS NULL THEN m.id ELSE -m.id END,"
    " m.role, m.content, m.tokens FROM messages m INDEXED BY messages_session_id"
    " WHERE m.session_id = ? AND m.id < ? ORDER BY m.id DESC LIMIT ?"
)
_TOTALS = "SELECT message_count, token_count FROM sessions WHERE id = ?"
_FIND_TOTALS = (
    "SELECT s.id, s.message_count, s.token_count FROM sessions s"
    " JOIN scopes c ON c.id = s.scope_id WHERE c.name = ? AND s.external_id = ?"
)
#: Reads started over when messages are deleted while they are read.
_ATTEMPTS = 5


class SQLiteHistory(SQLiteConnections):
    """The row reads of :class:`~engram.store.sqlite.backend.SQLiteStore`."""

    @_guarded
    def history_rows(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> tuple[list[MessageRow], dict[int, Message]]:
        """The newest ``limit`` messages with ``id < before_id``, newest first, as rows.

        Returns the rows and, by id, the messages among them that are not plain.
        """
        limit = _clamp(limit)
        if limit == 0:
            return [], {}
        before = MAX_ID if before_id is None else before_id
        conn = self._conn()
        for _ in range(_ATTEMPTS):
            rows: list[MessageRow] = self._session_rows(
                conn, scope, session, _ROWS, (before, limit)
            )
            if not rows or min(rows)[0] > 0:
                return rows, {}
            wanted = [-r[0] for r in rows if r[0] < 0]
            special = _whole(conn, scope, session, wanted)
            if len(special) == len(wanted):
                return [(-r[0], r[1], r[2], r[3]) if r[0] < 0 else r for r in rows], special
        raise StoreError(
            f"history of {scope}/{session}: messages kept being deleted while they were read"
        )

    @_guarded
    def history_totals(self, scope: str, session: str) -> tuple[int, int] | None:
        """The session's stored message and token counts (None: never written)."""
        conn = self._conn()
        key = (scope, session)
        pk = self._sessions.get(key)
        if pk is not None:
            row = conn.execute(_TOTALS, (pk,)).fetchone()
            if row is not None:
                return int(row[0]), int(row[1])
        # Not cached, or the cached id is gone (the session was purged elsewhere).
        found = conn.execute(_FIND_TOTALS, key).fetchone()
        if found is None:
            self._sessions.pop(key, None)
            return None
        self._sessions[key] = found[0]
        return int(found[1]), int(found[2])


def _whole(
    conn: sqlite3.Connection, scope: str, session: str, ids: list[int]
) -> dict[int, Message]:
    """The messages ``ids`` of the session, whole, by id (those still stored)."""
    marks = ",".join("?" * len(ids))
    found = conn.execute(f"SELECT {_MSG} FROM messages m WHERE m.id IN ({marks})", ids)
    return {m.id: m for m in (_message(scope, session, row) for row in found)}
