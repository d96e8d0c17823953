"""Engram's answer as a Responses ``response`` object.

The turn answers in chat-completions form; this module says the same as a
``response``: its output items (:func:`~engram.proxy.responses.items.output_items`),
its status (``incomplete`` when the answer stopped at ``max_output_tokens``
or a content filter), its usage (``input_tokens``, ``output_tokens``, cached
and reasoning tokens) and the request's own settings echoed back, as OpenAI
does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from engram.models import JSON
from engram.proxy.responses.ids import item_base
from engram.proxy.responses.items import output_items
from engram.proxy.responses.request import ResponsesCall

#: Chat finish reasons that leave a response incomplete, and the reason it gives.
INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def status_of(finish_reason: object) -> tuple[str, JSON | None]:
    """A response's status and ``incomplete_details`` for a chat finish reason."""
    reason = INCOMPLETE.get(finish_reason) if isinstance(finish_reason, str) else None
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def usage_of(usage: object) -> JSON:
    """Chat-completions usage in the Responses shape."""
    counts = usage if isinstance(usage, Mapping) else {}
    prompt = _count(counts.get("prompt_tokens"))
    completion = _count(counts.get("completion_tokens"))
    prompt_details = counts.get("prompt_tokens_details")
    completion_details = counts.get("completion_tokens_details")
    cached = (
        _count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, Mapping) else 0
    )
    reasoning = (
        _count(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, Mapping)
        else 0
    )
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": _count(counts.get("total_tokens")) or prompt + completion,
    }


def response_object(
    call: ResponsesCall,
    response_id: str,
    *,
    model: str,
    output: list[JSON],
    status: str,
    usage: JSON | None,
    created_at: int | None = None,
    incomplete: JSON | None = None,
    error: JSON | None = None,
) -> JSON:
    """A ``response`` object: the answer's items, and the request's settings as sent."""
    body = call.body
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at if created_at is not None else int(time.time()),
        "status": status,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": call.previous_response_id,
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": call.store,
        "temperature": body.get("temperature"),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": list(body.get("tools") or []),
        "top_p": body.get("top_p"),
        "truncation": body.get("truncation") or "disabled",
        "usage": usage,
        "user": body.get("user"),
        "metadata": dict(body.get("metadata") or {}),
    }


def from_completion(call: ResponsesCall, response_id: str, completion: Mapping[str, Any]) -> JSON:
    """The response object of a turn's chat completion."""
    choice = (completion.get("choices") or [{}])[0]
    status, incomplete = status_of(choice.get("finish_reason"))
    created = completion.get("created")
    return response_object(
        call,
        response_id,
        model=str(completion.get("model") or call.chat.model),
        output=output_items(choice.get("message") or {}, item_base(response_id)),
        status=status,
        incomplete=incomplete,
        usage=usage_of(completion.get("usage")),
        created_at=created if isinstance(created, int) else None,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
