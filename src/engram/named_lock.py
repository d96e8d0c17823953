"""Locks by name on one database, held in this process and across processes.

In-process, an ``RLock`` shared by every handle on the same name of the same
database (re-entrant: memory compaction runs inside creation). A store that
can exclude other processes (PostgreSQL: an advisory lock; see
:class:`SupportsExclusive`) is also locked at the outermost acquisition, so
two servers on one database never both compact a scope's memories past its
cap, nor both store one idempotent request. The store locked is the acquiring
handle's own (the shared part holds none, so a closed store is never reused).
The shared parts live in a weak dictionary: a lock lives as long as some
handle on it, so a server touching millions of scopes does not keep them all.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable


@runtime_checkable
class SupportsExclusive(Protocol):
    """A store offering a database-wide lock by name."""

    def exclusive(self, name: str) -> AbstractContextManager[None]:
        """Hold the lock ``name`` against every process on the database."""
        ...


@runtime_checkable
class SupportsHeldLocks(Protocol):
    """A store offering database-wide locks held across calls, taken without waiting.

    For work that spans awaits and threads (a proxied turn): one connection of
    the process holds every such lock, so holding one costs no pooled connection.
    """

    def try_hold(self, name: str) -> bool:
        """Take the lock ``name`` if no other process holds it; True when taken."""
        ...

    def release_hold(self, name: str) -> None:
        """Release the lock ``name`` taken by :meth:`try_hold`."""
        ...


class SharedLock:
    """What every handle on one name of one database shares: the lock and its depth."""

    def __init__(self) -> None:
        self.local = threading.RLock()
        self.depth = 0
        self.outer: AbstractContextManager[None] | None = None


class NamedLock:
    """One handle on a named lock: the shared in-process part plus its store's database lock."""

    def __init__(self, shared: SharedLock, store: object, name: str) -> None:
        self._shared = shared
        self._store = store if isinstance(store, SupportsExclusive) else None
        self._name = name

    @property
    def shared(self) -> SharedLock:
        """The part every handle on this name of this database shares."""
        return self._shared

    def __enter__(self) -> NamedLock:
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


_SHARED: weakref.WeakValueDictionary[tuple[str, str], SharedLock] = weakref.WeakValueDictionary()
_SHARED_GUARD = threading.Lock()


def named_lock(store: object, url: str, name: str) -> NamedLock:
    """A handle on the lock ``name`` of the database at ``url`` (``store`` is opened on it)."""
    key = (url, name)
    with _SHARED_GUARD:
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = SharedLock()
    return NamedLock(shared, store, name)
