"""Shared parts of the importers: batches, import keys, message checks, timestamps."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from engram.errors import ImportFormatError, InvalidMessage
from engram.intake.validation import build_message, check_id, message_fields
from engram.models import JSON, ROLES, NewMessage

Format = Literal["auto", "jsonl", "finetune", "chatgpt"]

#: Formats :func:`read_import` accepts (``auto`` looks at the content).
FORMATS: tuple[str, ...] = ("auto", "jsonl", "finetune", "chatgpt", "document")

#: What each format looks like, for errors about a file that is none of them.
EXPECTED = (
    "expected JSONL (one OpenAI message object per line), fine-tuning JSONL (one "
    '{"messages": [...]} object per line), a ChatGPT conversations.json (a JSON list of '
    'conversations), or Engram session documents (objects with "recent_history")'
)


#: Metadata key holding a message's import key (see :func:`import_key`).
IMPORT_KEY = "import_key"

#: Largest import file read into memory, in bytes (ChatGPT exports are one JSON document).
MAX_FILE_BYTES = 2 * 1024**3

# Unix timestamps beyond this are almost surely milliseconds or garbage (year 2286+).
_MAX_UNIX_SECONDS = 10_000_000_000


#: Makes the error for one line of a file from its reason.
LineError = Callable[[str], ImportFormatError]


@dataclass(slots=True)
class ImportBatch:
    """The messages of one session, in order, as OpenAI dicts ready for ``Session.add_many``.

    Each dict may carry ``created_at`` (an aware UTC ``datetime``) and ``metadata``.
    """

    session: str
    messages: list[JSON] = field(default_factory=list)
    title: str | None = None


def keyed(message: JSON, ident: str | int | None, position: int) -> JSON:
    """``message`` with its import key in the metadata (see :func:`import_key`).

    A key the message already carries (an Engram export of imported messages) is kept.
    """
    given = (message.get("metadata") or {}).get(IMPORT_KEY)
    key = given if isinstance(given, str) else import_key(message, ident=ident, position=position)
    return {**message, "metadata": {**(message.get("metadata") or {}), IMPORT_KEY: key}}


def import_key(message: JSON, *, ident: str | int | None = None, position: int = 0) -> str:
    """The stable key that makes importing the same file twice add nothing the second time.

    A ChatGPT node id, else the line's own ``id``, else a hash of role, content,
    timestamp and position in the session.
    """
    meta = message.get("metadata") or {}
    if meta.get("source") == "chatgpt" and isinstance(meta.get("node"), str):
        return f"chatgpt:{meta['node']}"
    if ident is not None:
        return f"id:{ident}"
    when = message.get("created_at")
    basis = json.dumps(
        [message.get("role"), message.get("content"), str(when) if when else None, position],
        ensure_ascii=True,
    )
    return "hash:" + hashlib.sha256(basis.encode()).hexdigest()[:32]


def json_lines(data: bytes, file: str) -> Iterator[tuple[int, Any, LineError]]:
    """Each non-blank line of JSONL ``data``: its number, its JSON value, an error naming it.

    Raises:
        ImportFormatError: a line is not UTF-8 or not JSON.

    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        fail: LineError = functools.partial(_line_error, file, number)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise fail(f"invalid UTF-8 at byte {exc.start}") from exc
        yield number, json_line(text, fail), fail


def _line_error(file: str, line: int, message: str) -> ImportFormatError:
    return ImportFormatError(message, file=file, line=line)


def json_line(text: str, fail: Any) -> Any:
    """One line's JSON value; malformed, too deep or too large numbers name the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError:
        raise fail("JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise fail(f"invalid JSON: {exc}") from None


def check_session_id(session: str, fail: Any) -> None:
    """Raise ``fail(reason)`` when ``session`` is not a usable session id."""
    try:
        check_id("session", session)
    except InvalidMessage as exc:
        raise fail(str(exc)) from None


def message_from_openai(obj: Mapping[str, Any], seen_calls: set[str]) -> JSON:
    """One validated message dict; raises ValueError with a readable reason.

    The engine's own checks (:func:`engram.intake.validation.build_message`) run here,
    so a file that parses cannot be refused later, halfway through the writes.
    """
    role = obj.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ValueError(f"unknown role {role!r}; expected one of {sorted(ROLES)}")
    if "content" not in obj:
        raise ValueError("message has no content")
    try:
        created = parse_timestamp(obj["created_at"]) if obj.get("created_at") is not None else None
        # The same reading as Session.add_many: SDK dumps, text parts, extra SDK fields.
        fields = message_fields(obj, 0, ignore_unknown=True)
        fields.update(created_at=created)
        built = build_message(fields.pop("role"), fields.pop("content"), **fields)
    except InvalidMessage as exc:
        raise ValueError(str(exc)) from None
    if built.role == "tool" and built.tool_call_id not in seen_calls:
        raise ValueError(
            f"tool message answers call {built.tool_call_id!r}, but no earlier assistant "
            "message in this session made that call"
        )
    if built.tool_calls:
        seen_calls.update(call["id"] for call in built.tool_calls)
    return as_dict(built, keep_time=created is not None)


def as_dict(message: NewMessage, *, keep_time: bool) -> JSON:
    """A checked message as the dict a batch holds (the time only if the file gave one)."""
    out = message.to_openai()
    if keep_time:  # otherwise the engine stamps the time of the write
        out["created_at"] = message.created_at
    if message.metadata:
        out["metadata"] = message.metadata
    return out


def parse_timestamp(value: Any) -> datetime:
    """Read ISO 8601 text or Unix seconds as an aware UTC datetime; naive times are UTC.

    Raises:
        ValueError: the value is not a readable, plausible timestamp.

    """
    if isinstance(value, bool):
        raise ValueError(f"bad timestamp {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 <= value < _MAX_UNIX_SECONDS:
            raise ValueError(f"bad timestamp {value!r}: not Unix seconds")
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"bad timestamp {value!r}: not ISO 8601") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"bad timestamp {value!r}: outside the years 1-9999 in UTC") from None
    raise ValueError(f"bad timestamp {value!r}")


def is_storable(text: str) -> bool:
    """True when ``text`` has no NUL and no lone surrogate (both unstorable)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return False
    return True
