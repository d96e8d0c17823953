"""Checks every message before anything is written.

A refused message raises :class:`~engram.errors.InvalidMessage` naming the
field that is wrong; nothing of the batch it belongs to is stored. The field
rules and limits live in :mod:`engram.intake.checks` (one rule per field, the same
for every backend). Messages may come as keyword arguments, OpenAI-format
dicts, or straight from the OpenAI SDK (pydantic objects or their
``model_dump()``, with ``refusal``, ``annotations``, ``audio`` and ``None``
fields), or from the Anthropic SDK. List content keeps its text as the
message's text; a list with an image is also kept whole in ``parts``
(:func:`engram.intake.checks.content_parts`). An Anthropic message with ``tool_use``
or ``tool_result`` blocks becomes the OpenAI messages that say the same
(:mod:`engram.intake.blocks`), so one batch item may give several messages.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from engram.errors import InvalidMessage
from engram.intake.blocks import has_tool_blocks, split_anthropic
from engram.intake.checks import (
    MAX_ARGUMENTS_BYTES,
    MAX_CONTENT_BYTES,
    MAX_ID_CHARS,
    MAX_JSON_DEPTH,
    MAX_METADATA_BYTES,
    MAX_TOOL_CALLS,
    NAME_PATTERN,
    content_parts,
    id_field,
    json_value,
    text_field,
    timestamp,
)
from engram.models import IDEMPOTENCY_RECORD, JSON, ROLES, NewMessage

__all__ = [
    "ANTHROPIC_FIELDS",
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
    "expand_blocks",
    "parse_timestamp",
]

#: Fields the OpenAI SDK adds to a message dump; kept in ``metadata["sdk"]`` when set.
SDK_FIELDS = frozenset({"refusal", "annotations", "audio", "function_call"})
#: Fields of an Anthropic SDK response (``Message``, ``"type": "message"``) beside role and
#: content; kept in ``metadata["sdk"]`` when set, so a response can be stored as it came.
ANTHROPIC_FIELDS = frozenset(
    {"id", "type", "model", "stop_reason", "stop_sequence", "stop_details", "usage"}
    | {"container", "diagnostics"}
)


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
        raise InvalidMessage(f"{where} must be an object", field=where)
    function = plain(call.get("function"))
    if not isinstance(function, Mapping):
        raise InvalidMessage(
            f"{where}.function must be an object with a name", field=f"{where}.function"
        )
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
        raise InvalidMessage("tool_calls must be a list of tool calls", field="tool_calls")
    items = list(value)
    if not items:
        return None
    if len(items) > MAX_TOOL_CALLS:
        raise InvalidMessage(
            f"tool_calls: {len(items)} in one message; the limit is {MAX_TOOL_CALLS}",
            field="tool_calls",
        )
    calls: list[JSON] = []
    total = 0
    for index, call in enumerate(items):
        built, size = _tool_call(index, call)
        total += size
        if total > MAX_ARGUMENTS_BYTES:
            raise InvalidMessage(
                f"tool_calls: arguments total more than {MAX_ARGUMENTS_BYTES} bytes",
                field="tool_calls",
            )
        calls.append(built)
    return calls


def _content(role: str, value: object, has_calls: bool) -> tuple[str, list[JSON] | None]:
    """The message's text, and its parts when the list content holds an image."""
    field = f"{role} message content"
    if value is None and has_calls:
        return "", None
    parts = None
    if isinstance(value, list | tuple):
        value, parts = content_parts(field, [plain(part) for part in value])
        if parts is not None and role != "user":
            raise InvalidMessage(
                f"{field}: images go in user messages (OpenAI's rule), not {role!r}",
                field="content",
            )
    text = text_field(field, value, max_bytes=MAX_CONTENT_BYTES)
    if (not text or text.isspace()) and not has_calls and parts is None:
        raise InvalidMessage(f"{field} is empty", field="content")  # isspace() stops at a letter
    return text, parts


def _name(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not NAME_PATTERN.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise InvalidMessage(
            f"name {shown} must be 1-64 letters, digits, '_' or '-' (OpenAI's rule)", field="name"
        )
    return value


def _metadata(value: object) -> JSON:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidMessage("metadata must be an object", field="metadata")
    if IDEMPOTENCY_RECORD in value:
        raise InvalidMessage(
            f"metadata.{IDEMPOTENCY_RECORD} is reserved for Engram's idempotency records; "
            "send a key as idempotency_key (the Idempotency-Key header over HTTP)",
            field=f"metadata.{IDEMPOTENCY_RECORD}",
        )
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
        raise InvalidMessage(
            f"role: unknown role {role!r:.40}; expected one of {sorted(ROLES)}", field="role"
        )
    calls = _tool_calls(tool_calls)
    if calls is not None and role != "assistant":
        raise InvalidMessage(
            f"tool_calls: only assistant messages carry them, not {role!r}", field="tool_calls"
        )
    text, parts = _content(role, content, calls is not None)
    if role == "tool":
        call_id: str | None = id_field("tool_call_id", tool_call_id)
    elif tool_call_id is not None:
        raise InvalidMessage(
            f"tool_call_id: only tool messages carry one, not {role!r}", field="tool_call_id"
        )
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
        parts=parts,
    )


_MESSAGE_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "created_at", "metadata"}
)


def message_fields(item: object, index: int, *, ignore_unknown: bool = False) -> dict[str, Any]:
    """One batch item (dict, SDK object or its dump) as :func:`build_message` arguments.

    The OpenAI SDK's extra fields (``refusal``, ``annotations``, ``audio``,
    ``function_call``), and those of an Anthropic response (``id``, ``model``,
    ``usage``...), are kept in ``metadata["sdk"]`` when they hold a value.
    ``parts`` (what :meth:`Message.to_dict` writes beside the text) is read
    as the content. Other unknown fields are refused unless
    ``ignore_unknown`` (an import line carries its own, such as ``session``).
    """
    item = plain(item)
    if not isinstance(item, Mapping):
        raise InvalidMessage(
            f"message #{index}: expected an object, got {type(item).__name__}",
            field=f"messages[{index}]",
        )
    known = SDK_FIELDS | ANTHROPIC_FIELDS if item.get("type") == "message" else SDK_FIELDS
    unknown = [key for key in item if key not in _MESSAGE_KEYS and key not in known | {"parts"}]
    if unknown and not ignore_unknown:
        raise InvalidMessage(
            f"message #{index}: unknown field(s) {sorted(map(str, unknown))}",
            field=f"messages[{index}].{unknown[0]!s}",
        )
    fields = {key: item.get(key) for key in _MESSAGE_KEYS}
    if item.get("parts") is not None:
        fields["content"] = item["parts"]
    extras = {key: plain(item[key]) for key in known if item.get(key) not in (None, [], {})}
    if extras:
        metadata = fields["metadata"]
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidMessage(
                f"message #{index}: metadata must be an object", field=f"messages[{index}].metadata"
            )
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
            for one in expand_blocks(fields):
                out.append(build_message(one.pop("role"), one.pop("content"), now=now, **one))
        except InvalidMessage as exc:
            field = _item_field(index, exc)
            raise InvalidMessage(f"message #{index}: {exc}", field=field) from None
    return out


def _item_field(index: int, exc: InvalidMessage) -> str:
    """The field of a batch item's error: ``messages[i]``, then the item's own field."""
    return f"messages[{index}]" + (f".{exc.field}" if exc.field else "")


def expand_blocks(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """One item's :func:`build_message` arguments, as several when it holds Anthropic tool blocks.

    SDK objects among the content's parts are read as their dumps first.
    """
    content = fields.get("content")
    if not isinstance(content, list | tuple):
        return [fields]
    fields = {**fields, "content": [plain(part) for part in content]}
    return split_anthropic(fields) if has_tool_blocks(fields["content"]) else [fields]


def check_tool_answers(batch: list[NewMessage], known_call_ids: set[str]) -> None:
    """Every tool message must answer a call made earlier (stored or earlier in the batch)."""
    seen = set(known_call_ids)
    for index, message in enumerate(batch):
        if message.tool_calls:
            seen.update(call["id"] for call in message.tool_calls)
        elif message.role == "tool" and message.tool_call_id not in seen:
            raise InvalidMessage(
                f"message #{index}: tool result for {message.tool_call_id!r} answers no earlier "
                "assistant tool call in this session",
                field=f"messages[{index}].tool_call_id",
            )
