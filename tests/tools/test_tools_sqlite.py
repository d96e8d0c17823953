"""The tools against the real engine on SQLite (FTS5 search, scopes, time zones)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

engram = pytest.importorskip("engram", reason="engram does not import yet")
if not hasattr(engram, "open"):
    pytest.skip("engram.open is not implemented yet", allow_module_level=True)

from engram import tools  # noqa: E402

DAY = timedelta(days=1)
BASE = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)  # Monday 10:00 in New York


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The shared ``mem``/``open_engram`` fixtures on SQLite only.

    Why: these tools read SQLite search results and dates."""
    return f"sqlite:///{tmp_path}/engram.db"


@pytest.fixture
def mem_ny(open_engram: Callable[..., Any]) -> Any:
    """An engine on each backend whose clock reads dates in New York."""
    return open_engram(tz="America/New_York")


@pytest.fixture
def chat(mem_ny: Any) -> Any:
    session = mem_ny.session("chat-1", scope="phoenix")
    session.add("user", "What should the pricing be?", created_at=BASE)
    session.add(
        "assistant", "I suggest 49 dollars per month.", created_at=BASE + timedelta(minutes=1)
    )
    session.add("user", "We decided: pricing is 59 dollars (final).", created_at=BASE + DAY)
    session.add(
        "assistant",
        "Noted, 59% of users pay_monthly.",
        created_at=BASE + DAY + timedelta(minutes=1),
    )
    session.add("user", "What is the launch date?", created_at=BASE + 2 * DAY)
    return session


def call(session: Any, name: str, **arguments: Any) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(tools.dispatch(session, name, json.dumps(arguments)))
    return decoded


class TestOnSQLite:
    def test_search_finds_stems(self, chat: Any) -> None:
        answer = call(chat, "search_history", query="prices decided")
        assert answer["count"] >= 1
        assert any("59" in r["snippet"] for r in answer["results"])

    def test_search_with_a_date(self, chat: Any) -> None:
        answer = call(chat, "search_history", query="pricing", date="2025-03-04")
        assert {r["created_at"][:10] for r in answer["results"]} == {"2025-03-04"}
        # The decision first; its reply follows on its neighbour context (the decision).
        assert "[pricing]" in answer["results"][0]["snippet"]

    @pytest.mark.parametrize(
        "query",
        ['"', "*", "NEAR", "NEAR(pricing dollars)", "%", "_", "(", ")", "pric*", '"pricing', "59%",
         "pay_monthly", "a OR b", "-pricing", "content:pricing", "'; DROP TABLE messages; --", "^"],
    )  # fmt: skip
    def test_metacharacters_return_results_or_nothing(self, chat: Any, query: str) -> None:
        answer = call(chat, "search_history", query=query)
        assert "error" not in answer, answer
        assert isinstance(answer["results"], list)
        assert call(chat, "get_memory_stats")["total_messages"] == 5  # nothing was harmed

    def test_percent_and_underscore_are_not_wildcards(self, chat: Any) -> None:
        answer = call(chat, "search_history", query="_")
        assert answer["results"] == [] or all("_" in r["snippet"] for r in answer["results"])

    def test_messages_by_date_in_the_engine_zone(self, chat: Any) -> None:
        answer = call(chat, "get_messages_by_date", date="2025-03-04")
        assert [m["content"][:10] for m in answer["messages"]] == ["We decided", "Noted, 59%"]
        assert answer["from"] == "2025-03-04T00:00:00-05:00"

    def test_impossible_date(self, chat: Any) -> None:
        assert (
            call(chat, "get_messages_by_date", date="2025-02-30")["error"]["type"] == "invalid_date"
        )

    def test_extended_pages_backwards(self, chat: Any) -> None:
        first = call(chat, "get_extended_context", count=2)
        assert [m["content"][:4] for m in first["messages"]] == ["Note", "What"]
        second = call(chat, "get_extended_context", count=2, before_id=first["next_before_id"])
        third = call(chat, "get_extended_context", count=2, before_id=second["next_before_id"])
        ids = [m["id"] for page in (third, second, first) for m in page["messages"]]
        assert len(ids) == 5 and ids == sorted(ids)

    def test_message_by_id_is_scoped(self, mem_ny: Any, chat: Any) -> None:
        other = mem_ny.session("chat-1", scope="other")
        secret = other.add("user", "the other scope's secret")
        mine = chat.messages()[0]
        assert call(chat, "get_message_by_id", message_id=mine.id)["content"] == mine.content
        leaked = call(chat, "get_message_by_id", message_id=secret.id)
        absent = call(chat, "get_message_by_id", message_id=secret.id + 1000)
        assert leaked["error"]["type"] == absent["error"]["type"] == "not_found"
        assert "secret" not in json.dumps(leaked)
        assert leaked["error"]["message"].replace(str(secret.id), "N") == absent["error"][
            "message"
        ].replace(str(secret.id + 1000), "N")

    def test_stats(self, chat: Any) -> None:
        answer = call(chat, "get_memory_stats")
        assert answer["total_messages"] == 5 and answer["stored_tokens"] > 0
        assert answer["first_message_at"].startswith("2025-03-03")

    def test_result_cap_on_real_rows(self, mem_ny: Any) -> None:
        session = mem_ny.session("big", scope="phoenix")
        session.add_many(
            {"role": "user", "content": f"pricing {i} " + "filler " * 300} for i in range(30)
        )
        text = tools.dispatch(
            session, "search_history", '{"query": "pricing", "limit": 30}', max_result_tokens=1000
        )
        from engram.tokens import storage_counter

        assert storage_counter().count_text(text) <= 1000
        answer = json.loads(text)
        assert "error" not in answer
