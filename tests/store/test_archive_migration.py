"""The prompt archive migrated onto a database written before it: the state documents
stored then become versions as they are replaced, and recipes are recorded from then on."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.store import open_store
from engram.store.base import archives_prompts
from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.migrations import m008_prompt_archive

from .migrated import postgres_before, sqlite_before

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
OLD = {"format": 1, "summary": "written before the archive", "summary_version": 1}


def _check(store: object) -> None:
    assert archives_prompts(store)
    current = store.load_state("p", "s", "compaction")  # type: ignore[attr-defined]
    assert current is not None and current.data["summary"] == OLD["summary"]
    new = {**OLD, "summary": "after", "summary_version": 2}
    assert store.save_state("p", "s", "compaction", new, expected_version=current.version)  # type: ignore[attr-defined]
    kept = store.load_state_version("p", "s", "compaction", current.version)
    assert kept is not None and kept.data["summary"] == OLD["summary"]
    assert store.add_prompts("p", "s", [(T0, {"n": 1})], {"k": "text"}) == [1]
    assert [r.turn for r in store.list_prompts("p", "s")] == [1]


class TestSQLite:
    def test_a_state_saved_before_becomes_a_version(self, tmp_path: Path) -> None:
        path = tmp_path / "old.db"
        conn = sqlite_before(path, m008_prompt_archive)
        conn.execute(
            "INSERT INTO session_state(session_id, kind, version, data, updated_at)"
            " VALUES (1, 'compaction', 3, ?, ?)",
            (json.dumps(OLD), T0.isoformat(timespec="microseconds")),
        )
        conn.close()
        with SQLiteStore(path) as store:
            _check(store)


@pytest.mark.postgres
class TestPostgres:
    def test_a_state_saved_before_becomes_a_version(self, pg_url: str) -> None:
        import psycopg
        from psycopg.types.json import Jsonb

        with psycopg.connect(pg_url, autocommit=True) as conn:
            postgres_before(conn, "prompt_archive")
            conn.execute(
                "INSERT INTO states (scope, session, kind, version, data, updated_at)"
                " VALUES ('p', 's', 'compaction', 3, %s, %s)",
                (Jsonb(OLD), T0),
            )
        store = open_store(pg_url)
        try:
            _check(store)
        finally:
            store.close()
