"""The Anthropic-format upstream: ``POST {base}/v1/messages``, answers read as chat completions.

``engram serve --anthropic-upstream URL`` (or ``ENGRAM_ANTHROPIC_BASE_URL``)
names it. Each request is sent with the client's own credential and
``anthropic-version`` and ``anthropic-beta`` headers: its ``x-api-key``, else
its ``Authorization`` bearer when that is not an Engram key (a server without
keys: the Anthropic SDK sends its key as a bearer), else a server key from
``ENGRAM_ANTHROPIC_API_KEY``. The key a client gave Engram never leaves
Engram. Errors go back to the client as the upstream sent them
(:class:`~engram.proxy.upstream.UpstreamFailed`), with its rate-limit
headers; timeouts and unreachable upstreams as for chat completions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx

from engram.errors import LLMBadResponse
from engram.llm.deadline import async_deadline, step
from engram.models import JSON
from engram.proxy.anthropic.convert import chat_completion
from engram.proxy.anthropic.events import UpstreamReader
from engram.proxy.settings import ProxySettings
from engram.proxy.upstream import (
    Reply,
    Stream,
    check_status,
    passed_headers,
    sse_events,
    translated,
)

#: The Messages path under the upstream's base URL.
PATH = "/v1/messages"
#: API version sent when the client names none.
DEFAULT_VERSION = "2023-06-01"
#: Client headers passed on to the upstream (besides its credential).
PASSED_ON = ("anthropic-version", "anthropic-beta")


def base_of(url: str) -> str:
    """The upstream's base URL without a trailing ``/v1`` (the path adds it)."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class AnthropicUpstream:
    """One connection pool to the Anthropic-format upstream; close it with :meth:`aclose`."""

    def __init__(self, settings: ProxySettings) -> None:
        self.settings = settings
        self._pool: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The connection pool, opened on first use (again after :meth:`aclose`)."""
        if self._pool is None or self._pool.is_closed:
            self._pool = httpx.AsyncClient(
                base_url=base_of(self.settings.base_url),
                timeout=httpx.Timeout(self.settings.timeout),
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            )
        return self._pool

    def call(self, headers: Mapping[str, str], *, bearer_is_engrams: bool) -> AnthropicCall:
        """The upstream as one request speaks to it: with that client's key and version.

        ``bearer_is_engrams``: the request's ``Authorization`` bearer is the
        Engram key it authenticated with, so it is not passed on.
        """
        lowered = {key.lower(): value for key, value in headers.items()}
        sent = {key: lowered[key] for key in PASSED_ON if lowered.get(key)}
        if lowered.get("x-api-key"):
            sent["x-api-key"] = lowered["x-api-key"]
        elif lowered.get("authorization") and not bearer_is_engrams:
            sent["authorization"] = lowered["authorization"]
        elif self.settings.api_key:
            sent["x-api-key"] = self.settings.api_key
        sent.setdefault("anthropic-version", DEFAULT_VERSION)
        return AnthropicCall(self, self.settings, sent)

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._pool is not None:
            await self._pool.aclose()


@dataclass(slots=True)
class AnthropicCall:
    """The upstream for one request (a :class:`~engram.proxy.upstream.ModelEndpoint`)."""

    upstream: AnthropicUpstream
    settings: ProxySettings
    headers: dict[str, str] = field(default_factory=dict)

    async def complete(self, body: JSON) -> Reply:
        """One message, read as a chat completion.

        Raises:
            UpstreamFailed: an error status. LLMTimeout: too slow.
            LLMError: unreachable. LLMBadResponse: not a message.
        """
        client = self.upstream.client
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            response = await step(deadline, client.post(PATH, json=body, headers=self.headers))
        await check_status(response)
        try:
            decoded = response.json()
        except ValueError:
            raise LLMBadResponse("the upstream model answered something that is not JSON") from None
        if not isinstance(decoded, dict) or not isinstance(decoded.get("content"), list):
            raise LLMBadResponse("the upstream model's answer is not a Messages message")
        return Reply(chat_completion(decoded), passed_headers(response.headers))

    @asynccontextmanager
    async def stream(self, body: JSON) -> AsyncIterator[Stream]:
        """A streamed message, read as chat-completion chunks."""
        client = self.upstream.client
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            request = client.build_request("POST", PATH, json=body, headers=self.headers)
            response = await step(deadline, client.send(request, stream=True))
        try:
            await check_status(response)
            secrets = (self.settings.api_key,)
            chunks = _chunks(response, self.settings.timeout, deadline, secrets)
            yield Stream(chunks, passed_headers(response.headers))
        finally:
            await response.aclose()


async def _chunks(
    response: httpx.Response, seconds: float, deadline: float, secrets: tuple[str | None, ...]
) -> AsyncIterator[JSON]:
    """The chat chunks of an Anthropic event stream, up to ``message_stop``."""
    reader = UpstreamReader(secrets)
    async for event in sse_events(response, seconds, deadline):
        for chunk in reader.feed(event):
            yield chunk
        if event.get("type") == "message_stop":
            return
