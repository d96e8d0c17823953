"""``messages.parts`` (images kept whole): migrated onto a database written before it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.images import image_part, png_url

from engram.models import NewMessage
from engram.store import open_store
from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.migrations import m006_message_parts

from .migrated import postgres_before, sqlite_before

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PARTS = [{"type": "text", "text": "look"}, image_part(png_url(2, 2))]


def _old_sqlite(path: Path) -> None:
    conn = sqlite_before(path, m006_message_parts)
    try:
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

        with psycopg.connect(pg_url, autocommit=True) as conn:
            postgres_before(conn, "message_parts")
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
