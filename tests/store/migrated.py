"""Databases left at the schema before one migration, for the tests of that migration.

Each holds session ``s`` of scope ``p``; the test writes its old rows there, then
opens the store, which migrates the rest.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from engram.store.sqlite.migrations import MIGRATIONS, Migration, migrate


def sqlite_before(path: Path, migration: Migration) -> sqlite3.Connection:
    """An open connection to a new SQLite file migrated up to ``migration`` (not included)."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[: MIGRATIONS.index(migration)])
    conn.execute("INSERT INTO scopes(name, created_at) VALUES ('p', 'x')")
    conn.execute(
        "INSERT INTO sessions(scope_id, external_id, created_at, updated_at)"
        " VALUES (1, 's', 'x', 'x')"
    )
    return conn


def postgres_before(conn: Any, name: str) -> None:
    """Migrate ``conn``'s schema (autocommit) up to the migration ``name`` (not included)."""
    from engram.store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS

    conn.execute(
        "CREATE TABLE engram_migrations (version integer PRIMARY KEY,"
        " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    )
    names = [step_name for _, step_name, _ in PG_MIGRATIONS]
    for version, step_name, step in PG_MIGRATIONS[: names.index(name)]:
        with conn.transaction():
            step(conn)
            conn.execute("INSERT INTO engram_migrations VALUES (%s, %s)", (version, step_name))
    conn.execute(
        "INSERT INTO sessions (scope, id, created_at, updated_at) VALUES ('p', 's', now(), now())"
    )
