"""The raw floor: stdlib sqlite3 doing the least work that gives Engram's results.

* append: count the message once (exact ``o200k_base``, chat overhead), insert
  the row and its FTS5 entry in one transaction;
* context: walk the newest rows of the session on the ``(session_id, id)``
  index, summing the stored counts until the budget is met, and return
  ``(role, content)`` tuples oldest first: the least work that gives the same
  messages (no ids, no dicts; Engram does more, and the ratio says what it costs);
* search: FTS5 (porter stemming, BM25, snippets) restricted to the session,
  every term required first, then any term to fill up (Engram's semantics);

Same pragmas as Engram's SQLite store (WAL, ``synchronous=NORMAL``) so the
floor pays the same durability cost. Session ids are resolved once at open:
the floor does not look a session up per call.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from benchmarks.dataset import MAIN_SCOPE, MAIN_SESSION, Chunk, TextSource

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3

_SCHEMA = [
    "CREATE TABLE sessions (id INTEGER PRIMARY KEY, scope TEXT NOT NULL, name TEXT NOT NULL,"
    " UNIQUE (scope, name))",
    "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL,"
    " role TEXT NOT NULL, content TEXT NOT NULL, name TEXT, created_at TEXT NOT NULL,"
    " tokens INTEGER NOT NULL)",
    "CREATE INDEX messages_session_id ON messages(session_id, id)",
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, name, content='messages',"
    " content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
]


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class Counter:
    """Exact chat-format size of a message in ``o200k_base``: what the floor stores."""

    def __init__(self) -> None:
        from engram.tokens import get_encoding

        self._encode = get_encoding("o200k_base").encode_ordinary
        self._roles = {r: len(self._encode(r)) for r in ("system", "user", "assistant", "tool")}

    def count(self, role: str, content: str) -> int:
        return TOKENS_PER_MESSAGE + self._roles[role] + len(self._encode(content))


class Floor:
    """A minimal conversation store on stdlib sqlite3."""

    def __init__(self, path: str, *, create: bool = False) -> None:
        self.path = path
        fresh = create or not os.path.exists(path)
        self.conn = _connect(path)
        if fresh:
            for statement in _SCHEMA:
                self.conn.execute(statement)
        self.counter = Counter()
        self._sessions: dict[tuple[str, str], int] = {}

    def close(self) -> None:
        self.conn.close()

    def session_id(self, scope: str, session: str) -> int:
        key = (scope, session)
        sid = self._sessions.get(key)
        if sid is None:
            row = self.conn.execute(
                "SELECT id FROM sessions WHERE scope = ? AND name = ?", key
            ).fetchone()
            if row is None:
                sid = self.conn.execute(
                    "INSERT INTO sessions(scope, name) VALUES (?, ?) RETURNING id", key
                ).fetchone()[0]
            else:
                sid = row[0]
            self._sessions[key] = sid
        return sid

    # -- writing -----------------------------------------------------------------

    def append(self, sid: int, role: str, content: str) -> int:
        """Count, insert, index: one message, one transaction."""
        tokens = self.counter.count(role, content)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        conn = self.conn
        conn.execute("BEGIN")
        mid = conn.execute(
            "INSERT INTO messages(session_id, role, content, created_at, tokens)"
            " VALUES (?, ?, ?, ?, ?) RETURNING id",
            (sid, role, content, now, tokens),
        ).fetchone()[0]
        conn.execute("INSERT INTO messages_fts(rowid, content) VALUES (?, ?)", (mid, content))
        conn.execute("COMMIT")
        return int(mid)

    def import_many(
        self, sid: int, messages: Sequence[dict[str, Any]], tokens: Sequence[int] | None = None
    ) -> None:
        """Insert a batch in one transaction (counts computed unless given)."""
        if tokens is None:
            count = self.counter.count
            tokens = [count(m["role"], m["content"]) for m in messages]
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        conn = self.conn
        conn.execute("BEGIN")
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM messages").fetchone()[0]
        rows = []
        for i, (m, t) in enumerate(zip(messages, tokens, strict=True)):
            created = m.get("created_at")
            stamp = created.isoformat(timespec="microseconds") if created else now
            rows.append((first + i, sid, m["role"], m["content"], stamp, t))
        conn.executemany(
            "INSERT INTO messages(id, session_id, role, content, created_at, tokens)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.executemany(
            "INSERT INTO messages_fts(rowid, content) VALUES (?, ?)",
            [(r[0], r[3]) for r in rows],
        )
        conn.execute("COMMIT")

    def delete_session(self, sid: int) -> None:
        conn = self.conn
        conn.execute("BEGIN")
        conn.execute(
            "INSERT INTO messages_fts(messages_fts, rowid, content)"
            " SELECT 'delete', id, content FROM messages WHERE session_id = ?",
            (sid,),
        )
        conn.execute("DELETE FROM messages WHERE session_id = ?", (sid,))
        conn.execute("COMMIT")

    # -- reading -----------------------------------------------------------------

    def context(self, sid: int, budget: int) -> tuple[list[tuple[str, str]], int]:
        """Newest messages that fit ``budget`` (reply priming included), oldest first.

        Returns ``(role, content)`` tuples and their total: the walk down the
        index stops at the first row that does not fit, and nothing else is built.
        """
        total = REPLY_PRIMING
        picked: list[tuple[str, str]] = []
        cursor = self.conn.execute(
            "SELECT role, content, tokens FROM messages WHERE session_id = ? ORDER BY id DESC",
            (sid,),
        )
        for role, content, tokens in cursor:
            if total + tokens > budget:
                break
            total += tokens
            picked.append((role, content))
        cursor.close()
        picked.reverse()
        return picked, total

    def search(self, sid: int, query: str, limit: int = 10) -> list[tuple[int, str, float]]:
        """BM25 hits with snippets within the session: all terms first, then any term.

        Ranking runs without snippets; only the ``limit`` winners get one (FTS5's
        ``snippet()`` re-tokenizes a document, ~50 us each, so making one for
        every match before the sort would dominate).
        """
        words = [w for w in query.lower().split() if w]
        if not words:
            return []
        quoted = ['"' + w.replace('"', '""') + '"' for w in words]
        rank_sql = (
            "SELECT m.id, bm25(messages_fts, 1.0, 0.5) FROM messages_fts"
            " JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? AND m.session_id = ?"
            " ORDER BY bm25(messages_fts, 1.0, 0.5), m.id DESC LIMIT ?"
        )
        expression = " AND ".join(quoted)
        ranked = self.conn.execute(rank_sql, (expression, sid, limit)).fetchall()
        if len(quoted) > 1 and len(ranked) < limit:
            seen = {r[0] for r in ranked}
            expression = " OR ".join(quoted)
            more = self.conn.execute(rank_sql, (expression, sid, limit + len(ranked))).fetchall()
            ranked += [r for r in more if r[0] not in seen][: limit - len(ranked)]
        if not ranked:
            return []
        snippets = dict(
            self.conn.execute(
                "SELECT rowid, snippet(messages_fts, -1, '[', ']', '…', 24) FROM messages_fts"
                f" WHERE messages_fts MATCH ? AND rowid IN ({','.join('?' * len(ranked))})",
                (" OR ".join(quoted), *(r[0] for r in ranked)),
            ).fetchall()
        )
        return [(mid, snippets.get(mid, ""), -score) for mid, score in ranked]


def build(path: str, chunks: Iterable[Chunk], source: TextSource, progress: Any = None) -> float:
    """Fill a new floor database with the dataset; returns the seconds it took."""
    if os.path.exists(path):
        os.remove(path)
    started = time.perf_counter()
    floor = Floor(path, create=True)
    try:
        for chunk in chunks:
            sid = floor.session_id(chunk.scope, chunk.session)
            floor.import_many(sid, source.chunk_messages(chunk))
            if progress is not None:
                progress(chunk.count)
        floor.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        floor.close()
    return time.perf_counter() - started


def main_session(floor: Floor) -> int:
    return floor.session_id(MAIN_SCOPE, MAIN_SESSION)
