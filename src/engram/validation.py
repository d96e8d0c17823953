"""Checks every message before anything is written.

A refused message raises :class:`~engram.errors.InvalidMessage` naming the
field that is wrong; nothing of the batch it belongs to is stored. The field
rules and limits live in :mod:`engram.checks` (one rule per field, the same
for every backend). Messages may come as keyword arguments, OpenAI-format
dicts, or straight from the OpenAI SDK (pydantic objects or their
``model_dump()``, with ``refusal``, ``annotations``, ``audio`` and ``None``
fields, and list content made of text parts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram.checks import (
    MAX_ARGUMENTS_BYTES,
    MAX_CONTENT_BYTES,
    MAX_ID_CHARS,
    MAX_JSON_DEPTH,
    MAX_METADATA_BYTES,
    MAX_TOOL_CALLS,
    NAME_PATTERN,
    id_field,
    json_value,
    text_field,
    timestamp,
)
from engram.errors import InvalidMessage
from engram.models import JSON, ROLES, NewMessage

__all__ = [
    "MAX_ARGUMENTS_BYTES",
    "MAX_CONTENT_BYTES",
    "MAX_ID_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_METADATA_BYTES",
    "MAX_TOOL_CALLS",
    "NAME_PATTERN",
    "build_message",
    "build_messages",
    "check_id",
    "check_tool_answers",
    "parse_timestamp",
]

#: Fields the OpenAI SDK adds to a message dump; kept in ``metadata["sdk"]`` when set.
SDK_FIELDS = frozenset({"refusal", "annotations", "audio", "function_call"})
#: Content-part types whose text is the message's text.
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def check_id(kind: str, value: object) -> str:
    """Validate a scope or session id: non-blank text, no NUL, at most 256 characters."""
    return id_field(f"{kind} id", value)


def parse_timestamp(value: object, *, what: str = "created_at") -> datetime:
    """Accept an aware or naive (taken as UTC) datetime, an ISO-8601 string or unix seconds."""
    return timestamp(value, field=what)


def plain(value: object) -> object:
    """An SDK object (pydantic model) as its plain dump; anything else unchanged."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        return dump()
    return value


def _arguments(where: str, value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return text_field(where, value, max_bytes=MAX_ARGUMENTS_BYTES)
    decoded = json_value(where, value, max_bytes=MAX_ARGUMENTS_BYTES)
    return json.dumps(decoded, ensure_ascii=False)


def _tool_call(index: int, call: object) -> tuple[JSON, int]:
    where = f"tool_calls[{index}]"
    call = plain(call)
    if not isinstance(call, Mapping):
        raise InvalidMessage(f"{where} must be an object")
    function = plain(call.get("function"))
    if not isinstance(function, Mapping):
        raise InvalidMessage(f"{where}.function must be an object with a name")
    kind = call.get("type", "function")
    arguments = _arguments(f"{where}.function.arguments", function.get("arguments"))
    built = {
        "id": id_field(f"{where}.id", call.get("id")),
        "type": id_field(f"{where}.type", "function" if kind is None else kind),
        "function": {
            "name": id_field(f"{where}.function.name", function.get("name")),
            "arguments": arguments,
        },
    }
    return built, len(arguments.encode("utf-8"))


def _tool_calls(value: object) -> list[JSON] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InvalidMessage("tool_calls must be a list of tool calls")
    items = list(value)
    if not items:
        return None
    if len(items) > MAX_TOOL_CALLS:
        raise InvalidMessage(
            f"tool_calls: {len(items)} in one message; the limit is {MAX_TOOL_CALLS}"
        )
    calls: list[JSON] = []
    total = 0
    for index, call in enumerate(items):
        built, size = _tool_call(index, call)
        total += size
        if total > MAX_ARGUMENTS_BYTES:
            raise InvalidMessage(
                f"tool_calls: arguments total more than {MAX_ARGUMENTS_BYTES} bytes"
            )
        calls.append(built)
    return calls


def _content(role: str, value: object, has_calls: bool) -> str:
    field = f"{role} message content"
    if value is None and has_calls:
        return ""
    if isinstance(value, list | tuple):
        value = _join_parts(field, value)
    text = text_field(field, value, max_bytes=MAX_CONTENT_BYTES)
    if (not text or text.isspace()) and not has_calls:  # blank; isspace() stops at a letter
        raise InvalidMessage(f"{field} is empty")
    return text


def _join_parts(field: str, parts: list[Any] | tuple[Any, ...]) -> str:
    """List content of text parts (OpenAI, Anthropic) as one text."""
    texts: list[str] = []
    for index, part in enumerate(parts):
        part = plain(part)
        where = f"{field}[{index}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise InvalidMessage(f"{where} must be a content part object")
        kind = part.get("type")
        if kind in TEXT_PARTS:
            texts.append(text_field(f"{where}.text", part.get("text"), max_bytes=MAX_CONTENT_BYTES))
        elif kind == "refusal":
            texts.append(
                text_field(f"{where}.refusal", part.get("refusal"), max_bytes=MAX_CONTENT_BYTES)
            )
        else:
            raise InvalidMessage(
                f"{where} is a {kind!r} part; Engram stores text parts "
                f"({', '.join(sorted(TEXT_PARTS))}, refusal)"
            )
    return "\n".join(texts)


def _name(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise InvalidMessage(
            f"name {shown} must be 1-64 letters, digits, '_' or '-' (OpenAI's rule)"
        )
    return value


def _metadata(value: object) -> JSON:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidMessage("metadata must be an object")
    copy: JSON = json_value("metadata", value, max_bytes=MAX_METADATA_BYTES)
    return copy


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
    """Validate one message and return it ready for the store.

    Raises:
        InvalidMessage: naming the field that is refused.

    """
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidMessage(f"role: unknown role {role!r:.40}; expected one of {sorted(ROLES)}")
    calls = _tool_calls(tool_calls)
    if calls is not None and role != "assistant":
        raise InvalidMessage(f"tool_calls: only assistant messages carry them, not {role!r}")
    text = _content(role, content, calls is not None)
    if role == "tool":
        call_id: str | None = id_field("tool_call_id", tool_call_id)
    elif tool_call_id is not None:
        raise InvalidMessage(f"tool_call_id: only tool messages carry one, not {role!r}")
    else:
        call_id = None
    stamp = timestamp(created_at) if created_at is not None else (now or datetime.now(UTC))
    return NewMessage(
        role=role,
        content=text,
        created_at=stamp,
        name=_name(name),
        tool_calls=calls,
        tool_call_id=call_id,
        metadata=_metadata(metadata),
    )


_MESSAGE_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "created_at", "metadata"}
)


def message_fields(item: object, index: int, *, ignore_unknown: bool = False) -> dict[str, Any]:
    """One batch item (dict, SDK object or its dump) as :func:`build_message` arguments.

    The OpenAI SDK's extra fields (``refusal``, ``annotations``, ``audio``,
    ``function_call``) are kept in ``metadata["sdk"]`` when they hold a value.
    Other unknown fields are refused unless ``ignore_unknown`` (an import
    line carries its own, such as ``session``).
    """
    item = plain(item)
    if not isinstance(item, Mapping):
        raise InvalidMessage(f"message #{index}: expected an object, got {type(item).__name__}")
    unknown = [key for key in item if key not in _MESSAGE_KEYS and key not in SDK_FIELDS]
    if unknown and not ignore_unknown:
        raise InvalidMessage(f"message #{index}: unknown field(s) {sorted(map(str, unknown))}")
    fields = {key: item.get(key) for key in _MESSAGE_KEYS}
    extras = {key: plain(item[key]) for key in SDK_FIELDS if item.get(key) not in (None, [], {})}
    if extras:
        metadata = fields["metadata"]
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidMessage(f"message #{index}: metadata must be an object")
        fields["metadata"] = {**(metadata or {}), "sdk": extras}
    return fields


def build_messages(items: Iterable[Any], *, now: datetime | None = None) -> list[NewMessage]:
    """Validate OpenAI-format messages (plus optional ``created_at``/``metadata``).

    Errors name the position of the bad item in the batch and its field.
    """
    out: list[NewMessage] = []
    for index, item in enumerate(items):
        fields = message_fields(item, index)
        try:
            out.append(build_message(fields.pop("role"), fields.pop("content"), now=now, **fields))
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
