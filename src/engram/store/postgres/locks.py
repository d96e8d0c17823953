"""Cross-process exclusion on PostgreSQL: a session advisory lock per name.

Several Engram processes share one database; work that must not run twice at
once across all of them (a scope's memory writes: add, then compact to the
cap) takes :meth:`PostgresLocks.exclusive`. The lock lives on one pooled
connection held for the duration, so a crashed holder releases it with its
connection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from engram.store.postgres.connection import PostgresConnections


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
