"""How many indexed messages hold each search word, for the SQLite backend (cached).

:func:`engram.search.query.tiers` sorts a query's words by these counts: a word
in many messages brings many candidates that all have to be scored, and BM25
gives a word in at least half of the messages no weight at all. A count is what
FTS5's ``bm25()`` counts for its inverse document frequency: the rows matching
the word under the search's column filter.

Counting a word reads its whole posting list (a few milliseconds for a word in
100K messages), so counts are cached per store. The cache is dropped when the
index has grown or shrunk by more than :data:`DRIFT` of its rows since (the row
count is read from FTS5's own totals, one small read per search) or is older
than :data:`MAX_AGE_S`: a stale count only moves a word between tiers near a
threshold, never changes which messages a search may return when the rarer
words find too few.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Collection, Iterable

from engram.search.query import SearchQuery, fts5_query

#: Share of the index's rows that may be added or removed before the counts are re-read.
DRIFT = 0.05
#: Seconds after which the counts are re-read however little the index moved.
MAX_AGE_S = 600.0
#: Most words cached per store (the cache is emptied when full).
MAX_WORDS = 4096

# FTS5 keeps its totals in row 1 of the ``_data`` table: the row count first, as a varint.
_TOTALS = "SELECT block FROM messages_fts_data WHERE id = 1"
_COUNT = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"


class TermCounts:
    """Messages of the index holding each word, cached (one instance per store)."""

    def __init__(self) -> None:
        """An empty cache."""
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._rows = -1
        self._born = 0.0

    def counts(
        self, conn: sqlite3.Connection, words: Iterable[str], columns: Collection[str] | None
    ) -> tuple[int, dict[str, int]]:
        """The rows of the index, and how many of them hold each of ``words``.

        Args:
            conn: A connection to the store's database.
            words: Terms of a :class:`~engram.search.query.SearchQuery`.
            columns: The columns the search matches in (None: every column).
        """
        rows = indexed_rows(conn)
        where = " ".join(columns or ())
        with self._lock:
            if (
                abs(rows - self._rows) > DRIFT * self._rows
                or time.monotonic() - self._born > MAX_AGE_S
                or len(self._counts) > MAX_WORDS
            ):
                self._counts, self._rows, self._born = {}, rows, time.monotonic()
            known = {w: self._counts.get((where, w)) for w in words}
        found = {}
        for word, count in known.items():
            if count is None:
                match = fts5_query(SearchQuery(text=word, terms=(word,)), columns)
                count = found[word] = int(conn.execute(_COUNT, (match,)).fetchone()[0])
            known[word] = count
        if found:
            with self._lock:
                self._counts.update(((where, w), n) for w, n in found.items())
        return rows, {w: n for w, n in known.items() if n is not None}


def indexed_rows(conn: sqlite3.Connection) -> int:
    """Rows of ``messages_fts``, as FTS5 counts them for BM25 (0 for an empty index)."""
    row = conn.execute(_TOTALS).fetchone()
    if row is None or not row[0]:
        return 0
    return _varint(bytes(row[0]))


def _varint(data: bytes) -> int:
    """The SQLite varint at the start of ``data`` (big-endian, 7 bits a byte, 9 bytes at most)."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value


__all__ = ["DRIFT", "MAX_AGE_S", "MAX_WORDS", "TermCounts", "indexed_rows"]
