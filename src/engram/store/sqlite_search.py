"""Full-text search of the SQLite backend: FTS5 matching, BM25 ranking, snippets.

The index is ``messages_fts`` (FTS5, Porter stemming, external content on
``messages``). A search runs in two steps: rank the matches by BM25 with no
snippet (SQLite evaluates the select list before sorting, and a snippet costs
far more than a score), then fetch the winners' rows and snippets by id.
Messages holding every word come first; then, if there is room, messages
holding some of them (see :mod:`engram.search_query`).

Ranking joins nothing but the messages: a session or scope filter is on
``m.session_id`` (a scope's session ids are listed once per query), so each
match costs one primary-key lookup.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from engram.models import SearchHit
from engram.search_query import fts5_match
from engram.store.sqlite_rows import MSG_COLUMNS, message

#: Characters of context on each side of a match in search snippets (FTS5 tokens).
SNIPPET_TOKENS = 24

#: Column weights for ``bm25()``: content counts twice as much as the speaker's name.
BM25_WEIGHTS = (1.0, 0.5)

_WEIGHTS = ", ".join(str(w) for w in BM25_WEIGHTS)
_SNIPPET = f"snippet(messages_fts, -1, '[', ']', '…', {SNIPPET_TOKENS})"


def search(
    conn: sqlite3.Connection,
    scope: str,
    words: list[str],
    *,
    session: str | None,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[SearchHit]:
    """Best hits first: every word, then (for several words) any word, ``limit`` at most.

    Args:
        conn: The connection to read with.
        scope: The scope searched (carried into the returned messages).
        words: The searchable words of the user's query (never FTS syntax).
        session: The session's name when ``where`` restricts to one session
            (``m.session_id = ?``); None when it spans the scope (``where`` then
            restricts ``m.session_id`` to the scope's sessions).
        where: Further SQL conditions on the message ``m``, each starting with AND.
        params: The parameters of ``where``.
        limit: Most hits returned (at least 1).

    """
    hits = _ranked(conn, scope, fts5_match(words, all_terms=True), session, where, params, limit)
    if len(words) > 1 and len(hits) < limit:
        seen = {hit.message.id for hit in hits}
        for hit in _ranked(conn, scope, fts5_match(words), session, where, params, limit):
            if hit.message.id not in seen:
                hits.append(hit)
                if len(hits) == limit:
                    break
    return hits


def _ranked(
    conn: sqlite3.Connection,
    scope: str,
    match: str,
    session: str | None,
    where: str,
    params: Sequence[Any],
    limit: int,
) -> list[SearchHit]:
    # CROSS JOIN: the full-text index is the outer loop, always; each match then
    # costs one primary-key lookup of its message.
    ranked = conn.execute(
        f"SELECT m.id, bm25(messages_fts, {_WEIGHTS}) AS rank"
        " FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid"
        f" WHERE messages_fts MATCH ?{where} ORDER BY rank, m.id DESC LIMIT ?",
        (match, *params, limit),
    ).fetchall()
    if not ranked:
        return []
    marks = ", ".join("?" * len(ranked))
    # Columns: the message (9), its session's name, the snippet. CROSS JOIN keeps the
    # index as the outer loop: with few ids the planner would otherwise walk the
    # messages and run the full-text query once per id.
    name, join = "?", ""
    if session is None:
        name, join = "s.external_id", " CROSS JOIN sessions s ON s.id = m.session_id"
    rows = {
        row[0]: row
        for row in conn.execute(
            f"SELECT {MSG_COLUMNS}, {name}, {_SNIPPET}"
            f" FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid{join}"
            f" WHERE messages_fts MATCH ? AND messages_fts.rowid IN ({marks})",
            (*((session,) if session is not None else ()), match, *(mid for mid, _ in ranked)),
        )
    }
    return [
        SearchHit(message=message(scope, row[9], row), score=-rank, snippet=row[10])
        for mid, rank in ranked
        if (row := rows.get(mid)) is not None
    ]


__all__ = ["BM25_WEIGHTS", "SNIPPET_TOKENS", "search"]
