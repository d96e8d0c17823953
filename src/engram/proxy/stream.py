"""Streamed answers: chunks gathered into one message, and chunks re-encoded for the client."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engram.errors import LLMError, LLMTimeout
from engram.models import JSON


@dataclass(slots=True)
class Gathered:
    """A streamed answer put back together from its chunks."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, JSON] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: JSON | None = None
    template: JSON | None = None

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


def error_event(exc: LLMError) -> bytes:
    """The event that ends a stream the upstream broke off (OpenAI's SDK raises it as an error)."""
    kind = "llm_timeout" if isinstance(exc, LLMTimeout) else "llm_error"
    return event({"error": {"type": kind, "message": str(exc), "field": None}})


def tool_call_chunks(gathered: Gathered, calls: list[JSON], usage: JSON | None) -> list[JSON]:
    """The chunks of an answer that hands tool calls back to the client."""
    base = {**(gathered.template or {}), "object": "chat.completion.chunk"}
    delta: JSON = {"role": "assistant", "content": gathered.text or None}
    delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(calls)]
    out = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    if usage is not None:
        out.append({**base, "choices": [], "usage": usage})
    return out
