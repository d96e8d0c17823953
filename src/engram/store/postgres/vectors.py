"""Message vectors of the PostgreSQL backend: pgvector, an HNSW index, iterative scans.

``message_vectors(message_id, scope, session, embedding vector(384))`` holds
one normalised vector per embedded message (written in the background by
:mod:`engram.search.vectors`), under an HNSW index on cosine distance. A search
filters on the scope (and session) while walking the index, so it runs with
``hnsw.iterative_scan = relaxed_order``: without it the index returns its
``ef_search`` nearest rows of the whole table and the filter leaves too few of
them. The table exists only when the server has the ``vector`` extension
(migration 003 enables it); otherwise semantic search reports that it is
unavailable.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from engram.errors import ConfigError
from engram.search.index import FLAG_OWN_RESULT
from engram.store.postgres.connection import Conn, PostgresConnections


def vector_literal(vector: Any) -> str:
    """Pgvector's text form of a float sequence: ``[0.1,0.2,...]``."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


class PostgresVectors(PostgresConnections):
    """The vector half of :class:`~engram.store.postgres.backend.PostgresStore`."""

    def _require_vectors(self, conn: Conn) -> None:
        if conn.execute("SELECT to_regclass('message_vectors')").fetchone() == (None,):
            raise ConfigError(
                "semantic search on PostgreSQL needs the pgvector extension "
                "(CREATE EXTENSION vector), then a new migration run"
            )

    def save_vectors(self, items: Sequence[tuple[int, bytes]]) -> None:
        """Store ``(message_id, float32 bytes)`` pairs (existing ones are kept)."""
        if not items:
            return
        import numpy as np

        literals = [vector_literal(np.frombuffer(v, dtype=np.float32)) for _, v in items]

        def work(conn: Conn) -> None:
            self._require_vectors(conn)
            conn.execute(
                "INSERT INTO message_vectors (message_id, scope, session, embedding)"
                " SELECT m.id, m.scope, m.session, v.embedding::vector FROM"
                " unnest(%s::bigint[], %s::text[]) AS v(id, embedding)"
                " JOIN messages m ON m.id = v.id ON CONFLICT DO NOTHING",
                ([mid for mid, _ in items], literals),
            )

        self._write(work)

    def vector_ids(self, scope: str, session: str, ids: Collection[int]) -> set[int]:
        """Which of the session's messages ``ids`` have a vector (none without pgvector)."""

        def work(conn: Conn) -> set[int]:
            if conn.execute("SELECT to_regclass('message_vectors')").fetchone() == (None,):
                return set()
            rows = conn.execute(
                "SELECT message_id FROM message_vectors WHERE scope = %s AND session = %s"
                " AND message_id = ANY(%s)",
                (scope, session, sorted(set(ids))),
            ).fetchall()
            return {int(r[0]) for r in rows}

        return self._read(work)

    def pending_vectors(self, scope: str, session: str, limit: int) -> list[tuple[int, str]]:
        """``(id, text)`` of the session's messages that have no vector yet, oldest first."""

        def work(conn: Conn) -> list[tuple[int, str]]:
            self._require_vectors(conn)
            rows = conn.execute(
                "SELECT m.id, m.content FROM messages m WHERE m.scope = %(scope)s"
                " AND m.session = %(session)s AND m.id > coalesce((SELECT max(message_id)"
                " FROM message_vectors WHERE scope = %(scope)s AND session = %(session)s), 0)"
                f" AND m.role IN ('user', 'assistant') AND (m.search_flags & {FLAG_OWN_RESULT}) = 0"
                " AND btrim(m.content) <> '' ORDER BY m.id LIMIT %(limit)s",
                {"scope": scope, "session": session, "limit": limit},
            ).fetchall()
            return [(int(mid), str(text)) for mid, text in rows]

        return self._read(work)

    def nearest(
        self,
        scope: str,
        session: str | None,
        vector: Any,
        limit: int,
        exclude: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        """``(message id, cosine similarity)`` of the ``limit`` nearest messages, best first."""
        params: dict[str, Any] = {
            "scope": scope,
            "vector": vector_literal(vector),
            "limit": limit,
            "exclude": sorted(exclude),
        }
        where = "scope = %(scope)s AND message_id <> ALL(%(exclude)s::bigint[])"
        if session is not None:
            where += " AND session = %(session)s"
            params["session"] = session

        def work(conn: Conn) -> list[tuple[int, float]]:
            self._require_vectors(conn)
            with conn.transaction():
                conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                rows = conn.execute(
                    "SELECT message_id, 1 - (embedding <=> %(vector)s::vector) AS similarity"
                    f" FROM message_vectors WHERE {where}"
                    " ORDER BY embedding <=> %(vector)s::vector LIMIT %(limit)s",
                    params,
                ).fetchall()
            found = [(int(mid), float(sim)) for mid, sim in rows]
            found.sort(key=lambda item: (-item[1], -item[0]))  # relaxed order: sort here
            return found

        return self._read(work)


__all__ = ["PostgresVectors", "vector_literal"]
