"""What every backend shares: time, page clamping, audit events and search by scan.

Backends keep their own encodings (SQLite's fixed-width text, PostgreSQL's
``timestamptz``, jsondir's ISO strings); the rules that must agree across all
of them live here once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from engram.limits import MAX_ID
from engram.models import JSON, Message
from engram.store.base import MAX_PAGE


def now() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(UTC)


def utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (naive values are taken as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def utc_or_none(value: datetime | None) -> datetime | None:
    """:func:`utc` of a timestamp that may be absent."""
    return None if value is None else utc(value)


def parse_iso(text: str) -> datetime:
    """ISO-8601 text (a trailing ``Z`` allowed; naive means UTC) as an aware UTC datetime.

    Raises:
        ValueError: the text is not ISO-8601.

    """
    return utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def storable_id(value: int) -> bool:
    """Whether ``value`` fits a 64-bit id column (no stored row has an id outside it)."""
    return -MAX_ID - 1 <= value <= MAX_ID


def clamp(limit: int) -> int:
    """``limit`` as a page size: at least 0, at most :data:`~engram.store.base.MAX_PAGE`."""
    return max(0, min(int(limit), MAX_PAGE))


def audit_time(value: object) -> datetime:
    """An audit event's own ``at`` (kept when stores are copied), else now."""
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, str):
        try:
            return parse_iso(value)
        except ValueError:
            pass
    return now()


def split_audit_event(event: Mapping[str, Any]) -> tuple[JSON, datetime]:
    """The body of an audit event to store (without ``id`` and ``at``) and its time."""
    body = dict(event)
    body.pop("id", None)
    return body, audit_time(body.pop("at", None))


#: Fields of an audit event naming the memories it is about.
AUDIT_MEMORY_FIELDS = ("memory", "target", "new_memory")
#: Free-text fields of an audit event, which may hold (or quote) a memory's text.
AUDIT_TEXT_FIELDS = ("content", "new_content", "reason", "error")
#: Set on an audit event whose text was replaced by its hash.
REDACTED = "redacted"


def redacted_audit_event(body: Mapping[str, Any], keep: Collection[int]) -> JSON | None:
    """``body`` with its text replaced by SHA-256 digests, or None when it stays as it is.

    An event about memories (``memory``, ``target``, ``new_memory``) none of which is
    in ``keep`` loses every free-text field (:data:`AUDIT_TEXT_FIELDS`): ``content``
    becomes ``content_sha256`` and so on, and ``redacted`` is set. The action, the
    ids, the session and the counts stay. Events about no memory hold no memory text.
    """
    named = [body.get(name) for name in AUDIT_MEMORY_FIELDS]
    ids = [value for value in named if isinstance(value, int) and not isinstance(value, bool)]
    if not ids or any(memory_id in keep for memory_id in ids):
        return None
    texts = [name for name in AUDIT_TEXT_FIELDS if isinstance(body.get(name), str)]
    if not texts:
        return None
    out = {key: value for key, value in body.items() if key not in texts}
    for name in texts:
        out[f"{name}_sha256"] = hashlib.sha256(
            str(body[name]).encode("utf-8", "replace")
        ).hexdigest()
    out[REDACTED] = True
    return out


def messages_between(
    messages: Iterable[Message],
    start: datetime,
    end: datetime,
    *,
    limit: int,
    roles: Sequence[str] | None = None,
) -> list[Message]:
    """``start <= created_at < end`` (and one of ``roles``), oldest first, clamped: for scans."""
    low, high = utc(start), utc(end)
    wanted = set(roles) if roles is not None else None
    rows = [
        m for m in messages if low <= m.created_at < high and (wanted is None or m.role in wanted)
    ]
    rows.sort(key=lambda m: (m.created_at, m.id))
    return rows[: clamp(limit)]
