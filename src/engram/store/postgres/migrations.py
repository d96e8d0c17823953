"""Versioned schema migrations for the PostgreSQL backend.

Each migration is an ordered, named function. It runs in one transaction
together with its row in ``engram_migrations``, under a transaction-level
advisory lock, so several Engram servers starting at once against one database
apply each migration exactly once. Tables are created unqualified: they live
in the first schema of the connection's ``search_path``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import psycopg

from engram.errors import MigrationError
from engram.models import JSON
from engram.search.index import LOOKBACK, Recent, contexts

#: Advisory-lock key taken while migrating (any constant; "engram" in ASCII).
MIGRATION_LOCK_KEY = 0x656E6772616D

#: Dimensions of a message vector (all-MiniLM-L6-v2).
VECTOR_DIM = 384

#: Characters of a message indexed for search. Punctuation (``_``, ``.``, ``@``...) splits
#: words, as in :mod:`engram.search.query`; the cap keeps the tsvector under its 1 MB limit.
SEARCHED_CHARS = 400_000

Migration = Callable[[psycopg.Connection[tuple[object, ...]]], None]


def m001_initial(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Sessions, messages (weighted tsvector + GIN index), state, memories, audit, usage."""
    _create_search_config(conn)
    _create_history(conn)
    _create_scope_data(conn)


def _create_search_config(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """The text search configuration: English stems, no stop words."""
    # English stemming without a stop-word list: every word a person types is searchable,
    # as with the SQLite (FTS5 porter) and jsondir backends.
    conn.execute(
        "CREATE TEXT SEARCH DICTIONARY engram_stem (TEMPLATE = snowball, Language = english)"
    )
    conn.execute("CREATE TEXT SEARCH CONFIGURATION engram_english (COPY = pg_catalog.english)")
    conn.execute(
        "ALTER TEXT SEARCH CONFIGURATION engram_english ALTER MAPPING FOR "
        "asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH engram_stem"
    )


def _create_history(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Sessions, their messages (with the search vector) and state documents."""
    conn.execute(
        """
        CREATE TABLE sessions (
            scope            text        NOT NULL,
            id               text        NOT NULL,
            created_at       timestamptz NOT NULL,
            updated_at       timestamptz NOT NULL,
            message_count    bigint      NOT NULL DEFAULT 0,
            token_count      bigint      NOT NULL DEFAULT 0,
            policy           jsonb,
            first_message_at timestamptz,
            last_message_at  timestamptz,
            PRIMARY KEY (scope, id)
        )
        """
    )
    conn.execute("CREATE INDEX sessions_by_update ON sessions (updated_at DESC, scope, id)")
    conn.execute(
        f"""
        CREATE TABLE messages (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            scope        text        NOT NULL,
            session      text        NOT NULL,
            role         text        NOT NULL,
            content      text        NOT NULL,
            name         text,
            tool_calls   json,
            tool_call_id text,
            created_at   timestamptz NOT NULL,
            tokens       integer     NOT NULL,
            metadata     jsonb       NOT NULL DEFAULT '{{}}',
            search       tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('engram_english'::regconfig, regexp_replace(
                    left(coalesce(content, ''), {SEARCHED_CHARS}), '[[:punct:]]', ' ', 'g')
                ), 'A') ||
                setweight(to_tsvector('engram_english'::regconfig, regexp_replace(
                    coalesce(name, ''), '[[:punct:]]', ' ', 'g')), 'B')
            ) STORED,
            FOREIGN KEY (scope, session) REFERENCES sessions (scope, id) ON DELETE CASCADE
        )
        """
    )
    conn.execute("CREATE INDEX messages_by_session ON messages (scope, session, id)")
    conn.execute("CREATE INDEX messages_by_time ON messages (scope, created_at, id)")
    conn.execute("CREATE INDEX messages_search ON messages USING gin (search)")
    conn.execute(
        """
        CREATE TABLE states (
            scope      text        NOT NULL,
            session    text        NOT NULL,
            kind       text        NOT NULL,
            version    integer     NOT NULL,
            data       jsonb       NOT NULL,
            updated_at timestamptz NOT NULL,
            PRIMARY KEY (scope, session, kind),
            FOREIGN KEY (scope, session) REFERENCES sessions (scope, id) ON DELETE CASCADE
        )
        """
    )


def _create_scope_data(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Memories, their audit trail and LLM usage: rows of a scope, not of a session."""
    conn.execute(
        """
        CREATE TABLE memories (
            id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            scope          text        NOT NULL,
            content        text        NOT NULL,
            source_session text,
            metadata       jsonb       NOT NULL DEFAULT '{}',
            created_at     timestamptz NOT NULL,
            updated_at     timestamptz NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX memories_by_scope ON memories (scope, created_at, id)")
    conn.execute(
        """
        CREATE TABLE memory_audit (
            id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            scope text        NOT NULL,
            at    timestamptz NOT NULL,
            event jsonb       NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX memory_audit_by_scope ON memory_audit (scope, id DESC)")
    conn.execute(
        """
        CREATE TABLE usage (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            scope         text        NOT NULL,
            session       text,
            model         text        NOT NULL,
            purpose       text        NOT NULL,
            input_tokens  integer     NOT NULL,
            output_tokens integer     NOT NULL,
            cost_usd      double precision,
            created_at    timestamptz NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX usage_by_scope ON usage (scope, session)")


def m002_jobs(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Background jobs any server may claim with ``FOR UPDATE SKIP LOCKED``."""
    conn.execute(
        """
        CREATE TABLE jobs (
            id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind         text        NOT NULL,
            scope        text        NOT NULL,
            session      text,
            payload      jsonb       NOT NULL DEFAULT '{}',
            dedupe_key   text,
            status       text        NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'running', 'done', 'failed')),
            attempts     integer     NOT NULL DEFAULT 0,
            max_attempts integer     NOT NULL DEFAULT 3,
            run_after    timestamptz NOT NULL DEFAULT now(),
            locked_by    text,
            locked_until timestamptz,
            result       jsonb,
            error        text,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    conn.execute("CREATE INDEX jobs_ready ON jobs (status, run_after, id)")
    # At most one live job per (kind, dedupe_key): enqueueing "compact session X" twice is a no-op.
    conn.execute(
        "CREATE UNIQUE INDEX jobs_dedupe ON jobs (kind, dedupe_key) "
        "WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running')"
    )


def m003_vector(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Enable pgvector when the server ships it and we may create it; otherwise skip quietly."""
    available = conn.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    installed = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if available is None or installed is not None:
        return
    try:
        with conn.transaction():  # a savepoint: a refusal must not abort the migration
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error:
        pass  # no privilege: embeddings stay unavailable, everything else works


def m004_api_keys(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """API keys of the server, hashed, so every server on this database shares them."""
    conn.execute(
        """
        CREATE TABLE api_keys (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            key_hash   text        NOT NULL UNIQUE,
            prefix     text        NOT NULL,
            label      text        NOT NULL DEFAULT '',
            admin      boolean     NOT NULL DEFAULT false,
            scopes     jsonb       NOT NULL DEFAULT '[]',
            writable   boolean     NOT NULL DEFAULT false,
            created_at timestamptz NOT NULL DEFAULT now(),
            revoked_at timestamptz
        )
        """
    )


# What migration 005 indexed, as it shipped (the search index has changed since).
_M005_CONTEXT_CHARS = 300
_M005_CONTEXT_TURNS = 2
_M005_QUESTION = 2


def m005_search_columns(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Index neighbour context and date words with their own weights; list participants.

    ``messages`` gains ``search_context``, ``search_dates`` and ``search_flags``
    (see :mod:`engram.search.index`, written at append), and ``search`` is
    regenerated with four weights: content ``A``, context ``B``, date words
    ``C``, name ``D``. Rows stored before get their context from the same
    session and their date words in UTC.
    """
    conn.execute(
        "ALTER TABLE messages ADD COLUMN search_context text, ADD COLUMN search_dates text,"
        " ADD COLUMN search_flags integer NOT NULL DEFAULT 0"
    )
    conn.execute(
        """
        UPDATE messages m SET
            search_context = coalesce((
                SELECT string_agg(t.text, E'\n' ORDER BY t.id) FROM (
                    SELECT p.id, left(p.content, %(chars)s) AS text FROM messages p
                    WHERE p.scope = m.scope AND p.session = m.session AND p.id < m.id
                      AND p.role IN ('user', 'assistant') AND btrim(p.content) <> ''
                    ORDER BY p.id DESC LIMIT %(turns)s) t), ''),
            search_dates = lower(to_char(m.created_at AT TIME ZONE 'UTC',
                                         'FMDD FMMonth YYYY FMDay')),
            search_flags = CASE WHEN rtrim(m.content) LIKE '%%?' THEN %(question)s ELSE 0 END
        """,
        {"chars": _M005_CONTEXT_CHARS, "turns": _M005_CONTEXT_TURNS, "question": _M005_QUESTION},
    )
    conn.execute("ALTER TABLE messages DROP COLUMN search")
    conn.execute(
        f"""
        ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('engram_english'::regconfig, regexp_replace(
                left(coalesce(content, ''), {SEARCHED_CHARS}), '[[:punct:]]', ' ', 'g')
            ), 'A') ||
            setweight(to_tsvector('engram_english'::regconfig, regexp_replace(
                coalesce(search_context, ''), '[[:punct:]]', ' ', 'g')), 'B') ||
            setweight(to_tsvector('engram_english'::regconfig,
                coalesce(search_dates, '')), 'C') ||
            setweight(to_tsvector('engram_english'::regconfig, regexp_replace(
                coalesce(name, ''), '[[:punct:]]', ' ', 'g')), 'D')
        ) STORED
        """
    )
    conn.execute("CREATE INDEX messages_search ON messages USING gin (search)")
    conn.execute(
        """
        CREATE TABLE participants (
            scope   text NOT NULL,
            session text NOT NULL,
            name    text NOT NULL,
            PRIMARY KEY (scope, session, name),
            FOREIGN KEY (scope, session) REFERENCES sessions (scope, id) ON DELETE CASCADE
        )
        """
    )
    conn.execute(
        """
        INSERT INTO participants (scope, session, name)
        SELECT DISTINCT scope, session, n FROM messages,
            LATERAL (VALUES (name), (metadata->>'speaker')) AS v(n)
        WHERE n IS NOT NULL AND length(n) <= 64
        ON CONFLICT DO NOTHING
        """
    )


def m006_message_vectors(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """One vector per embedded message under an HNSW index (only with pgvector installed)."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
        return  # no pgvector: semantic search says so; keyword search is unaffected
    conn.execute(
        f"""
        CREATE TABLE message_vectors (
            message_id bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
            scope      text NOT NULL,
            session    text NOT NULL,
            embedding  vector({VECTOR_DIM}) NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX message_vectors_hnsw ON message_vectors"
        " USING hnsw (embedding vector_cosine_ops)"
    )
    conn.execute(
        "CREATE INDEX message_vectors_session ON message_vectors (scope, session, message_id)"
    )


def m007_message_parts(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """``messages.parts``: the list content of a message with images, kept whole (json).

    NULL for every message whose content is text. Search stays on ``content``.
    """
    conn.execute("ALTER TABLE messages ADD COLUMN parts json")


#: Rows of one session read at a time by :func:`m008_turn_context`.
_REINDEX_CHUNK = 2000


def m008_turn_context(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Index each message with the turn it follows; flag questions and answers anew.

    As the SQLite migration ``m007_turn_context``: the neighbour context becomes
    the previous turn alone, a question flag only marks a message that asks and
    states nothing, and a message after one that only asks is flagged as its
    answer (:func:`engram.search.index.contexts`); only changed rows are
    written (the generated ``search`` follows). Then extended statistics on
    the message's own words (``search`` without the context weight ``B``), so
    the search can tell how many messages *say* a word (see ``search.py``; PostgreSQL
    14 or later, before that the statistics of ``search`` serve).
    """
    sessions = conn.execute("SELECT scope, id FROM sessions").fetchall()
    for scope, session in sessions:
        window: list[Recent] = []
        after = 0
        while True:
            rows = conn.execute(
                "SELECT id, role, content, tool_calls, tool_call_id, search_context, search_flags"
                " FROM messages WHERE scope = %s AND session = %s AND id > %s"
                " ORDER BY id LIMIT %s",
                (scope, session, after, _REINDEX_CHUNK),
            ).fetchall()
            if not rows:
                break
            batch = [
                Recent(str(r[1]), str(r[2]), _calls(r[3]), r[4] if r[4] is None else str(r[4]))
                for r in rows
            ]
            changed = [
                (context, flags, row[0])
                for row, (context, flags) in zip(rows, contexts(window, batch), strict=True)
                if (context, flags) != (row[5] or "", row[6])
            ]
            if changed:
                with conn.cursor() as cur:
                    cur.executemany(
                        "UPDATE messages SET search_context = %s, search_flags = %s WHERE id = %s",
                        changed,
                    )
            window = (window + batch)[-LOOKBACK:]
            after = int(str(rows[-1][0]))
    version = conn.execute("SHOW server_version_num").fetchone()
    if version is not None and int(str(version[0])) >= 140000:  # statistics on expressions
        conn.execute(
            f"CREATE STATISTICS {OWN_WORDS} ON (ts_filter(search, '{{a,c,d}}')) FROM messages"
        )


def _calls(value: object) -> list[JSON] | None:
    if isinstance(value, list):
        return value
    return json.loads(value) if isinstance(value, str) and value else None


#: Extended statistics of the words of a message's own text, date words and name.
OWN_WORDS = "messages_own_words"


def m009_prompt_archive(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """The prompt archive: recipes per turn, their texts, and superseded state versions.

    Empty at first: sessions recorded before it have no recipes, and their
    current state documents become versions as they are replaced.
    """
    fk = "FOREIGN KEY (scope, session) REFERENCES sessions (scope, id) ON DELETE CASCADE"
    conn.execute(
        f"""
        CREATE TABLE prompt_turns (
            scope   text        NOT NULL,
            session text        NOT NULL,
            turn    integer     NOT NULL CHECK (turn >= 1),
            at      timestamptz NOT NULL,
            data    jsonb       NOT NULL,
            usage   jsonb,
            PRIMARY KEY (scope, session, turn),
            {fk}
        )
        """
    )
    conn.execute(
        f"""
        CREATE TABLE prompt_texts (
            scope   text NOT NULL,
            session text NOT NULL,
            hash    text NOT NULL,
            text    text NOT NULL,
            PRIMARY KEY (scope, session, hash),
            {fk}
        )
        """
    )
    conn.execute(
        f"""
        CREATE TABLE state_versions (
            scope    text        NOT NULL,
            session  text        NOT NULL,
            kind     text        NOT NULL,
            version  integer     NOT NULL,
            data     jsonb       NOT NULL,
            saved_at timestamptz NOT NULL,
            PRIMARY KEY (scope, session, kind, version),
            {fk}
        )
        """
    )


def m010_sign_ins(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Dashboard sign-ins beside the keys: the SHA-256 of the id, the key's id, the end."""
    conn.execute(
        """
        CREATE TABLE sign_ins (
            sign_in_hash text             PRIMARY KEY,
            key_id       bigint           NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
            ends_at      double precision NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX sign_ins_ends_at ON sign_ins (ends_at)")


#: Every migration, in order. Append only; never edit one that has shipped.
MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial", m001_initial),
    (2, "jobs", m002_jobs),
    (3, "vector", m003_vector),
    (4, "api_keys", m004_api_keys),
    (5, "search_columns", m005_search_columns),
    (6, "message_vectors", m006_message_vectors),
    (7, "message_parts", m007_message_parts),
    (8, "turn_context", m008_turn_context),
    (9, "prompt_archive", m009_prompt_archive),
    (10, "sign_ins", m010_sign_ins),
]


def applied_versions(conn: psycopg.Connection[tuple[object, ...]]) -> set[int]:
    """Versions recorded in ``engram_migrations`` of the current schema."""
    rows = conn.execute("SELECT version FROM engram_migrations").fetchall()
    return {int(str(row[0])) for row in rows}


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Apply every pending migration; return the versions applied now.

    Raises:
        MigrationError: a migration failed; its transaction was rolled back, so
            the schema stays at the previous version.

    """
    done: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        conn.execute(
            """
            CREATE TABLE IF NOT EXISTS engram_migrations (
                version    integer PRIMARY KEY,
                name       text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        have = applied_versions(conn)
        for version, name, step in MIGRATIONS:
            if version in have:
                continue
            try:
                with conn.transaction():
                    step(conn)
                    conn.execute(
                        "INSERT INTO engram_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
            except psycopg.Error as exc:
                raise MigrationError(
                    f"PostgreSQL migration {version:03d}_{name} failed: {exc}"
                ) from exc
            done.append(version)
    return done
