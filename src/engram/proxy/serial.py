"""One session, one turn at a time: proxied requests on the same session are served in order.

A turn holds its session from the moment its messages are read until its
answer is stored (the end of the stream, for a streamed answer), so each
answer is stored right after its own question and each prompt holds only
finished turns. In this process the requests wait in arrival order (an
``asyncio.Lock`` per session); on a store with held locks (PostgreSQL's
advisory locks, :class:`~engram.named_lock.SupportsHeldLocks`) the turn also
holds the session against every other process on the database.

A request that waits longer than its limit is refused (:class:`SessionBusy`,
409) rather than kept forever.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import anyio

from engram.aio import offload
from engram.errors import Contention
from engram.named_lock import SupportsHeldLocks

#: Seconds between two tries for a session another process holds (doubling up to the cap).
FIRST_POLL, MAX_POLL = 0.01, 0.25


class SessionBusy(Contention):
    """Another request on the session took longer than this one may wait."""


@dataclass(slots=True)
class _Waiters:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Held:
    """A session's turn, held until :meth:`release` (safe to call twice)."""

    def __init__(self, turns: SessionTurns, key: tuple[str, str], store: object, name: str):
        self._turns = turns
        self._key = key
        self._store = store if isinstance(store, SupportsHeldLocks) else None
        self._name = name
        self._released = False

    async def release(self) -> None:
        """Give the session to the next request (shielded: a cancelled request still does)."""
        if self._released:
            return
        self._released = True
        with anyio.CancelScope(shield=True):
            try:
                if self._store is not None:
                    await offload(self._store.release_hold, self._name)
            finally:
                self._turns._leave(self._key)


class SessionTurns:
    """The turns in progress of one server (create it inside its event loop's lifetime)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, str], _Waiters] = {}

    async def hold(self, store: object, scope: str, session: str, *, wait: float) -> Held:
        """Wait for the session's turn (at most ``wait`` seconds) and hold it.

        Raises:
            SessionBusy: the session stayed busy for ``wait`` seconds.
        """
        key = (scope, session)
        waiters = self._waiters.setdefault(key, _Waiters())
        waiters.users += 1
        deadline = time.monotonic() + wait
        try:
            await asyncio.wait_for(waiters.lock.acquire(), timeout=wait)
        except TimeoutError:
            self._drop(key)
            raise self._busy(session, wait) from None
        except BaseException:
            self._drop(key)
            raise
        held = Held(self, key, store, f"proxy-turn:{scope}\x1f{session}")
        try:
            if held._store is not None:
                await self._hold_across_processes(held._store, held._name, deadline, session, wait)
        except BaseException:
            held._store = None  # nothing taken there
            await held.release()
            raise
        return held

    async def _hold_across_processes(
        self, store: SupportsHeldLocks, name: str, deadline: float, session: str, wait: float
    ) -> None:
        pause = FIRST_POLL
        while not await offload(store.try_hold, name):
            if time.monotonic() + pause > deadline:
                raise self._busy(session, wait)
            await anyio.sleep(pause)
            pause = min(pause * 2, MAX_POLL)

    def _leave(self, key: tuple[str, str]) -> None:
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.lock.release()
        self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        waiters = self._waiters.get(key)
        if waiters is None:
            return
        waiters.users -= 1
        if waiters.users <= 0:
            del self._waiters[key]

    @staticmethod
    def _busy(session: str, wait: float) -> SessionBusy:
        return SessionBusy(
            f"session {session!r} is busy: another request on it was still being answered "
            f"after {wait:g} seconds; try again later"
        )
