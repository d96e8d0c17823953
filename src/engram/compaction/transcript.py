"""Messages as plain text for summarizers, and sentence splitting shared by them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engram.intake.parts import content_text
from engram.models import JSON, Message

#: Characters of one message kept in a transcript (a giant tool result must not
#: crowd out the conversation).
MAX_MESSAGE_CHARS = 4000

MessageLike = Message | Mapping[str, Any]

# A sentence ends at . ! or ?, also when a closing quote or parenthesis follows it.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"\u201d\u2019)])\s+|\n+")
_URL = re.compile(r"https?://\S+", re.IGNORECASE)
#: A quotation on one line (Recorded: "A. B.") is one sentence: its stops are not split.
_QUOTED = re.compile(r"\"[^\"\n]{1,400}\"|\u201c[^\u201d\n]{1,400}\u201d")
_STOP = re.compile(r"(?<=[.!?])\s+")


def as_openai(message: MessageLike) -> JSON:
    """Return an OpenAI-format dict for a stored :class:`Message` or a plain mapping."""
    if isinstance(message, Message):
        return message.to_openai()
    return dict(message)


def text_of(message: Mapping[str, Any]) -> str:
    """Return the text content of an OpenAI-format message (multi-part content joined)."""
    return content_text(message.get("content") or "")


def tool_call_names(message: Mapping[str, Any]) -> list[str]:
    """Names of the functions an assistant message calls."""
    names = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            function = call.get("function")
            if isinstance(function, Mapping) and function.get("name"):
                names.append(str(function["name"]))
    return names


def message_id(message: MessageLike) -> int | None:
    """The stored id of a message (a :class:`Message`, or a mapping with an ``id``), if any."""
    value = message.id if isinstance(message, Message) else message.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def format_transcript(messages: Sequence[MessageLike], *, ids: bool = False) -> str:
    """One line per message, ``role: content``; tool calls and results are labelled.

    With ``ids``, a line of a message with a stored id starts with it: ``[#112] user: ...``.
    """
    lines = []
    for raw in messages:
        message = as_openai(raw)
        number = message_id(raw) if ids else None
        head = f"[#{number}] " if number is not None else ""
        role = str(message.get("role", "unknown"))
        text = text_of(message).strip()
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS] + " […]"
        if role == "tool":
            lines.append(f"{head}tool result: {text}")
            continue
        calls = message.get("tool_calls") or []
        if calls:
            shown = []
            for call in calls:
                function = call.get("function", {}) if isinstance(call, Mapping) else {}
                args = function.get("arguments", "")
                if not isinstance(args, str):
                    args = json.dumps(args, ensure_ascii=False)
                shown.append(f"{function.get('name', '?')}({args[:300]})")
            text = (text + " " if text else "") + "[called " + ", ".join(shown) + "]"
        name = message.get("name")
        label = f"{role} ({name})" if name else role
        lines.append(f"{head}{label}: {text}")
    return "\n".join(lines)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: URLs are not split at their dots, a one-line quotation stays whole."""
    protected = _URL.sub(lambda m: m.group(0).replace(".", "\x00"), text)
    protected = _QUOTED.sub(lambda m: _STOP.sub("\x01", m.group(0)), protected)
    parts = [
        p.replace("\x00", ".").replace("\x01", " ").strip() for p in _SENTENCE_END.split(protected)
    ]
    return [p for p in parts if p]
