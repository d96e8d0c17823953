from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engram.engine import Engram
from engram.models import JSON
from engram.search.dates import parse_when
from engram.session import Session
from engram.tools import dispatch
from engram.tools.registry import RECORDS_NOTE, ToolSession

from .conftest import NOW

NEW_YORK = ZoneInfo("America/New_York")


def call(session: Any, name: str, **arguments: Any) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(dispatch(session, name, json.dumps(arguments)))
    return decoded


class TestSearchHistory:
    def test_ranked_hits_with_fields(self, chat: Session) -> None:
        answer = call(chat, "search_history", query="pricing")
        assert answer["query"] == "pricing" and answer["count"] == len(answer["results"])
        assert {1, 5, 6} <= {r["id"] for r in answer["results"]}  # the three that say it
        first = answer["results"][0]
        assert set(first) - {"partner"} == {"id", "role", "created_at", "snippet"}
        assert "pricing" in first["snippet"].lower()
        assert datetime.fromisoformat(first["created_at"]).tzinfo is not None

    def test_name_is_shown_when_set(self, chat: Session) -> None:
        hits = {r["id"]: r for r in call(chat, "search_history", query="launch")["results"]}
        assert hits[3]["name"] == "ana" and hits[3]["role"] == "user"
        assert "name" not in hits[4]

    def test_role_and_limit_reach_the_session(self, chat: Session) -> None:
        answer = call(chat, "search_history", query="pricing", role="user", limit=1)
        assert [r["role"] for r in answer["results"]] == ["user"]
        users = call(chat, "search_history", query="pricing", role="user")["results"]
        assert {r["role"] for r in users} == {"user"} and {1, 5} <= {r["id"] for r in users}

    def test_date_filters_in_the_engine_zone(self, chat: Session) -> None:
        answer = call(chat, "search_history", query="pricing", date="2025-03-04")
        assert {5, 6} <= {r["id"] for r in answer["results"]}
        assert {r["created_at"][:10] for r in answer["results"]} == {"2025-03-04"}
        assert answer["from"] == "2025-03-04T00:00:00+00:00"
        assert answer["until"] == "2025-03-05T00:00:00+00:00"

    def test_session_only_with_all_sessions(self, mem: Engram, chat: Session) -> None:
        other = mem.session("chat-2", scope="phoenix").add("user", "pricing in the other chat")
        mine = call(chat, "search_history", query="pricing", limit=20)
        assert all("session" not in r for r in mine["results"])
        assert other.id not in {r["id"] for r in mine["results"]}
        both = call(chat, "search_history", query="pricing", limit=20, all_sessions=True)
        assert both["count"] == mine["count"] + 1
        assert {r["session"] for r in both["results"]} == {"chat-1", "chat-2"}

    def test_the_question_being_asked_is_not_a_hit(self, chat: Session) -> None:
        assert 7 in [hit.message.id for hit in chat.search("roadmap")]  # the library finds it
        answer = call(chat, "search_history", query="roadmap")
        assert 7 not in {r["id"] for r in answer["results"]}

    def test_no_hits_is_an_empty_list(self, chat: Session) -> None:
        assert call(chat, "search_history", query="zebra") == {
            "about": RECORDS_NOTE,
            "session": "chat-1",
            "query": "zebra",
            "count": 0,
            "results": [],
        }


class TestMessagesByDate:
    def test_a_day_oldest_first(self, chat: Session) -> None:
        answer = call(chat, "get_messages_by_date", date="2025-03-04")
        assert [m["id"] for m in answer["messages"]] == [3, 4, 5, 6]
        assert answer["messages"][0]["content"] == "Let's talk about the launch date."
        assert answer["from"].startswith("2025-03-04") and answer["until"].startswith("2025-03-05")
        assert answer["has_more"] is False

    def test_limit_says_there_is_more(self, chat: Session) -> None:
        answer = call(chat, "get_messages_by_date", date="2025-03-01..2025-03-05", limit=3)
        assert answer["count"] == 3 and answer["has_more"] is True

    def test_role_filter(self, chat: Session) -> None:
        answer = call(chat, "get_messages_by_date", date="2025-03-04", role="assistant")
        assert {m["role"] for m in answer["messages"]} == {"assistant"}

    def test_relative_dates_read_the_engine_clock(self, mem: Engram) -> None:
        session = mem.session("now", scope="p")
        session.add("user", "written just now")
        (today,) = call(session, "get_messages_by_date", date="today")["messages"]
        assert today["content"] == "written just now"
        assert call(session, "get_messages_by_date", date="yesterday")["count"] == 0

    def test_weekday_in_the_engine_zone(self, open_engram: Callable[..., Engram]) -> None:
        session = open_engram(tz="America/New_York").session("s", scope="p")
        # The last Monday, as the engine's clock reads it in New York: its last half hour
        # there is already Tuesday in UTC.
        monday_start, monday_end = parse_when("monday", now=datetime.now(UTC), tz=NEW_YORK)
        late = monday_end - timedelta(minutes=30)
        session.add("user", "late monday", created_at=late)
        session.add("user", "tuesday", created_at=monday_end + timedelta(hours=10))
        answer = call(session, "get_messages_by_date", date="monday")
        assert [m["content"] for m in answer["messages"]] == ["late monday"]
        assert late.date() > monday_start.astimezone(NEW_YORK).date()
        assert answer["messages"][0]["created_at"] == late.astimezone(NEW_YORK).isoformat()
        assert answer["messages"][0]["created_at"][11:19] == "23:30:00"


class TestExtendedContext:
    def test_pages_backwards_through_everything(self, chat: Session) -> None:
        seen: list[int] = []
        before: int | None = None
        for _ in range(10):
            arguments: dict[str, Any] = {"count": 3}
            if before is not None:
                arguments["before_id"] = before
            answer = call(chat, "get_extended_context", **arguments)
            ids = [m["id"] for m in answer["messages"]]
            assert ids == sorted(ids)
            seen = ids + seen
            before = answer["next_before_id"]
            if before is None:
                break
        assert seen == list(range(1, 9))

    def test_default_count(self, chat: Session) -> None:
        answer = call(chat, "get_extended_context")
        assert answer["count"] == 8 and answer["next_before_id"] is None


class TestMessageById:
    def test_full_text(self, chat: Session) -> None:
        answer = call(chat, "get_message_by_id", message_id=2)
        assert answer["content"] == "I suggest 49 dollars per month."
        assert answer["session"] == "chat-1" and answer["total_chars"] == len(answer["content"])

    def test_offset(self, chat: Session) -> None:
        answer = call(chat, "get_message_by_id", message_id=2, offset=10)
        assert (
            answer["content"] == "I suggest 49 dollars per month."[10:] and answer["offset"] == 10
        )

    def test_offset_past_the_end(self, chat: Session) -> None:
        answer = call(chat, "get_message_by_id", message_id=2, offset=1000)
        assert answer["error"]["type"] == "invalid_arguments"

    def test_other_scope_is_indistinguishable_from_absent(self, mem: Engram, chat: Session) -> None:
        stranger = mem.session("chat-1", scope="other-project")
        secret = stranger.add("user", "the other project's secret")
        leaked = call(chat, "get_message_by_id", message_id=secret.id)
        absent = call(chat, "get_message_by_id", message_id=10_000)
        assert leaked["error"]["type"] == "not_found"
        assert "secret" not in json.dumps(leaked)
        # Same wording apart from the id itself.
        assert leaked["error"]["message"].replace(str(secret.id), "N") == absent["error"][
            "message"
        ].replace("10000", "N")
        # The owner can read it.
        assert (
            call(stranger, "get_message_by_id", message_id=secret.id)["content"] == secret.content
        )

    def test_same_scope_other_session_is_readable(self, mem: Engram, chat: Session) -> None:
        sibling = mem.session("chat-2", scope="phoenix").add("user", "sibling text")
        assert call(chat, "get_message_by_id", message_id=sibling.id)["session"] == "chat-2"


class TestStats:
    def test_counts_and_dates(self, chat: Session) -> None:
        answer = call(chat, "get_memory_stats")
        assert answer["total_messages"] == 8
        assert answer["first_message_at"] == (NOW - timedelta(days=2)).isoformat(timespec="seconds")
        assert answer["stored_tokens"] > 0


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "*",
        "NEAR",
        "NEAR(pricing launch)",
        "%",
        "_",
        "(",
        ")",
        "pric*",
        '"pricing',
        "a OR b",
        "-",
        "col:val",
        "'; DROP TABLE messages; --",
    ],
)
def test_metacharacters_never_error(chat: Session, query: str) -> None:
    answer = call(chat, "search_history", query=query)
    assert "error" not in answer
    assert isinstance(answer["results"], list)


def test_declaring_a_tool_registers_nothing_until_installed() -> None:
    from engram.tools import TOOLS, install, unregister
    from engram.tools.registry import tool

    @tool(items_key="items")
    def list_things(session: ToolSession, limit: int = 3) -> JSON:
        """List things.

        Args:
            session: The bound session.
            limit: How many.
        """
        return {"items": []}

    assert "list_things" not in TOOLS
    try:
        installed = install(list_things)
        assert TOOLS["list_things"] is installed and installed.items_key == "items"
    finally:
        unregister("list_things")
