"""SQLite backend: the default store, one file, WAL, FTS5 search.

Data model (the schema itself is in :mod:`engram.store.sqlite.migrations`):
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

Connections, write transactions and the id caches are in
:mod:`engram.store.sqlite.connection`; memories, their audit trail and LLM usage
(scope-level data) in :mod:`engram.store.sqlite.scope`; row encoding and
decoding in :mod:`engram.store.sqlite.rows`; full-text search in
:mod:`engram.store.sqlite.search`; the prompt builder's row reads in
:mod:`engram.store.sqlite.history`.

Hot paths avoid work: ``(scope, session) -> session id`` is cached once
committed, ``tail`` is one indexed query, and JSON columns are decoded only
when not NULL.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.errors import ConfigError, InvalidMessage, StoreError
from engram.limits import MAX_ID
from engram.models import JSON, Message, NewMessage, SessionInfo, StateRecord, stored_message
from engram.search.index import index_zone
from engram.store.base import VERSIONED_KINDS
from engram.store.common import clamp as _clamp
from engram.store.common import now as _now
from engram.store.common import utc as _utc
from engram.store.sqlite.archive import ARCHIVE_TABLES, SQLiteArchive, keep_version
from engram.store.sqlite.connection import BUSY_TIMEOUT_MS
from engram.store.sqlite.connection import guarded as _guarded
from engram.store.sqlite.edits import SQLiteEdits
from engram.store.sqlite.history import SQLiteHistory
from engram.store.sqlite.keys import SQLiteApiKeys
from engram.store.sqlite.migrations import migrate
from engram.store.sqlite.rows import MSG_COLUMNS as _MSG
from engram.store.sqlite.rows import MSG_HOT_COLUMNS as _MSG_HOT
from engram.store.sqlite.rows import MSG_WIDTH as _MSG_WIDTH
from engram.store.sqlite.rows import SESSION_COLUMNS as _SESSION_COLS
from engram.store.sqlite.rows import dump as _dump
from engram.store.sqlite.rows import json_dict as _json_dict
from engram.store.sqlite.rows import message as _message
from engram.store.sqlite.rows import message_row as _message_row
from engram.store.sqlite.rows import messages as _messages
from engram.store.sqlite.rows import parse_ts as _parse_ts
from engram.store.sqlite.rows import roles_clause as _roles_clause
from engram.store.sqlite.rows import session_info as _session_info
from engram.store.sqlite.rows import ts as _ts
from engram.store.sqlite.scope import SQLiteScopeData
from engram.store.sqlite.search import (
    BM25_WEIGHTS,
    SNIPPET_TOKENS,
    SQLiteSearch,
    index_values,
    record_speakers,
)
from engram.store.sqlite.sign_ins import SQLiteSignIns
from engram.store.sqlite.terms import TermCounts
from engram.store.sqlite.vectors import SQLiteVectors

_MEMORY_PATHS = frozenset({"", ":memory:"})

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
    " tool_call_id, metadata, parts, tokens, search_context, search_dates, search_flags)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# The index entries of new messages are written by the store, not by a trigger (see
# sqlite_migrations.m002_index_inserts_explicitly): one statement per append.
_FTS = "content, name, search_context, search_dates"
_INDEX_ONE = f"INSERT INTO messages_fts(rowid, {_FTS}) VALUES (?, ?, ?, ?, ?)"
_INDEX_RANGE = (
    f"INSERT INTO messages_fts(rowid, {_FTS}) SELECT id, {_FTS} FROM messages"
    " WHERE id BETWEEN ? AND ?"
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


class SQLiteStore(
    SQLiteEdits,
    SQLiteHistory,
    SQLiteScopeData,
    SQLiteApiKeys,
    SQLiteSignIns,
    SQLiteSearch,
    SQLiteVectors,
    SQLiteArchive,
):
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
        tz: str | ZoneInfo | None = None,
        synchronous: str = "normal",
    ) -> None:
        """Open (creating and migrating if needed) the database at ``path``.

        Args:
            path: file path, or ``":memory:"`` for a private in-memory database.
            busy_timeout_ms: how long a write waits for another process's lock.
            url: the URL to report as :attr:`url` (defaults to one built from path).
            tz: time zone of the date words indexed for search (default UTC).
            synchronous: ``"normal"`` (default: a commit survives a crash of the
                process; a power loss may undo the newest commits, never corrupt
                the file) or ``"full"`` (every commit is fsynced: it survives a
                power loss too, at the cost of one fsync per write).

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
        self.zone = index_zone(tz)
        self._matrices = {}
        self._matrices_lock = threading.Lock()
        self._terms = TermCounts()
        self._busy_timeout_ms = busy_timeout_ms
        self._synchronous = _synchronous_mode(synchronous)
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
            **options: ``busy_timeout_ms`` (int), ``tz`` (time zone of the date words),
                ``synchronous`` (``"normal"`` or ``"full"``; also ``?synchronous=full``
                at the end of the URL).

        Raises:
            ConfigError: the URL is not an SQLite URL, or an option is unknown.
        """
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower().split("+", 1)[0] != "sqlite":
            raise ConfigError(f"not an SQLite URL: {url!r} (expected sqlite:///path.db)")
        rest, _, query = rest.partition("?")
        options = {**_url_options(url, query), **options}
        unknown = set(options) - {"busy_timeout_ms", "tz", "synchronous"}
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
                tx.conn.execute("DELETE FROM participants WHERE session_id = ?", (pk,))
                tx.conn.execute("DELETE FROM message_vectors WHERE session_id = ?", (pk,))
                for table in ARCHIVE_TABLES:
                    tx.conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (pk,))
                tx.conn.execute("DELETE FROM sessions WHERE id = ?", (pk,))
        self._sessions.pop((scope, session), None)
        if pk is not None:
            self._forget_vectors(pk)
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
        rows = [_message_row(i, m, t) for i, (m, t) in pairs]
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
                extra = index_values(conn, pk, messages, self.zone)
                rows = [(*row, *more) for row, more in zip(rows, extra, strict=True)]
                record_speakers(conn, pk, messages)
                ids = self._insert_messages(conn, pk, rows)
        except UnicodeEncodeError as exc:
            raise InvalidMessage(f"a message holds text that is not valid Unicode: {exc}") from exc
        return [
            stored_message(m, mid, scope, session, t, _utc(m.created_at))
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
            conn.execute(_INDEX_ONE, (mid, row[2], row[3], row[9], row[10]))
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
        before = MAX_ID if before_id is None else before_id
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
        return None if row is None else _message(scope, row[_MSG_WIDTH], row)

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
        return [_message(scope, row[_MSG_WIDTH], row) for row in rows]

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
                if kind in VERSIONED_KINDS:
                    keep_version(tx, pk, kind, expected_version)
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


__all__ = ["BM25_WEIGHTS", "BUSY_TIMEOUT_MS", "SNIPPET_TOKENS", "SQLiteStore"]


#: ``PRAGMA synchronous`` values a store may be opened with.
SYNCHRONOUS_MODES = ("normal", "full")


def _synchronous_mode(value: object) -> str:
    mode = str(value).lower()
    if mode not in SYNCHRONOUS_MODES:
        raise ConfigError(f"SQLite option synchronous={value!r}: use one of {SYNCHRONOUS_MODES}")
    return mode


def _url_options(url: str, query: str) -> dict[str, Any]:
    """Options given in the URL's query string (``?synchronous=full``)."""
    from urllib.parse import parse_qsl

    try:
        options: dict[str, Any] = dict(parse_qsl(query, strict_parsing=True)) if query else {}
    except ValueError:
        raise ConfigError(f"SQLite URL {url!r}: cannot read its options {query!r}") from None
    if str(options.get("busy_timeout_ms", "")).isdigit():
        options["busy_timeout_ms"] = int(options["busy_timeout_ms"])
    return options
