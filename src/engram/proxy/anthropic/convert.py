"""Anthropic answers and chat completions, both ways.

Engram's turn works on chat completions. An Anthropic upstream's message is
read as one (:func:`chat_completion`): its text blocks are the text (joined
by the library's rule), its ``tool_use`` blocks the tool calls, and every
other block (``thinking``, ``redacted_thinking``...) is carried verbatim at
its place (:mod:`engram.proxy.verbatim`). Its ``stop_reason`` and
``stop_sequence`` ride along under :data:`ANTHROPIC_KEY`, and its usage keeps
Anthropic's counts (``cache_read_input_tokens`` too) beside chat's.

The turn's chat completion goes back to the client as an Anthropic message
(:func:`anthropic_message`): text, then the client's ``tool_use`` blocks,
with the kept blocks back in their places, and the turn's summed usage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from engram.context.shapes import tool_use_block
from engram.intake.parts import content_text, join_texts
from engram.models import JSON
from engram.proxy.verbatim import ANTHROPIC, VERBATIM_KEY, items_of, record, restore

#: Field of a chat completion (or chunk) carrying the upstream's own stop reason.
ANTHROPIC_KEY = "anthropic"
#: Anthropic stop reasons as chat finish reasons.
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
#: Chat finish reasons as Anthropic stop reasons.
STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
#: Anthropic's usage counts, summed over a turn's calls.
USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def chat_usage(usage: object) -> JSON:
    """Anthropic usage as chat usage, Anthropic's own counts kept beside."""
    counts = (
        {key: _count(usage.get(key)) for key in USAGE_KEYS} if isinstance(usage, Mapping) else {}
    )
    prompt = sum(counts.get(key, 0) for key in USAGE_KEYS if key != "output_tokens")
    completion = counts.get("output_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **counts,
    }


def anthropic_usage(usage: object) -> JSON:
    """A turn's summed usage in Anthropic's shape."""
    counts = usage if isinstance(usage, Mapping) else {}
    return {key: _count(counts.get(key)) for key in USAGE_KEYS}


def chat_completion(message: Mapping[str, Any]) -> JSON:
    """An Anthropic message as the chat completion a turn reads."""
    texts: list[str] = []
    calls: list[JSON] = []
    kept: list[tuple[int, JSON]] = []
    for at, block in enumerate(message.get("content") or ()):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(tool_call(block))
        elif isinstance(block, Mapping):
            kept.append((at, dict(block)))
    chat_message: JSON = {"role": "assistant", "content": join_texts(texts) or None}
    if calls:
        chat_message["tool_calls"] = calls
    kept_record = record(ANTHROPIC, kept)
    if kept_record is not None:
        chat_message[VERBATIM_KEY] = kept_record
    stop = message.get("stop_reason")
    return {
        "id": message.get("id"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.get("model"),
        "choices": [
            {"index": 0, "message": chat_message, "finish_reason": FINISH.get(str(stop), "stop")}
        ],
        "usage": chat_usage(message.get("usage")),
        ANTHROPIC_KEY: {"stop_reason": stop, "stop_sequence": message.get("stop_sequence")},
    }


def tool_call(block: Mapping[str, Any]) -> JSON:
    """A ``tool_use`` block as a chat tool call."""
    arguments = block.get("input")
    return {
        "id": str(block.get("id") or ""),
        "type": "function",
        "function": {
            "name": str(block.get("name") or ""),
            "arguments": json.dumps(arguments if arguments is not None else {}, ensure_ascii=False),
        },
    }


def stop_of(finish: object, upstream: object) -> tuple[str, str | None]:
    """The Anthropic stop reason (and sequence) of an answer that ended with ``finish``.

    The upstream's own reason wins when it says the same (``stop_sequence``,
    ``pause_turn``...); when Engram changed the ending (its own calls dropped
    at the round limit), the reason follows the answer the client gets.
    """
    mapped = STOP.get(str(finish), "end_turn")
    if isinstance(upstream, Mapping):
        reason = upstream.get("stop_reason")
        if isinstance(reason, str) and FINISH.get(reason, "stop") == (finish or "stop"):
            sequence = upstream.get("stop_sequence")
            return reason, sequence if isinstance(sequence, str) else None
    return mapped, None


def content_blocks(message: Mapping[str, Any]) -> list[JSON]:
    """An answer's Anthropic content: its text, its tool calls, the kept blocks in their places."""
    blocks: list[JSON] = []
    text = content_text(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    blocks += [tool_use_block(call) for call in message.get("tool_calls") or ()]
    return restore(blocks, items_of(message, ANTHROPIC))


def anthropic_message(completion: Mapping[str, Any]) -> JSON:
    """A turn's chat completion as the Anthropic message the client gets."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    stop, sequence = stop_of(choice.get("finish_reason"), completion.get(ANTHROPIC_KEY))
    return {
        "id": str(completion.get("id") or "msg_engram"),
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": content_blocks(message),
        "stop_reason": stop,
        "stop_sequence": sequence,
        "usage": anthropic_usage(completion.get("usage")),
    }


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
