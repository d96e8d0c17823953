"""Checks a backend makes on an append batch before writing anything.

The engine validates messages on the way in (:mod:`engram.intake.validation`); the
store checks again what it relies on, so a direct caller of the Store cannot
write a row that would break a reader: unknown roles, negative or non-integer
token counts, tool calls or metadata that are not JSON, text that is not valid
Unicode or holds NUL (PostgreSQL text cannot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.errors import ConfigError, InvalidMessage
from engram.intake.checks import json_value as checked_json
from engram.models import ROLES, NewMessage

#: Sizes are the engine's concern; the store only refuses what it cannot hold.
_NO_SIZE_LIMIT = 1 << 62
#: Stored documents (states) nest deeper than messages may; still bounded.
_DEEP = 200


def _text(index: int, what: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise InvalidMessage(f"message {index} {what} must be text, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidMessage(f"message {index} {what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(
            f"message {index} {what} is not valid Unicode (lone surrogate at {exc.start})"
        ) from None


def _json(index: int, what: str, value: Any) -> None:
    # The engine's own rule (engram.intake.checks): the same refusals on every backend.
    checked_json(f"message {index} {what}", value, max_bytes=_NO_SIZE_LIMIT)


def check_batch(messages: Sequence[NewMessage], tokens: Sequence[int]) -> None:
    """Raise InvalidMessage, naming the message and field, if any of the batch cannot be stored."""
    if len(messages) != len(tokens):
        raise InvalidMessage(f"append got {len(messages)} messages but {len(tokens)} token counts")
    for index, (message, count) in enumerate(zip(messages, tokens, strict=True)):
        if message.role not in ROLES:
            raise InvalidMessage(
                f"message {index} has role {message.role!r}; expected one of {sorted(ROLES)}"
            )
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidMessage(f"message {index} has token count {count!r}; expected an int >= 0")
        _text(index, "content", message.content)
        _text(index, "name", message.name, optional=True)
        _text(index, "tool_call_id", message.tool_call_id, optional=True)
        if message.tool_calls is not None:
            if not isinstance(message.tool_calls, list):
                raise InvalidMessage(f"message {index} tool_calls must be a list")
            _json(index, "tool_calls", message.tool_calls)
        if message.parts is not None:
            if not isinstance(message.parts, list):
                raise InvalidMessage(f"message {index} parts must be a list")
            _json(index, "parts", message.parts)
        if message.metadata is not None and not isinstance(message.metadata, dict):
            raise InvalidMessage(f"message {index} metadata must be an object")
        _json(index, "metadata", message.metadata or {})


def json_value(value: Any, what: str) -> Any:
    """``value`` as plain JSON data (a deep copy), or ConfigError naming ``what``."""
    return checked_json(what, value, max_bytes=_NO_SIZE_LIMIT, max_depth=_DEEP, error=ConfigError)
