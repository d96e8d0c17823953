"""Field checks shared by every way in: one rule per field, before any backend.

Every string Engram stores passes :func:`text_field` (no NUL, no lone
surrogate, a byte limit) and every JSON value passes :func:`json_value` (plain
JSON types, string keys, finite numbers, bounded depth and size), so SQLite,
PostgreSQL, jsondir and the in-memory store accept and refuse exactly the same
input. Text that comes from a model is untrusted too: :func:`clean_text`
repairs it instead of refusing it (a turn must go on).

List content (:func:`content_parts`) keeps its text parts as the message's
text and, when a part is an image, the whole list in OpenAI's chat shape;
:func:`image_url` accepts ``http(s)`` URLs (never fetched) and base64 image
data URLs that decode.

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
from engram.intake.images import parse_data_url
from engram.intake.parts import TEXT_PARTS, join_texts
from engram.limits import MAX_ID
from engram.models import JSON

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
MAX_MESSAGE_ID = MAX_ID
#: OpenAI's rule for the ``name`` field of a message (matched whole).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")

_SURROGATES = re.compile("[\ud800-\udfff]")
#: A field path: ``content``, ``content[1].image_url.url``, ``metadata.tags[0]``.
_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[\w-]+|\[\d+\])*")


def _path(label: str) -> str | None:
    """The field an error label names, or None (the label is the error's first words).

    The last word: ``user message content[1].text`` names ``content[1].text``;
    ``scope id`` names ``scope``, ``message id`` names ``message_id``.
    """
    words = label.split()
    if len(words) > 1 and words[-1] == "id":
        words = [words[-2] if words[-2] in ("scope", "session") else f"{words[-2]}_id"]
    last = words[-1] if words else ""
    return last if _PATH.fullmatch(last) else None


def _utf8_size(field: str, text: str, error: type[EngramError]) -> int:
    if text.isascii():  # O(1) in CPython; ASCII text is its own UTF-8, and most text is
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise error(
            f"{field} is not valid unicode (lone surrogate at position {exc.start})",
            field=_path(field),
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
            raise error(
                f"{field} is not valid UTF-8 (byte {exc.start})", field=_path(field)
            ) from None
    if not isinstance(value, str):
        raise error(f"{field} must be a string, got {type(value).__name__}", field=_path(field))
    if "\x00" in value:
        raise error(f"{field} contains a NUL character", field=_path(field))
    size = _utf8_size(field, value, error)
    if size > max_bytes:
        raise error(f"{field} is {size} bytes; the limit is {max_bytes}", field=_path(field))
    return value


def id_field(field: str, value: object, *, error: type[EngramError] = InvalidMessage) -> str:
    """A scope, session, tool-call id or tool name: non-blank text of at most 256 characters."""
    if not isinstance(value, str) or not value.strip():
        raise error(f"{field} must be a non-empty string, got {_show(value)}", field=_path(field))
    if len(value) > MAX_ID_CHARS:
        raise error(
            f"{field} is {len(value)} characters; the limit is {MAX_ID_CHARS}", field=_path(field)
        )
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
        raise error(
            f"{field} is {size} bytes as JSON; the limit is {max_bytes}", field=_path(field)
        )
    return copy


def _plain(where: str, value: object, depth: int, limit: int, error: type[EngramError]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) >= 10**300:  # beyond every backend's number type
            raise error(f"{where} holds an integer too large to store", field=_path(where))
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(f"{where} holds a non-finite number ({value!r})", field=_path(where))
        return float(value)
    if isinstance(value, str):
        return text_field(where, value, max_bytes=MAX_CONTENT_BYTES, error=error)
    if depth >= limit:
        raise error(f"{where} is nested deeper than {limit} levels", field=_path(where))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise error(
                    f"{where} has a key that is not a string ({_show(key)})", field=_path(where)
                )
            text_field(f"a key of {where}", key, max_bytes=MAX_CONTENT_BYTES, error=error)
            out[key] = _plain(f"{where}.{key[:40]}", item, depth + 1, limit, error)
        return out
    if isinstance(value, list | tuple):
        return [
            _plain(f"{where}[{index}]", item, depth + 1, limit, error)
            for index, item in enumerate(value)
        ]
    raise error(f"{where} holds a {type(value).__name__}, which is not JSON", field=_path(where))


# --------------------------------------------------------------------------- content parts

#: Most content parts (text and images) in one message.
MAX_CONTENT_PARTS = 16
#: Largest image data URL (``data:image/...;base64,...``), in bytes: 5 MiB, a 3.75 MiB image.
MAX_IMAGE_DATA_URL_BYTES = 5 * 1_048_576
#: Longest remote (``http``/``https``) image URL, in characters.
MAX_IMAGE_URL_CHARS = 8_192
#: Largest total of one message's content parts (texts and image URLs), in bytes (8 MiB).
MAX_PARTS_BYTES = 8 * 1_048_576
#: OpenAI's ``detail`` values of an image part.
IMAGE_DETAILS = frozenset({"low", "high", "auto"})
#: Media types of image data URLs: the formats OpenAI's vision models read.
IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Image part types read: OpenAI chat (``image_url``), Responses (``input_image``), Anthropic.
IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})


def content_parts(field: str, parts: Sequence[Any]) -> tuple[str, list[JSON] | None]:
    """List content as ``(text, parts)``: the joined text, and the parts when one is an image.

    Text parts (and refusals) are joined into the text
    (:func:`engram.intake.parts.join_texts`). When a
    part is an image, ``parts`` is the whole list in OpenAI's chat shape: text
    parts as ``{"type": "text"}``, images as ``{"type": "image_url"}`` with
    their URL unchanged (Responses ``input_image`` parts and Anthropic
    ``image`` blocks are turned into that shape). Only text-only lists give
    ``parts`` None.

    Raises:
        InvalidMessage: naming the part and its field (``content[2].image_url.url``).

    """
    if len(parts) > MAX_CONTENT_PARTS:
        raise InvalidMessage(
            f"{field}: {len(parts)} parts; the limit is {MAX_CONTENT_PARTS}", field=_path(field)
        )
    texts: list[str] = []
    shaped: list[JSON] = []
    images = 0
    for index, part in enumerate(parts):
        where = f"{field}[{index}]"
        if isinstance(part, str):
            text = text_field(where, part, max_bytes=MAX_CONTENT_BYTES)
        elif not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise InvalidMessage(
                f"{where} must be a content part object with a type", field=_path(where)
            )
        elif part["type"] in IMAGE_PARTS:
            shaped.append(_image_part(where, part))
            images += 1
            continue
        else:
            text = _text_part(where, part)
        texts.append(text)
        shaped.append({"type": "text", "text": text})
    if not images:
        return join_texts(texts), None
    # Texts and URLs were checked one by one: their sizes add up without a JSON dump.
    size = sum(_utf8_size(field, text, InvalidMessage) for text in texts) + sum(
        _utf8_size(field, p["image_url"]["url"], InvalidMessage) for p in shaped if "image_url" in p
    )
    if size > MAX_PARTS_BYTES:
        raise InvalidMessage(
            f"{field} holds {size} bytes of text and image URLs; the limit is {MAX_PARTS_BYTES}",
            field=_path(field),
        )
    return join_texts(texts), shaped


def _text_part(where: str, part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind in TEXT_PARTS:
        return text_field(f"{where}.text", part.get("text"), max_bytes=MAX_CONTENT_BYTES)
    if kind == "refusal":
        return text_field(f"{where}.refusal", part.get("refusal"), max_bytes=MAX_CONTENT_BYTES)
    known = ", ".join(sorted(TEXT_PARTS | {"refusal", "image_url", "input_image", "image"}))
    raise InvalidMessage(
        f"{where}.type: {_show(kind)} parts are not stored; Engram keeps {known}",
        field=_path(f"{where}.type"),
    )


def _image_part(where: str, part: Mapping[str, Any]) -> JSON:
    """An image part, checked, in OpenAI's chat shape (``{"type": "image_url", ...}``)."""
    kind = part["type"]
    if kind == "image":  # Anthropic: {"source": {"type": "base64" | "url", ...}}
        url, detail = _anthropic_source(f"{where}.source", part.get("source")), None
    elif kind == "input_image":  # Responses: {"image_url": "...", "detail": ...}
        url, detail = image_url(f"{where}.image_url", part.get("image_url")), part.get("detail")
    else:
        image = part.get("image_url")
        if isinstance(image, str):  # a bare URL string, as some clients send
            image = {"url": image}
        if not isinstance(image, Mapping):
            raise InvalidMessage(
                f"{where}.image_url must be an object with a url", field=_path(f"{where}.image_url")
            )
        url, detail = image_url(f"{where}.image_url.url", image.get("url")), image.get("detail")
        where = f"{where}.image_url"
    body: JSON = {"url": url}
    if detail is not None:
        if not isinstance(detail, str) or detail not in IMAGE_DETAILS:
            raise InvalidMessage(
                f"{where}.detail: {_show(detail)}; expected one of {sorted(IMAGE_DETAILS)}",
                field=_path(f"{where}.detail"),
            )
        body["detail"] = detail
    return {"type": "image_url", "image_url": body}


def _anthropic_source(where: str, source: object) -> str:
    if not isinstance(source, Mapping):
        raise InvalidMessage(
            f"{where} must be an object (an Anthropic image block)", field=_path(where)
        )
    if source.get("type") == "url":
        return image_url(f"{where}.url", source.get("url"))
    if source.get("type") != "base64":
        raise InvalidMessage(
            f"{where}.type: {_show(source.get('type'))}; expected base64 or url",
            field=_path(f"{where}.type"),
        )
    media = source.get("media_type")
    data = source.get("data")
    if not isinstance(media, str) or not isinstance(data, str):
        raise InvalidMessage(f"{where} needs media_type and data strings", field=_path(where))
    return image_url(f"{where}.data", f"data:{media};base64,{data}")


def image_url(field: str, value: object) -> str:
    """An image URL: ``http(s)://...`` or a ``data:image/...;base64,`` URL that decodes.

    Remote URLs are at most ``MAX_IMAGE_URL_CHARS`` characters and are never
    fetched; data URLs at most ``MAX_IMAGE_DATA_URL_BYTES``, of a media type
    in ``IMAGE_MEDIA_TYPES``, with a payload that is valid base64.
    """
    if not isinstance(value, str) or not value:
        raise InvalidMessage(
            f"{field} must be a URL string, got {_show(value)}", field=_path(field)
        )
    lowered = value[:8].lower()
    if lowered.startswith(("http://", "https://")):
        if len(value) > MAX_IMAGE_URL_CHARS:
            raise InvalidMessage(
                f"{field} is {len(value)} characters; the limit is {MAX_IMAGE_URL_CHARS}",
                field=_path(field),
            )
        if any(ch.isspace() or ord(ch) < 32 for ch in value):
            raise InvalidMessage(f"{field} holds a blank or control character", field=_path(field))
        return value
    if not lowered.startswith("data:"):
        raise InvalidMessage(
            f"{field} must be an http(s) URL or a base64 data: URL", field=_path(field)
        )
    if len(value) > MAX_IMAGE_DATA_URL_BYTES:
        raise InvalidMessage(
            f"{field} is {len(value)} bytes; the limit is {MAX_IMAGE_DATA_URL_BYTES}",
            field=_path(field),
        )
    parsed = parse_data_url(value)
    if parsed is None:
        raise InvalidMessage(
            f"{field} is not a base64 data URL (data:image/png;base64,...)", field=_path(field)
        )
    if parsed.media_type not in IMAGE_MEDIA_TYPES:
        raise InvalidMessage(
            f"{field}: media type {_show(parsed.media_type)}; expected one of "
            f"{sorted(IMAGE_MEDIA_TYPES)}",
            field=_path(field),
        )
    try:
        parsed.decode()
    except ValueError as exc:
        raise InvalidMessage(f"{field}: the data is {exc}", field=_path(field)) from None
    return value


def message_id(field: str, value: object, *, error: type[EngramError] = InvalidQuery) -> int:
    """A message id: an integer from 1 to :data:`MAX_MESSAGE_ID` (what every backend holds)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{field} must be an integer, got {_show(value)}", field=_path(field))
    if not 1 <= value <= MAX_MESSAGE_ID:
        raise error(
            f"{field} must be between 1 and {MAX_MESSAGE_ID}, got {value}", field=_path(field)
        )
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
        raise error(f"{field} must be a datetime, ISO-8601 string or unix time", field=_path(field))
    elif isinstance(value, int | float):
        try:
            stamp = datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise error(
                f"{field} {value!r} is not a usable unix time", field=_path(field)
            ) from None
    elif isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise error(
                f"{field} {value[:40]!r} is not an ISO-8601 date-time", field=_path(field)
            ) from None
    else:
        raise error(f"{field} must be a datetime, ISO-8601 string or unix time", field=_path(field))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    try:
        return stamp.astimezone(UTC)
    except (OverflowError, ValueError):
        raise error(
            f"{field} {value!s} is outside the years 1-9999 in UTC", field=_path(field)
        ) from None


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
