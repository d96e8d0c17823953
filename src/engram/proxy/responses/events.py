"""A streamed turn as Responses server-sent events.

The turn streams chat-completion chunks (Engram's own tool rounds already
held back, :meth:`engram.proxy.ProxyTurn.chunks`); :func:`response_events`
says them as the Responses API does: ``response.created`` and
``response.in_progress``; for the text, ``response.output_item.added``,
``response.content_part.added``, ``response.output_text.delta``...,
``response.output_text.done``, ``response.content_part.done``,
``response.output_item.done``; for each tool call, its item with
``response.function_call_arguments.delta`` and ``.done``; then
``response.completed`` (``response.incomplete`` when the answer stopped at
its token limit) with the whole response. An upstream that breaks off
mid-stream gives an ``error`` event and ``response.failed``. Every event
carries its ``sequence_number``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from engram.errors import LLMTimeout
from engram.models import JSON
from engram.proxy.responses.ids import item_base
from engram.proxy.responses.items import call_item, message_item
from engram.proxy.responses.output import response_object, status_of, usage_of
from engram.proxy.responses.request import ResponsesCall
from engram.proxy.stream import End
from engram.proxy.verbatim import RESPONSES, VERBATIM_KEY, items_of


def sse(kind: str, data: JSON) -> bytes:
    """One server-sent event: its name and its JSON data."""
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def response_events(
    call: ResponsesCall,
    response_id: str,
    chunks: AsyncGenerator[JSON | End, None],
) -> AsyncGenerator[bytes, None]:
    """The Responses events of a turn's chunks (closing the chunks when closed)."""
    writer = _Writer(call, response_id)
    try:
        for event in writer.start():
            yield event
        async for chunk in chunks:
            events = writer.end(chunk) if isinstance(chunk, End) else writer.chunk(chunk)
            for event in events:
                yield event
    finally:
        await chunks.aclose()


class _Writer:
    """The state of one response being streamed."""

    def __init__(self, call: ResponsesCall, response_id: str) -> None:
        self.call = call
        self.id = response_id
        self.base = item_base(response_id)
        self.model = call.chat.model
        self.sequence = 0
        self.output: list[JSON] = []  # items, in order (open ones too)
        self.text: JSON | None = None  # the open message item
        self.calls: dict[int, JSON] = {}  # chunk index -> function_call item
        self.open_call: JSON | None = None
        self.finish: object = None
        self.usage: JSON | None = None

    def _event(self, kind: str, **data: Any) -> bytes:
        payload = {"type": kind, **data, "sequence_number": self.sequence}
        self.sequence += 1
        return sse(kind, payload)

    def _response(self, status: str, **extra: Any) -> JSON:
        return response_object(
            self.call,
            self.id,
            model=self.model,
            output=[dict(item) for item in self.output],
            status=status,
            usage=usage_of(self.usage) if self.usage is not None else None,
            **extra,
        )

    def start(self) -> list[bytes]:
        shell = self._response("in_progress")
        return [
            self._event("response.created", response=shell),
            self._event("response.in_progress", response=shell),
        ]

    def chunk(self, chunk: JSON) -> list[bytes]:
        out: list[bytes] = []
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            for _at, item in items_of(delta, RESPONSES) if VERBATIM_KEY in delta else ():
                out += self._close_all()
                out += self._whole(dict(item))
            if isinstance(delta.get("content"), str) and delta["content"]:
                out += self._text(delta["content"])
            for piece in delta.get("tool_calls") or ():
                if isinstance(piece, Mapping):
                    out += self._call(piece)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return out

    def end(self, end: End) -> list[bytes]:
        out = self._close_all()
        if end.error is not None:
            code = "timeout" if isinstance(end.error, LLMTimeout) else "server_error"
            error = {"code": code, "message": str(end.error)}
            out.append(self._event("error", code=code, message=str(end.error), param=None))
            out.append(
                self._event("response.failed", response=self._response("failed", error=error))
            )
            return out
        status, incomplete = status_of(self.finish)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        out.append(self._event(kind, response=self._response(status, incomplete=incomplete)))
        return out

    # -- items -----------------------------------------------------------------------

    def _added(self, item: JSON) -> bytes:
        self.output.append(item)
        return self._event(
            "response.output_item.added", output_index=len(self.output) - 1, item=dict(item)
        )

    def _whole(self, item: JSON) -> list[bytes]:
        """An item that comes whole (kept verbatim): added and done at once."""
        index = len(self.output)
        return [
            self._added(item),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    def _text(self, piece: str) -> list[bytes]:
        out: list[bytes] = []
        if self.text is None:
            out += self._close_call()
            self.text = message_item(f"msg_{self.base}", [], status="in_progress")
            out.append(self._added(self.text))
            self.text["content"] = [
                {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            ]
            out.append(
                self._event(
                    "response.content_part.added",
                    item_id=self.text["id"],
                    output_index=self.output.index(self.text),
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
            )
        part = self.text["content"][0]
        part["text"] += piece
        out.append(
            self._event(
                "response.output_text.delta",
                item_id=self.text["id"],
                output_index=self.output.index(self.text),
                content_index=0,
                delta=piece,
                logprobs=[],
            )
        )
        return out

    def _call(self, piece: Mapping[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        index = piece.get("index", len(self.calls))
        function = piece.get("function") or {}
        item = self.calls.get(index)
        if item is None:
            out += self._close_text()
            out += self._close_call()
            item = call_item(
                f"fc_{self.base}_{len(self.calls)}",
                str(piece.get("id") or ""),
                str(function.get("name") or ""),
                "",
                status="in_progress",
            )
            self.calls[index] = item
            self.open_call = item
            out.append(self._added(item))
        elif function.get("name"):
            item["name"] += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            item["arguments"] += arguments
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=self.output.index(item),
                    delta=arguments,
                )
            )
        return out

    def _close_text(self) -> list[bytes]:
        item, self.text = self.text, None
        if item is None:
            return []
        index = self.output.index(item)
        part = item["content"][0]
        item["status"] = "completed"
        return [
            self._event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            ),
            self._event(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={"type": "output_text", "text": part["text"], "annotations": []},
            ),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    def _close_call(self) -> list[bytes]:
        item, self.open_call = self.open_call, None
        if item is None:
            return []
        index = self.output.index(item)
        item["status"] = "completed"
        return [
            self._event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            ),
            self._event("response.output_item.done", output_index=index, item=dict(item)),
        ]

    def _close_all(self) -> list[bytes]:
        return self._close_text() + self._close_call()
