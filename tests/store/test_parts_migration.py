"""``messages.parts`` (images kept whole): migrated onto a database written before it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.images import image_part, png_url

from engram.models import NewMessage
from engram.store import open_store
from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.migrations import MIGRATIONS, m006_message_parts, migrate

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PARTS = [{"type": "text", "text": "look"}, image_part(png_url(2, 2))]


def _old_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        before = MIGRATIONS[: MIGRATIONS.index(m006_message_parts)]
        migrate(conn, before)
        conn.execute("INSERT INTO scopes(name, created_at) VALUES ('p', 'x')")
        conn.execute(
            "INSERT INTO sessions(scope_id, external_id, created_at, updated_at)"
            " VALUES (1, 's', 'x', 'x')"
        )
        conn.execute(
            "INSERT INTO messages(session_id, role, content, created_at, tokens, metadata)"
            " VALUES (1, 'user', 'written before images', ?, 5, '{\"k\":1}')",
            (T0.isoformat(timespec="microseconds"),),
        )
    finally:
        conn.close()


class TestSQLite:
    def test_old_rows_read_without_parts_and_new_rows_keep_them(self, tmp_path: Path) -> None:
        path = tmp_path / "old.db"
        _old_sqlite(path)
        with SQLiteStore(path) as store:
            (old,) = store.tail("p", "s", limit=5)
            assert (old.content, old.parts) == ("written before images", None)
            assert old.metadata == {"k": 1}
            (new,) = store.append("p", "s", [NewMessage("user", "look", T0, parts=PARTS)], [90])
            assert [m.parts for m in store.tail("p", "s", limit=5)] == [None, PARTS]
            assert store.get_message("p", new.id) == new


@pytest.mark.postgres
class TestPostgres:
    def test_old_rows_read_without_parts_and_new_rows_keep_them(self, pg_url: str) -> None:
        import psycopg

        from engram.store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE engram_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for version, name, step in PG_MIGRATIONS:
                if name == "message_parts":
                    break
                with conn.transaction():
                    step(conn)
                    conn.execute("INSERT INTO engram_migrations VALUES (%s, %s)", (version, name))
            conn.execute(
                "INSERT INTO sessions (scope, id, created_at, updated_at)"
                " VALUES ('p', 's', now(), now())"
            )
            conn.execute(
                "INSERT INTO messages (scope, session, role, content, created_at, tokens)"
                " VALUES ('p', 's', 'user', 'written before images', %s, 5)",
                (T0,),
            )
        store = open_store(pg_url)
        try:
            (old,) = store.tail("p", "s", limit=5)
            assert (old.content, old.parts) == ("written before images", None)
            store.append("p", "s", [NewMessage("user", "look", T0, parts=PARTS)], [90])
            assert [m.parts for m in store.tail("p", "s", limit=5)] == [None, PARTS]
        finally:
            store.close()
