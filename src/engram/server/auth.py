"""Who is calling: the bearer key checked against the store, with a short cache.

With no active key in the store the server is in **local mode**: every caller
has every right, and only peers on this machine (loopback) are served; ``engram
serve`` refuses to listen elsewhere in that mode. Once a key exists, every
``/v1`` request needs one. Checks are cached for
:attr:`~engram.server.settings.ServerSettings.key_cache_seconds`, so a hot
path costs no database read; revocations take effect within that time.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass

from engram.apikeys import ApiKeys, hash_key
from engram.engine import Engram
from engram.errors import ConfigError
from engram.models import ApiKeyRecord
from engram.server.errors import Forbidden, NotAuthenticated

#: Most cached key checks kept; past it the cache starts over (random keys cannot grow it).
MAX_CACHED = 10_000


@dataclass(frozen=True, slots=True)
class Caller:
    """The rights of one request: its key, or ``key=None`` in local mode (every right)."""

    key: ApiKeyRecord | None

    @property
    def admin(self) -> bool:
        """Whether this caller may do anything."""
        return self.key is None or self.key.admin

    def may(self, scope: str, *, write: bool) -> bool:
        """Whether this caller may read (or write) ``scope``."""
        if self.admin:
            return True
        assert self.key is not None
        return scope in self.key.scopes and (self.key.writable or not write)

    def visible(self) -> list[str] | None:
        """The scopes this caller may read, or None for every scope (admin, local mode)."""
        if self.admin:
            return None
        assert self.key is not None
        return list(self.key.scopes)

    def require(self, scope: str | None, rights: str) -> None:
        """Raise unless this caller has ``rights`` ("read", "write", "admin") on ``scope``."""
        if rights == "admin":
            if not self.admin:
                raise Forbidden("this operation needs an admin key")
            return
        if scope is None:
            return
        if not self.may(scope, write=False):
            raise Forbidden(f"this key does not reach scope {scope!r}")
        if rights == "write" and not self.may(scope, write=True):
            raise Forbidden(f"this key may only read scope {scope!r}")


class KeyCheck:
    """Checks bearer keys for one app; thread-safe, cached."""

    def __init__(self, engram: Engram, ttl: float) -> None:
        try:
            self._keys: ApiKeys | None = engram.api_keys()
        except ConfigError:
            self._keys = None  # a backend without keys: local mode only
        self._ttl = ttl
        self._lock = threading.Lock()
        self._checked: dict[str, tuple[float, ApiKeyRecord | None]] = {}
        self._required: tuple[float, bool] | None = None

    def cached(self, secret: str | None) -> Caller | None:
        """The caller from the cache alone, or None when the store must be asked."""
        now = time.monotonic()
        with self._lock:
            required = self._required
            if required is None or required[0] < now:
                return None
            if not required[1]:
                return Caller(None)
            if secret is None:
                raise NotAuthenticated("this server needs an API key: Authorization: Bearer KEY")
            found = self._checked.get(hash_key(secret))
        if found is None or found[0] < now:
            return None
        if found[1] is None:
            raise NotAuthenticated("unknown or revoked API key")
        return Caller(found[1])

    def cached_local(self) -> bool | None:
        """Whether no key is active (local mode), from the cache alone; None: ask the store."""
        with self._lock:
            required = self._required
        if required is None or required[0] < time.monotonic():
            return None
        return not required[1]

    def local(self) -> bool:
        """Whether no key is active (local mode), asking the store (blocking)."""
        return not self._refresh_required()

    def _refresh_required(self) -> bool:
        expires = time.monotonic() + self._ttl
        required = self._keys is not None and bool(self._keys.active())
        with self._lock:
            self._required = (expires, required)
        return required

    def check(self, secret: str | None) -> Caller:
        """The caller, asking the store (blocking: call it in a worker thread)."""
        expires = time.monotonic() + self._ttl
        required = self._refresh_required()
        if not required:
            return Caller(None)
        if secret is None:
            raise NotAuthenticated("this server needs an API key: Authorization: Bearer KEY")
        assert self._keys is not None
        record = self._keys.authenticate(secret)
        with self._lock:
            if len(self._checked) >= MAX_CACHED:
                self._checked.clear()
            self._checked[hash_key(secret)] = (expires, record)
        if record is None:
            raise NotAuthenticated("unknown or revoked API key")
        return Caller(record)


def is_remote(host: str | None) -> bool:
    """Whether a peer address is a real network address off this machine.

    In-process test clients have no address (or a name): they are local.
    """
    if not host:
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
