"""PostgreSQL backend: several Engram servers can share one database.

Data model (see :mod:`engram.store.postgres.migrations` for the DDL):

* ``sessions`` keyed by ``(scope, id)``, with running totals kept at append;
* ``messages`` with an identity id, a JSON ``tool_calls``, ``jsonb`` metadata
  and a stored, weighted ``tsvector`` (content weight A, speaker name weight B)
  under a GIN index; ranked with ``ts_rank_cd``, snippets by ``ts_headline``;
* ``states`` (one row per session and kind, compare-and-set on ``version``),
  ``memories``, ``memory_audit``, ``usage`` and ``jobs`` (see :mod:`engram.store.postgres.jobs`).

Concurrency: an append first upserts its session row, which locks it until
commit; ids are drawn after that, so within a session ids are committed in
increasing order and a reader paging by id never skips a message that commits
later. State saves are a single conditional ``UPDATE``/``INSERT``: two
compactions of one session commit at most one new version.

The pool and error mapping are in :mod:`engram.store.postgres.connection`;
memories, their audit trail and LLM usage (scope-level data) in
:mod:`engram.store.postgres.scope`; row decoding in
:mod:`engram.store.postgres.rows`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.errors import ConfigError, ConnectionLost, StoreError
from engram.models import (
    JSON,
    Message,
    NewMessage,
    SessionInfo,
    StateRecord,
    frozen_metadata,
    stored_message,
)
from engram.search.index import index_zone
from engram.store.base import VERSIONED_KINDS
from engram.store.batch_check import check_batch, json_value
from engram.store.common import clamp as _clamp
from engram.store.common import storable_id
from engram.store.common import utc as _utc
from engram.store.postgres.archive import PostgresArchive, keep_version
from engram.store.postgres.connection import (
    DEFAULT_MAX_SIZE,
    DEFAULT_MIN_SIZE,
    DEFAULT_TIMEOUT,
    Conn,
    ConnectionPool,
    Json,
    Jsonb,
    one_line,
    probe_connection,
    psycopg,
)
from engram.store.postgres.connection import check_on_checkout as _check
from engram.store.postgres.connection import configure_connection as _configure
from engram.store.postgres.connection import libpq_conninfo as _conninfo
from engram.store.postgres.connection import mask_url as _mask
from engram.store.postgres.edits import PostgresEdits
from engram.store.postgres.jobs import JobQueue
from engram.store.postgres.keys import PostgresApiKeys
from engram.store.postgres.locks import PostgresLocks
from engram.store.postgres.migrations import migrate
from engram.store.postgres.rows import MESSAGE_COLUMNS as _MESSAGE_COLUMNS
from engram.store.postgres.rows import SESSION_COLUMNS as _SESSION_COLUMNS
from engram.store.postgres.rows import message as _message
from engram.store.postgres.rows import session as _session
from engram.store.postgres.scope import PostgresScopeData
from engram.store.postgres.search import PostgresSearch
from engram.store.postgres.search import index_values as _index_values
from engram.store.postgres.search import record_speakers as _record_speakers
from engram.store.postgres.sign_ins import PostgresSignIns
from engram.store.postgres.vectors import PostgresVectors

_OPTIONS = frozenset({"min_size", "max_size", "timeout", "migrate_schema", "tz"})

#: Creates a session if absent (its scope and id as parameters).
_CREATE_SESSION_SQL = """
    INSERT INTO sessions (scope, id, created_at, updated_at)
    VALUES (%s, %s, clock_timestamp(), clock_timestamp())
    ON CONFLICT (scope, id) DO NOTHING
"""

#: Creates the session or adds a batch to its totals (scope, id, count, tokens, first, last).
_ADD_TO_SESSION_SQL = """
    INSERT INTO sessions AS s (scope, id, created_at, updated_at, message_count,
                               token_count, first_message_at, last_message_at)
    VALUES (%s, %s, clock_timestamp(), clock_timestamp(), %s, %s, %s, %s)
    ON CONFLICT (scope, id) DO UPDATE SET
        updated_at = clock_timestamp(),
        message_count = s.message_count + EXCLUDED.message_count,
        token_count = s.token_count + EXCLUDED.token_count,
        first_message_at = LEAST(s.first_message_at, EXCLUDED.first_message_at),
        last_message_at = GREATEST(s.last_message_at, EXCLUDED.last_message_at)
"""

#: A batch of messages in one statement: parallel arrays, inserted in batch order.
_APPEND_SQL = """
    INSERT INTO messages (scope, session, role, content, name, tool_calls, tool_call_id,
                          created_at, tokens, metadata, search_context, search_dates,
                          search_flags, parts)
    SELECT %(scope)s, %(session)s, b.role, b.content, b.name, b.tool_calls, b.tool_call_id,
           b.created_at, b.tokens, b.metadata, b.context, b.dates, b.flags, b.parts
    FROM unnest(%(role)s::text[], %(content)s::text[], %(name)s::text[], %(tool_calls)s::json[],
                %(tool_call_id)s::text[], %(created_at)s::timestamptz[], %(tokens)s::integer[],
                %(metadata)s::jsonb[], %(context)s::text[], %(dates)s::text[],
                %(flags)s::integer[], %(parts)s::json[])
         WITH ORDINALITY AS b(role, content, name, tool_calls, tool_call_id, created_at, tokens,
                              metadata, context, dates, flags, parts, ord)
    ORDER BY b.ord
    RETURNING id
"""


class PostgresStore(
    PostgresEdits,
    PostgresScopeData,
    PostgresApiKeys,
    PostgresSignIns,
    PostgresLocks,
    PostgresSearch,
    PostgresVectors,
    PostgresArchive,
):
    """The :class:`~engram.store.base.Store` over PostgreSQL (psycopg 3 + a connection pool)."""

    def job_queue(self, worker_id: str) -> JobQueue:
        """The job queue shared by every process on this database."""
        return JobQueue(self, worker_id=worker_id)

    def __init__(
        self,
        conninfo: str,
        *,
        url: str | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
        max_size: int = DEFAULT_MAX_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        migrate_schema: bool = True,
        tz: str | ZoneInfo | None = None,
    ) -> None:
        """Open a pool on ``conninfo`` and bring the schema up to date.

        Raises:
            ConnectionLost: the server cannot be reached within ``timeout`` seconds.
            MigrationError: the schema could not be migrated.

        """
        self.url = _mask(url or conninfo)
        self.zone = index_zone(tz)
        self._timeout = timeout
        self._dsn = conninfo
        self._closed = False
        self._group = threading.local()
        probe_connection(conninfo, self.url, timeout)
        self._pool: ConnectionPool[Conn] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max(min_size, max_size),
            open=False,
            # Autocommit: a read is a single statement, so BEGIN/COMMIT would only
            # add two round trips; writes open their own transaction (see _write).
            kwargs={"autocommit": True},
            configure=_configure,
            check=_check,
            timeout=timeout,
            name="engram",
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise ConnectionLost(
                f"cannot connect to PostgreSQL at {self.url} within {timeout:g}s: {one_line(exc)}"
            ) from None
        if migrate_schema:
            try:
                with self._connection() as conn:
                    migrate(conn)
            except BaseException:
                self._pool.close()
                raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresStore:
        """Open ``postgresql://user:pass@host:port/db?...`` or any libpq URI (Unix sockets too).

        ``options``: ``min_size``, ``max_size`` (pool bounds), ``timeout`` (seconds to
        wait for a connection), ``migrate_schema`` (default True) and ``tz`` (time
        zone of the date words indexed for search, default UTC).
        """
        unknown = set(options) - _OPTIONS
        if unknown:
            raise ConfigError(
                f"unknown PostgreSQL store option(s) {sorted(unknown)}; use {sorted(_OPTIONS)}"
            )
        return cls(_conninfo(url), url=url, **options)

    # -- sessions -----------------------------------------------------------------

    def ensure_session(
        self, scope: str, session: str, *, policy: Mapping[str, Any] | None = None
    ) -> SessionInfo:
        """Return the session, creating it (and its scope) if absent."""

        def work(conn: Conn) -> SessionInfo:
            if policy is not None:
                row = conn.execute(
                    f"""
                    INSERT INTO sessions (scope, id, created_at, updated_at, policy)
                    VALUES (%s, %s, clock_timestamp(), clock_timestamp(), %s)
                    ON CONFLICT (scope, id) DO UPDATE SET policy = EXCLUDED.policy
                    RETURNING {_SESSION_COLUMNS}
                    """,
                    (scope, session, Jsonb(json_value(dict(policy), "policy"))),
                ).fetchone()
            else:
                conn.execute(_CREATE_SESSION_SQL, (scope, session))
                row = conn.execute(
                    f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE scope = %s AND id = %s",
                    (scope, session),
                ).fetchone()
            assert row is not None
            return _session(row)

        return self._write(work)

    def get_session(self, scope: str, session: str) -> SessionInfo | None:
        """The session with its running totals, or None."""

        def work(conn: Conn) -> SessionInfo | None:
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE scope = %s AND id = %s",
                (scope, session),
            ).fetchone()
            return None if row is None else _session(row)

        return self._read(work)

    def list_sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        where, params = ("WHERE scope = %s", [scope]) if scope is not None else ("", [])

        def work(conn: Conn) -> list[SessionInfo]:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions {where} "
                "ORDER BY updated_at DESC, scope, id LIMIT %s OFFSET %s",
                [*params, _clamp(limit), max(0, int(offset))],
            ).fetchall()
            return [_session(row) for row in rows]

        return self._read(work)

    def list_scopes(self) -> list[str]:
        """Every scope that has a session or a memory, sorted by name."""

        def work(conn: Conn) -> list[str]:
            rows = conn.execute(
                "SELECT scope FROM sessions UNION SELECT scope FROM memories ORDER BY 1"
            ).fetchall()
            return sorted(str(row[0]) for row in rows)

        return self._read(work)

    def delete_session(self, scope: str, session: str) -> bool:
        """Admin purge of the session, its messages and state (cascade). True if it existed."""

        def work(conn: Conn) -> bool:
            cur = conn.execute(
                "DELETE FROM sessions WHERE scope = %s AND id = %s", (scope, session)
            )
            return cur.rowcount > 0

        return self._write(work)

    # -- messages -----------------------------------------------------------------

    def append(
        self, scope: str, session: str, messages: Sequence[NewMessage], tokens: Sequence[int]
    ) -> list[Message]:
        """Store messages atomically and in order; ids increase within the session."""
        check_batch(messages, tokens)
        if not messages:
            self.ensure_session(scope, session)
            return []
        stamps = [_utc(m.created_at) for m in messages]

        def work(conn: Conn) -> list[Message]:
            # The upsert locks the session row until commit: concurrent appends to one
            # session serialize here, before any id is drawn.
            conn.execute(
                _ADD_TO_SESSION_SQL,
                (
                    scope,
                    session,
                    len(messages),
                    sum(int(t) for t in tokens),
                    min(stamps),
                    max(stamps),
                ),
            )
            # One statement for the whole batch (a round trip per message would
            # dominate an import). Rows are inserted in ``ord`` order, so ids are drawn
            # in batch order; sorting the returned ids pairs them with the messages.
            extra = _index_values(conn, scope, session, messages, self.zone)
            _record_speakers(conn, scope, session, messages)
            rows = conn.execute(
                _APPEND_SQL,
                {
                    "scope": scope,
                    "session": session,
                    "role": [m.role for m in messages],
                    "content": [m.content for m in messages],
                    "name": [m.name for m in messages],
                    "tool_calls": [
                        None if m.tool_calls is None else Json(m.tool_calls) for m in messages
                    ],
                    "tool_call_id": [m.tool_call_id for m in messages],
                    "created_at": stamps,
                    "tokens": [int(count) for count in tokens],
                    "metadata": [Jsonb(frozen_metadata(m.metadata)) for m in messages],
                    "context": [e[0] for e in extra],
                    "dates": [e[1] for e in extra],
                    "flags": [e[2] for e in extra],
                    "parts": [None if m.parts is None else Json(m.parts) for m in messages],
                },
            ).fetchall()
            ids = sorted(int(row[0]) for row in rows)
            if len(ids) != len(messages):
                raise StoreError(
                    f"stored {len(ids)} of {len(messages)} messages in {scope}/{session}"
                )
            stored = [
                stored_message(message, message_id, scope, session, count, stamp)
                for message_id, message, stamp, count in zip(
                    ids, messages, stamps, tokens, strict=True
                )
            ]
            return stored

        return self._write(work)

    def tail(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> list[Message]:
        """The newest ``limit`` messages with ``id < before_id`` (or all), oldest first."""
        rows = self._history(scope, session, "id < %s", before_id, "id DESC", limit)
        return rows[::-1]

    def page(
        self, scope: str, session: str, *, after_id: int | None = None, limit: int = 100
    ) -> list[Message]:
        """The oldest ``limit`` messages with ``id > after_id`` (or all), oldest first."""
        return self._history(scope, session, "id > %s", after_id, "id", limit)

    def _history(
        self, scope: str, session: str, bound: str, bound_id: int | None, order: str, limit: int
    ) -> list[Message]:
        """One page of a session's messages: ``bound`` applies when ``bound_id`` is given."""
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = %s AND session = %s"
        params: list[Any] = [scope, session]
        if bound_id is not None:
            sql += f" AND {bound}"
            params.append(int(bound_id))
        sql += f" ORDER BY {order} LIMIT %s"
        params.append(_clamp(limit))

        def work(conn: Conn) -> list[Message]:
            return [_message(row) for row in conn.execute(sql, params).fetchall()]

        return self._read(work)

    def get_message(self, scope: str, message_id: int) -> Message | None:
        """One message by id, only if it belongs to a session of ``scope``."""

        def work(conn: Conn) -> Message | None:
            row = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = %s AND scope = %s",
                (int(message_id), scope),
            ).fetchone()
            return None if row is None else _message(row)

        if not storable_id(int(message_id)):
            return None
        return self._read(work)

    def between(
        self,
        scope: str,
        session: str | None,
        start: datetime,
        end: datetime,
        *,
        limit: int = 100,
        roles: Sequence[str] | None = None,
    ) -> list[Message]:
        """Messages with ``start <= created_at < end``, oldest first."""
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = %s"
        params: list[Any] = [scope]
        if session is not None:
            sql += " AND session = %s"
            params.append(session)
        sql += " AND created_at >= %s AND created_at < %s"
        params += [_utc(start), _utc(end)]
        if roles is not None:
            sql += " AND role = ANY(%s)"
            params.append(list(roles))
        sql += " ORDER BY created_at, id LIMIT %s"
        params.append(_clamp(limit))

        def work(conn: Conn) -> list[Message]:
            return [_message(row) for row in conn.execute(sql, params).fetchall()]

        return self._read(work)

    # -- session state -----------------------------------------------------------

    def load_state(self, scope: str, session: str, kind: str) -> StateRecord | None:
        """The state document of that kind, or None if never saved."""

        def work(conn: Conn) -> StateRecord | None:
            row = conn.execute(
                "SELECT kind, version, data, updated_at FROM states "
                "WHERE scope = %s AND session = %s AND kind = %s",
                (scope, session, kind),
            ).fetchone()
            if row is None:
                return None
            return StateRecord(
                kind=row[0], version=int(row[1]), data=dict(row[2]), updated_at=_utc(row[3])
            )

        return self._read(work)

    def list_states(self, scope: str, session: str) -> list[StateRecord]:
        """Every state document of the session, by kind (for `engram.transfer.documents`)."""

        def work(conn: Conn) -> list[StateRecord]:
            rows = conn.execute(
                "SELECT kind, version, data, updated_at FROM states "
                "WHERE scope = %s AND session = %s ORDER BY kind",
                (scope, session),
            ).fetchall()
            return [
                StateRecord(kind=r[0], version=int(r[1]), data=dict(r[2]), updated_at=_utc(r[3]))
                for r in rows
            ]

        return self._read(work)

    def save_state(
        self, scope: str, session: str, kind: str, data: JSON, *, expected_version: int
    ) -> StateRecord | None:
        """Compare-and-set on ``version``; None when another writer got there first."""

        def work(conn: Conn) -> StateRecord | None:
            if expected_version == 0:
                conn.execute(_CREATE_SESSION_SQL, (scope, session))
                row = conn.execute(
                    """
                    INSERT INTO states (scope, session, kind, version, data, updated_at)
                    VALUES (%s, %s, %s, 1, %s, clock_timestamp())
                    ON CONFLICT (scope, session, kind) DO NOTHING
                    RETURNING kind, version, data, updated_at
                    """,
                    (scope, session, kind, Jsonb(json_value(data, f"state {kind!r}"))),
                ).fetchone()
            else:
                if kind in VERSIONED_KINDS:
                    keep_version(conn, scope, session, kind, expected_version)
                row = conn.execute(
                    """
                    UPDATE states
                    SET version = version + 1, data = %s, updated_at = clock_timestamp()
                    WHERE scope = %s AND session = %s AND kind = %s AND version = %s
                    RETURNING kind, version, data, updated_at
                    """,
                    (
                        Jsonb(json_value(data, f"state {kind!r}")),
                        scope,
                        session,
                        kind,
                        int(expected_version),
                    ),
                ).fetchone()
            if row is None:
                return None
            return StateRecord(
                kind=row[0], version=int(row[1]), data=dict(row[2]), updated_at=_utc(row[3])
            )

        return self._write(work)

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"
