"""PostgreSQL backend: several Engram servers can share one database.

Data model (see :mod:`engram.store.postgres_migrations` for the DDL):

* ``sessions`` keyed by ``(scope, id)``, with running totals kept at append;
* ``messages`` with an identity id, a JSON ``tool_calls``, ``jsonb`` metadata
  and a stored, weighted ``tsvector`` (content weight A, speaker name weight B)
  under a GIN index; ranked with ``ts_rank_cd``, snippets by ``ts_headline``;
* ``states`` (one row per session and kind, compare-and-set on ``version``),
  ``memories``, ``memory_audit``, ``usage`` and ``jobs`` (see :mod:`engram.jobs`).

Concurrency: an append first upserts its session row, which locks it until
commit; ids are drawn after that, so within a session ids are committed in
increasing order and a reader paging by id never skips a message that commits
later. State saves are a single conditional ``UPDATE``/``INSERT``: two
compactions of one session commit at most one new version.

Connections come from a ``psycopg_pool.ConnectionPool`` and run in
autocommit mode: a read is one statement and one round trip; a write opens an
explicit transaction. A checked-out connection is probed without a round trip
(is its socket readable while idle? then the server closed it or said
something: only then is it pinged). A connection lost mid-call raises
:class:`~engram.errors.ConnectionLost`; reads are retried once on a fresh
connection, writes are not (the caller decides).
"""

from __future__ import annotations

import select
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from engram.errors import ConfigError, ConnectionLost, EngramError, MissingDependency, StoreError
from engram.models import (
    JSON,
    MemoryRecord,
    Message,
    NewMessage,
    SearchHit,
    SessionInfo,
    StateRecord,
    UsageRecord,
    frozen_metadata,
)
from engram.search_query import terms as extract_terms
from engram.store.base import MAX_PAGE
from engram.store.batch_check import check_batch, json_value
from engram.store.snippets import Stemmer, highlight
from engram.store.usage_totals import usage_summary

try:
    import psycopg
    from psycopg.types.json import Json, Jsonb
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency(
        "the PostgreSQL backend needs the 'postgres' extra: pip install 'engram[postgres]'"
    ) from exc

from engram.store.postgres_migrations import migrate

#: Default pool bounds; override with ``open_store(url, min_size=..., max_size=...)``.
DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10
#: Seconds to wait for a pooled connection before raising ConnectionLost.
DEFAULT_TIMEOUT = 30.0
#: Text-search configuration made by migration 001 (English stems, no stop words).
TS_CONFIG = "engram_english"
#: ``ts_headline`` options: ``[``/``]`` around matches, a short fragment.
HEADLINE_OPTIONS = (
    "StartSel=[, StopSel=], MaxWords=30, MinWords=12, ShortWord=2, HighlightAll=false"
)

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")

_OPTIONS = frozenset({"min_size", "max_size", "timeout", "migrate_schema"})

_MESSAGE_COLUMNS = (
    "id, scope, session, role, content, created_at, tokens, name, tool_calls, tool_call_id, "
    "metadata"
)
_SESSION_COLUMNS = (
    "scope, id, created_at, updated_at, message_count, token_count, policy, "
    "first_message_at, last_message_at"
)
_MEMORY_COLUMNS = "id, scope, content, created_at, updated_at, source_session, metadata"

#: A batch of messages in one statement: parallel arrays, inserted in batch order.
_APPEND_SQL = """
    INSERT INTO messages (scope, session, role, content, name, tool_calls, tool_call_id,
                          created_at, tokens, metadata)
    SELECT %(scope)s, %(session)s, b.role, b.content, b.name, b.tool_calls, b.tool_call_id,
           b.created_at, b.tokens, b.metadata
    FROM unnest(%(role)s::text[], %(content)s::text[], %(name)s::text[], %(tool_calls)s::json[],
                %(tool_call_id)s::text[], %(created_at)s::timestamptz[], %(tokens)s::integer[],
                %(metadata)s::jsonb[])
         WITH ORDINALITY AS b(role, content, name, tool_calls, tool_call_id, created_at, tokens,
                              metadata, ord)
    ORDER BY b.ord
    RETURNING id
"""


def _utc(value: datetime) -> datetime:
    """Aware UTC datetime (naive values are taken as UTC, as everywhere in Engram)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


def _clamp(limit: int) -> int:
    return max(0, min(int(limit), MAX_PAGE))


def _message(row: Sequence[Any]) -> Message:
    return Message(
        id=int(row[0]),
        scope=row[1],
        session=row[2],
        role=row[3],
        content=row[4],
        created_at=_utc(row[5]),
        tokens=int(row[6]),
        name=row[7],
        tool_calls=row[8],
        tool_call_id=row[9],
        metadata=dict(row[10] or {}),
    )


def _session(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(
        scope=row[0],
        id=row[1],
        created_at=_utc(row[2]),
        updated_at=_utc(row[3]),
        message_count=int(row[4]),
        token_count=int(row[5]),
        policy=row[6],
        first_message_at=_utc_or_none(row[7]),
        last_message_at=_utc_or_none(row[8]),
    )


def _memory(row: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(
        id=int(row[0]),
        scope=row[1],
        content=row[2],
        created_at=_utc(row[3]),
        updated_at=_utc(row[4]),
        source_session=row[5],
        metadata=dict(row[6] or {}),
    )


def _mask(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _conninfo(url: str) -> str:
    """A libpq URI from an Engram URL (``postgres://``, ``postgresql+psycopg://`` ...)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL: {_mask(url)!r}")
    return "postgresql://" + rest


def _configure(conn: Conn) -> None:
    # Timestamps come back in UTC whatever the server's default time zone is.
    conn.execute("SET TIME ZONE 'UTC'")


def _check(conn: Conn) -> None:
    """Pool check on checkout, without a round trip for a healthy idle connection.

    An idle connection has nothing to read; if its socket is readable, the
    server closed it (killed backend, restart) or sent a notice: only then ping
    it (``check_connection`` raises for a dead one, and the pool replaces it).
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the pooled connection is closed")
    if _readable(conn.fileno()):
        ConnectionPool.check_connection(conn)


def _readable(fd: int) -> bool:
    """True if ``fd`` has data (or EOF) to read right now; never blocks."""
    if hasattr(select, "poll"):  # no FD_SETSIZE limit, unlike select()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


class PostgresStore:
    """The :class:`~engram.store.base.Store` over PostgreSQL (psycopg 3 + a connection pool)."""

    def __init__(
        self,
        conninfo: str,
        *,
        url: str | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
        max_size: int = DEFAULT_MAX_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        migrate_schema: bool = True,
    ) -> None:
        """Open a pool on ``conninfo`` and bring the schema up to date.

        Raises:
            ConnectionLost: the server cannot be reached within ``timeout`` seconds.
            MigrationError: the schema could not be migrated.

        """
        self.url = _mask(url or conninfo)
        self._timeout = timeout
        self._closed = False
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
                f"cannot connect to PostgreSQL at {self.url} within {timeout:g}s: {exc}"
            ) from exc
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
        wait for a connection) and ``migrate_schema`` (default True).
        """
        unknown = set(options) - _OPTIONS
        if unknown:
            raise ConfigError(
                f"unknown PostgreSQL store option(s) {sorted(unknown)}; use {sorted(_OPTIONS)}"
            )
        return cls(_conninfo(url), url=url, **options)

    def close(self) -> None:
        """Close every pooled connection. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    @property
    def pool(self) -> ConnectionPool[Conn]:
        """The connection pool (for :mod:`engram.jobs` and benchmarks)."""
        return self._pool

    def connection(self) -> AbstractContextManager[Conn]:
        """A pooled connection in a transaction (committed on success), errors mapped.

        For modules that add tables of their own (:mod:`engram.jobs`).
        """
        return self._connection(transaction=True)

    # -- plumbing -------------------------------------------------------------------

    @contextmanager
    def _connection(self, *, transaction: bool = False) -> Iterator[Conn]:
        """A pooled (autocommit) connection; with ``transaction``, inside one committed on success.

        psycopg errors become Engram errors: a dropped connection is
        ConnectionLost (the pool discards the broken connection and opens a new
        one), anything else is StoreError.
        """
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        try:
            with self._pool.connection(timeout=self._timeout) as conn:
                if transaction:
                    with conn.transaction():
                        yield conn
                else:
                    yield conn
        except EngramError:
            raise
        except PoolTimeout as exc:
            raise ConnectionLost(
                f"no PostgreSQL connection to {self.url} became available within "
                f"{self._timeout:g}s (server down or pool exhausted): {exc}"
            ) from exc
        except psycopg.OperationalError as exc:
            raise ConnectionLost(
                f"lost the connection to PostgreSQL at {self.url} ({exc}); "
                "the pool reconnects, so the call can be retried"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error at {self.url}: {exc}") from exc

    def _read(self, work: Callable[[Conn], T]) -> T:
        """Run a read-only ``work``; retried once on a fresh connection if the first one died.

        No transaction: each read is one statement (autocommit), so one round trip.
        """
        try:
            with self._connection() as conn:
                return work(conn)
        except ConnectionLost as exc:
            if isinstance(exc.__cause__, PoolTimeout):
                raise  # already waited the whole timeout: do not wait twice
            with self._connection() as conn:
                return work(conn)

    def _write(self, work: Callable[[Conn], T]) -> T:
        """Run ``work`` in one transaction (never retried: it may have partly happened)."""
        with self._connection(transaction=True) as conn:
            return work(conn)

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
                conn.execute(
                    """
                    INSERT INTO sessions (scope, id, created_at, updated_at)
                    VALUES (%s, %s, clock_timestamp(), clock_timestamp())
                    ON CONFLICT (scope, id) DO NOTHING
                    """,
                    (scope, session),
                )
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
                """
                INSERT INTO sessions AS s (scope, id, created_at, updated_at, message_count,
                                           token_count, first_message_at, last_message_at)
                VALUES (%s, %s, clock_timestamp(), clock_timestamp(), %s, %s, %s, %s)
                ON CONFLICT (scope, id) DO UPDATE SET
                    updated_at = clock_timestamp(),
                    message_count = s.message_count + EXCLUDED.message_count,
                    token_count = s.token_count + EXCLUDED.token_count,
                    first_message_at = LEAST(s.first_message_at, EXCLUDED.first_message_at),
                    last_message_at = GREATEST(s.last_message_at, EXCLUDED.last_message_at)
                """,
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
                },
            ).fetchall()
            ids = sorted(int(row[0]) for row in rows)
            if len(ids) != len(messages):
                raise StoreError(
                    f"stored {len(ids)} of {len(messages)} messages in {scope}/{session}"
                )
            stored = [
                Message(
                    id=message_id,
                    scope=scope,
                    session=session,
                    role=message.role,
                    content=message.content,
                    created_at=stamp,
                    tokens=int(count),
                    name=message.name,
                    tool_calls=message.tool_calls,
                    tool_call_id=message.tool_call_id,
                    metadata=frozen_metadata(message.metadata),
                )
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
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = %s AND session = %s"
        params: list[Any] = [scope, session]
        if before_id is not None:
            sql += " AND id < %s"
            params.append(int(before_id))
        sql += " ORDER BY id DESC LIMIT %s"
        params.append(_clamp(limit))

        def work(conn: Conn) -> list[Message]:
            rows = conn.execute(sql, params).fetchall()
            return [_message(row) for row in reversed(rows)]

        return self._read(work)

    def page(
        self, scope: str, session: str, *, after_id: int | None = None, limit: int = 100
    ) -> list[Message]:
        """The oldest ``limit`` messages with ``id > after_id`` (or all), oldest first."""
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE scope = %s AND session = %s"
        params: list[Any] = [scope, session]
        if after_id is not None:
            sql += " AND id > %s"
            params.append(int(after_id))
        sql += " ORDER BY id LIMIT %s"
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

        if not -(2**63) <= int(message_id) < 2**63:
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

    def search(
        self,
        scope: str,
        query: str,
        *,
        session: str | None = None,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """Full-text search over content and speaker name, best first.

        The query text is never parsed as tsquery syntax: each extracted word
        goes through ``plainto_tsquery`` (which stems it and drops stop words)
        and the pieces are OR-ed, so any matching word finds a message and
        messages matching more words rank higher.
        """
        terms = extract_terms(query)
        if not terms or _clamp(limit) == 0:
            return []
        names = [f"t{i}" for i in range(len(terms))]
        params: dict[str, Any] = dict(zip(names, terms, strict=True))
        any_query = " || ".join(f"plainto_tsquery('{TS_CONFIG}', %({n})s)" for n in names)
        all_query = " && ".join(f"plainto_tsquery('{TS_CONFIG}', %({n})s)" for n in names)
        filters = ["m.scope = %(scope)s"]
        params.update(scope=scope, limit=_clamp(limit), options=HEADLINE_OPTIONS)
        if session is not None:
            filters.append("m.session = %(session)s")
            params["session"] = session
        if roles is not None:
            filters.append("m.role = ANY(%(roles)s)")
            params["roles"] = list(roles)
        if start is not None:
            filters.append("m.created_at >= %(start)s")
            params["start"] = _utc(start)
        if end is not None:
            filters.append("m.created_at < %(end)s")
            params["end"] = _utc(end)
        where = " AND ".join(filters)
        # Messages holding every word rank first, then the others, each by the score
        # of the any-word query. Two index scans instead of scoring every any-word
        # match: the second runs only when the first leaves room (a one-time filter),
        # and only for several words. numnode = 0: only stop words, nothing to scan.
        some = ""
        if len(terms) > 1:
            some = f"""
            UNION ALL (
                SELECT m.id, ts_rank_cd(m.search, q.query) AS score, false AS has_all
                FROM messages m, q
                WHERE numnode(q.query) > 0
                  AND (SELECT count(*) FROM every_hit) < %(limit)s
                  AND m.search @@ q.query AND NOT (m.search @@ q.every) AND {where}
                ORDER BY score DESC, m.id DESC
                LIMIT %(limit)s
            )"""
        columns = ", ".join(f"m.{c.strip()}" for c in _MESSAGE_COLUMNS.split(","))
        sql = f"""
            WITH q AS NOT MATERIALIZED (SELECT ({any_query}) AS query, ({all_query}) AS every),
            every_hit AS (
                SELECT m.id, ts_rank_cd(m.search, q.query) AS score, true AS has_all
                FROM messages m, q
                WHERE numnode(q.query) > 0 AND m.search @@ q.every AND {where}
                ORDER BY score DESC, m.id DESC
                LIMIT %(limit)s
            ),
            top AS (
                (SELECT * FROM every_hit){some}
                ORDER BY has_all DESC, score DESC, id DESC
                LIMIT %(limit)s
            )
            SELECT {columns}, top.score, top.has_all,
                   ts_headline('{TS_CONFIG}', m.content, q.query, %(options)s) AS snippet
            FROM top JOIN messages m ON m.id = top.id, q
            ORDER BY top.has_all DESC, top.score DESC, top.id DESC
        """

        def work(conn: Conn) -> list[SearchHit]:
            # Never prepared: a generic plan would keep plainto_tsquery($1) as a per-row
            # filter and guess selectivity; with the words as constants the planner
            # folds the tsquery and estimates from the tsvector statistics.
            rows = conn.execute(sql, params, prepare=False).fetchall()
            stemmer = Stemmer()
            wanted = stemmer.stems(terms)
            hits = []
            for row in rows:
                snippet = str(row[13])
                if "[" not in snippet:
                    # ts_headline tokenizes the raw text (``3.14`` is one token): mark in Python.
                    snippet = highlight(row[4], stemmer.words(row[4]), wanted, name=row[7])
                hits.append(
                    SearchHit(
                        message=_message(row[:11]),
                        score=float(row[11]) + (1.0 if row[12] else 0.0),
                        snippet=snippet,
                    )
                )
            return hits

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
        """Every state document of the session, by kind (used by :mod:`engram.transfer`)."""

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
                conn.execute(
                    """
                    INSERT INTO sessions (scope, id, created_at, updated_at)
                    VALUES (%s, %s, clock_timestamp(), clock_timestamp())
                    ON CONFLICT (scope, id) DO NOTHING
                    """,
                    (scope, session),
                )
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

    # -- memories -----------------------------------------------------------------

    def add_memory(
        self,
        scope: str,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> MemoryRecord:
        """Store a new memory for the scope."""
        stamp = _utc(created_at) if created_at is not None else datetime.now(UTC)

        def work(conn: Conn) -> MemoryRecord:
            row = conn.execute(
                f"""
                INSERT INTO memories
                    (scope, content, source_session, metadata, created_at, updated_at)
                VALUES (%s, %s, %s, %s, %s, %s) RETURNING {_MEMORY_COLUMNS}
                """,
                (
                    scope,
                    content,
                    source_session,
                    Jsonb(json_value(frozen_metadata(metadata), "memory metadata")),
                    stamp,
                    stamp,
                ),
            ).fetchone()
            assert row is not None
            return _memory(row)

        return self._write(work)

    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""

        def work(conn: Conn) -> list[MemoryRecord]:
            rows = conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE scope = %s ORDER BY created_at, id",
                (scope,),
            ).fetchall()
            return [_memory(row) for row in rows]

        return self._read(work)

    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        if not -(2**63) <= int(memory_id) < 2**63:
            return None

        def work(conn: Conn) -> MemoryRecord | None:
            row = conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = %s AND scope = %s",
                (int(memory_id), scope),
            ).fetchone()
            return None if row is None else _memory(row)

        return self._read(work)

    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata; bumps ``updated_at``. None if not in scope."""
        if not -(2**63) <= int(memory_id) < 2**63:
            return None

        def work(conn: Conn) -> MemoryRecord | None:
            row = conn.execute(
                f"""
                UPDATE memories SET
                    content = COALESCE(%s, content),
                    metadata = COALESCE(%s, metadata),
                    updated_at = GREATEST(clock_timestamp(), updated_at)
                WHERE id = %s AND scope = %s
                RETURNING {_MEMORY_COLUMNS}
                """,
                (
                    content,
                    None
                    if metadata is None
                    else Jsonb(json_value(dict(metadata), "memory metadata")),
                    int(memory_id),
                    scope,
                ),
            ).fetchone()
            return None if row is None else _memory(row)

        return self._write(work)

    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        if not -(2**63) <= int(memory_id) < 2**63:
            return False

        def work(conn: Conn) -> bool:
            cur = conn.execute(
                "DELETE FROM memories WHERE id = %s AND scope = %s", (int(memory_id), scope)
            )
            return cur.rowcount > 0

        return self._write(work)

    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""

        def work(conn: Conn) -> int:
            return conn.execute("DELETE FROM memories WHERE scope = %s", (scope,)).rowcount

        return self._write(work)

    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's audit trail (an ISO ``at`` in the event is kept)."""
        body = dict(event)
        body.pop("id", None)
        at = _parse_at(body.pop("at", None))

        def work(conn: Conn) -> None:
            conn.execute(
                "INSERT INTO memory_audit (scope, at, event) VALUES (%s, %s, %s)",
                (scope, at, Jsonb(json_value(body, "audit event"))),
            )

        self._write(work)

    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added."""

        def work(conn: Conn) -> list[JSON]:
            rows = conn.execute(
                "SELECT id, at, event FROM memory_audit WHERE scope = %s ORDER BY id DESC LIMIT %s",
                (scope, _clamp(limit)),
            ).fetchall()
            return [
                {**dict(row[2]), "id": int(row[0]), "at": _utc(row[1]).isoformat()} for row in rows
            ]

        return self._read(work)

    # -- usage --------------------------------------------------------------------

    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any)."""

        def work(conn: Conn) -> None:
            conn.execute(
                """
                INSERT INTO usage (scope, session, model, purpose, input_tokens, output_tokens,
                                   cost_usd, created_at)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
                """,
                (
                    scope,
                    session,
                    usage.model,
                    usage.purpose,
                    int(usage.input_tokens),
                    int(usage.output_tokens),
                    usage.cost_usd,
                    _utc(usage.created_at),
                ),
            )

        self._write(work)

    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too."""
        where = "scope = %s" + (" AND session = %s" if session is not None else "")
        params: list[Any] = [scope] + ([session] if session is not None else [])

        def work(conn: Conn) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"""
                SELECT purpose, count(*), coalesce(sum(input_tokens), 0),
                       coalesce(sum(output_tokens), 0), coalesce(sum(cost_usd), 0)
                FROM usage WHERE {where} GROUP BY purpose ORDER BY purpose
                """,
                params,
            ).fetchall()

        return usage_summary(
            (str(r[0]), int(r[1]), int(r[2]), int(r[3]), float(r[4])) for r in self._read(work)
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"


def _parse_at(value: object) -> datetime:
    """An audit event's own ``at`` (kept when copying stores), else now."""
    if isinstance(value, datetime):
        return _utc(value)
    if isinstance(value, str):
        try:
            return _utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            pass
    return datetime.now(UTC)
