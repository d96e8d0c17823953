"""Versioned schema of the SQLite backend: ordered, named migration functions.

Each migration runs in its own ``BEGIN IMMEDIATE`` transaction together with
its row in ``_migrations``, so a database is always at a known version: a
migration that fails is rolled back whole and :class:`MigrationError` says
which one, leaving the database at the previous version. Running
:func:`migrate` again is a no-op once every migration is recorded. Migrations
never use ``executescript`` (it commits behind our back); they execute one
statement at a time on the connection they are given.

Schema (``m001_initial``):

* ``scopes(id, name UNIQUE, created_at)``;
* ``sessions(id, scope_id, external_id, policy JSON, created_at, updated_at,
  message_count, token_count, first_message_at, last_message_at)`` with
  ``UNIQUE(scope_id, external_id)``: totals are kept at append time;
* ``messages(id, session_id, role, content, name, tool_calls JSON,
  tool_call_id, created_at, metadata JSON, tokens)``: append-only;
  ``AUTOINCREMENT`` so an id is never reused, even after a purge;
* ``messages_fts``: FTS5 external-content index over ``messages(content,
  name)`` on the explicit integer id (implicit rowids are not stable across
  VACUUM), tokenizer ``porter unicode61 remove_diacritics 2``, kept in step by
  delete/update triggers and, for inserts, by the store itself (``m002``);
* ``session_state(session_id, kind, version, data JSON, updated_at)``
  (tool caches are state documents too);
* ``memories``, ``memory_audit``, ``llm_usage`` (scope level);
* ``jobs``: background work queue, ready for workers to claim;
* ``api_keys(id, key_hash UNIQUE, prefix, label, admin, scopes JSON,
  writable, created_at, revoked_at)``: the server's keys, hashed (``m003``);
* ``messages.parts`` JSON: the list content of a message with images (``m006``);
* ``prompt_turns(session_id, turn, at, data JSON, usage JSON)``, ``prompt_texts
  (session_id, hash, text)`` and ``state_versions(session_id, kind, version,
  data JSON, saved_at)``: the recipe of each recorded prompt, the texts recipes
  name by SHA-256, and superseded state documents (``m008``);
* ``messages_session_id`` on ``(session_id, id, search_flags)``: a search within
  a session scores its matches from the index alone (``m009``);
* ``sign_ins(sign_in_hash PRIMARY KEY, key_id, ends_at)``: the dashboard's
  sign-ins, shared by every process on the file (``m010``).

Timestamps are fixed-width ISO-8601 UTC text
(``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``): they sort and compare as text, the
sqlite3 shell can read them, and ``date()`` works on them. JSON columns hold
NULL for "nothing" so readers can skip decoding.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from engram.errors import MigrationError
from engram.search.index import LOOKBACK, Recent, contexts, date_words

Migration = Callable[[sqlite3.Connection], None]


def _run(conn: sqlite3.Connection, statements: Sequence[str]) -> None:
    for statement in statements:
        conn.execute(statement)


#: Every table, index and trigger of the first schema, in order.
_INITIAL_SCHEMA: tuple[str, ...] = (
    """CREATE TABLE scopes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        )""",
    """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope_id INTEGER NOT NULL REFERENCES scopes(id),
            external_id TEXT NOT NULL,
            policy TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0,
            token_count INTEGER NOT NULL DEFAULT 0,
            first_message_at TEXT,
            last_message_at TEXT,
            UNIQUE (scope_id, external_id)
        )""",
    "CREATE INDEX sessions_recent ON sessions(scope_id, updated_at)",
    "CREATE INDEX sessions_recent_all ON sessions(updated_at)",
    """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content TEXT NOT NULL,
            name TEXT,
            tool_calls TEXT,
            tool_call_id TEXT,
            created_at TEXT NOT NULL,
            metadata TEXT,
            tokens INTEGER NOT NULL CHECK (tokens >= 0)
        )""",
    "CREATE INDEX messages_session_id ON messages(session_id, id)",
    "CREATE INDEX messages_session_time ON messages(session_id, created_at)",
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, name,
            content='messages', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
    """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content, name)
            VALUES (new.id, new.content, new.name);
        END""",
    """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content, name)
            VALUES ('delete', old.id, old.content, old.name);
        END""",
    """CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content, name)
            VALUES ('delete', old.id, old.content, old.name);
            INSERT INTO messages_fts(rowid, content, name)
            VALUES (new.id, new.content, new.name);
        END""",
    """CREATE TABLE session_state (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            version INTEGER NOT NULL CHECK (version >= 1),
            data TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (session_id, kind)
        ) WITHOUT ROWID""",
    """CREATE TABLE memories (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope_id INTEGER NOT NULL REFERENCES scopes(id),
            content TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            source_session TEXT,
            metadata TEXT
        )""",
    "CREATE INDEX memories_scope ON memories(scope_id, created_at, id)",
    """CREATE TABLE memory_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope_id INTEGER NOT NULL REFERENCES scopes(id),
            at TEXT NOT NULL,
            event TEXT NOT NULL
        )""",
    "CREATE INDEX memory_audit_scope ON memory_audit(scope_id, id)",
    """CREATE TABLE llm_usage (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            scope_id INTEGER NOT NULL REFERENCES scopes(id),
            session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
            model TEXT NOT NULL,
            purpose TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_usd REAL,
            created_at TEXT NOT NULL
        )""",
    "CREATE INDEX llm_usage_scope ON llm_usage(scope_id, session_id)",
    """CREATE TABLE jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            scope_id INTEGER REFERENCES scopes(id),
            session_id INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
            payload TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'running', 'done', 'failed')),
            run_after TEXT NOT NULL,
            claimed_by TEXT,
            claimed_at TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        )""",
    "CREATE INDEX jobs_ready ON jobs(status, run_after)",
)


def m001_initial(conn: sqlite3.Connection) -> None:
    """Create every table, index and trigger of the first schema."""
    _run(conn, _INITIAL_SCHEMA)


def m002_index_inserts_explicitly(conn: sqlite3.Connection) -> None:
    """Drop the insert trigger of ``messages_fts``: the store indexes new messages itself.

    SQLite runs a trigger inside its statement's own transaction (a savepoint),
    and FTS5 (3.40) writes its pending terms to disk at every savepoint: with the
    trigger, every message became its own index segment, then merged, and
    indexing cost three times what one ``INSERT INTO messages_fts ... SELECT``
    per append costs. ``SQLiteStore.append`` now writes the index entries in
    the same transaction as the rows. The delete and update triggers stay:
    deletes are rare admin purges and updates only manual repairs.
    """
    conn.execute("DROP TRIGGER messages_fts_insert")


def m003_api_keys(conn: sqlite3.Connection) -> None:
    """API keys of the server, hashed, so every server on this database shares them."""
    _run(
        conn,
        [
            """CREATE TABLE api_keys (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                key_hash TEXT NOT NULL UNIQUE,
                prefix TEXT NOT NULL,
                label TEXT NOT NULL DEFAULT '',
                admin INTEGER NOT NULL DEFAULT 0,
                scopes TEXT NOT NULL DEFAULT '[]',
                writable INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                revoked_at TEXT
            )""",
        ],
    )


# What migration 004 indexed, as it shipped (the search index has changed since).
_M004_CONTEXT_CHARS = 300
_M004_CONTEXT_TURNS = 2
_M004_QUESTION = 2


def m004_search_columns(conn: sqlite3.Connection) -> None:
    """Index each message's neighbour context and date words, and flag what search skips.

    ``messages`` gains ``search_context`` (the previous two turns of the session),
    ``search_dates`` (the day as words) and ``search_flags`` (see
    :mod:`engram.search.index`), all written at append; ``participants``
    lists each session's speakers (names and metadata ``speaker``). ``messages_fts`` is
    rebuilt over ``(content, name, search_context, search_dates)``. Rows stored
    before this migration get their context from the same session's rows and
    their date words in UTC (the migration does not know the engine's zone).
    """
    for column in ("search_context TEXT", "search_dates TEXT"):
        conn.execute(f"ALTER TABLE messages ADD COLUMN {column}")
    conn.execute("ALTER TABLE messages ADD COLUMN search_flags INTEGER NOT NULL DEFAULT 0")
    conn.create_function("engram_date_words", 1, _utc_date_words, deterministic=True)
    conn.execute(
        """WITH turns AS (
            SELECT id, session_id, substr(content, 1, ?1) AS text FROM messages
            WHERE role IN ('user', 'assistant') AND trim(content) != ''
        ), ctx AS (
            SELECT m.id, (SELECT group_concat(text, char(10)) FROM (
                SELECT t.text FROM turns t WHERE t.session_id = m.session_id AND t.id < m.id
                ORDER BY t.id DESC LIMIT ?2) ) AS context
            FROM messages m
        )
        UPDATE messages SET
            search_context = coalesce((SELECT context FROM ctx WHERE ctx.id = messages.id), ''),
            search_dates = engram_date_words(created_at),
            search_flags = CASE WHEN rtrim(content) LIKE '%?' THEN ?3 ELSE 0 END""",
        (_M004_CONTEXT_CHARS, _M004_CONTEXT_TURNS, _M004_QUESTION),
    )
    for statement in (
        """CREATE TABLE participants (
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            PRIMARY KEY (session_id, name)
        ) WITHOUT ROWID""",
        """INSERT OR IGNORE INTO participants(session_id, name)
            SELECT DISTINCT session_id, name FROM messages WHERE name IS NOT NULL""",
        """INSERT OR IGNORE INTO participants(session_id, name)
            SELECT DISTINCT session_id, json_extract(metadata, '$.speaker') FROM messages
            WHERE metadata IS NOT NULL AND json_type(metadata, '$.speaker') = 'text'""",
        "DROP TRIGGER messages_fts_delete",
        "DROP TRIGGER messages_fts_update",
        "DROP TABLE messages_fts",
        """CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, name, search_context, search_dates,
            content='messages', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )""",
        "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
        f"""CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, {_FTS_COLUMNS})
            VALUES ('delete', old.id, {_old("old")});
        END""",
        f"""CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, {_FTS_COLUMNS})
            VALUES ('delete', old.id, {_old("old")});
            INSERT INTO messages_fts(rowid, {_FTS_COLUMNS}) VALUES (new.id, {_old("new")});
        END""",
    ):
        conn.execute(statement)


_FTS_COLUMNS = "content, name, search_context, search_dates"


def _old(row: str) -> str:
    return ", ".join(f"{row}.{c.strip()}" for c in _FTS_COLUMNS.split(","))


def _utc_date_words(stamp: str) -> str:
    return date_words(datetime.fromisoformat(stamp), ZoneInfo("UTC"))


def m005_message_vectors(conn: sqlite3.Connection) -> None:
    """One sentence vector per embedded message (semantic search; see ``sqlite_vectors``)."""
    conn.execute(
        """CREATE TABLE message_vectors (
            message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            vector BLOB NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX message_vectors_session ON message_vectors(session_id, message_id)")


def m006_message_parts(conn: sqlite3.Connection) -> None:
    """``messages.parts``: the list content of a message with images, kept whole (JSON).

    NULL for every message whose content is text (all rows written before this
    migration). The search index stays on ``content`` (the text).
    """
    conn.execute("ALTER TABLE messages ADD COLUMN parts TEXT")


#: Rows of one session read at a time by :func:`m007_turn_context`.
_REINDEX_CHUNK = 2000


def m007_turn_context(conn: sqlite3.Connection) -> None:
    """Index each message with the turn it follows, and flag questions and answers anew.

    The neighbour context becomes the previous turn alone (it was the previous
    two), a question flag only marks a message that asks and states nothing,
    and a message after one that only asks is flagged as its answer (see
    :func:`engram.search.index.contexts`). Each session is read in order, a
    chunk at a time; only rows that change are written (and re-indexed by the
    update trigger). Date words stay as they are.
    """
    for (pk,) in conn.execute("SELECT id FROM sessions").fetchall():
        window: list[Recent] = []
        after = 0
        while True:
            rows = conn.execute(
                "SELECT id, role, content, tool_calls, tool_call_id, search_context, search_flags"
                " FROM messages INDEXED BY messages_session_id"
                " WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?",
                (pk, after, _REINDEX_CHUNK),
            ).fetchall()
            if not rows:
                break
            batch = [Recent(r[1], r[2], json.loads(r[3]) if r[3] else None, r[4]) for r in rows]
            conn.executemany(
                "UPDATE messages SET search_context = ?, search_flags = ? WHERE id = ?",
                [
                    (context, flags, row[0])
                    for row, (context, flags) in zip(rows, contexts(window, batch), strict=True)
                    if (context, flags) != (row[5] or "", row[6])
                ],
            )
            window = (window + batch)[-LOOKBACK:]
            after = rows[-1][0]


def m008_prompt_archive(conn: sqlite3.Connection) -> None:
    """The prompt archive: recipes per turn, their texts, and superseded state versions.

    Empty at first: sessions recorded before it have no recipes, and their
    current state documents become versions as they are replaced.
    """
    _run(
        conn,
        [
            """CREATE TABLE prompt_turns (
                session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                turn INTEGER NOT NULL CHECK (turn >= 1),
                at TEXT NOT NULL,
                data TEXT NOT NULL,
                usage TEXT,
                PRIMARY KEY (session_id, turn)
            ) WITHOUT ROWID""",
            """CREATE TABLE prompt_texts (
                session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                hash TEXT NOT NULL,
                text TEXT NOT NULL,
                PRIMARY KEY (session_id, hash)
            ) WITHOUT ROWID""",
            """CREATE TABLE state_versions (
                session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
                kind TEXT NOT NULL,
                version INTEGER NOT NULL CHECK (version >= 1),
                data TEXT NOT NULL,
                saved_at TEXT NOT NULL,
                PRIMARY KEY (session_id, kind, version)
            ) WITHOUT ROWID""",
        ],
    )


def m009_search_flags_in_session_index(conn: sqlite3.Connection) -> None:
    """``messages_session_id`` covers ``search_flags`` too: ``(session_id, id, search_flags)``.

    A search within a session then scores each match from this narrow index
    (which message it is, whose session, question or answer, a tool result of
    Engram's own) without reading the message's wide row. Same order as before,
    so every reader that walks a session by id is unchanged.
    """
    _run(
        conn,
        [
            "DROP INDEX messages_session_id",
            "CREATE INDEX messages_session_id ON messages(session_id, id, search_flags)",
        ],
    )


def m010_sign_ins(conn: sqlite3.Connection) -> None:
    """Dashboard sign-ins beside the keys: the SHA-256 of the id, the key's id, the end."""
    _run(
        conn,
        [
            """CREATE TABLE sign_ins (
                sign_in_hash TEXT PRIMARY KEY,
                key_id INTEGER NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
                ends_at REAL NOT NULL
            )""",
            "CREATE INDEX sign_ins_ends_at ON sign_ins(ends_at)",
        ],
    )


#: Every migration, in the order it is applied. Append only: never edit or reorder.
MIGRATIONS: tuple[Migration, ...] = (
    m001_initial,
    m002_index_inserts_explicitly,
    m003_api_keys,
    m004_search_columns,
    m005_message_vectors,
    m006_message_parts,
    m007_turn_context,
    m008_prompt_archive,
    m009_search_flags_in_session_index,
    m010_sign_ins,
)

_CREATE_LEDGER = """CREATE TABLE IF NOT EXISTS _migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
)"""


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations recorded in ``conn``'s database, in the order applied."""
    has_ledger = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_migrations'"
    ).fetchone()
    if not has_ledger:
        return []
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> list[str]:
    """Apply every migration not yet recorded, each in its own transaction.

    ``conn`` must be in autocommit mode (``isolation_level=None``).

    Args:
        conn: an open connection to the database to upgrade.
        migrations: the ordered migrations (the default is the real schema).

    Returns:
        The names applied by this call (empty when already up to date).

    Raises:
        MigrationError: a migration failed (it was rolled back; the database is at
            the previous version) or the database has migrations this code does not
            know (it was written by a newer Engram).
    """
    known = [m.__name__ for m in migrations]
    try:
        unknown = [name for name in applied(conn) if name not in known]
    except sqlite3.Error as exc:
        raise MigrationError(f"cannot read the migration ledger: {exc}") from exc
    if unknown:
        raise MigrationError(
            f"the database has migrations this Engram does not know ({', '.join(unknown)}); "
            "it was written by a newer version: upgrade engram"
        )
    done: list[str] = []
    for migration in migrations:
        name = migration.__name__
        try:
            # IMMEDIATE takes the write lock first, so two processes opening a new
            # database at once cannot both apply the same migration.
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise MigrationError(f"cannot start migration {name}: {exc}") from exc
        try:
            conn.execute(_CREATE_LEDGER)
            if conn.execute("SELECT 1 FROM _migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("COMMIT")
                continue
            migration(conn)
            conn.execute(
                "INSERT INTO _migrations(name, applied_at) VALUES (?, ?)",
                (name, datetime.now(UTC).isoformat(timespec="microseconds")),
            )
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            previous = done[-1] if done else _last_applied(conn)
            raise MigrationError(
                f"migration {name} failed ({type(exc).__name__}: {exc}); "
                f"the database is left at {previous or 'an empty schema'}"
            ) from exc
        done.append(name)
    return done


def _last_applied(conn: sqlite3.Connection) -> str | None:
    try:
        names = applied(conn)
    except sqlite3.Error:
        return None
    return names[-1] if names else None


__all__ = [
    "MIGRATIONS",
    "Migration",
    "applied",
    "m001_initial",
    "m002_index_inserts_explicitly",
    "m003_api_keys",
    "m004_search_columns",
    "m005_message_vectors",
    "m006_message_parts",
    "m008_prompt_archive",
    "m010_sign_ins",
    "migrate",
]
