"""Connections of the PostgreSQL backend: the pool, reads, write transactions, errors.

Connections come from a ``psycopg_pool.ConnectionPool`` and run in
autocommit mode: a read is one statement and one round trip; a write opens an
explicit transaction. A checked-out connection is probed without a round trip
(is its socket readable while idle? then the server closed it or said
something: only then is it pinged). A connection lost mid-call raises
:class:`~engram.errors.ConnectionLost`; reads are retried once on a fresh
connection, writes are not (the caller decides).

:class:`PostgresConnections` is the base of :class:`~engram.store.postgres.backend.PostgresStore`,
which opens the pool in its ``__init__``.
"""

from __future__ import annotations

import math
import select
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from engram.errors import ConfigError, ConnectionLost, EngramError, MissingDependency, StoreError

try:
    import psycopg
    from psycopg.types.json import Json, Jsonb
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency.extra("the PostgreSQL backend", "postgres", exc) from exc

#: Default pool bounds; override with ``open_store(url, min_size=..., max_size=...)``.
DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10
#: Seconds to wait for a pooled connection before raising ConnectionLost.
DEFAULT_TIMEOUT = 30.0

Conn = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def libpq_conninfo(url: str) -> str:
    """A libpq URI from an Engram URL (``postgres://``, ``postgresql+psycopg://`` ...)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ConfigError(f"not a PostgreSQL URL: {mask_url(url)!r}")
    return "postgresql://" + rest


def one_line(exc: BaseException) -> str:
    """An error's text on one line (libpq's messages span several)."""
    return " ".join(str(exc).split())


def probe_connection(conninfo: str, url: str, timeout: float) -> None:
    """Connect once, outside the pool, so a server that is down fails fast with its cause.

    A refused connection or an unknown host fails at once here (the pool
    would retry in the background until ``timeout`` and log each attempt).

    Raises:
        ConnectionLost: the server cannot be reached; the message carries libpq's cause.

    """
    try:
        # libpq's connect_timeout is whole seconds, at least 2.
        with psycopg.connect(conninfo, connect_timeout=max(2, math.ceil(timeout))):
            pass
    except psycopg.Error as exc:
        raise ConnectionLost(f"cannot connect to PostgreSQL at {url}: {one_line(exc)}") from None


def configure_connection(conn: Conn) -> None:
    """Set up a new pooled connection."""
    # Timestamps come back in UTC whatever the server's default time zone is.
    conn.execute("SET TIME ZONE 'UTC'")


def check_on_checkout(conn: Conn) -> None:
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


class PostgresConnections:
    """The pool of one store: checked-out connections, reads, write transactions."""

    url: str
    _timeout: float
    _dsn: str
    _closed: bool
    _pool: ConnectionPool[Conn]
    #: Per thread: the connection of the group of writes in progress (see :meth:`atomic`).
    _group: threading.local

    def close(self) -> None:
        """Close every pooled connection. Safe to call twice."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    @property
    def pool(self) -> ConnectionPool[Conn]:
        """The connection pool (for :mod:`engram.store.postgres.jobs` and benchmarks)."""
        return self._pool

    def connection(self) -> AbstractContextManager[Conn]:
        """A pooled connection in a transaction (committed on success), errors mapped.

        For modules that add tables of their own (:mod:`engram.store.postgres.jobs`).
        """
        return self._connection(transaction=True)

    # -- plumbing -------------------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Make this thread's store calls inside one transaction: all writes commit, or none.

        Calls of the block use its connection (reads see its writes); a write
        is a savepoint inside it, and any error rolls the whole block back.
        """
        if getattr(self._group, "conn", None) is not None:
            yield  # already inside a group: the outer one commits
            return
        with self._connection(transaction=True) as conn:
            self._group.conn = conn
            try:
                yield
            finally:
                self._group.conn = None

    @contextmanager
    def _connection(self, *, transaction: bool = False) -> Iterator[Conn]:
        """A pooled (autocommit) connection; with ``transaction``, inside one committed on success.

        Inside :meth:`atomic` it is the group's connection (a transaction is a
        savepoint). psycopg errors become Engram errors: a dropped connection is
        ConnectionLost (the pool discards the broken connection and opens a new
        one), anything else is StoreError.
        """
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")
        try:
            group: Conn | None = getattr(self._group, "conn", None)
            if group is not None:
                with group.transaction() if transaction else nullcontext():
                    yield group
                return
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
                f"{self._timeout:g}s: {self._why_unavailable()}"
            ) from exc
        except psycopg.OperationalError as exc:
            raise ConnectionLost(
                f"lost the connection to PostgreSQL at {self.url} ({one_line(exc)}); "
                "the pool reconnects, so the call can be retried"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL error at {self.url}: {one_line(exc)}") from exc

    def _why_unavailable(self) -> str:
        """The cause of a pool timeout: the server's own error if it is down, else the pool."""
        try:
            probe_connection(self._dsn, self.url, 2)
        except ConnectionLost as exc:
            return str(exc)
        return f"the pool of {self._pool.max_size} connections is exhausted"

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


# psycopg and its JSON adapters are re-exported so the other PostgreSQL modules
# import them from here, behind the MissingDependency guard above.
__all__ = [
    "DEFAULT_MAX_SIZE",
    "DEFAULT_MIN_SIZE",
    "DEFAULT_TIMEOUT",
    "Conn",
    "ConnectionPool",
    "Json",
    "Jsonb",
    "PostgresConnections",
    "T",
    "check_on_checkout",
    "configure_connection",
    "libpq_conninfo",
    "mask_url",
    "one_line",
    "probe_connection",
    "psycopg",
]
