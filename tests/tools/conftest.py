"""Fixtures of the tool tests: a real Engram on ``memory://`` (the store passes the contract).

``mem`` and ``open_engram`` come from tests/conftest.py; ``store_url`` narrows
them to the in-memory store, since the tools only read the Session API.
test_tools_sqlite.py runs the same tools on SQLite's own search.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram.engine import Engram
from engram.session import Session

#: A Wednesday, 15:00 UTC (10:00 in New York).
NOW = datetime(2025, 3, 5, 15, 0, tzinfo=UTC)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The shared ``mem``/``open_engram`` fixtures on the in-memory store only."""
    return f"memory://{tmp_path}"


@pytest.fixture
def chat(mem: Engram) -> Session:
    """A session 'chat-1' in scope 'phoenix' with eight messages (ids 1-8) over three days.

    Message 3 has a name (ana). Message 7, the newest user message, is the
    question being asked: ``search_history`` never returns it.
    """
    session = mem.session("chat-1", scope="phoenix")
    day, minute = timedelta(days=1), timedelta(minutes=1)
    for role, content, created_at in [
        ("user", "What should the pricing be?", NOW - 2 * day),
        ("assistant", "I suggest 49 dollars per month.", NOW - 2 * day + minute),
        ("user", "Let's talk about the launch date.", NOW - day),
        ("assistant", "The launch is planned for April.", NOW - day + minute),
        ("user", "Pricing: we decided on 59 dollars.", NOW - day + 2 * minute),
        ("assistant", "Noted: pricing is 59 dollars.", NOW - day + 3 * minute),
    ]:
        session.add(
            role, content, created_at=created_at, name="ana" if "launch date" in content else None
        )
    session.add("user", "Anything else on the roadmap?", created_at=NOW - 60 * minute)
    session.add("assistant", "Only the beta invite list.", created_at=NOW - 59 * minute)
    return session
