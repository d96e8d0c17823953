"""The upstream's ``POST /responses``, answers and events read as chat completions and chunks.

Used when the upstream speaks the Responses API (``engram serve
--upstream-responses``): the same connection pool, key, timeout and error
handling as its chat completions (:class:`~engram.proxy.upstream.Upstream`).
:class:`EventReader` reads Responses events as the chunks a turn gathers and
relays: text deltas are content, a ``function_call`` item is a tool call
whose arguments stream, any other item (``reasoning``...) comes whole, once
done, as a verbatim item at its place; ``response.completed`` (or
``.incomplete``) gives the finish reason and the usage.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from engram.errors import LLMBadResponse, LLMError
from engram.llm.deadline import async_deadline, step
from engram.models import JSON
from engram.proxy.redact import redact_text
from engram.proxy.responses.wire import chat_completion, chat_usage, finish_of
from engram.proxy.settings import ProxySettings
from engram.proxy.upstream import (
    Reply,
    Stream,
    Upstream,
    check_status,
    passed_headers,
    sse_events,
    translated,
)
from engram.proxy.verbatim import RESPONSES, VERBATIM_KEY, record

#: The Responses path under the upstream's base URL (which ends with ``/v1``).
PATH = "/responses"
#: Events that end a response.
FINAL = frozenset({"response.completed", "response.incomplete"})


@dataclass(slots=True)
class ResponsesEndpoint:
    """The upstream's Responses API (a :class:`~engram.proxy.upstream.ModelEndpoint`)."""

    upstream: Upstream

    @property
    def settings(self) -> ProxySettings:
        """The upstream's settings."""
        return self.upstream.settings

    async def complete(self, body: JSON) -> Reply:
        """One response, read as a chat completion.

        Raises:
            UpstreamFailed, LLMTimeout, LLMError: as for chat completions.
            LLMBadResponse: not a response object.
        """
        client = self.upstream.client
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            response = await step(deadline, client.post(PATH, json=body))
        await check_status(response)
        try:
            decoded = response.json()
        except ValueError:
            raise LLMBadResponse("the upstream model answered something that is not JSON") from None
        if not isinstance(decoded, dict) or not isinstance(decoded.get("output"), list):
            raise LLMBadResponse("the upstream model's answer is not a Responses response")
        return Reply(chat_completion(decoded), passed_headers(response.headers))

    @asynccontextmanager
    async def stream(self, body: JSON) -> AsyncIterator[Stream]:
        """A streamed response, read as chat-completion chunks."""
        client = self.upstream.client
        with translated(self.settings.timeout):
            deadline = async_deadline(self.settings.timeout)
            request = client.build_request("POST", PATH, json=body)
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
    """The chat chunks of a Responses event stream, up to its final event."""
    reader = EventReader(secrets)
    async for event in sse_events(response, seconds, deadline):
        for chunk in reader.feed(event):
            yield chunk
        if event.get("type") in FINAL:
            return


class EventReader:
    """Responses events in, chat-completion chunks out (one reader per stream)."""

    def __init__(self, secrets: Sequence[str | None] = ()) -> None:
        """A reader of one stream; ``secrets`` never leave in an error it reports."""
        self.secrets = secrets
        self.head: JSON = {"object": "chat.completion.chunk"}
        self.calls: dict[str, int] = {}  # function_call item id -> tool call index

    def feed(self, event: Mapping[str, Any]) -> list[JSON]:
        """The chunks one event stands for.

        Raises:
            LLMError: the upstream reported a failure.
        """
        kind = event.get("type")
        if kind == "response.created":
            created = event.get("response") or {}
            self.head.update(id=created.get("id"), model=created.get("model"))
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "response.output_text.delta":
            return [self._chunk({"content": str(event.get("delta") or "")})]
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") != "function_call":
                return []
            number = self.calls[str(item.get("id"))] = len(self.calls)
            call = {
                "index": number,
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""},
            }
            return [self._chunk({"tool_calls": [call]})]
        if kind == "response.function_call_arguments.delta":
            found = self.calls.get(str(event.get("item_id")))
            if found is None:
                return []
            piece = {"index": found, "function": {"arguments": str(event.get("delta") or "")}}
            return [self._chunk({"tool_calls": [piece]})]
        if kind == "response.output_item.done":
            item = event.get("item") or {}
            if item.get("type") in ("message", "function_call"):
                return []
            at = event.get("output_index")
            kept = record(RESPONSES, [(at if isinstance(at, int) else 0, dict(item))])
            return [self._chunk({VERBATIM_KEY: kept})]
        if kind in FINAL:
            done = event.get("response") or {}
            finish = finish_of(done, list(self.calls))
            usage = {**self.head, "choices": [], "usage": chat_usage(done.get("usage"))}
            return [self._chunk({}, finish), usage]
        if kind in ("response.failed", "error"):
            failed = event.get("response") or {}
            error = failed.get("error") if isinstance(failed, Mapping) else None
            message = (error or {}).get("message") or event.get("message") or "failed"
            said = redact_text(str(message), self.secrets)
            raise LLMError(f"the upstream model broke off: {said}")
        return []

    def _chunk(self, delta: JSON, finish: str | None = None) -> JSON:
        return {**self.head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
