"""The search columns' migrations, from a blank database and from the schema before them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.models import NewMessage
from engram.store import open_store
from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.migrations import m004_search_columns

from .migrated import postgres_before, sqlite_before

T0 = datetime(2023, 5, 8, 12, 0, tzinfo=UTC)  # a Monday
OLD_ROWS = [
    ("user", "How long have you had the dog?", "Caroline"),
    ("assistant", "Three years now.", "Melanie"),
    ("user", "Nice!", "Caroline"),
]


def _seed_old_sqlite(path: Path) -> None:
    conn = sqlite_before(path, m004_search_columns)
    try:
        for role, content, name in OLD_ROWS:
            conn.execute(
                "INSERT INTO messages(session_id, role, content, name, created_at, tokens)"
                " VALUES (1, ?, ?, ?, ?, 1)",
                (role, content, name, T0.isoformat(timespec="microseconds")),
            )
            conn.execute(
                "INSERT INTO messages_fts(rowid, content, name) VALUES (last_insert_rowid(), ?, ?)",
                (content, name),
            )
    finally:
        conn.close()


class TestSQLite:
    def test_blank_database_has_every_column(self, tmp_path: Path) -> None:
        with SQLiteStore(tmp_path / "blank.db") as store:
            columns = {
                row[1] for row in store._conn().execute("PRAGMA table_info(messages)").fetchall()
            }
            assert {"search_context", "search_dates", "search_flags"} <= columns

    def test_old_rows_get_context_dates_and_participants(self, tmp_path: Path) -> None:
        path = tmp_path / "old.db"
        _seed_old_sqlite(path)
        with SQLiteStore(path) as store:
            # The answer is found by the question before it (its neighbour context).
            hits = store.search("p", "how long dog")
            assert "Three years now." in [h.message.content for h in hits]
            # Date words of old rows (UTC) match.
            dated = store.search("p", "monday 8 may 2023")
            assert len(dated) == 3
            assert store.speakers("p", "s") == ["Caroline", "Melanie"]
            # The rebuilt index stays consistent with new rows and deletes.
            store.append("p", "s", [NewMessage("user", "the dog barks", T0)], [1])
            assert store._conn().execute(
                "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
            )
            assert store.delete_session("p", "s")
            assert store.search("p", "dog") == []


@pytest.mark.postgres
class TestPostgres:
    def test_old_rows_get_context_dates_and_participants(self, pg_url: str) -> None:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as conn:
            postgres_before(conn, "search_columns")
            for role, content, name in OLD_ROWS:
                conn.execute(
                    "INSERT INTO messages (scope, session, role, content, name, created_at,"
                    " tokens) VALUES ('p', 's', %s, %s, %s, %s, 1)",
                    (role, content, name, T0),
                )
        store = open_store(pg_url)
        try:
            hits = store.search("p", "how long dog")
            assert "Three years now." in [h.message.content for h in hits]
            assert len(store.search("p", "monday 8 may 2023")) == 3
            assert store.speakers("p", "s") == ["Caroline", "Melanie"]  # type: ignore[attr-defined]
        finally:
            store.close()
