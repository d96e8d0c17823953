"""The search columns' migrations, from a blank database and from the schema before them."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.models import NewMessage
from engram.store import open_store
from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.migrations import MIGRATIONS, m004_search_columns, migrate

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


# Rows as the search columns indexed them before the turn context: two turns of context,
# and a question flag on every message ending with "?".
TURN_ROWS = [
    ("user", "I adopted a beagle last month, any tips for crate training?", "", 2),
    ("assistant", "Keep crate sessions short.", "I adopted a beagle last month, any tips?", 0),
    ("user", "How long have you had the dog?", "x\nKeep crate sessions short.", 2),
    (
        "assistant",
        "Three years now.",
        "Keep crate sessions short.\nHow long have you had the dog?",
        0,
    ),
]
#: What the turn-context migration makes of them: (context, flags).
TURN_EXPECTED = [
    ("", 0),  # a fact inside a request: not a question
    ("I adopted a beagle last month, any tips for crate training?", 0),
    ("Keep crate sessions short.", 2),  # only asks
    ("How long have you had the dog?", 4),  # answers the question before it
]


def _seed_before_turn_context(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrate(conn, MIGRATIONS[:6])
        conn.execute("INSERT INTO scopes(name, created_at) VALUES ('p', 'x')")
        conn.execute(
            "INSERT INTO sessions(scope_id, external_id, created_at, updated_at)"
            " VALUES (1, 's', 'x', 'x')"
        )
        for role, content, context, flags in TURN_ROWS:
            conn.execute(
                "INSERT INTO messages(session_id, role, content, created_at, tokens,"
                " search_context, search_dates, search_flags) VALUES (1, ?, ?, ?, 1, ?, '', ?)",
                (role, content, T0.isoformat(timespec="microseconds"), context, flags),
            )
            conn.execute(
                "INSERT INTO messages_fts(rowid, content, name, search_context, search_dates)"
                " VALUES (last_insert_rowid(), ?, NULL, ?, '')",
                (content, context),
            )
    finally:
        conn.close()


class TestTurnContext:
    def test_sqlite_rows_get_the_turn_they_follow_and_new_flags(self, tmp_path: Path) -> None:
        path = tmp_path / "before.db"
        _seed_before_turn_context(path)
        with SQLiteStore(path) as store:
            conn = store._conn()
            rows = conn.execute(
                "SELECT search_context, search_flags FROM messages ORDER BY id"
            ).fetchall()
            assert [tuple(r) for r in rows] == TURN_EXPECTED
            conn.execute(
                "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)"
            )
            # The old context ("x") is gone from the index; the new one is there.
            assert store.search("p", "x") == []
            hits = store.search("p", "how long dog")
            assert hits[0].message.content == "Three years now."

    @pytest.mark.postgres
    def test_postgres_rows_get_the_turn_they_follow_and_new_flags(self, pg_url: str) -> None:
        import psycopg

        from engram.store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE engram_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for version, name, step in PG_MIGRATIONS[:7]:
                with conn.transaction():
                    step(conn)
                    conn.execute("INSERT INTO engram_migrations VALUES (%s, %s)", (version, name))
            conn.execute(
                "INSERT INTO sessions (scope, id, created_at, updated_at)"
                " VALUES ('p', 's', now(), now())"
            )
            for role, content, context, flags in TURN_ROWS:
                conn.execute(
                    "INSERT INTO messages (scope, session, role, content, created_at, tokens,"
                    " search_context, search_dates, search_flags)"
                    " VALUES ('p', 's', %s, %s, %s, 1, %s, '', %s)",
                    (role, content, T0, context, flags),
                )
        store = open_store(pg_url)
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT search_context, search_flags FROM messages ORDER BY id"
                ).fetchall()
                assert [tuple(r) for r in rows] == TURN_EXPECTED
                stats = conn.execute(
                    "SELECT 1 FROM pg_statistic_ext WHERE stxname = 'messages_own_words'"
                ).fetchone()
                assert stats is not None
            assert store.search("p", "x") == []
            hits = store.search("p", "how long dog")
            assert hits[0].message.content == "Three years now."
        finally:
            store.close()
