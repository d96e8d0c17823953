"""Streamed answers: chunks gathered into one message, and chunks re-encoded for the client.

A chunk's delta may carry :data:`~engram.proxy.verbatim.VERBATIM_KEY` (items an
upstream in another format streamed that chat completions cannot say, whole):
they are gathered with the message and passed on untouched.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from engram.errors import LLMError, LLMTimeout
from engram.models import JSON
from engram.proxy.verbatim import VERBATIM_KEY


@dataclass(frozen=True, slots=True)
class End:
    """The end of a turn's chunks: ``error`` is what the upstream broke off with, if it did."""

    error: LLMError | None = None


@dataclass(slots=True)
class Gathered:
    """A streamed answer put back together from its chunks."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, JSON] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: JSON | None = None
    template: JSON | None = None
    kept: list[JSON] = field(default_factory=list)

    def add(self, chunk: JSON) -> None:
        """Take one chunk's content, tool-call pieces, finish reason and usage."""
        if self.template is None:
            self.template = {key: chunk[key] for key in ("id", "created", "model") if key in chunk}
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.content.append(delta["content"])
            for piece in delta.get("tool_calls") or []:
                self._call(piece)
            record = delta.get(VERBATIM_KEY)
            if isinstance(record, dict):
                self.kept.append(record)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    @property
    def text(self) -> str:
        """The answer's text so far."""
        return "".join(self.content)

    def message(self) -> JSON:
        """The answer as a chat message."""
        message: JSON = {"role": "assistant", "content": self.text or None}
        calls = [self.calls[index] for index in sorted(self.calls)]
        if calls:
            message["tool_calls"] = calls
        if self.kept:
            items = [item for record in self.kept for item in record.get("items") or ()]
            message[VERBATIM_KEY] = {**self.kept[0], "items": items}
        return message

    def _call(self, piece: Any) -> None:
        if not isinstance(piece, dict):
            return
        index = piece.get("index", len(self.calls))
        call = self.calls.setdefault(
            index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        call["id"] = piece.get("id") or call["id"]
        function = piece.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""


def event(chunk: JSON) -> bytes:
    """One server-sent event carrying ``chunk``."""
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"


#: The event that ends every stream.
DONE = b"data: [DONE]\n\n"


async def encode(chunks: AsyncGenerator[JSON | End, None]) -> AsyncGenerator[bytes, None]:
    """A turn's chunks as chat-completion server-sent events (closing them when closed)."""
    try:
        async for chunk in chunks:
            if isinstance(chunk, End):
                yield DONE if chunk.error is None else error_event(chunk.error)
            else:
                yield event(chunk)
    finally:
        await chunks.aclose()


def error_event(exc: LLMError) -> bytes:
    """The event that ends a stream the upstream broke off (OpenAI's SDK raises it as an error)."""
    kind = "llm_timeout" if isinstance(exc, LLMTimeout) else "llm_error"
    return event({"error": {"type": kind, "message": str(exc), "field": None}})


def completion_chunks(
    template: JSON | None,
    message: JSON,
    calls: list[JSON],
    usage: JSON | None,
    finish_reason: str | None = None,
) -> list[JSON]:
    """The chunks of a whole answer: its text and the client's tool ``calls``, then its end.

    ``finish_reason`` defaults to ``tool_calls`` with calls, else ``stop``; a
    ``tool_calls`` reason with no call left becomes ``stop``.
    """
    base = {**(template or {}), "object": "chat.completion.chunk"}
    delta: JSON = {"role": "assistant", "content": message.get("content") or None}
    if isinstance(message.get(VERBATIM_KEY), dict):
        delta[VERBATIM_KEY] = message[VERBATIM_KEY]
    if calls:
        delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(calls)]
    reason = finish_reason or ("tool_calls" if calls else "stop")
    if reason == "tool_calls" and not calls:
        reason = "stop"
    out = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
    ]
    if usage is not None:
        out.append({**base, "choices": [], "usage": usage})
    return out


class Relay:
    """Chunks of a streamed answer as the client gets them: without calls to Engram's tools.

    The client's calls keep their order, renumbered from 0; a ``tool_calls``
    finish with none of the client's calls left becomes ``stop``.
    """

    def __init__(self, ours: Callable[[str], bool]) -> None:
        self._ours = ours
        self._names: dict[int, str] = {}  # upstream index -> tool name
        self._index: dict[int, int] = {}  # upstream index -> the client's index

    def chunk(self, chunk: JSON) -> JSON | None:
        """The chunk to send (None: nothing is left of it)."""
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return chunk
        shown = [self._choice(choice) for choice in choices if isinstance(choice, dict)]
        if all(c is None for c in shown) and not isinstance(chunk.get("usage"), dict):
            return None
        return {**chunk, "choices": [c for c in shown if c is not None]}

    def _choice(self, choice: JSON) -> JSON | None:
        delta = choice.get("delta")
        if isinstance(delta, dict) and "tool_calls" in delta:
            kept = self._calls(delta.get("tool_calls"))
            delta = {k: v for k, v in delta.items() if k != "tool_calls"}
            if kept:
                delta["tool_calls"] = kept
            choice = {**choice, "delta": delta}
            if not delta and choice.get("finish_reason") is None:
                return None
        if choice.get("finish_reason") == "tool_calls" and not self._index:
            choice = {**choice, "finish_reason": "stop"}
        return choice

    def _calls(self, pieces: object) -> list[JSON]:
        kept: list[JSON] = []
        for piece in pieces if isinstance(pieces, list) else []:
            if not isinstance(piece, dict):
                continue
            index = piece.get("index", len(self._names))
            function = piece.get("function")
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str) and name:
                self._names[index] = self._names.get(index, "") + name
            if self._ours(self._names.get(index, "")):
                continue
            kept.append({**piece, "index": self._index.setdefault(index, len(self._index))})
        return kept
