"""A session's stored messages read a page at a time, for the adapters."""

from __future__ import annotations

from collections.abc import Iterator

from engram.limits import MAX_EXTENDED_CONTEXT, MAX_PAGE
from engram.models import Message
from engram.session import Session


def newest(session: Session, count: int) -> list[Message]:
    """The newest ``count`` messages of ``session``, oldest first."""
    rows: list[Message] = []
    before: int | None = None
    while len(rows) < count:
        wanted = min(MAX_EXTENDED_CONTEXT, count - len(rows))
        page = session.extended(wanted, before_id=before)
        rows[:0] = page
        if len(page) < wanted:
            break
        before = page[0].id
    return rows


def every(session: Session) -> Iterator[Message]:
    """Every message of ``session``, oldest first, read a page at a time."""
    after: int | None = None
    while True:
        page = session.messages(after_id=after, limit=MAX_PAGE)
        yield from page
        if len(page) < MAX_PAGE:
            return
        after = page[-1].id
