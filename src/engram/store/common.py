"""What every backend shares: time, page clamping, audit events and search by scan.

Backends keep their own encodings (SQLite's fixed-width text, PostgreSQL's
``timestamptz``, jsondir's ISO strings); the rules that must agree across all
of them live here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
