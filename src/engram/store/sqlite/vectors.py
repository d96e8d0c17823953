"""Message vectors of the SQLite backend: stored per message, searched by brute force.

``message_vectors(message_id, session_id, vector)`` holds one normalised
float32 vector per embedded message (written in the background, off the write
path, by :mod:`engram.search.vectors`). A nearest-neighbour search reads each
searched session's vectors once into a matrix kept in this process, extends it
with the rows added since (vectors are append-only, like messages), and ranks
by dot product (cosine similarity): a session of 100K messages is one
100K x 384 matrix product, a few milliseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from typing import Any

from engram.search.index import FLAG_OWN_RESULT
from engram.store.sqlite.connection import SQLiteConnections


class _Matrix:
    def __init__(self, np: Any, dim: int) -> None:
        self.last_id = 0
        self.ids = np.zeros(0, dtype=np.int64)
        self.rows = np.zeros((0, dim), dtype=np.float32)


class SQLiteVectors(SQLiteConnections):
    """The vector half of :class:`~engram.store.sqlite.backend.SQLiteStore`."""

    _matrices: dict[int, _Matrix]
    _matrices_lock: threading.Lock

    def save_vectors(self, items: Sequence[tuple[int, bytes]]) -> None:
        """Store ``(message_id, float32 bytes)`` pairs (existing ones are kept)."""
        if not items:
            return
        with self._write() as tx:
            tx.conn.executemany(
                "INSERT OR IGNORE INTO message_vectors(message_id, session_id, vector)"
                " SELECT id, session_id, ? FROM messages WHERE id = ?",
                [(vector, mid) for mid, vector in items],
            )

    def pending_vectors(self, scope: str, session: str, limit: int) -> list[tuple[int, str]]:
        """``(id, text)`` of the session's messages that have no vector yet, oldest first.

        Only user and assistant messages with text get vectors; results of
        Engram's own retrieval tools never do.
        """
        conn = self._conn()
        pk = self._lookup_session(conn, scope, session)
        if pk is None:
            return []
        rows = conn.execute(
            "SELECT m.id, m.content FROM messages m INDEXED BY messages_session_id"
            " WHERE m.session_id = ?1 AND m.id > coalesce((SELECT max(message_id)"
            " FROM message_vectors WHERE session_id = ?1), 0)"
            f" AND m.role IN ('user', 'assistant') AND (m.search_flags & {FLAG_OWN_RESULT}) = 0"
            " AND trim(m.content) != '' ORDER BY m.id LIMIT ?2",
            (pk, limit),
        ).fetchall()
        return [(int(mid), str(text)) for mid, text in rows]

    def vector_ids(self, scope: str, session: str, ids: Collection[int]) -> set[int]:
        """Which of the session's messages ``ids`` have a vector."""
        conn = self._conn()
        pk = self._lookup_session(conn, scope, session)
        wanted = sorted(set(ids))
        found: set[int] = set()
        for start in range(0, len(wanted) if pk is not None else 0, 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found |= {
                int(r[0])
                for r in conn.execute(
                    "SELECT message_id FROM message_vectors WHERE session_id = ?"
                    f" AND message_id IN ({marks})",
                    (pk, *chunk),
                )
            }
        return found

    def nearest(
        self,
        scope: str,
        session: str | None,
        vector: Any,
        limit: int,
        exclude: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        """``(message id, cosine similarity)`` of the ``limit`` nearest messages, best first."""
        import numpy as np

        conn = self._conn()
        if session is None:
            scope_pk = self._scope_pk(conn, scope)
            pks = (
                [
                    r[0]
                    for r in conn.execute("SELECT id FROM sessions WHERE scope_id = ?", (scope_pk,))
                ]
                if scope_pk is not None
                else []
            )
        else:
            pk = self._lookup_session(conn, scope, session)
            pks = [] if pk is None else [pk]
        found: list[tuple[int, float]] = []
        query = np.asarray(vector, dtype=np.float32)
        for pk in pks:
            matrix = self._matrix(conn, pk, np, query.shape[0])
            if not len(matrix.ids):
                continue
            sims = matrix.rows @ query
            take = min(len(sims), limit + len(exclude))
            best = np.argpartition(-sims, take - 1)[:take]
            found += [(int(matrix.ids[i]), float(sims[i])) for i in best]
        found = [(mid, sim) for mid, sim in found if mid not in exclude]
        found.sort(key=lambda item: (-item[1], -item[0]))
        return found[:limit]

    def _matrix(self, conn: Any, pk: int, np: Any, dim: int) -> _Matrix:
        with self._matrices_lock:
            matrix = self._matrices.get(pk)
            if matrix is None:
                matrix = self._matrices[pk] = _Matrix(np, dim)
            rows = conn.execute(
                "SELECT message_id, vector FROM message_vectors WHERE session_id = ?"
                " AND message_id > ? ORDER BY message_id",
                (pk, matrix.last_id),
            ).fetchall()
            if rows:
                ids = np.array([r[0] for r in rows], dtype=np.int64)
                new = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
                matrix.ids = np.concatenate([matrix.ids, ids])
                matrix.rows = np.concatenate([matrix.rows, new.reshape(len(rows), dim)])
                matrix.last_id = int(ids[-1])
            return matrix

    def _forget_vectors(self, pk: int) -> None:
        with self._matrices_lock:
            self._matrices.pop(pk, None)


__all__ = ["SQLiteVectors"]
