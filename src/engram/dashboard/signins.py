"""Dashboard sign-ins kept by the server: the browser holds a random id, never the key.

Signing in with a key opens a sign-in: a random id (256 bits) goes to the
browser in an HTTP-only, same-site cookie; the server keeps, under the id's
SHA-256, the key and when the sign-in ends (:attr:`ServerSettings.session_seconds
<engram.server.settings.ServerSettings.session_seconds>` after it began). Every
page checks the key again (a revoked key ends its sign-ins at once); ``/logout``
closes the sign-in on the server, so a copied cookie stops working too.
Sign-ins live in the server process: a restart signs everyone out, and behind
several servers a browser must reach the one it signed in at.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable

#: Sign-ins kept at most; past it the ones that end soonest are closed (bounded memory).
MAX_SIGN_INS = 10_000


def _slot(sign_in: str) -> str:
    return hashlib.sha256(sign_in.encode("utf-8", "surrogatepass")).hexdigest()


class SignIns:
    """Open sign-ins of one server; thread-safe."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        """Sign-ins that last ``seconds``."""
        self.seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[str, tuple[str, float]] = {}

    def open(self, secret: str) -> str:
        """Open a sign-in for the key ``secret``; the id to give the browser."""
        sign_in = secrets.token_urlsafe(32)
        now = self._clock()
        with self._lock:
            if len(self._open) >= MAX_SIGN_INS:
                self._trim(now)
            self._open[_slot(sign_in)] = (secret, now + self.seconds)
        return sign_in

    def key(self, sign_in: str | None) -> str | None:
        """The key of an open sign-in, or None (unknown, closed or ended)."""
        if not sign_in:
            return None
        slot = _slot(sign_in)
        with self._lock:
            found = self._open.get(slot)
            if found is None:
                return None
            if found[1] <= self._clock():
                del self._open[slot]
                return None
            return found[0]

    def close(self, sign_in: str | None) -> None:
        """Close a sign-in (``/logout``); nothing happens for an unknown one."""
        if sign_in:
            with self._lock:
                self._open.pop(_slot(sign_in), None)

    def _trim(self, now: float) -> None:
        for slot in [s for s, (_, ends) in self._open.items() if ends <= now]:
            del self._open[slot]
        if len(self._open) >= MAX_SIGN_INS:
            ending = sorted(self._open, key=lambda s: self._open[s][1])
            for slot in ending[: len(ending) // 2]:
                del self._open[slot]
