"""Failed key checks are throttled per client address: guessing keys costs time.

Every door that checks a key (``/v1``, ``/mcp``, the dashboard's ``/login`` and its
pages) goes through :func:`engram.server.deps.resolve_caller`, which asks
:class:`FailedKeys` first. An address with ``limit`` failed checks within the last
``window`` seconds is refused with 429 and ``Retry-After`` (the seconds until its
oldest failure leaves the window) before its key is even looked at, so a guess
made while throttled says nothing, right or wrong. Requests without a key are not
counted. IPv6 addresses count per /64 (one host holds a whole /64); behind a
reverse proxy every client shares the proxy's address.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import deque
from collections.abc import Callable

#: Failed key checks an address may make within the window (ServerSettings.key_failures).
KEY_FAILURES = 10
#: The window, in seconds (ServerSettings.key_failure_window).
KEY_FAILURE_WINDOW = 60.0
#: Addresses remembered at most; past it the oldest are forgotten (bounded memory).
MAX_ADDRESSES = 10_000


def address_key(host: str | None) -> str:
    """The key failures are counted under: the address, or its /64 for IPv6."""
    if not host:
        return "-"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class FailedKeys:
    """Failed key checks per address within a sliding window; thread-safe."""

    def __init__(
        self,
        limit: int = KEY_FAILURES,
        window: float = KEY_FAILURE_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Allow ``limit`` failures per ``window`` seconds and address (0: no throttle)."""
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, host: str | None) -> int | None:
        """Seconds this address must wait before its next key is checked, or None."""
        if self.limit <= 0:
            return None
        key, now = address_key(host), self._clock()
        with self._lock:
            failures = self._failures.get(key)
            if failures is None:
                return None
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if not failures:
                del self._failures[key]
                return None
            if len(failures) < self.limit:
                return None
            return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, host: str | None) -> None:
        """Count one failed key check of this address."""
        if self.limit <= 0:
            return
        key, now = address_key(host), self._clock()
        with self._lock:
            if key not in self._failures and len(self._failures) >= MAX_ADDRESSES:
                self._forget(now)
            failures = self._failures.setdefault(key, deque(maxlen=self.limit))
            failures.append(now)

    def _forget(self, now: float) -> None:
        """Drop expired addresses; if still full, the half whose last failure is oldest."""
        for key in [k for k, f in self._failures.items() if not f or f[-1] <= now - self.window]:
            del self._failures[key]
        if len(self._failures) >= MAX_ADDRESSES:
            ordered = sorted(self._failures, key=lambda k: self._failures[k][-1])
            for key in ordered[: len(ordered) // 2]:
                del self._failures[key]
