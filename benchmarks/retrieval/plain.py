"""The floor every search is measured against: plain FTS5 BM25 over the bare turn texts.

An FTS5 table (Porter stemmer, as Engram's) of every stored message's text and
nothing else (no names, no neighbours, no dates), queried with the question's
words OR-ed, ranked by ``bm25()``, restricted to the conversation's messages.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from engram.search.query import fts5_match, terms


def plain_fts5(
    db: Path, texts: dict[int, str], scope_ids: dict[str, list[int]]
) -> Callable[[str, str, int], list[int]]:
    """A search function ``(scope, question, limit) -> ids`` over ``texts`` (id -> text).

    The table is made in the SQLite file ``db`` (any backend's ids work).
    """
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS plain USING fts5(content, tokenize='porter unicode61')"
    )
    conn.execute("DELETE FROM plain")
    conn.executemany("INSERT INTO plain(rowid, content) VALUES (?, ?)", sorted(texts.items()))
    conn.commit()

    def search(scope: str, text: str, limit: int) -> list[int]:
        ids = scope_ids[scope]
        rows = conn.execute(
            "SELECT rowid FROM plain WHERE plain MATCH ? AND rowid BETWEEN ? AND ?"
            " ORDER BY bm25(plain) LIMIT ?",
            (fts5_match(terms(text)), min(ids), max(ids), limit),
        )
        return [row[0] for row in rows]

    return search


__all__ = ["plain_fts5"]
