"""Connections and write transactions of the SQLite backend, and id resolution.

Connections: one per thread (``threading.local``), opened on first use with
``journal_mode=WAL`` (readers never block the writer), ``synchronous=NORMAL``
(a commit survives a process crash; a power loss may undo the newest commits,
never corrupt the file) unless the store was opened with ``synchronous="full"``,
``foreign_keys=ON`` and ``busy_timeout`` = :data:`BUSY_TIMEOUT_MS`. Every write is one
``BEGIN IMMEDIATE ... COMMIT`` transaction taken under a per-store lock, so
threads of one process queue in Python rather than spin in SQLite's busy
handler, and other processes wait up to the busy timeout. An in-memory
database (``sqlite:///:memory:``) has a single connection shared under a lock,
since each connection to ``:memory:`` would be a different database.

``(scope, session) -> session id`` is cached once committed: a rolled-back id
can be reused, and a cached id may go stale when another store on the same file
purges the session, so readers look the id up again when a query finds nothing.

:class:`SQLiteConnections` is the base of :class:`~engram.store.sqlite.backend.SQLiteStore`,
which sets the attributes declared here in its ``__init__``.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, Concatenate, ParamSpec, TypeVar

from engram.errors import CorruptedData, StoreError
from engram.store.common import clamp
from engram.store.common import now as _now
from engram.store.sqlite.rows import ts as _ts

#: How long a write waits for another process's write lock before failing, in ms.
BUSY_TIMEOUT_MS = 5000

_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S", bound="SQLiteConnections")

_FIND_SESSION = (
    "SELECT s.id FROM sessions s JOIN scopes c ON c.id = s.scope_id"
    " WHERE c.name = ? AND s.external_id = ?"
)


def guarded(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """Run ``method`` under the store lock, turning sqlite3 errors into StoreError."""
    op = method.__name__

    @functools.wraps(method)
    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise self._error(op, exc) from exc

    return wrapper


class Tx:
    """One write transaction: its connection and the ids to cache once it commits."""

    __slots__ = ("conn", "rollback_only", "scopes", "sessions")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.scopes: dict[str, int] = {}
        self.sessions: dict[tuple[str, str], int] = {}
        # Set when the operation decided to change nothing (a failed compare-and-set).
        self.rollback_only = False


def _joined(group: Tx) -> Tx:
    """A write inside a group: the group's connection and id caches (cached at its commit).

    Its own ``rollback_only`` (a missed compare-and-set, which changed nothing) is
    not the group's: the rest of the group still commits.
    """
    tx = Tx(group.conn)
    tx.scopes, tx.sessions = group.scopes, group.sessions
    return tx


class SQLiteConnections:
    """Per-thread connections, write transactions and the id caches of one store."""

    url: str
    path: str
    _memory: bool
    _busy_timeout_ms: int
    _synchronous: str
    _local: threading.local
    _conns: list[sqlite3.Connection]
    _conns_lock: threading.Lock
    _write_lock: threading.Lock
    _lock: AbstractContextManager[Any]
    _shared: sqlite3.Connection | None
    _closed: bool
    _scopes: dict[str, int]
    _sessions: dict[tuple[str, str], int]

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
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
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
    def atomic(self) -> Iterator[None]:
        """Make this thread's writes inside one transaction: all of them commit, or none.

        Writes of the block join it (a store method that fails raises, and the
        whole block rolls back); other threads' writes wait for its end.
        """
        if getattr(self._local, "group", None) is not None:
            yield  # already inside a group: the outer one commits
            return
        with self._lock, self._write() as tx:
            self._local.group = tx
            try:
                yield
            finally:
                self._local.group = None

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        """One atomic write: BEGIN IMMEDIATE, then COMMIT, or ROLLBACK on any error."""
        group: Tx | None = getattr(self._local, "group", None)
        if group is not None:
            yield _joined(group)  # committed or rolled back with its group
            return
        conn = self._conn()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            tx = Tx(conn)
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

    def _scope_for_write(self, tx: Tx, scope: str) -> int:
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

    def _session_for_write(self, tx: Tx, scope: str, session: str, now: str | None = None) -> int:
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


__all__ = ["BUSY_TIMEOUT_MS", "SQLiteConnections", "Tx", "clamp", "guarded"]
