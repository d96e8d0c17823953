"""Field checks shared by every way in: one rule per field, before any backend.

Every string Engram stores passes :func:`text_field` (no NUL, no lone
surrogate, a byte limit) and every JSON value passes :func:`json_value` (plain
JSON types, string keys, finite numbers, bounded depth and size), so SQLite,
PostgreSQL, jsondir and the in-memory store accept and refuse exactly the same
input. Text that comes from a model is untrusted too: :func:`clean_text`
repairs it instead of refusing it (a turn must go on).

The limits are module constants so users, docs and errors quote the same
numbers (README, "Limits").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from engram.errors import EngramError, InvalidMessage, InvalidQuery

#: Largest message content accepted, in UTF-8 bytes (1 MiB).
MAX_CONTENT_BYTES = 1_048_576
#: Largest total of the tool-call arguments of one message, in UTF-8 bytes (1 MiB).
MAX_ARGUMENTS_BYTES = 1_048_576
#: Largest metadata document, serialized as JSON, in bytes (64 KiB).
MAX_METADATA_BYTES = 65_536
#: Deepest nesting of lists and objects in metadata or tool-call arguments.
MAX_JSON_DEPTH = 32
#: Most tool calls in one assistant message.
MAX_TOOL_CALLS = 128
#: Longest scope id, session id, tool-call id or tool name, in characters.
MAX_ID_CHARS = 256
#: Largest message id (ids are signed 64-bit integers in every backend).
MAX_MESSAGE_ID = 2**63 - 1
#: OpenAI's rule for the ``name`` field of a message (matched whole).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

_SURROGATES = re.compile("[\ud800-\udfff]")


def _utf8_size(field: str, text: str, error: type[EngramError]) -> int:
    if text.isascii():  # O(1) in CPython; ASCII text is its own UTF-8, and most text is
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise error(
            f"{field} is not valid unicode (lone surrogate at position {exc.start})"
        ) from None


def text_field(
    field: str,
    value: object,
    *,
    max_bytes: int,
    error: type[EngramError] = InvalidMessage,
) -> str:
    """``value`` as stored text, or ``error`` naming ``field``.

    Accepts ``str`` (and UTF-8 ``bytes``); refuses other types, NUL characters
    (PostgreSQL text cannot hold them), lone surrogates (not encodable as
    UTF-8) and text over ``max_bytes`` UTF-8 bytes.
    """
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{field} is not valid UTF-8 (byte {exc.start})") from None
    if not isinstance(value, str):
        raise error(f"{field} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise error(f"{field} contains a NUL character")
    size = _utf8_size(field, value, error)
    if size > max_bytes:
        raise error(f"{field} is {size} bytes; the limit is {max_bytes}")
    return value


def id_field(field: str, value: object, *, error: type[EngramError] = InvalidMessage) -> str:
    """A scope, session, tool-call id or tool name: non-blank text of at most 256 characters."""
    if not isinstance(value, str) or not value.strip():
        raise error(f"{field} must be a non-empty string, got {_show(value)}")
    if len(value) > MAX_ID_CHARS:
        raise error(f"{field} is {len(value)} characters; the limit is {MAX_ID_CHARS}")
    return text_field(field, value, max_bytes=4 * MAX_ID_CHARS, error=error)


def json_value(
    field: str,
    value: object,
    *,
    max_bytes: int,
    max_depth: int = MAX_JSON_DEPTH,
    error: type[EngramError] = InvalidMessage,
) -> Any:
    """A private plain-JSON copy of ``value``, or ``error`` naming ``field`` and the path.

    Objects need string keys; numbers must be finite; strings follow
    :func:`text_field`; nesting stops at ``max_depth``; the JSON text is at
    most ``max_bytes``.
    """
    copy = _plain(field, value, 0, max_depth, error)
    text = json.dumps(copy, ensure_ascii=False, separators=(",", ":"))
    size = _utf8_size(field, text, error)
    if size > max_bytes:
        raise error(f"{field} is {size} bytes as JSON; the limit is {max_bytes}")
    return copy


def _plain(where: str, value: object, depth: int, limit: int, error: type[EngramError]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) >= 10**300:  # beyond every backend's number type
            raise error(f"{where} holds an integer too large to store")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(f"{where} holds a non-finite number ({value!r})")
        return float(value)
    if isinstance(value, str):
        return text_field(where, value, max_bytes=MAX_CONTENT_BYTES, error=error)
    if depth >= limit:
        raise error(f"{where} is nested deeper than {limit} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise error(f"{where} has a key that is not a string ({_show(key)})")
            text_field(f"{where} key", key, max_bytes=MAX_CONTENT_BYTES, error=error)
            out[key] = _plain(f"{where}.{key[:40]}", item, depth + 1, limit, error)
        return out
    if isinstance(value, list | tuple):
        return [
            _plain(f"{where}[{index}]", item, depth + 1, limit, error)
            for index, item in enumerate(value)
        ]
    raise error(f"{where} holds a {type(value).__name__}, which is not JSON")


def message_id(field: str, value: object, *, error: type[EngramError] = InvalidQuery) -> int:
    """A message id: an integer from 1 to 2**63 - 1 (what every backend can hold)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{field} must be an integer, got {_show(value)}")
    if not 1 <= value <= MAX_MESSAGE_ID:
        raise error(f"{field} must be between 1 and {MAX_MESSAGE_ID}, got {value}")
    return value


def optional_message_id(field: str, value: object) -> int | None:
    """:func:`message_id`, or None when ``value`` is None."""
    return None if value is None else message_id(field, value)


def timestamp(
    value: object, *, field: str = "created_at", error: type[EngramError] = InvalidMessage
) -> datetime:
    """An aware UTC datetime from a datetime (naive = UTC), ISO-8601 text or unix seconds."""
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, bool):
        raise error(f"{field} must be a datetime, ISO-8601 string or unix time")
    elif isinstance(value, int | float):
        try:
            stamp = datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise error(f"{field} {value!r} is not a usable unix time") from None
    elif isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise error(f"{field} {value[:40]!r} is not an ISO-8601 date-time") from None
    else:
        raise error(f"{field} must be a datetime, ISO-8601 string or unix time")
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    try:
        return stamp.astimezone(UTC)
    except (OverflowError, ValueError):
        raise error(f"{field} {value!s} is outside the years 1-9999 in UTC") from None


def optional_timestamp(field: str, value: object) -> datetime | None:
    """A query bound: None, or :func:`timestamp` raising InvalidQuery."""
    return None if value is None else timestamp(value, field=field, error=InvalidQuery)


def roles_filter(value: object, known: frozenset[str]) -> list[str] | None:
    """A ``roles`` argument: None or a sequence of known role names."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidQuery(f"roles must be a list of role names, got {_show(value)}")
    roles = list(value)
    for role in roles:
        if not isinstance(role, str) or role not in known:
            raise InvalidQuery(f"roles: unknown role {_show(role)}; expected {sorted(known)}")
    return roles


def clean_text(value: object, *, max_bytes: int = MAX_CONTENT_BYTES) -> str:
    """Model text made storable: NUL removed, lone surrogates replaced, cut to ``max_bytes``.

    The cut falls on a character boundary (UTF-8 of at most ``max_bytes``).
    """
    text = value if isinstance(value, str) else "" if value is None else str(value)
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii() and _SURROGATES.search(text):
        text = _SURROGATES.sub("\ufffd", text)
    if len(text) > max_bytes // 4:  # only long text can be over; most is not
        encoded = text.encode("utf-8")
        if len(encoded) > max_bytes:
            text = encoded[:max_bytes].decode("utf-8", errors="ignore")
    return text


def clean_json(value: Any, *, max_depth: int = MAX_JSON_DEPTH, depth: int = 0) -> Any:
    """A copy of parsed model JSON with every string (and key) cleaned by :func:`clean_text`.

    Raises:
        ValueError: the value nests deeper than ``max_depth`` lists and objects.

    """
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict | list):
        if depth >= max_depth:
            raise ValueError(f"JSON nested deeper than {max_depth} levels")
        if isinstance(value, dict):
            return {
                clean_text(key): clean_json(item, max_depth=max_depth, depth=depth + 1)
                for key, item in value.items()
            }
        return [clean_json(item, max_depth=max_depth, depth=depth + 1) for item in value]
    return value


def is_clean(text: str) -> bool:
    """True when ``text`` holds no NUL and no lone surrogate."""
    return "\x00" not in text and (text.isascii() or not _SURROGATES.search(text))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
