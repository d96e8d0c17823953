"""What every backend shares: time, page clamping, audit events and search by scan.

Backends keep their own encodings (SQLite's fixed-width text, PostgreSQL's
``timestamptz``, jsondir's ISO strings); the rules that must agree across all
of them live here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from engram.models import JSON, Message
from engram.search_query import terms as extract_terms
from engram.store.base import MAX_PAGE
from engram.store.snippets import Stemmer, score_message


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


def scan_search(
    messages: Iterable[Message],
    query: str,
    *,
    roles: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
    limit: int,
) -> list[tuple[float, Message, str]]:
    """Search by scan for the backends without an index: ``(score, message, snippet)``.

    Any query word matches on its stem, in content or speaker name; best
    first, ties newest first; ``start <= created_at < end``.
    """
    stemmer = Stemmer()
    wanted = stemmer.stems(extract_terms(query))
    if not wanted or clamp(limit) == 0:
        return []
    wanted_roles = set(roles) if roles is not None else None
    low = utc(start) if start is not None else None
    high = utc(end) if end is not None else None
    scored: list[tuple[float, int, Message, str]] = []
    for message in messages:
        if wanted_roles is not None and message.role not in wanted_roles:
            continue
        if (low is not None and message.created_at < low) or (
            high is not None and message.created_at >= high
        ):
            continue
        hit = score_message(stemmer, wanted, message)
        if hit is not None:
            scored.append((hit[0], message.id, message, hit[1]))
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [(score, message, snippet) for score, _, message, snippet in scored[: clamp(limit)]]
