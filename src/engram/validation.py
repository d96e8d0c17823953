"""Checks every message before anything is written.

A refused message raises :class:`~engram.errors.InvalidMessage` naming what is
wrong; nothing of the batch it belongs to is stored. Limits are module
constants so users and docs can quote them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram.errors import InvalidMessage
from engram.models import JSON, ROLES, NewMessage

#: Largest message content accepted, in UTF-8 bytes (1 MiB).
MAX_CONTENT_BYTES = 1_048_576
#: Largest metadata document, serialized as JSON, in bytes (64 KiB).
MAX_METADATA_BYTES = 65_536
#: Most tool calls in one assistant message.
MAX_TOOL_CALLS = 128
#: Longest scope or session id, in characters.
MAX_ID_CHARS = 256
#: OpenAI's rule for the ``name`` field of a message.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_id(kind: str, value: object) -> str:
    """Validate a scope or session id: a non-empty string, no NUL, at most 256 characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidMessage(f"{kind} id must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_CHARS:
        raise InvalidMessage(f"{kind} id is {len(value)} characters; the limit is {MAX_ID_CHARS}")
    if "\x00" in value:
        raise InvalidMessage(f"{kind} id contains a NUL byte")
    _check_utf8(f"{kind} id", value)
    return value


def _check_utf8(what: str, text: str) -> int:
    if text.isascii():  # O(1) in CPython; ASCII text is its own UTF-8, and most text is
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidMessage(
            f"{what} is not valid unicode (lone surrogate at position {exc.start})"
        ) from None


def _text(what: str, value: object) -> str:
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidMessage(f"{what} is not valid UTF-8 (byte {exc.start})") from None
    if not isinstance(value, str):
        raise InvalidMessage(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidMessage(f"{what} contains a NUL byte")
    return value


def parse_timestamp(value: object, *, what: str = "created_at") -> datetime:
    """Accept an aware or naive (taken as UTC) datetime, an ISO-8601 string or unix seconds."""
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, bool):
        raise InvalidMessage(f"{what} must be a datetime, ISO-8601 string or unix time")
    elif isinstance(value, int | float):
        try:
            stamp = datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidMessage(f"{what} {value!r} is not a usable unix time") from None
    elif isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidMessage(f"{what} {value!r} is not an ISO-8601 date-time") from None
    else:
        raise InvalidMessage(f"{what} must be a datetime, ISO-8601 string or unix time")
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.astimezone(UTC)


def _tool_calls(value: object) -> list[JSON] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise InvalidMessage("tool_calls must be a non-empty list")
    if len(value) > MAX_TOOL_CALLS:
        raise InvalidMessage(
            f"{len(value)} tool calls in one message; the limit is {MAX_TOOL_CALLS}"
        )
    calls: list[JSON] = []
    for index, call in enumerate(value):
        where = f"tool_calls[{index}]"
        if not isinstance(call, Mapping):
            raise InvalidMessage(f"{where} must be an object")
        call_id = call.get("id")
        function = call.get("function")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(f"{where}.id must be a non-empty string")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidMessage(f"{where}.function.name must be a string")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(
            {
                "id": call_id,
                "type": call.get("type", "function"),
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    return calls


def _metadata(value: object) -> JSON:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidMessage("metadata must be an object")
    try:
        encoded = json.dumps(dict(value), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"metadata is not JSON-serializable: {exc}") from None
    if len(encoded.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
        raise InvalidMessage(f"metadata is larger than {MAX_METADATA_BYTES} bytes")
    _check_utf8("metadata", encoded)
    loaded: JSON = json.loads(encoded)  # a private, plain-JSON copy
    return loaded


def build_message(
    role: object,
    content: object,
    *,
    name: object = None,
    tool_calls: object = None,
    tool_call_id: object = None,
    created_at: object = None,
    metadata: object = None,
    now: datetime | None = None,
) -> NewMessage:
    """Validate one message and return it ready for the store."""
    if role not in ROLES:
        raise InvalidMessage(f"unknown role {role!r}; expected one of {sorted(ROLES)}")
    assert isinstance(role, str)
    calls = _tool_calls(tool_calls)
    if calls is not None and role != "assistant":
        raise InvalidMessage(f"only assistant messages carry tool_calls, not {role!r}")
    text = "" if content is None and calls else _text(f"{role} message content", content)
    size = _check_utf8(f"{role} message content", text)
    if size > MAX_CONTENT_BYTES:
        raise InvalidMessage(
            f"{role} message content is {size} bytes; the limit is {MAX_CONTENT_BYTES}"
        )
    if (not text or text.isspace()) and not calls:  # blank; isspace() stops at a letter
        raise InvalidMessage(f"{role} message content is empty")
    if name is not None:
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise InvalidMessage(
                f"name {name!r} must be 1-64 letters, digits, '_' or '-' (OpenAI's rule)"
            )
    if role == "tool":
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidMessage("a tool message needs the tool_call_id of the call it answers")
    elif tool_call_id is not None:
        raise InvalidMessage(f"only tool messages carry tool_call_id, not {role!r}")
    stamp = parse_timestamp(created_at) if created_at is not None else (now or datetime.now(UTC))
    return NewMessage(
        role=role,
        content=text,
        created_at=stamp,
        name=name,
        tool_calls=calls,
        tool_call_id=tool_call_id if role == "tool" else None,
        metadata=_metadata(metadata),
    )


_MESSAGE_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "created_at", "metadata"}
)


def build_messages(
    items: Iterable[Mapping[str, Any]], *, now: datetime | None = None
) -> list[NewMessage]:
    """Validate OpenAI-format dicts (plus optional ``created_at``/``metadata``).

    Errors name the position of the bad item in the batch.
    """
    out: list[NewMessage] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidMessage(f"message #{index}: expected an object, got {type(item).__name__}")
        unknown = set(item) - _MESSAGE_KEYS
        if unknown:
            raise InvalidMessage(f"message #{index}: unknown field(s) {sorted(unknown)}")
        try:
            out.append(
                build_message(
                    item.get("role"),
                    item.get("content"),
                    name=item.get("name"),
                    tool_calls=item.get("tool_calls"),
                    tool_call_id=item.get("tool_call_id"),
                    created_at=item.get("created_at"),
                    metadata=item.get("metadata"),
                    now=now,
                )
            )
        except InvalidMessage as exc:
            raise InvalidMessage(f"message #{index}: {exc}") from None
    return out


def check_tool_answers(batch: list[NewMessage], known_call_ids: set[str]) -> None:
    """Every tool message must answer a call made earlier (stored or earlier in the batch)."""
    seen = set(known_call_ids)
    for index, message in enumerate(batch):
        if message.tool_calls:
            seen.update(call["id"] for call in message.tool_calls)
        elif message.role == "tool" and message.tool_call_id not in seen:
            raise InvalidMessage(
                f"message #{index}: tool result for {message.tool_call_id!r} answers no earlier "
                "assistant tool call in this session"
            )
