"""The lock that serializes one scope's memory writes, in this process and across processes.

In-process, an ``RLock`` (re-entrant: compaction runs inside creation). A store
that can exclude other processes (PostgreSQL: an advisory lock; see
:class:`SupportsExclusive`) is also locked at the outermost acquisition, so
two servers on one database never both compact a scope past its cap.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable


@runtime_checkable
class SupportsExclusive(Protocol):
    """A store offering a database-wide lock by name."""

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Hold the lock ``name`` against every process on the database."""
        ...


class ScopeLock:
    """Re-entrant in-process lock plus, when the store offers one, a cross-process lock."""

    def __init__(self, store: object, scope: str) -> None:
        self._local = threading.RLock()
        self._store = store if isinstance(store, SupportsExclusive) else None
        self._name = f"memories:{scope}"
        self._depth = 0
        self._outer: AbstractContextManager[None] | None = None

    def __enter__(self) -> ScopeLock:
        self._local.acquire()
        try:
            self._depth += 1
            if self._depth == 1 and self._store is not None:
                outer = self._store.exclusive(self._name)
                outer.__enter__()
                self._outer = outer
        except BaseException:
            self._depth -= 1
            self._local.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._depth -= 1
            if self._depth == 0 and self._outer is not None:
                outer, self._outer = self._outer, None
                outer.__exit__(None, None, None)
        finally:
            self._local.release()
