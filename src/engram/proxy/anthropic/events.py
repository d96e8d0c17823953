"""Anthropic's streamed events and chat-completion chunks, both ways.

:class:`UpstreamReader` reads an Anthropic upstream's events as the chunks a
turn gathers and relays: ``message_start`` gives the id, model and input
usage; text deltas are content; a ``tool_use`` block is a tool call whose
arguments stream as ``input_json_delta``; a ``thinking`` block (its text and
signature) or any other block comes whole, once it stops, as a verbatim
item; ``message_delta`` gives the finish reason (the upstream's own under
``anthropic``) and the usage chunk.

:func:`message_events` says a turn's chunks to the client as Anthropic does:
``message_start``, then per block ``content_block_start``, its deltas
(``text_delta``, ``input_json_delta``, ``thinking_delta`` and
``signature_delta``) and ``content_block_stop``, then ``message_delta``
with the stop reason and the turn's usage, and ``message_stop``. An
upstream that breaks off mid-stream ends it with an ``error`` event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from engram.errors import LLMError, LLMTimeout
from engram.models import JSON
from engram.proxy.anthropic.convert import (
    ANTHROPIC_KEY,
    FINISH,
    anthropic_usage,
    chat_usage,
    stop_of,
)
from engram.proxy.redact import redact_text
from engram.proxy.stream import End
from engram.proxy.verbatim import ANTHROPIC, VERBATIM_KEY, items_of, record


class UpstreamReader:
    """Anthropic events in, chat-completion chunks out (one reader per stream)."""

    def __init__(self, secrets: Sequence[str | None] = ()) -> None:
        """A reader of one stream; ``secrets`` never leave in an error it reports."""
        self.secrets = secrets
        self.head: JSON = {"object": "chat.completion.chunk"}
        self.usage: JSON = {}
        self.calls: dict[int, int] = {}  # block index -> tool call index
        self.blocks: dict[int, JSON] = {}  # block index -> block gathered whole
        self.json: dict[int, str] = {}  # block index -> input JSON of a block gathered whole

    def feed(self, event: Mapping[str, Any]) -> list[JSON]:
        """The chunks one event stands for.

        Raises:
            LLMError: the upstream sent an error event.
        """
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.head.update(id=message.get("id"), model=message.get("model"))
            self.usage.update(message.get("usage") or {})
            return [self._chunk({"role": "assistant", "content": ""})]
        if kind == "content_block_start":
            return self._start(int(event.get("index") or 0), event.get("content_block") or {})
        if kind == "content_block_delta":
            return self._delta(int(event.get("index") or 0), event.get("delta") or {})
        if kind == "content_block_stop":
            return self._stop(int(event.get("index") or 0))
        if kind == "message_delta":
            delta = event.get("delta") or {}
            self.usage.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
            stop = delta.get("stop_reason")
            finish = self._chunk({}, FINISH.get(str(stop), "stop"))
            finish[ANTHROPIC_KEY] = {
                "stop_reason": stop,
                "stop_sequence": delta.get("stop_sequence"),
            }
            return [finish, {**self.head, "choices": [], "usage": chat_usage(self.usage)}]
        if kind == "error":
            error = event.get("error") or {}
            said = redact_text(str(error.get("message") or error), self.secrets)
            raise LLMError(f"the upstream model broke off: {said}")
        return []

    def _chunk(self, delta: JSON, finish: str | None = None) -> JSON:
        return {**self.head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def _start(self, index: int, block: Mapping[str, Any]) -> list[JSON]:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text") or ""
            return [self._chunk({"content": text})] if text else []
        if kind == "tool_use":
            number = self.calls[index] = len(self.calls)
            call = {
                "index": number,
                "id": block.get("id"),
                "type": "function",
                "function": {"name": block.get("name"), "arguments": ""},
            }
            return [self._chunk({"tool_calls": [call]})]
        self.blocks[index] = dict(block)
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[JSON]:
        kind = delta.get("type")
        if kind == "text_delta":
            return [self._chunk({"content": delta.get("text") or ""})]
        if kind == "input_json_delta" and index in self.calls:
            piece = {
                "index": self.calls[index],
                "function": {"arguments": delta.get("partial_json") or ""},
            }
            return [self._chunk({"tool_calls": [piece]})]
        block = self.blocks.get(index)
        if block is None:
            return []
        if kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature") or "")
        elif kind == "input_json_delta":
            self.json[index] = self.json.get(index, "") + str(delta.get("partial_json") or "")
        return []

    def _stop(self, index: int) -> list[JSON]:
        block = self.blocks.pop(index, None)
        if block is None:
            return []
        if index in self.json:
            try:
                block["input"] = json.loads(self.json.pop(index) or "{}")
            except ValueError:
                pass
        return [self._chunk({VERBATIM_KEY: record(ANTHROPIC, [(index, block)])})]


def _sse(kind: str, data: JSON) -> bytes:
    payload = json.dumps({"type": kind, **data}, ensure_ascii=False)
    return f"event: {kind}\ndata: {payload}\n\n".encode()


async def message_events(
    model: str, chunks: AsyncGenerator[JSON | End, None]
) -> AsyncGenerator[bytes, None]:
    """A turn's chunks as Anthropic's events (closing the chunks when closed)."""
    writer = _Writer(model)
    try:
        async for chunk in chunks:
            for event in writer.end(chunk) if isinstance(chunk, End) else writer.chunk(chunk):
                yield event
    finally:
        await chunks.aclose()


class _Writer:
    """The state of one message being streamed to the client."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.index = -1  # the open block's index (-1: none)
        self.open: str | None = None  # its kind
        self.calls: dict[int, int] = {}  # chunk call index -> block index
        self.finish: object = None
        self.upstream: object = None
        self.usage: JSON | None = None

    def chunk(self, chunk: JSON) -> list[bytes]:
        out = self._start(chunk)
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get(ANTHROPIC_KEY), dict):
            self.upstream = chunk[ANTHROPIC_KEY]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            for _place, block in items_of(delta, ANTHROPIC):
                out += self._whole(dict(block))
            if isinstance(delta.get("content"), str) and delta["content"]:
                out += self._text(delta["content"])
            for piece in delta.get("tool_calls") or ():
                if isinstance(piece, Mapping):
                    out += self._call(piece)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return out

    def end(self, end: End) -> list[bytes]:
        out = self._start({})
        out += self._close()
        if end.error is not None:
            kind = "timeout_error" if isinstance(end.error, LLMTimeout) else "api_error"
            out.append(_sse("error", {"error": {"type": kind, "message": str(end.error)}}))
            return out
        stop, sequence = stop_of(self.finish, self.upstream)
        usage = anthropic_usage(self.usage)
        out.append(
            _sse(
                "message_delta",
                {"delta": {"stop_reason": stop, "stop_sequence": sequence}, "usage": usage},
            )
        )
        out.append(_sse("message_stop", {}))
        return out

    def _start(self, chunk: JSON) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self.model = chunk["model"]
        message: JSON = {
            "id": str(chunk.get("id") or "msg_engram"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": anthropic_usage(None),
        }
        return [_sse("message_start", {"message": message})]

    def _open_block(self, kind: str, block: JSON) -> list[bytes]:
        out = self._close()
        self.index += 1
        self.open = kind
        out.append(_sse("content_block_start", {"index": self.index, "content_block": block}))
        return out

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        return [_sse("content_block_stop", {"index": self.index})]

    def _delta(self, delta: JSON) -> bytes:
        return _sse("content_block_delta", {"index": self.index, "delta": delta})

    def _whole(self, block: JSON) -> list[bytes]:
        """A block kept whole: a thinking block's text and signature stream as its deltas."""
        if block.get("type") != "thinking":
            return [*self._open_block("whole", block), *self._close()]
        out = self._open_block("thinking", {"type": "thinking", "thinking": "", "signature": ""})
        out.append(self._delta({"type": "thinking_delta", "thinking": block.get("thinking", "")}))
        out.append(
            self._delta({"type": "signature_delta", "signature": block.get("signature", "")})
        )
        return [*out, *self._close()]

    def _text(self, piece: str) -> list[bytes]:
        out = [] if self.open == "text" else self._open_block("text", {"type": "text", "text": ""})
        out.append(self._delta({"type": "text_delta", "text": piece}))
        return out

    def _call(self, piece: Mapping[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        number = piece.get("index", len(self.calls))
        function = piece.get("function") or {}
        if number not in self.calls:
            block: JSON = {
                "type": "tool_use",
                "id": piece.get("id"),
                "name": function.get("name"),
                "input": {},
            }
            out += self._open_block("tool_use", block)
            self.calls[number] = self.index
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments and self.calls[number] == self.index:
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return out
