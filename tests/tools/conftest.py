"""A small in-memory Session for tool unit tests (test_tools_sqlite uses the real engine)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engram.errors import MessageNotFound
from engram.models import Message, SearchHit
from engram.search.dates import parse_when

#: A Wednesday, 15:00 UTC (10:00 in New York).
NOW = datetime(2025, 3, 5, 15, 0, tzinfo=UTC)


class FakeEngram:
    def __init__(self, tz: str = "UTC", now: datetime = NOW) -> None:
        self.tz = ZoneInfo(tz)
        self.now = now
        self.rows: list[Message] = []

    def add(
        self,
        scope: str,
        session: str,
        role: str,
        content: str,
        created_at: datetime | None = None,
        **extra: Any,
    ) -> Message:
        message = Message(
            id=len(self.rows) + 1,
            scope=scope,
            session=session,
            role=role,
            content=content,
            created_at=created_at or self.now,
            tokens=len(content) // 4 + 4,
            **extra,
        )
        self.rows.append(message)
        return message

    def message(self, message_id: int, scope: str = "default") -> Message:
        for row in self.rows:
            if row.id == message_id and row.scope == scope:
                return row
        raise MessageNotFound(f"message {message_id} not found")

    def session(self, session_id: str, scope: str = "default") -> FakeSession:
        return FakeSession(self, scope, session_id)


class FakeSession:
    def __init__(self, engram: FakeEngram, scope: str, session_id: str) -> None:
        self.engram = engram
        self.scope = scope
        self.id = session_id
        self.calls: list[tuple[str, dict[str, Any]]] = []

    @property
    def tz(self) -> Any:
        return self.engram.tz

    def message(self, message_id: int) -> Message:
        return self.engram.message(message_id, scope=self.scope)

    def add(
        self, role: str, content: str, created_at: datetime | None = None, **extra: Any
    ) -> Message:
        return self.engram.add(self.scope, self.id, role, content, created_at, **extra)

    def _mine(self, all_sessions: bool = False) -> list[Message]:
        return [
            m
            for m in self.engram.rows
            if m.scope == self.scope and (all_sessions or m.session == self.id)
        ]

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        all_sessions: bool = False,
        context: int = 0,
        partner: bool = False,
        exclude_visible: bool = False,
        exclude_question: bool = False,
        as_of: datetime | None = None,
    ) -> list[SearchHit]:
        self.calls.append(
            (
                "search",
                {"query": query, "limit": limit, "roles": roles, "start": start, "end": end,
                 "as_of": as_of},
            )
        )  # fmt: skip
        words = [w for w in re.findall(r"\w+", query.lower()) if w]
        hits = []
        for m in self._mine(all_sessions):
            if roles and m.role not in roles:
                continue
            if start is not None and not (start <= m.created_at < (end or m.created_at)):
                continue
            score = sum(m.content.lower().count(w) for w in words)
            if score:
                hits.append(SearchHit(message=m, score=float(score), snippet=m.content[:60]))
        hits.sort(key=lambda h: (-h.score, -h.message.id))
        return hits[:limit]

    def date_range(self, when: str, *, as_of: datetime | None = None) -> tuple[datetime, datetime]:
        return parse_when(when, now=as_of or self.engram.now, tz=self.engram.tz)

    def by_date(
        self,
        when: str,
        *,
        limit: int = 20,
        roles: Sequence[str] | None = None,
        as_of: datetime | None = None,
    ) -> list[Message]:
        start, end = self.date_range(when, as_of=as_of)
        rows = [
            m
            for m in self._mine()
            if start <= m.created_at < end and (not roles or m.role in roles)
        ]
        return rows[:limit]

    def extended(self, count: int = 30, *, before_id: int | None = None) -> list[Message]:
        rows = [m for m in self._mine() if before_id is None or m.id < before_id]
        return rows[-min(count, 50) :]

    def stats(self) -> dict[str, Any]:
        rows = self._mine()
        return {
            "scope": self.scope,
            "session": self.id,
            "total_messages": len(rows),
            "stored_tokens": sum(m.tokens for m in rows),
            "first_message_at": rows[0].created_at if rows else None,
            "last_message_at": rows[-1].created_at if rows else None,
        }


@pytest.fixture
def fake_engram() -> FakeEngram:
    return FakeEngram()


@pytest.fixture
def chat(fake_engram: FakeEngram) -> FakeSession:
    """A session 'chat-1' in scope 'phoenix' with eight messages over three days."""
    session = fake_engram.session("chat-1", scope="phoenix")
    day = timedelta(days=1)
    session.add("user", "What should the pricing be?", NOW - 2 * day)
    session.add(
        "assistant", "I suggest 49 dollars per month.", NOW - 2 * day + timedelta(minutes=1)
    )
    session.add("user", "Let's talk about the launch date.", NOW - day)
    session.add("assistant", "The launch is planned for April.", NOW - day + timedelta(minutes=1))
    session.add("user", "Pricing: we decided on 59 dollars.", NOW - day + timedelta(minutes=2))
    session.add("assistant", "Noted: pricing is 59 dollars.", NOW - day + timedelta(minutes=3))
    session.add("user", "Anything else on the roadmap?", NOW - timedelta(hours=1), name="ana")
    session.add("assistant", "Only the beta invite list.", NOW - timedelta(minutes=59))
    return session
