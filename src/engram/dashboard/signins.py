"""Dashboard sign-ins kept in the store beside the API keys: the browser holds a random id.

Signing in with a key opens a sign-in: a random id (256 bits) goes to the
browser in an HTTP-only, same-site cookie, never the key. The store keeps only
the id's SHA-256, the id of the key it belongs to and when it ends
(:attr:`ServerSettings.session_seconds
<engram.server.settings.ServerSettings.session_seconds>` after it began), so
every server process on one database shares the sign-ins (``engram serve
--workers N``, several servers on one PostgreSQL) and a restart signs nobody
out. Every page checks that the key is still active (a revoked key ends its
sign-ins at once); ``/logout`` deletes the sign-in, so a copied cookie stops
working on every process. Ended sign-ins are removed and their number is
bounded (:data:`MAX_SIGN_INS`).

A store that keeps keys but not sign-ins (the in-process ``memory://`` store
and the ``jsondir://`` folder, which ``--workers`` refuses) keeps them in the
server process (:class:`InProcessSignIns`); a store that keeps no keys has no
sign-ins at all (every page is open to this machine).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable

from engram.models import ApiKeyRecord
from engram.store.api_keys import ApiKeyStore, has_api_keys
from engram.store.sign_ins import SignInStore, has_sign_ins

#: Sign-ins kept at most; past it the ones that end soonest are closed (bounded storage).
MAX_SIGN_INS = 10_000


def _slot(sign_in: str) -> str:
    return hashlib.sha256(sign_in.encode("utf-8", "surrogatepass")).hexdigest()


class InProcessSignIns:
    """The :class:`~engram.store.sign_ins.SignInStore` of one process, for a store without one."""

    def __init__(self, keys: ApiKeyStore) -> None:
        """Sign-ins of the keys of ``keys``, kept in this process; thread-safe."""
        self._keys = keys
        self._lock = threading.Lock()
        self._open: dict[str, tuple[int, float]] = {}

    def add_sign_in(
        self, sign_in_hash: str, key_id: int, ends_at: float, *, now: float, limit: int
    ) -> None:
        """Keep a sign-in until ``ends_at``; ended ones and those past ``limit`` go first."""
        with self._lock:
            for slot in [s for s, (_, ends) in self._open.items() if ends <= now]:
                del self._open[slot]
            if len(self._open) >= limit:
                ending = sorted(self._open, key=lambda s: self._open[s][1])
                for slot in ending[: len(ending) - limit + 1]:
                    del self._open[slot]
            self._open[sign_in_hash] = (key_id, ends_at)

    def find_sign_in(self, sign_in_hash: str, now: float) -> ApiKeyRecord | None:
        """The active key of a sign-in not ended by ``now``, or None."""
        with self._lock:
            found = self._open.get(sign_in_hash)
        if found is None or found[1] <= now:
            return None
        active = (k for k in self._keys.list_api_keys() if k.id == found[0] and not k.revoked_at)
        return next(active, None)

    def delete_sign_in(self, sign_in_hash: str) -> None:
        """Delete a sign-in; nothing happens for an unknown one."""
        with self._lock:
            self._open.pop(sign_in_hash, None)


class SignIns:
    """The open sign-ins of the dashboard, over the store (blocking: call from a thread)."""

    def __init__(
        self,
        store: object,
        seconds: float,
        *,
        clock: Callable[[], float] = time.time,
        limit: int = MAX_SIGN_INS,
    ) -> None:
        """Sign-ins that last ``seconds``, kept in ``store`` when it can keep them."""
        self.seconds = seconds
        self._clock = clock
        self._limit = limit
        self._store: SignInStore | None = None
        if has_sign_ins(store):
            self._store = store
        elif has_api_keys(store):
            self._store = InProcessSignIns(store)

    def open(self, key: ApiKeyRecord) -> str:
        """Open a sign-in for the active key ``key``; the id to give the browser.

        Raises:
            RuntimeError: the store keeps no keys (nobody can sign in there).

        """
        if self._store is None:
            raise RuntimeError("a store without API keys has no sign-ins")
        sign_in = secrets.token_urlsafe(32)
        now = self._clock()
        self._store.add_sign_in(
            _slot(sign_in), key.id, now + self.seconds, now=now, limit=self._limit
        )
        return sign_in

    def key(self, sign_in: str | None) -> ApiKeyRecord | None:
        """The active key of an open sign-in, or None (unknown, closed, ended or revoked)."""
        if not sign_in or self._store is None:
            return None
        return self._store.find_sign_in(_slot(sign_in), self._clock())

    def close(self, sign_in: str | None) -> None:
        """Close a sign-in (``/logout``) for every process; nothing happens for an unknown one."""
        if sign_in and self._store is not None:
            self._store.delete_sign_in(_slot(sign_in))
