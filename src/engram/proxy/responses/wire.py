"""The Responses API on the upstream's side (``engram serve --upstream-responses``).

When the upstream speaks the Responses API too, ``/v1/responses`` requests go
to it in that format, so what Engram keeps verbatim goes back as it came:
:class:`ResponsesRequest` builds each call's body from the client's own (its
``reasoning``, ``include``, ``text``... pass through) with Engram's prompt as
input items (:func:`input_items`: the kept ``reasoning`` and ``compaction``
items back at their places) and ``store: false`` (Engram holds the
conversation; ``reasoning.encrypted_content`` is asked for when the client
asks for reasoning, so it can be sent back). :func:`chat_completion` reads the
upstream's response as the chat completion the turn works on, its other
items kept verbatim.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram import tools
from engram.intake.parts import content_text, join_texts
from engram.models import JSON
from engram.proxy.request import ChatRequest
from engram.proxy.responses.output import INCOMPLETE
from engram.proxy.verbatim import RESPONSES, VERBATIM_KEY, record, record_items, restore

#: Body fields Engram sets itself in the upstream body.
REPLACED = frozenset(
    {
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "stream",
        "stream_options",
        "store",
        "previous_response_id",
        "conversation",
        "metadata",
        "background",
        "prompt",
    }
)
#: ``metadata`` keys that only tell Engram the session.
OURS = frozenset({"session_id", "scope"})
#: What makes an upstream that stores nothing send reasoning back in a form it takes again.
ENCRYPTED_REASONING = "reasoning.encrypted_content"
#: Engram's tools in the Responses form, by name.
ENGRAM_TOOLS: dict[str, JSON] = {s["name"]: s for s in tools.schemas("responses")}
#: Responses statuses' reasons as chat finish reasons.
FINISH = {reason: finish for finish, reason in INCOMPLETE.items()}


@dataclass(frozen=True, slots=True)
class ResponsesRequest(ChatRequest):
    """A Responses request whose upstream takes Responses bodies.

    Attributes:
        original_tools: The client's function tools as sent, by name.
    """

    original_tools: dict[str, JSON] = field(default_factory=dict)
    keeps: str | None = RESPONSES

    def upstream_body(
        self,
        messages: Sequence[JSON],
        offered: Sequence[JSON],
        *,
        turn_start: int | None = None,
        kept: Mapping[int, JSON] | None = None,
    ) -> JSON:
        """The Responses body of one upstream call: the client's, with Engram's input and tools."""
        body = self.body
        out: JSON = {key: value for key, value in body.items() if key not in REPLACED}
        metadata = body.get("metadata")
        if isinstance(metadata, Mapping):
            theirs = {key: value for key, value in metadata.items() if key not in OURS}
            if theirs:
                out["metadata"] = theirs
        out["input"] = input_items(messages, kept or {})
        out["store"] = False
        if body.get("reasoning") is not None:
            include = list(body.get("include") or [])
            out["include"] = (
                include if ENCRYPTED_REASONING in include else [*include, ENCRYPTED_REASONING]
            )
        names = [str((schema.get("function") or {}).get("name")) for schema in offered]
        if names:
            out["tools"] = [dict(self.original_tools.get(n) or ENGRAM_TOOLS[n]) for n in names]
            if body.get("tool_choice") is not None:
                out["tool_choice"] = body["tool_choice"]
        else:
            out.pop("parallel_tool_calls", None)
        if self.stream:
            out["stream"] = True
        return out


def upstream_request(body: Mapping[str, Any], chat: ChatRequest) -> ResponsesRequest:
    """The chat request of a Responses call, for an upstream that takes Responses bodies."""
    fields = {f.name: getattr(chat, f.name) for f in dataclasses.fields(ChatRequest)}
    fields.update(body=body, keeps=RESPONSES)  # the client's body: its settings go upstream
    theirs = {
        str(tool["name"]): dict(tool)
        for tool in body.get("tools") or ()
        if isinstance(tool, Mapping) and tool.get("type") == "function"
    }
    return ResponsesRequest(**fields, original_tools=theirs)


def input_items(messages: Sequence[Mapping[str, Any]], kept: Mapping[int, JSON]) -> list[JSON]:
    """A chat-format prompt as Responses input items, kept items back at their places."""
    out: list[JSON] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        items: list[JSON]
        if role == "tool":
            items = [
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id")),
                    "output": content_text(message.get("content")),
                }
            ]
        elif role == "assistant":
            items = _assistant(message)
        else:
            items = [{"type": "message", "role": role, "content": _parts(message.get("content"))}]
        out += restore(items, record_items(kept.get(index), RESPONSES))
    return out


def _assistant(message: Mapping[str, Any]) -> list[JSON]:
    items: list[JSON] = []
    text = content_text(message.get("content"))
    if text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        )
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id")),
                "name": str(function.get("name") or ""),
                "arguments": str(function.get("arguments") or ""),
            }
        )
    return items


def _parts(content: object) -> object:
    """Chat content as Responses content: text as it is, parts as input parts."""
    if not isinstance(content, list):
        return content_text(content)
    parts: list[JSON] = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "image_url":
            image = part.get("image_url") or {}
            shown: JSON = {"type": "input_image", "image_url": image.get("url")}
            if image.get("detail"):
                shown["detail"] = image["detail"]
            parts.append(shown)
        else:
            parts.append({"type": "input_text", "text": content_text([part])})
    return parts


def chat_completion(response: Mapping[str, Any]) -> JSON:
    """A Responses ``response`` as the chat completion a turn reads."""
    texts: list[str] = []
    calls: list[JSON] = []
    kept: list[tuple[int, JSON]] = []
    for at, item in enumerate(response.get("output") or ()):
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message":
            texts.append(content_text(item.get("content")))
        elif kind == "function_call":
            calls.append(
                {
                    "id": str(item.get("call_id")),
                    "type": "function",
                    "function": {
                        "name": str(item.get("name") or ""),
                        "arguments": str(item.get("arguments") or ""),
                    },
                }
            )
        elif isinstance(item, Mapping):
            kept.append((at, dict(item)))
    message: JSON = {"role": "assistant", "content": join_texts(t for t in texts if t) or None}
    if calls:
        message["tool_calls"] = calls
    kept_record = record(RESPONSES, kept)
    if kept_record is not None:
        message[VERBATIM_KEY] = kept_record
    return {
        "id": response.get("id"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": response.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_of(response, calls)}],
        "usage": chat_usage(response.get("usage")),
    }


def finish_of(response: Mapping[str, Any], calls: Sequence[object]) -> str:
    """The chat finish reason of a response: its incomplete reason, else calls or stop."""
    details = response.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    if response.get("status") == "incomplete" and reason in FINISH:
        return FINISH[reason]
    return "tool_calls" if calls else "stop"


def chat_usage(usage: object) -> JSON:
    """Responses usage in the chat shape."""
    counts = usage if isinstance(usage, Mapping) else {}
    prompt, completion = _count(counts.get("input_tokens")), _count(counts.get("output_tokens"))
    inputs, outputs = counts.get("input_tokens_details"), counts.get("output_tokens_details")
    cached = _count(inputs.get("cached_tokens")) if isinstance(inputs, Mapping) else 0
    reasoning = _count(outputs.get("reasoning_tokens")) if isinstance(outputs, Mapping) else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": _count(counts.get("total_tokens")) or prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
