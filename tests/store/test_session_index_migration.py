"""The session index gains the search flags on a database written before: the flags
stored then rank the session's search from the index, and the hits are the same."""

from __future__ import annotations

from pathlib import Path

from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.migrations import m009_search_flags_in_session_index

from .migrated import sqlite_before

AT = "2024-05-01T12:00:00.000000+00:00"


def test_flags_written_before_rank_from_the_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite_before(path, m009_search_flags_in_session_index)
    rows = [  # content, flags: a statement, a question (2), one of Engram's own results (1)
        ("The budget review is on Monday.", 0),
        ("What about the budget review?", 2),
        ("budget review found earlier", 1),
    ]
    for content, flags in rows:
        (mid,) = conn.execute(
            "INSERT INTO messages(session_id, role, content, created_at, tokens, search_flags,"
            " search_context, search_dates) VALUES (1, 'user', ?, ?, 3, ?, '', '') RETURNING id",
            (content, AT, flags),
        ).fetchone()
        conn.execute(
            "INSERT INTO messages_fts(rowid, content, name, search_context, search_dates)"
            " VALUES (?, ?, NULL, '', '')",
            (mid, content),
        )
    conn.close()
    with SQLiteStore(path) as store:
        columns = [r[2] for r in store._conn().execute("PRAGMA index_info('messages_session_id')")]
        assert columns == ["session_id", "id", "search_flags"]
        hits = store.search("p", "budget review", session="s")
        assert [h.message.content for h in hits] == [rows[0][0], rows[1][0]]  # answer first
        every_role = ["system", "user", "assistant", "tool"]
        same = store.search("p", "budget review", session="s", roles=every_role)
        assert [(h.message.id, h.score) for h in hits] == [(h.message.id, h.score) for h in same]
