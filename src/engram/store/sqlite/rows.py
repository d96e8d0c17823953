"""Rows of the SQLite backend to and from Engram's values: columns, timestamps, JSON.

Kept apart from :mod:`engram.store.sqlite.backend` and its helpers (connections, queries)
so the decoding rules live in one place. Timestamps are fixed-width ISO-8601 UTC
text; JSON columns hold NULL for "nothing" so readers skip decoding.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from engram.errors import ConfigError, CorruptedData, InvalidMessage
from engram.models import JSON, ROLES, MemoryRecord, Message, NewMessage, SessionInfo
from engram.store.common import now, utc

# Compact, exact JSON; NaN/Infinity refused because no other backend can store them.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
parse_ts = datetime.fromisoformat

MSG_COLUMNS = (
    "m.id, m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.created_at,"
    " m.metadata, m.tokens, m.parts"
)
#: Columns of ``MSG_COLUMNS``: what a query selects after them starts at this index.
MSG_WIDTH = 10
# The history reads (tail, page) fetch the five rarely set columns as one value: NULL
# for a plain message, else a JSON array of them. Each column costs the sqlite3
# module a conversion per row, and these reads return hundreds of rows per context.
MSG_HOT_COLUMNS = (
    "m.id, m.role, m.content, m.tokens, m.created_at,"
    " CASE WHEN m.name IS NULL AND m.tool_calls IS NULL AND m.tool_call_id IS NULL"
    " AND m.metadata IS NULL AND m.parts IS NULL THEN NULL"
    " ELSE json_array(m.name, json(m.tool_calls), m.tool_call_id, json(m.metadata),"
    " json(m.parts)) END"
)
SESSION_COLUMNS = (
    "c.name, s.external_id, s.created_at, s.updated_at, s.message_count, s.token_count,"
    " s.policy, s.first_message_at, s.last_message_at"
)
MEMORY_COLUMNS = "id, content, created_at, updated_at, source_session, metadata"


def ts(value: datetime) -> str:
    """Fixed-width UTC text for ``value`` (naive means UTC); sorts like the instants."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    elif value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(timespec="microseconds")


def json_dict(text: str | None, what: str) -> JSON:
    """Decode a JSON object column (NULL or empty: ``{}``); CorruptedData names ``what``."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CorruptedData(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CorruptedData(f"{what} is not a JSON object")
    return value


def dump(value: Any, what: str, error: type[Exception] = ConfigError) -> str:
    """Compact JSON text of ``value``; ``error`` (naming ``what``) when it is not JSON."""
    try:
        return _encode(value)
    except (TypeError, ValueError) as exc:
        raise error(f"{what} cannot be stored as JSON: {exc}") from exc


def message_row(index: int, m: NewMessage, tokens: int) -> tuple[Any, ...]:
    """The column values of new message ``index`` (after ``session_id``), checked.

    Raises:
        InvalidMessage: unknown role, content that is not text, or a bad token count.
    """
    if m.role not in ROLES:
        raise InvalidMessage(
            f"message {index} has role {m.role!r}; expected one of {sorted(ROLES)}"
        )
    if not isinstance(m.content, str):
        raise InvalidMessage(
            f"message {index} content must be text, not {type(m.content).__name__}"
        )
    if not isinstance(tokens, int) or tokens < 0:
        raise InvalidMessage(f"message {index} has token count {tokens!r}; expected an int >= 0")
    return (
        ts(m.created_at),
        m.role,
        m.content,
        m.name,
        None if m.tool_calls is None else dump(m.tool_calls, "tool_calls", InvalidMessage),
        m.tool_call_id,
        dump(m.metadata, "metadata", InvalidMessage) if m.metadata else None,
        None if m.parts is None else dump(m.parts, "parts", InvalidMessage),
        tokens,
    )


def message(scope: str, session: str, row: Sequence[Any]) -> Message:
    """A message from a row whose first ``MSG_WIDTH`` columns are ``MSG_COLUMNS``."""
    mid, role, content, name, tool_calls, tool_call_id, created_at, metadata, tokens, parts = row[
        :MSG_WIDTH
    ]
    return Message(
        mid,
        scope,
        session,
        role,
        content,
        parse_ts(created_at),
        tokens,
        name,
        json.loads(tool_calls) if tool_calls is not None else None,
        tool_call_id,
        json.loads(metadata) if metadata else {},
        json.loads(parts) if parts is not None else None,
    )


def messages(scope: str, session: str, rows: Sequence[Sequence[Any]]) -> list[Message]:
    """Messages of one session from ``MSG_HOT_COLUMNS`` rows: the context builder's hot path."""
    parse, make = parse_ts, Message
    return [
        make(mid, scope, session, role, content, parse(created_at), tokens, None, None, None, {})
        if extra is None
        else _message_extra(scope, session, mid, role, content, tokens, created_at, extra)
        for mid, role, content, tokens, created_at, extra in rows
    ]


def _message_extra(
    scope: str,
    session: str,
    mid: int,
    role: str,
    content: str,
    tokens: int,
    created_at: str,
    extra: str,
) -> Message:
    try:
        name, tool_calls, tool_call_id, metadata, parts = json.loads(extra)
    except ValueError as exc:
        raise CorruptedData(f"message {mid} has unreadable fields: {exc}") from exc
    return Message(
        mid,
        scope,
        session,
        role,
        content,
        parse_ts(created_at),
        tokens,
        name,
        tool_calls,
        tool_call_id,
        metadata if metadata is not None else {},
        parts,
    )


def session_info(row: Sequence[Any]) -> SessionInfo:
    """A session from a ``SESSION_COLUMNS`` row."""
    scope, external_id, created, updated, count, tokens, policy, first, last = row
    return SessionInfo(
        scope=scope,
        id=external_id,
        created_at=parse_ts(created),
        updated_at=parse_ts(updated),
        message_count=count,
        token_count=tokens,
        policy=json_dict(policy, f"policy of session {scope}/{external_id}") if policy else None,
        first_message_at=parse_ts(first) if first else None,
        last_message_at=parse_ts(last) if last else None,
    )


def memory(scope: str, row: Sequence[Any]) -> MemoryRecord:
    """A memory of ``scope`` from a ``MEMORY_COLUMNS`` row."""
    mid, content, created, updated, source, metadata = row
    return MemoryRecord(
        id=mid,
        scope=scope,
        content=content,
        created_at=parse_ts(created),
        updated_at=parse_ts(updated),
        source_session=source,
        metadata=json_dict(metadata, f"metadata of memory {mid}"),
    )


def roles_clause(column: str, roles: Sequence[str] | None) -> tuple[str, list[str]]:
    """SQL ``AND column IN (...)`` and its parameters; nothing when ``roles`` is None."""
    if roles is None:
        return "", []
    roles = list(roles)
    return f" AND {column} IN ({', '.join('?' * len(roles))})", roles


__all__ = [
    "MEMORY_COLUMNS",
    "MSG_COLUMNS",
    "MSG_HOT_COLUMNS",
    "MSG_WIDTH",
    "SESSION_COLUMNS",
    "dump",
    "json_dict",
    "memory",
    "message",
    "messages",
    "now",
    "parse_ts",
    "roles_clause",
    "session_info",
    "ts",
    "utc",
]
