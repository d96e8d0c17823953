"""A model's answer put back together: whole or streamed, checked, its JSON parsed.

Model output is untrusted input: text and tool calls are cleaned (NUL, lone
surrogates) and bounded like stored messages; JSON is parsed with a depth bound.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engram.errors import LLMBadResponse
from engram.intake.checks import MAX_ARGUMENTS_BYTES, MAX_ID_CHARS, clean_json, clean_text
from engram.models import JSON

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


@dataclass(slots=True)
class Reply:
    """What one answer said, however it arrived (whole or streamed)."""

    text: Any
    tool_calls: list[JSON]
    finish_reason: str | None
    model: Any
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None = None


def cached_tokens_of(usage: Any) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` of a chat completion, when reported."""
    details = getattr(usage, "prompt_tokens_details", None)
    value = getattr(details, "cached_tokens", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(slots=True)
class StreamedAnswer:
    """Chat-completion chunks put back together: text, tool calls by index, usage."""

    model: str
    pieces: list[str] = field(default_factory=list)
    calls: dict[int, JSON] = field(default_factory=dict)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    started: bool = False
    choices: bool = False

    def take(self, chunk: Any) -> str:
        """Fold one chunk in; return its new text ("" for none)."""
        self.started = True
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.prompt_tokens = usage.prompt_tokens
            self.completion_tokens = usage.completion_tokens
            self.cached_tokens = cached_tokens_of(usage)
        choices = getattr(chunk, "choices", None) or []
        if not isinstance(choices, list) or not choices:
            return ""
        self.choices = True
        choice = choices[0]
        self.finish_reason = choice.finish_reason or self.finish_reason
        delta = choice.delta
        for part in getattr(delta, "tool_calls", None) or []:
            call = self.calls.setdefault(
                part.index,
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
            )
            call["id"] = part.id or call["id"]
            if part.function is not None:
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
        piece = delta.content or ""
        if piece:
            self.pieces.append(piece)
        return piece

    def reply(self) -> Reply:
        """The whole answer."""
        return Reply(
            text="".join(self.pieces),
            tool_calls=[self.calls[index] for index in sorted(self.calls)],
            finish_reason=self.finish_reason,
            model=self.model,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens,
        )


def parse_json_object(text: str) -> JSON:
    """Parse a model's JSON answer, tolerating a Markdown code fence around it.

    Raises:
        LLMBadResponse: Empty, invalid or truncated JSON, or JSON that is not an object.

    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise LLMBadResponse("the model answered with empty text where JSON was expected")
    try:
        data = clean_json(json.loads(body))
    except json.JSONDecodeError as exc:
        raise LLMBadResponse(
            f"the model answered with invalid JSON ({exc}): {body[:120]!r}"
        ) from exc
    except (RecursionError, ValueError) as exc:
        raise LLMBadResponse(f"the model answered with unusable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise LLMBadResponse(f"the model answered with JSON {type(data).__name__}, not an object")
    return data


def clean_call(call: JSON) -> JSON:
    """A model's tool call with storable id, name and arguments (NUL and surrogates removed)."""
    function = call.get("function")
    if isinstance(function, dict):
        for key in ("name", "arguments"):
            if isinstance(function.get(key), str):
                function[key] = clean_text(function[key], max_bytes=MAX_ARGUMENTS_BYTES)
    if isinstance(call.get("id"), str):
        call["id"] = clean_text(call["id"], max_bytes=MAX_ID_CHARS)
    return call
