"""SQLite backend: the default store, one file, WAL, FTS5 search.

Data model (the schema itself is in :mod:`engram.store.sqlite_migrations`):
scopes and sessions have integer keys; a session is ``UNIQUE(scope_id,
external_id)`` and carries its running totals (message and token counts,
first and last message time), updated in the same transaction as every
append. Messages are append-only rows with ``AUTOINCREMENT`` integer ids, so
ids increase in insertion order and are never reused. An FTS5 external-content
index over ``(content, name)`` is written by ``append`` in the same transaction
as the rows (one statement per append; an insert trigger made FTS5 flush once
per row) and kept in step on delete and update by triggers. State documents,
memories, the memory audit trail, LLM usage and background jobs have their
own tables. Timestamps are fixed-width ISO-8601 UTC text, returned as aware
UTC datetimes; naive datetimes given to the store are taken to be UTC.

Connections: one per thread (``threading.local``), opened on first use with
``journal_mode=WAL`` (readers never block the writer), ``synchronous=NORMAL``
(durable at checkpoints, safe against corruption), ``foreign_keys=ON`` and
``busy_timeout`` = :data:`BUSY_TIMEOUT_MS`. Every write is one
``BEGIN IMMEDIATE ... COMMIT`` transaction taken under a per-store lock, so
threads of one process queue in Python rather than spin in SQLite's busy
handler, and other processes wait up to the busy timeout. An in-memory
database (``sqlite:///:memory:``) has a single connection shared under a lock,
since each connection to ``:memory:`` would be a different database.

Hot paths avoid work: ``(scope, session) -> session id`` is cached once
committed, ``tail`` is one indexed query, and JSON columns are decoded only
when not NULL.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from engram.errors import ConfigError, CorruptedData, InvalidMessage, StoreError
from engram.models import (
    JSON,
    ROLES,
    MemoryRecord,
    Message,
    NewMessage,
    SearchHit,
    SessionInfo,
    StateRecord,
    UsageRecord,
)
from engram.search_query import terms
from engram.store.base import MAX_PAGE
from engram.store.sqlite_migrations import migrate
from engram.store.sqlite_rows import MEMORY_COLUMNS as _MEMORY_COLS
from engram.store.sqlite_rows import MSG_COLUMNS as _MSG
from engram.store.sqlite_rows import MSG_HOT_COLUMNS as _MSG_HOT
from engram.store.sqlite_rows import SESSION_COLUMNS as _SESSION_COLS
from engram.store.sqlite_rows import dump as _dump
from engram.store.sqlite_rows import json_dict as _json_dict
from engram.store.sqlite_rows import memory as _memory
from engram.store.sqlite_rows import message as _message
from engram.store.sqlite_rows import messages as _messages
from engram.store.sqlite_rows import now as _now
from engram.store.sqlite_rows import parse_ts as _parse_ts
from engram.store.sqlite_rows import roles_clause as _roles_clause
from engram.store.sqlite_rows import session_info as _session_info
from engram.store.sqlite_rows import ts as _ts
from engram.store.sqlite_rows import utc as _utc
from engram.store.sqlite_search import BM25_WEIGHTS, SNIPPET_TOKENS
from engram.store.sqlite_search import search as search_fts

#: How long a write waits for another process's write lock before failing, in ms.
BUSY_TIMEOUT_MS = 5000

_MAX_ID = 2**63 - 1
_MEMORY_PATHS = frozenset({"", ":memory:"})

_P = ParamSpec("_P")
_R = TypeVar("_R")

# INDEXED BY: with few sessions (or stale statistics) the planner prefers walking the
# rowid range ``id < ?`` and filtering on the session, which reads other sessions'
# rows; the (session_id, id) index keeps the cost proportional to the rows returned.
_TAIL = (
    f"SELECT {_MSG_HOT} FROM messages m INDEXED BY messages_session_id"
    " WHERE m.session_id = ? AND m.id < ? ORDER BY m.id DESC LIMIT ?"
)
_PAGE = (
    f"SELECT {_MSG_HOT} FROM messages m INDEXED BY messages_session_id"
    " WHERE m.session_id = ? AND m.id > ? ORDER BY m.id LIMIT ?"
)
_INSERT_MESSAGE = (
    "INSERT INTO messages(session_id, created_at, role, content, name, tool_calls,"
    " tool_call_id, metadata, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# The index entries of new messages are written by the store, not by a trigger (see
# sqlite_migrations.m002_index_inserts_explicitly): one statement per append.
_INDEX_ONE = "INSERT INTO messages_fts(rowid, content, name) VALUES (?, ?, ?)"
_INDEX_RANGE = (
    "INSERT INTO messages_fts(rowid, content, name)"
    " SELECT id, content, name FROM messages WHERE id BETWEEN ? AND ?"
)
_UPDATE_TOTALS = """UPDATE sessions SET
    message_count = message_count + ?1,
    token_count = token_count + ?2,
    first_message_at = CASE WHEN first_message_at IS NULL OR first_message_at > ?3
                            THEN ?3 ELSE first_message_at END,
    last_message_at = CASE WHEN last_message_at IS NULL OR last_message_at < ?4
                           THEN ?4 ELSE last_message_at END,
    updated_at = ?5
WHERE id = ?6"""
_FIND_SESSION = (
    "SELECT s.id FROM sessions s JOIN scopes c ON c.id = s.scope_id"
    " WHERE c.name = ? AND s.external_id = ?"
)
_SCOPE_OF = "(SELECT id FROM scopes WHERE name = ?)"


def _clamp(limit: int) -> int:
    return max(0, min(int(limit), MAX_PAGE))


def _guarded(
    method: Callable[Concatenate[SQLiteStore, _P], _R],
) -> Callable[Concatenate[SQLiteStore, _P], _R]:
    """Run ``method`` under the store lock, turning sqlite3 errors into StoreError."""
    op = method.__name__

    @functools.wraps(method)
    def wrapper(self: SQLiteStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise self._error(op, exc) from exc

    return wrapper


class _Tx:
    """One write transaction: its connection and the ids to cache once it commits."""

    __slots__ = ("conn", "rollback_only", "scopes", "sessions")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.scopes: dict[str, int] = {}
        self.sessions: dict[tuple[str, str], int] = {}
        # Set when the operation decided to change nothing (a failed compare-and-set).
        self.rollback_only = False


class SQLiteStore:
    """The :class:`~engram.store.base.Store` on one SQLite file (or ``:memory:``).

    Open with ``SQLiteStore.from_url("sqlite:///path.db")`` or
    ``SQLiteStore(path)``. The directory must exist; the file is created and
    migrated on open.
    """

    url: str

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        url: str | None = None,
    ) -> None:
        """Open (creating and migrating if needed) the database at ``path``.

        Args:
            path: file path, or ``":memory:"`` for a private in-memory database.
            busy_timeout_ms: how long a write waits for another process's lock.
            url: the URL to report as :attr:`url` (defaults to one built from path).

        Raises:
            ConfigError: the directory does not exist or the path is a directory.
            CorruptedData: the file is not an SQLite database.
            MigrationError: the schema could not be brought up to date.
        """
        self.path = os.fspath(path)
        self._memory = self.path in _MEMORY_PATHS
        if not self._memory:
            parent = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(parent):
                raise ConfigError(
                    f"cannot open SQLite database {self.path!r}: "
                    f"directory {parent!r} does not exist"
                )
            if os.path.isdir(self.path):
                raise ConfigError(f"cannot open SQLite database {self.path!r}: it is a directory")
        if not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
            raise ConfigError(
                f"busy_timeout_ms must be a non-negative integer, not {busy_timeout_ms!r}"
            )
        self.url = url or f"sqlite:///{self.path or ':memory:'}"
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.Lock()
        # A :memory: database has one connection, so every call must take turns on it.
        self._lock: AbstractContextManager[Any] = (
            threading.RLock() if self._memory else nullcontext()
        )
        self._shared: sqlite3.Connection | None = None
        self._closed = False
        self._scopes: dict[str, int] = {}
        self._sessions: dict[tuple[str, str], int] = {}
        try:
            migrate(self._conn())
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteStore:
        """Open ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``sqlite:///:memory:``.

        Args:
            url: the store URL (``sqlite://`` alone also means in-memory).
            **options: ``busy_timeout_ms`` (int).

        Raises:
            ConfigError: the URL is not an SQLite URL, or an option is unknown.
        """
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower().split("+", 1)[0] != "sqlite":
            raise ConfigError(f"not an SQLite URL: {url!r} (expected sqlite:///path.db)")
        unknown = set(options) - {"busy_timeout_ms"}
        if unknown:
            raise ConfigError(f"unknown SQLite store options {sorted(unknown)} for {url!r}")
        if rest == "":
            path = ":memory:"
        elif rest.startswith("/"):
            path = rest[1:]
            if not path:
                raise ConfigError(f"SQLite URL {url!r} names no file (expected sqlite:///path.db)")
        else:
            raise ConfigError(
                f"SQLite URL {url!r} must not name a host: use sqlite:///relative.db "
                "or sqlite:////absolute/path.db"
            )
        return cls(path, url=url, **options)

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

    # -- connections ----------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        try:
            conn: sqlite3.Connection = self._local.conn
        except AttributeError:
            return self._connect_thread()
        return conn

    def _connect_thread(self) -> sqlite3.Connection:
        with self._conns_lock:
            if self._closed:
                raise StoreError(f"the store {self.url} is closed")
            if self._memory and self._shared is not None:
                conn = self._shared
            else:
                conn = self._open_connection()
                self._conns.append(conn)
                if self._memory:
                    self._shared = conn
        self._local.conn = conn
        return conn

    def _open_connection(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path or ":memory:",
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,  # autocommit; we issue BEGIN IMMEDIATE ourselves
                check_same_thread=False,  # close() runs on another thread; use stays per-thread
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "not a database" in str(exc):
                raise CorruptedData(
                    f"{self.path!r} is not an SQLite database (or it is encrypted or damaged)"
                ) from exc
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        return conn

    def close(self) -> None:
        """Close every connection this store opened. Safe to call twice."""
        with self._conns_lock:
            if self._closed:
                return
            self._closed = True
            conns, self._conns = self._conns, []
            self._shared = None
        self._local = threading.local()
        for i, conn in enumerate(conns):
            if i == 0:
                # Lets SQLite refresh its planner statistics when they are stale; cheap.
                with suppress(sqlite3.Error):
                    conn.execute("PRAGMA optimize")
            conn.close()

    def _error(self, op: str, exc: sqlite3.Error) -> StoreError:
        if self._closed:
            return StoreError(f"{op}: the store {self.url} is closed")
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StoreError(
                f"{op} on {self.url}: the database stayed locked by another writer for "
                f"more than {self._busy_timeout_ms} ms ({text})"
            )
        if "not a database" in text or "malformed" in text:
            return CorruptedData(f"{op} on {self.url}: the database file is damaged ({text})")
        return StoreError(f"{op} on {self.url} failed: {type(exc).__name__}: {text}")

    @contextmanager
    def _write(self) -> Iterator[_Tx]:
        """One atomic write: BEGIN IMMEDIATE, then COMMIT, or ROLLBACK on any error."""
        conn = self._conn()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            tx = _Tx(conn)
            try:
                yield tx
                if tx.rollback_only:
                    conn.execute("ROLLBACK")
                    return
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        # Only ids of committed rows may be cached: a rolled-back id can be reused.
        if tx.scopes:
            self._scopes.update(tx.scopes)
        if tx.sessions:
            self._sessions.update(tx.sessions)

    # -- id resolution ----------------------------------------------------------------

    def _scope_pk(self, conn: sqlite3.Connection, scope: str) -> int | None:
        pk = self._scopes.get(scope)
        if pk is None:
            row = conn.execute("SELECT id FROM scopes WHERE name = ?", (scope,)).fetchone()
            if row is None:
                return None
            pk = self._scopes[scope] = row[0]
        return pk

    def _scope_for_write(self, tx: _Tx, scope: str) -> int:
        pk = self._scopes.get(scope) or tx.scopes.get(scope)
        if pk is not None:
            return pk  # scopes are never deleted, so a cached id stays valid
        row = tx.conn.execute("SELECT id FROM scopes WHERE name = ?", (scope,)).fetchone()
        if row is None:
            cur = tx.conn.execute(
                "INSERT INTO scopes(name, created_at) VALUES (?, ?)", (scope, _ts(_now()))
            )
            pk = cur.lastrowid
            assert pk is not None
        else:
            pk = row[0]
        tx.scopes[scope] = pk
        return pk

    def _lookup_session(self, conn: sqlite3.Connection, scope: str, session: str) -> int | None:
        row = conn.execute(_FIND_SESSION, (scope, session)).fetchone()
        return None if row is None else int(row[0])

    def _session_for_write(self, tx: _Tx, scope: str, session: str, now: str | None = None) -> int:
        """The session's id, created (with its scope) inside ``tx`` if absent."""
        scope_pk = self._scope_for_write(tx, scope)
        row = tx.conn.execute(
            "SELECT id FROM sessions WHERE scope_id = ? AND external_id = ?", (scope_pk, session)
        ).fetchone()
        if row is None:
            now = now or _ts(_now())
            cur = tx.conn.execute(
                "INSERT INTO sessions(scope_id, external_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?)",
                (scope_pk, session, now, now),
            )
            pk = cur.lastrowid
            assert pk is not None
        else:
            pk = row[0]
        tx.sessions[(scope, session)] = pk
        return pk

    def _session_rows(
        self, conn: sqlite3.Connection, scope: str, session: str, sql: str, params: tuple[Any, ...]
    ) -> list[Any]:
        """Run ``sql`` (whose first parameter is the session id) for this session."""
        key = (scope, session)
        pk = self._sessions.get(key)
        if pk is not None:
            rows = conn.execute(sql, (pk, *params)).fetchall()
            if rows:
                return rows
        # Not cached, or nothing found: the cached id may be stale (the session was
        # purged, maybe re-created, through another store on the same file).
        fresh = self._lookup_session(conn, scope, session)
        if fresh is None:
            self._sessions.pop(key, None)
            return []
        self._sessions[key] = fresh
        if fresh == pk:
            return []
        return conn.execute(sql, (fresh, *params)).fetchall()

    # -- sessions ----------------------------------------------------------------------

    @_guarded
    def ensure_session(
        self, scope: str, session: str, *, policy: Mapping[str, Any] | None = None
    ) -> SessionInfo:
        """Return the session, creating it (and its scope) if absent.

        A non-None ``policy`` replaces the stored one; None leaves it as it is.
        """
        if policy is None:
            existing = self._get_session(self._conn(), scope, session)
            if existing is not None:
                return existing
        policy_json = None if policy is None else _dump(dict(policy), "policy")
        with self._write() as tx:
            pk = self._session_for_write(tx, scope, session)
            if policy_json is not None:
                tx.conn.execute(
                    "UPDATE sessions SET policy = ?, updated_at = ? WHERE id = ?",
                    (policy_json, _ts(_now()), pk),
                )
            info = self._get_session(tx.conn, scope, session)
        assert info is not None
        return info

    def _get_session(
        self, conn: sqlite3.Connection, scope: str, session: str
    ) -> SessionInfo | None:
        row = conn.execute(
            f"SELECT {_SESSION_COLS} FROM sessions s JOIN scopes c ON c.id = s.scope_id"
            " WHERE c.name = ? AND s.external_id = ?",
            (scope, session),
        ).fetchone()
        return None if row is None else _session_info(row)

    @_guarded
    def get_session(self, scope: str, session: str) -> SessionInfo | None:
        """The session with its running totals, or None."""
        return self._get_session(self._conn(), scope, session)

    @_guarded
    def list_sessions(
        self, scope: str | None = None, *, limit: int = 100, offset: int = 0
    ) -> list[SessionInfo]:
        """Sessions of one scope (or all), most recently updated first."""
        where, params = ("", ()) if scope is None else (" WHERE c.name = ?", (scope,))
        rows = self._conn().execute(
            f"SELECT {_SESSION_COLS} FROM sessions s JOIN scopes c ON c.id = s.scope_id{where}"
            " ORDER BY s.updated_at DESC, s.id DESC LIMIT ? OFFSET ?",
            (*params, _clamp(limit), max(0, int(offset))),
        )
        return [_session_info(row) for row in rows]

    @_guarded
    def list_scopes(self) -> list[str]:
        """Every scope that has a session or a memory, sorted by name."""
        rows = self._conn().execute(
            "SELECT name FROM scopes c"
            " WHERE EXISTS (SELECT 1 FROM sessions WHERE scope_id = c.id)"
            " OR EXISTS (SELECT 1 FROM memories WHERE scope_id = c.id)"
            " ORDER BY name"
        )
        return [row[0] for row in rows]

    @_guarded
    def delete_session(self, scope: str, session: str) -> bool:
        """Admin purge: remove the session, its messages and its state. True if it existed.

        The scope's memories are kept; LLM usage of the session stays counted in the scope.
        """
        with self._write() as tx:
            pk = self._lookup_session(tx.conn, scope, session)
            if pk is not None:
                # Explicit deletes (not only ON DELETE CASCADE): they do not depend on
                # the foreign_keys pragma, and the FTS trigger runs for each message.
                tx.conn.execute("DELETE FROM messages WHERE session_id = ?", (pk,))
                tx.conn.execute("DELETE FROM session_state WHERE session_id = ?", (pk,))
                tx.conn.execute("DELETE FROM sessions WHERE id = ?", (pk,))
        self._sessions.pop((scope, session), None)
        return pk is not None

    # -- messages ----------------------------------------------------------------------

    @_guarded
    def append(
        self, scope: str, session: str, messages: Sequence[NewMessage], tokens: Sequence[int]
    ) -> list[Message]:
        """Store messages atomically, in order, creating the session if absent.

        ``tokens[i]`` is the exact size of ``messages[i]``. Returns the stored
        messages with their new ids (increasing). Updates the session totals.

        Raises:
            InvalidMessage: a message cannot be stored (unknown role, negative token
                count, metadata that is not JSON, text that is not valid Unicode);
                nothing was written.
        """
        if len(messages) != len(tokens):
            raise InvalidMessage(
                f"append got {len(messages)} messages but {len(tokens)} token counts"
            )
        pairs = enumerate(zip(messages, tokens, strict=True))
        rows = [self._message_row(i, m, t) for i, (m, t) in pairs]
        stamps = [row[0] for row in rows]
        totals = (
            len(rows),
            sum(row[-1] for row in rows),
            min(stamps, default=None),
            max(stamps, default=None),
            _ts(_now()),
        )
        try:
            with self._write() as tx:
                conn = tx.conn
                key = (scope, session)
                pk = self._sessions.get(key)
                # The totals UPDATE doubles as a check that a cached id is still live.
                if pk is None or conn.execute(_UPDATE_TOTALS, (*totals, pk)).rowcount != 1:
                    self._sessions.pop(key, None)
                    pk = self._session_for_write(tx, scope, session, totals[-1])
                    conn.execute(_UPDATE_TOTALS, (*totals, pk))
                ids = self._insert_messages(conn, pk, rows)
        except UnicodeEncodeError as exc:
            raise InvalidMessage(f"a message holds text that is not valid Unicode: {exc}") from exc
        return [
            Message(
                mid,
                scope,
                session,
                m.role,
                m.content,
                _utc(m.created_at),
                t,
                m.name,
                m.tool_calls,
                m.tool_call_id,
                dict(m.metadata) if m.metadata else {},
            )
            for mid, m, t in zip(ids, messages, tokens, strict=True)
        ]

    @staticmethod
    def _insert_messages(
        conn: sqlite3.Connection, pk: int, rows: list[tuple[Any, ...]]
    ) -> list[int]:
        """Insert the rows and their index entries; returns their ids, in order.

        Inside the caller's write transaction (the write lock is held), so the
        ``AUTOINCREMENT`` ids of one ``executemany`` are consecutive and end at
        ``last_insert_rowid()``; the index statement checks it saw them all.
        """
        if len(rows) == 1:
            row = rows[0]
            mid = conn.execute(_INSERT_MESSAGE, (pk, *row)).lastrowid
            assert mid is not None
            conn.execute(_INDEX_ONE, (mid, row[2], row[3]))
            return [mid]
        conn.executemany(_INSERT_MESSAGE, [(pk, *row) for row in rows])
        last = int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])
        first = last - len(rows) + 1
        indexed = conn.execute(_INDEX_RANGE, (first, last)).rowcount
        if indexed != len(rows):
            raise StoreError(
                f"append: {len(rows)} messages inserted but {indexed} found in ids "
                f"{first}..{last}; nothing was written"
            )
        return list(range(first, last + 1))

    @staticmethod
    def _message_row(index: int, m: NewMessage, tokens: int) -> tuple[Any, ...]:
        if m.role not in ROLES:
            raise InvalidMessage(
                f"message {index} has role {m.role!r}; expected one of {sorted(ROLES)}"
            )
        if not isinstance(m.content, str):
            raise InvalidMessage(
                f"message {index} content must be text, not {type(m.content).__name__}"
            )
        if not isinstance(tokens, int) or tokens < 0:
            raise InvalidMessage(
                f"message {index} has token count {tokens!r}; expected an int >= 0"
            )
        return (
            _ts(m.created_at),
            m.role,
            m.content,
            m.name,
            None if m.tool_calls is None else _dump(m.tool_calls, "tool_calls", InvalidMessage),
            m.tool_call_id,
            _dump(m.metadata, "metadata", InvalidMessage) if m.metadata else None,
            tokens,
        )

    @_guarded
    def tail(
        self, scope: str, session: str, *, limit: int, before_id: int | None = None
    ) -> list[Message]:
        """The newest ``limit`` messages with ``id < before_id`` (or all), oldest first.

        Cost grows with ``limit``, not with the history: one walk down the
        ``(session_id, id)`` index.
        """
        limit = _clamp(limit)
        if limit == 0:
            return []
        before = _MAX_ID if before_id is None else before_id
        rows = self._session_rows(self._conn(), scope, session, _TAIL, (before, limit))
        rows.reverse()
        return _messages(scope, session, rows)

    @_guarded
    def page(
        self, scope: str, session: str, *, after_id: int | None = None, limit: int = 100
    ) -> list[Message]:
        """The oldest ``limit`` messages with ``id > after_id`` (or all), oldest first."""
        limit = _clamp(limit)
        if limit == 0:
            return []
        after = 0 if after_id is None else after_id
        rows = self._session_rows(self._conn(), scope, session, _PAGE, (after, limit))
        return _messages(scope, session, rows)

    @_guarded
    def get_message(self, scope: str, message_id: int) -> Message | None:
        """One message by id, only if it belongs to a session of ``scope``."""
        row = (
            self._conn()
            .execute(
                f"SELECT {_MSG}, s.external_id FROM messages m"
                " JOIN sessions s ON s.id = m.session_id JOIN scopes c ON c.id = s.scope_id"
                " WHERE m.id = ? AND c.name = ?",
                (message_id, scope),
            )
            .fetchone()
        )
        return None if row is None else _message(scope, row[9], row)

    @_guarded
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
        """Messages with ``start <= created_at < end``, oldest first (ties by id).

        ``session=None`` searches every session of the scope.
        """
        limit = _clamp(limit)
        lo, hi = _ts(start), _ts(end)
        if limit == 0 or lo >= hi:
            return []
        role_sql, role_params = _roles_clause("m.role", roles)
        conn = self._conn()
        if session is not None:
            sql = (
                f"SELECT {_MSG} FROM messages m WHERE m.session_id = ?"
                f" AND m.created_at >= ? AND m.created_at < ?{role_sql}"
                " ORDER BY m.created_at, m.id LIMIT ?"
            )
            rows = self._session_rows(conn, scope, session, sql, (lo, hi, *role_params, limit))
            return [_message(scope, session, row) for row in rows]
        scope_pk = self._scope_pk(conn, scope)
        if scope_pk is None:
            return []
        rows = conn.execute(
            f"SELECT {_MSG}, s.external_id FROM messages m JOIN sessions s ON s.id = m.session_id"
            f" WHERE s.scope_id = ? AND m.created_at >= ? AND m.created_at < ?{role_sql}"
            " ORDER BY m.created_at, m.id LIMIT ?",
            (scope_pk, lo, hi, *role_params, limit),
        ).fetchall()
        return [_message(scope, row[9], row) for row in rows]

    @_guarded
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
        """Full-text search, best first. ``query`` is plain user text, never query syntax.

        Words are matched on their stems (Porter) in the content and in the
        speaker's name, ranked by BM25 with content weighted over name. Messages
        holding every word come first; then, if there is room, messages holding
        some of them (see :mod:`engram.search_query`). Snippets mark matches with
        ``[`` and ``]``. A query with no searchable word returns no hit.
        """
        words = terms(query)
        limit = _clamp(limit)
        if not words or limit == 0:
            return []
        conn = self._conn()
        where, params = _roles_clause("m.role", roles)
        if start is not None:
            where += " AND m.created_at >= ?"
            params.append(_ts(start))
        if end is not None:
            where += " AND m.created_at < ?"
            params.append(_ts(end))
        if session is None:
            scope_pk = self._scope_pk(conn, scope)
            if scope_pk is None:
                return []
            return search_fts(
                conn,
                scope,
                words,
                session=None,
                where=" AND m.session_id IN (SELECT id FROM sessions WHERE scope_id = ?)" + where,
                params=[scope_pk, *params],
                limit=limit,
            )
        key = (scope, session)
        pk = self._sessions.get(key)
        for attempt in range(2):
            if pk is None:
                pk = self._lookup_session(conn, scope, session)
                if pk is None:
                    self._sessions.pop(key, None)
                    return []
                self._sessions[key] = pk
            hits = search_fts(
                conn,
                scope,
                words,
                session=session,
                where=" AND m.session_id = ?" + where,
                params=[pk, *params],
                limit=limit,
            )
            if hits or attempt:
                return hits
            # No hit with a cached id: it may be stale (the session purged, maybe
            # re-created, through another store on the file). Look it up once more.
            fresh = self._lookup_session(conn, scope, session)
            if fresh == pk:
                return hits
            pk = fresh
            self._sessions.pop(key, None)
        return []

    # -- session state ------------------------------------------------------------------

    @_guarded
    def load_state(self, scope: str, session: str, kind: str) -> StateRecord | None:
        """The state document of that kind, or None if never saved."""
        row = (
            self._conn()
            .execute(
                "SELECT st.version, st.data, st.updated_at FROM session_state st"
                " JOIN sessions s ON s.id = st.session_id JOIN scopes c ON c.id = s.scope_id"
                " WHERE c.name = ? AND s.external_id = ? AND st.kind = ?",
                (scope, session, kind),
            )
            .fetchone()
        )
        if row is None:
            return None
        data = _json_dict(row[1], f"{kind} state of session {scope}/{session}")
        return StateRecord(kind=kind, version=row[0], data=data, updated_at=_parse_ts(row[2]))

    @_guarded
    def save_state(
        self, scope: str, session: str, kind: str, data: JSON, *, expected_version: int
    ) -> StateRecord | None:
        """Compare-and-set: save if the current version is ``expected_version``.

        ``expected_version=0`` means "only if no state exists yet". Returns the
        new record (version + 1), or None when another writer got there first;
        nothing is changed then (not even the session is created).
        """
        if not isinstance(expected_version, int) or expected_version < 0:
            raise ConfigError(f"expected_version must be an int >= 0, not {expected_version!r}")
        text = _dump(data, f"{kind} state")
        now = _now()
        with self._write() as tx:
            pk = self._session_for_write(tx, scope, session)
            if expected_version == 0:
                cur = tx.conn.execute(
                    "INSERT INTO session_state(session_id, kind, version, data, updated_at)"
                    " VALUES (?, ?, 1, ?, ?) ON CONFLICT DO NOTHING",
                    (pk, kind, text, _ts(now)),
                )
            else:
                cur = tx.conn.execute(
                    "UPDATE session_state SET version = version + 1, data = ?, updated_at = ?"
                    " WHERE session_id = ? AND kind = ? AND version = ?",
                    (text, _ts(now), pk, kind, expected_version),
                )
            if cur.rowcount != 1:
                tx.rollback_only = True
                return None
        return StateRecord(
            kind=kind, version=expected_version + 1, data=json.loads(text), updated_at=now
        )

    # -- memories (scope level) -------------------------------------------------------

    @_guarded
    def add_memory(
        self,
        scope: str,
        content: str,
        *,
        source_session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | None = None,
    ) -> MemoryRecord:
        """Store a new memory for the scope (``updated_at`` starts equal to ``created_at``)."""
        when = _utc(created_at) if created_at is not None else _now()
        meta = dict(metadata) if metadata else {}
        meta_json = _dump(meta, "memory metadata") if meta else None
        with self._write() as tx:
            scope_pk = self._scope_for_write(tx, scope)
            cur = tx.conn.execute(
                "INSERT INTO memories(scope_id, content, created_at, updated_at, source_session,"
                " metadata) VALUES (?, ?, ?, ?, ?, ?)",
                (scope_pk, content, _ts(when), _ts(when), source_session, meta_json),
            )
            mid = cur.lastrowid
        assert mid is not None
        return MemoryRecord(
            id=mid,
            scope=scope,
            content=content,
            created_at=when,
            updated_at=when,
            source_session=source_session,
            metadata=meta,
        )

    @_guarded
    def list_memories(self, scope: str) -> list[MemoryRecord]:
        """The scope's memories, oldest first (ties by id)."""
        rows = self._conn().execute(
            f"SELECT {_MEMORY_COLS} FROM memories WHERE scope_id = {_SCOPE_OF}"
            " ORDER BY created_at, id",
            (scope,),
        )
        return [_memory(scope, row) for row in rows]

    def _get_memory(
        self, conn: sqlite3.Connection, scope: str, memory_id: int
    ) -> MemoryRecord | None:
        row = conn.execute(
            f"SELECT {_MEMORY_COLS} FROM memories WHERE id = ? AND scope_id = {_SCOPE_OF}",
            (memory_id, scope),
        ).fetchone()
        return None if row is None else _memory(scope, row)

    @_guarded
    def get_memory(self, scope: str, memory_id: int) -> MemoryRecord | None:
        """One memory, only if it belongs to ``scope``."""
        return self._get_memory(self._conn(), scope, memory_id)

    @_guarded
    def update_memory(
        self,
        scope: str,
        memory_id: int,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRecord | None:
        """Change content and/or metadata (metadata is replaced); bumps ``updated_at``.

        None if the memory is not in the scope. With nothing to change, the
        memory is returned as it is.
        """
        if content is None and metadata is None:
            return self._get_memory(self._conn(), scope, memory_id)
        meta_json = None if metadata is None else _dump(dict(metadata), "memory metadata")
        with self._write() as tx:
            current = self._get_memory(tx.conn, scope, memory_id)
            if current is None:
                return None
            # Never before created_at, even if the clock went back or created_at was given.
            now = max(_now(), current.created_at)
            tx.conn.execute(
                "UPDATE memories SET content = ?, metadata = ?, updated_at = ? WHERE id = ?",
                (
                    current.content if content is None else content,
                    (_dump(current.metadata, "memory metadata") if current.metadata else None)
                    if meta_json is None
                    else (meta_json if metadata else None),
                    _ts(now),
                    memory_id,
                ),
            )
            return self._get_memory(tx.conn, scope, memory_id)

    @_guarded
    def delete_memory(self, scope: str, memory_id: int) -> bool:
        """Delete one memory of the scope. True if it existed."""
        with self._write() as tx:
            cur = tx.conn.execute(
                f"DELETE FROM memories WHERE id = ? AND scope_id = {_SCOPE_OF}", (memory_id, scope)
            )
            return cur.rowcount == 1

    @_guarded
    def purge_memories(self, scope: str) -> int:
        """Delete every memory of the scope (the audit trail stays). Returns how many."""
        with self._write() as tx:
            cur = tx.conn.execute(f"DELETE FROM memories WHERE scope_id = {_SCOPE_OF}", (scope,))
            return cur.rowcount

    @_guarded
    def add_audit(self, scope: str, event: Mapping[str, Any]) -> None:
        """Append an event to the scope's memory audit trail.

        An ISO-8601 ``at`` in the event is kept as its time (imports replay old
        trails); otherwise the time is now. An ``id`` in the event is dropped.
        """
        body = dict(event)
        body.pop("id", None)
        at = body.pop("at", None)
        when = _now()
        if isinstance(at, datetime):
            when = at
        elif isinstance(at, str):
            with suppress(ValueError):
                when = datetime.fromisoformat(at)
        text = _dump(body, "audit event")
        with self._write() as tx:
            scope_pk = self._scope_for_write(tx, scope)
            tx.conn.execute(
                "INSERT INTO memory_audit(scope_id, at, event) VALUES (?, ?, ?)",
                (scope_pk, _ts(when), text),
            )

    @_guarded
    def list_audit(self, scope: str, *, limit: int = 100) -> list[JSON]:
        """The scope's audit events, newest first; each has ``id`` and ``at`` added.

        ``at`` is ISO-8601 UTC text, so the events stay plain JSON.
        """
        rows = self._conn().execute(
            f"SELECT id, at, event FROM memory_audit WHERE scope_id = {_SCOPE_OF}"
            " ORDER BY id DESC LIMIT ?",
            (scope, _clamp(limit)),
        )
        out: list[JSON] = []
        for aid, at, event in rows:
            item = _json_dict(event, f"audit event {aid}")
            item["id"] = aid
            item["at"] = at
            out.append(item)
        return out

    # -- LLM usage -------------------------------------------------------------------------

    @_guarded
    def record_usage(self, scope: str, session: str | None, usage: UsageRecord) -> None:
        """Record one LLM call made on behalf of the scope (and session, if any).

        A session named here is created if absent, like any write to a session.
        """
        with self._write() as tx:
            scope_pk = self._scope_for_write(tx, scope)
            session_pk = None if session is None else self._session_for_write(tx, scope, session)
            tx.conn.execute(
                "INSERT INTO llm_usage(scope_id, session_id, model, purpose, input_tokens,"
                " output_tokens, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    scope_pk,
                    session_pk,
                    usage.model,
                    usage.purpose,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cost_usd,
                    _ts(usage.created_at),
                ),
            )

    @_guarded
    def usage_totals(self, scope: str, session: str | None = None) -> JSON:
        """Sums: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``, by purpose too.

        ``by_purpose`` maps each purpose to the same four sums. Unknown costs
        (None) count as 0.
        """
        conn = self._conn()
        totals: JSON = {
            "calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "by_purpose": {},
        }
        scope_pk = self._scope_pk(conn, scope)
        if scope_pk is None:
            return totals
        where, params = "u.scope_id = ?", [scope_pk]
        if session is not None:
            session_pk = self._lookup_session(conn, scope, session)
            if session_pk is None:
                return totals
            where += " AND u.session_id = ?"
            params.append(session_pk)
        rows = conn.execute(
            "SELECT u.purpose, count(*), sum(u.input_tokens), sum(u.output_tokens),"
            f" total(u.cost_usd) FROM llm_usage u WHERE {where}"
            " GROUP BY u.purpose ORDER BY u.purpose",
            params,
        )
        for purpose, calls, tokens_in, tokens_out, cost in rows:
            totals["by_purpose"][purpose] = {
                "calls": calls,
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "cost_usd": cost,
            }
            totals["calls"] += calls
            totals["input_tokens"] += tokens_in
            totals["output_tokens"] += tokens_out
            totals["cost_usd"] += cost
        return totals


__all__ = ["BM25_WEIGHTS", "BUSY_TIMEOUT_MS", "SNIPPET_TOKENS", "SQLiteStore"]
