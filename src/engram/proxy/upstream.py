"""The upstream model endpoint, spoken to with httpx: answers, streams and errors as they are.

An upstream error is not Engram's to interpret: :class:`UpstreamFailed` keeps
its status and body so the client gets them unchanged. The upstream's
``Retry-After`` and ``x-ratelimit-*`` headers go back to the client too
(:func:`passed_headers`), with an error or an answer. A call that takes
longer than the configured timeout in total (from the request to the last
byte, however slowly the upstream trickles) is :class:`~engram.errors.LLMTimeout`
(504); an upstream that cannot be reached is :class:`~engram.errors.LLMError`
(502).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import httpx

from engram.errors import LLMBadResponse, LLMError, LLMTimeout
from engram.llm.deadline import async_deadline, step, steps
from engram.models import JSON
from engram.proxy.settings import ProxySettings

#: Upstream response headers passed back to the client (and any rate-limit header).
PASSED_HEADERS = frozenset({"retry-after", "retry-after-ms"})
#: Prefixes of rate-limit headers: OpenAI's and Anthropic's.
RATE_LIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def passed_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The upstream headers the client gets too: retry advice and rate limits."""
    return {
        key: value
        for key, value in headers.items()
        if key.lower() in PASSED_HEADERS or key.lower().startswith(RATE_LIMIT_PREFIXES)
    }


class UpstreamFailed(LLMError):
    """The upstream answered with an error status; its body goes back to the client as is."""

    def __init__(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"the upstream model answered {status}")
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = dict(headers or {})


@dataclass(slots=True)
class Reply:
    """One upstream answer: the decoded completion and the headers passed back."""

    body: JSON
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Stream:
    """A streamed upstream answer: its chunks, and the headers passed back."""

    chunks: AsyncIterator[JSON]
    headers: dict[str, str] = field(default_factory=dict)


class ModelEndpoint(Protocol):
    """What a turn calls: answers and streams in the chat-completions shape, whatever the wire."""

    @property
    def settings(self) -> ProxySettings:
        """The upstream's settings (timeout, rounds, budget...)."""
        ...

    async def complete(self, body: JSON) -> Reply:
        """One answer, as a chat completion."""
        ...

    def stream(self, body: JSON) -> AbstractAsyncContextManager[Stream]:
        """One streamed answer, as chat-completion chunks."""
        ...


class Upstream:
    """One connection pool to the upstream; close it with :meth:`aclose`."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self._pool: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The connection pool, opened on first use (again after :meth:`aclose`)."""
        if self._pool is None or self._pool.is_closed:
            key = self.settings.api_key
            self._pool = httpx.AsyncClient(
                base_url=self.settings.base_url,
                headers={"Authorization": f"Bearer {key}"} if key else {},
                timeout=httpx.Timeout(self.settings.timeout),
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            )
        return self._pool

    async def aclose(self) -> None:
        """Close the connection pool (the app shuts down; a restart opens a new one)."""
        if self._pool is not None:
            await self._pool.aclose()

    async def complete(self, body: JSON) -> Reply:
        """One chat completion, decoded.

        Raises:
            UpstreamFailed: an error status. LLMTimeout: too slow.
            LLMError: unreachable. LLMBadResponse: not a JSON object.
        """
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            response = await step(deadline, self.client.post("/chat/completions", json=body))
        await check_status(response)
        try:
            decoded = response.json()
        except ValueError:
            raise LLMBadResponse("the upstream model answered something that is not JSON") from None
        if not isinstance(decoded, dict) or not isinstance(decoded.get("choices"), list):
            raise LLMBadResponse("the upstream model's answer is not a chat completion")
        return Reply(decoded, passed_headers(response.headers))

    @asynccontextmanager
    async def stream(self, body: JSON) -> AsyncIterator[Stream]:
        """A streamed chat completion: yields the decoded chunks and the passed headers.

        Raises:
            UpstreamFailed, LLMTimeout, LLMError: as :meth:`complete`, before the first chunk.
        """
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            request = self.client.build_request("POST", "/chat/completions", json=body)
            response = await step(deadline, self.client.send(request, stream=True))
        try:
            await check_status(response)
            yield Stream(
                sse_events(response, self.settings.timeout, deadline),
                passed_headers(response.headers),
            )
        finally:
            await response.aclose()

    async def models(self) -> tuple[int, bytes, str]:
        """The upstream's ``GET /models`` answer: status, body, content type."""
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            response = await step(deadline, self.client.get("/models"))
        return response.status_code, response.content, _content_type(response)


async def sse_events(
    response: httpx.Response, seconds: float, deadline: float
) -> AsyncIterator[JSON]:
    """The JSON objects of a server-sent-events body, up to ``[DONE]``, ending by ``deadline``.

    Every format's stream is read here (chat chunks, Responses and Anthropic events).
    """
    with translated(seconds):
        async for line in steps(deadline, response.aiter_lines()):
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                event = json.loads(data)
            except ValueError:
                raise LLMBadResponse(
                    "the upstream model streamed an event that is not JSON"
                ) from None
            if isinstance(event, dict):
                yield event


async def check_status(response: httpx.Response) -> None:
    """Raise :class:`UpstreamFailed` (its status, body and passed headers) for an error status."""
    if response.status_code >= 400:
        body = await response.aread()
        raise UpstreamFailed(
            response.status_code, body, _content_type(response), passed_headers(response.headers)
        )


def _content_type(response: httpx.Response) -> str:
    return str(response.headers.get("content-type", "application/json"))


@contextmanager
def translated(timeout: float) -> Iterator[None]:
    """Turn httpx's transport errors into Engram's."""
    try:
        yield
    except (httpx.TimeoutException, TimeoutError) as exc:
        raise LLMTimeout(
            f"the upstream model did not answer within {timeout:g} seconds (upstream timeout)"
        ) from exc
    except httpx.TransportError as exc:
        raise LLMError(f"the upstream model cannot be reached: {exc}") from exc
