from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram.models import JSON
from engram.tools import dispatch
from engram.tools.registry import ToolSession

from .conftest import NOW, FakeEngram, FakeSession


def call(session: Any, name: str, **arguments: Any) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(dispatch(session, name, json.dumps(arguments)))
    return decoded


class TestSearchHistory:
    def test_ranked_hits_with_fields(self, chat: FakeSession) -> None:
        answer = call(chat, "search_history", query="pricing")
        assert answer["query"] == "pricing" and answer["count"] == 3
        first = answer["results"][0]
        assert set(first) == {"id", "role", "created_at", "snippet"}
        assert "pricing" in first["snippet"].lower()
        assert datetime.fromisoformat(first["created_at"]).tzinfo is not None

    def test_name_is_shown_when_set(self, chat: FakeSession) -> None:
        (hit,) = call(chat, "search_history", query="roadmap")["results"]
        assert hit["name"] == "ana" and hit["role"] == "user"

    def test_role_and_limit_reach_the_session(self, chat: FakeSession) -> None:
        answer = call(chat, "search_history", query="pricing", role="user", limit=1)
        assert [r["role"] for r in answer["results"]] == ["user"]
        assert chat.calls[-1][1]["roles"] == ["user"] and chat.calls[-1][1]["limit"] == 1

    def test_date_filters_in_the_engine_zone(self, chat: FakeSession) -> None:
        answer = call(chat, "search_history", query="pricing", date="yesterday")
        assert {r["id"] for r in answer["results"]} == {5, 6}
        start, end = chat.calls[-1][1]["start"], chat.calls[-1][1]["end"]
        assert (start, end) == (datetime(2025, 3, 4, tzinfo=UTC), datetime(2025, 3, 5, tzinfo=UTC))
        assert answer["from"] == "2025-03-04T00:00:00+00:00"

    def test_session_only_with_all_sessions(
        self, fake_engram: FakeEngram, chat: FakeSession
    ) -> None:
        other = fake_engram.session("chat-2", scope="phoenix")
        other.add("user", "pricing in the other chat")
        mine = call(chat, "search_history", query="pricing")
        assert all("session" not in r for r in mine["results"]) and mine["count"] == 3
        both = call(chat, "search_history", query="pricing", all_sessions=True)
        assert both["count"] == 4 and {r["session"] for r in both["results"]} == {
            "chat-1",
            "chat-2",
        }

    def test_no_hits_is_an_empty_list(self, chat: FakeSession) -> None:
        assert call(chat, "search_history", query="zebra") == {
            "query": "zebra",
            "count": 0,
            "results": [],
        }


class TestMessagesByDate:
    def test_a_day_oldest_first(self, chat: FakeSession) -> None:
        answer = call(chat, "get_messages_by_date", date="yesterday")
        assert [m["id"] for m in answer["messages"]] == [3, 4, 5, 6]
        assert answer["messages"][0]["content"] == "Let's talk about the launch date."
        assert answer["from"].startswith("2025-03-04") and answer["until"].startswith("2025-03-05")
        assert answer["has_more"] is False

    def test_limit_says_there_is_more(self, chat: FakeSession) -> None:
        answer = call(chat, "get_messages_by_date", date="past 7 days", limit=3)
        assert answer["count"] == 3 and answer["has_more"] is True

    def test_role_filter(self, chat: FakeSession) -> None:
        answer = call(chat, "get_messages_by_date", date="2025-03-04", role="assistant")
        assert {m["role"] for m in answer["messages"]} == {"assistant"}

    def test_weekday_in_the_engine_zone(self) -> None:
        engine = FakeEngram(tz="America/New_York")
        session = engine.session("s", scope="p")
        # Monday 2025-03-03 23:30 in New York is Tuesday 04:30 UTC.
        session.add("user", "late monday", datetime(2025, 3, 4, 4, 30, tzinfo=UTC))
        session.add("user", "tuesday", datetime(2025, 3, 4, 15, 0, tzinfo=UTC))
        answer = call(session, "get_messages_by_date", date="monday")
        assert [m["content"] for m in answer["messages"]] == ["late monday"]
        assert answer["messages"][0]["created_at"] == "2025-03-03T23:30:00-05:00"


class TestExtendedContext:
    def test_pages_backwards_through_everything(self, chat: FakeSession) -> None:
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

    def test_default_count(self, chat: FakeSession) -> None:
        answer = call(chat, "get_extended_context")
        assert answer["count"] == 8 and answer["next_before_id"] is None


class TestMessageById:
    def test_full_text(self, chat: FakeSession) -> None:
        answer = call(chat, "get_message_by_id", message_id=2)
        assert answer["content"] == "I suggest 49 dollars per month."
        assert answer["session"] == "chat-1" and answer["total_chars"] == len(answer["content"])

    def test_offset(self, chat: FakeSession) -> None:
        answer = call(chat, "get_message_by_id", message_id=2, offset=10)
        assert (
            answer["content"] == "I suggest 49 dollars per month."[10:] and answer["offset"] == 10
        )

    def test_offset_past_the_end(self, chat: FakeSession) -> None:
        answer = call(chat, "get_message_by_id", message_id=2, offset=1000)
        assert answer["error"]["type"] == "invalid_arguments"

    def test_other_scope_is_indistinguishable_from_absent(
        self, fake_engram: FakeEngram, chat: FakeSession
    ) -> None:
        stranger = fake_engram.session("chat-1", scope="other-project")
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

    def test_same_scope_other_session_is_readable(
        self, fake_engram: FakeEngram, chat: FakeSession
    ) -> None:
        sibling = fake_engram.session("chat-2", scope="phoenix").add("user", "sibling text")
        assert call(chat, "get_message_by_id", message_id=sibling.id)["session"] == "chat-2"


class TestStats:
    def test_counts_and_dates(self, chat: FakeSession) -> None:
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
def test_metacharacters_never_error(chat: FakeSession, query: str) -> None:
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
