"""The lock that serializes one scope's memory writes, in this process and across processes.

In-process, an ``RLock`` shared by every ``Memories`` of the scope on the same
database (re-entrant: compaction runs inside creation). A store that can
exclude other processes (PostgreSQL: an advisory lock; see
:class:`SupportsExclusive`) is also locked at the outermost acquisition, so
two servers on one database never both compact a scope past its cap. The
store locked is the acquiring ``Memories``' own (each handle holds its store;
the shared part holds none, so a closed store is never reused).
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


class SharedScopeLock:
    """What every handle on one scope of one database shares: the lock and its depth."""

    def __init__(self) -> None:
        self.local = threading.RLock()
        self.depth = 0
        self.outer: AbstractContextManager[None] | None = None


class ScopeLock:
    """One ``Memories``' handle on its scope's shared lock (plus its store's database lock)."""

    def __init__(self, shared: SharedScopeLock, store: object, scope: str) -> None:
        self._shared = shared
        self._store = store if isinstance(store, SupportsExclusive) else None
        self._name = f"memories:{scope}"

    @property
    def shared(self) -> SharedScopeLock:
        """The part every handle on this scope of this database shares."""
        return self._shared

    def __enter__(self) -> ScopeLock:
        shared = self._shared
        shared.local.acquire()
        try:
            shared.depth += 1
            if shared.depth == 1 and self._store is not None:
                outer = self._store.exclusive(self._name)
                outer.__enter__()
                shared.outer = outer
        except BaseException:
            shared.depth -= 1
            shared.local.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        shared = self._shared
        try:
            shared.depth -= 1
            if shared.depth == 0 and shared.outer is not None:
                outer, shared.outer = shared.outer, None
                outer.__exit__(None, None, None)
        finally:
            shared.local.release()
