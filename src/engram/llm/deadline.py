"""One deadline for a whole model call: connect, send, and every read, however slow the server.

HTTP clients bound each socket operation (a read timeout is per read), so a
server that trickles a byte a second holds a call, and the compaction or turn
waiting on it, forever. A deadline bounds the whole attempt instead.

- Synchronous calls (the ``openai`` SDK over its httpx fork) go through a
  network backend that gives every connect, read and write only the time left
  until the deadline of the current call (:func:`sync_deadline`, a context
  variable, so concurrent threads each keep their own).
- Asynchronous calls await each step under ``asyncio.timeout_at``
  (:func:`step` and :func:`steps`): the time between the steps (the caller
  consuming a stream) counts too, and a step that outlives the deadline is
  cancelled and raises :class:`TimeoutError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import httpcore2
    import httpx2

log = logging.getLogger(__name__)

T = TypeVar("T")

#: When the current synchronous call must end (``time.monotonic()``), if it has a deadline.
_DEADLINE: ContextVar[float | None] = ContextVar("engram_llm_deadline", default=None)


@contextmanager
def sync_deadline(seconds: float) -> Iterator[None]:
    """Bound every socket operation of the calls made inside to ``seconds`` in total."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """The timeout for one socket operation: its own, or less when the deadline is closer."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the call ran past its deadline")
    return left if timeout is None else min(timeout, left)


def bounded_http_client(**options: Any) -> httpx2.Client:
    """The SDK's default HTTP client, its connections bounded by :func:`sync_deadline`.

    Args:
        **options: Passed to ``openai.DefaultHttpxClient`` (timeout, limits...).

    """
    import openai

    client = openai.DefaultHttpxClient(**options)
    # httpx offers no total timeout; its transports' pools take a network backend.
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            log.warning("cannot bound %r by a deadline: reads are bounded one by one", transport)
            continue
        pool._network_backend = _Backend(backend)  # type: ignore[union-attr]
    return client


class _Stream:
    """A connection whose every operation ends by the current call's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        import httpcore2

        return self._inner.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        import httpcore2

        self._inner.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        import httpcore2

        inner = self._inner.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore2.ConnectTimeout)
        )
        return _Stream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """Opens :class:`_Stream` connections through the pool's own backend."""

    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        import httpcore2

        stream = self._inner.connect_tcp(
            host, port, _left(timeout, httpcore2.ConnectTimeout), local_address, socket_options
        )
        return _Stream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _Stream:
        import httpcore2

        stream = self._inner.connect_unix_socket(
            path, _left(timeout, httpcore2.ConnectTimeout), socket_options
        )
        return _Stream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# -- async ------------------------------------------------------------------------------


def async_deadline(seconds: float) -> float:
    """The event-loop time ``seconds`` from now (for :func:`step` and :func:`steps`)."""
    import asyncio

    return asyncio.get_running_loop().time() + seconds


async def step(deadline: float, awaitable: Awaitable[T]) -> T:
    """Await ``awaitable``, cancelled at ``deadline``.

    Raises:
        TimeoutError: The deadline passed first.

    """
    import asyncio

    async with asyncio.timeout_at(deadline):
        return await awaitable


async def steps(deadline: float, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """The items of ``items``, each awaited under ``deadline`` (the consumer's time counts).

    Raises:
        TimeoutError: The deadline passed before the iterator's end.

    """
    while True:
        try:
            item = await step(deadline, anext(items))
        except StopAsyncIteration:
            return
        yield item
