"""Cross-process exclusion on PostgreSQL: a session advisory lock per name.

Several Engram processes share one database; work that must not run twice at
once across all of them (a scope's memory writes: add, then compact to the
cap) takes :meth:`PostgresLocks.exclusive`. The lock lives on one pooled
connection held for the duration, so a crashed holder releases it with its
connection.

Locks held across many calls and threads (a proxied turn, for as long as the
upstream answers) use :meth:`PostgresLocks.try_hold`: one connection of this
store, outside the pool, holds them all, so a thousand turns in progress do not
take a thousand pooled connections. A process that dies releases them with
that connection.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from engram.errors import ConnectionLost
from engram.store.postgres.connection import Conn, PostgresConnections, one_line

log = logging.getLogger("engram.store")
_HOLDERS_GUARD = threading.Lock()


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for ``name``."""
    digest = hashlib.sha256(f"engram:{name}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresLocks(PostgresConnections):
    """The cross-process lock of :class:`~engram.store.postgres.backend.PostgresStore`."""

    @contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        """Hold the database-wide lock ``name`` (waits for other processes' holders)."""
        key = lock_key(name)
        with self._connection() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def try_hold(self, name: str) -> bool:
        """Take the lock ``name`` without waiting; True when taken (see the module doc).

        Raises:
            ConnectionLost: the holding connection cannot be opened.
        """
        key = lock_key(name)
        with self._holder_lock():
            for attempt in (1, 2):
                conn = self._holder(fresh=attempt == 2)
                try:
                    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                    return bool(row and row[0])
                except psycopg.OperationalError as exc:
                    if attempt == 2:
                        raise ConnectionLost(
                            f"cannot hold a lock on PostgreSQL at {self.url}: {one_line(exc)}"
                        ) from exc
        return False  # pragma: no cover - the loop returns or raises

    def release_hold(self, name: str) -> None:
        """Release the lock ``name`` taken by :meth:`try_hold` (a lost connection released it)."""
        with self._holder_lock():
            conn = self.__dict__.get("_held_conn")
            if conn is None or conn.closed:
                return
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(name),))
            except psycopg.Error as exc:
                log.warning("lock %r not released on %s: %s", name, self.url, one_line(exc))

    def close(self) -> None:
        """Close the holding connection, then the pool."""
        with self._holder_lock():
            conn = self.__dict__.pop("_held_conn", None)
            if conn is not None:
                conn.close()
        super().close()

    def _holder_lock(self) -> threading.Lock:
        with _HOLDERS_GUARD:
            lock: threading.Lock = self.__dict__.setdefault("_held_guard", threading.Lock())
        return lock

    def _holder(self, *, fresh: bool) -> Conn:
        """The connection that holds this store's held locks (opened on first use)."""
        conn: Conn | None = self.__dict__.get("_held_conn")
        if conn is not None and (fresh or conn.closed):
            conn.close()
            conn = None
        if conn is None:
            try:
                conn = psycopg.connect(self._dsn, autocommit=True)
            except psycopg.Error as exc:
                raise ConnectionLost(
                    f"cannot connect to PostgreSQL at {self.url} to hold a lock: {one_line(exc)}"
                ) from exc
            self.__dict__["_held_conn"] = conn
        return conn
