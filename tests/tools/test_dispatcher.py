from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from engram.errors import ConfigError
from engram.session import Session
from engram.tools import ERROR_TYPES, dispatch


def call(session: Any, name: str, arguments: Any) -> dict[str, Any]:
    answer = dispatch(session, name, arguments)
    assert isinstance(answer, str)
    decoded: dict[str, Any] = json.loads(answer)
    return decoded


def error_of(session: Any, name: str, arguments: Any) -> tuple[str, str]:
    answer = call(session, name, arguments)
    assert set(answer) == {"error"}, answer
    assert answer["error"]["type"] in ERROR_TYPES
    return answer["error"]["type"], answer["error"]["message"]


class TestArgumentsDecoding:
    def test_json_text(self, chat: Session) -> None:
        answer = call(chat, "search_history", '{"query": "pricing"}')
        assert answer["count"] > 0 and answer == call(chat, "search_history", {"query": "pricing"})

    def test_object(self, chat: Session) -> None:
        assert call(chat, "search_history", {"query": "pricing", "limit": 1})["count"] == 1

    @pytest.mark.parametrize("empty", ["", "  ", None, "{}"])
    def test_empty_means_no_arguments(self, chat: Session, empty: Any) -> None:
        assert call(chat, "get_memory_stats", empty)["total_messages"] == 8

    @pytest.mark.parametrize("bad", ['{"query": "x"', "not json", "{'query': 'x'}", "[[[[", "NaN{"])
    def test_bad_json(self, chat: Session, bad: str) -> None:
        kind, message = error_of(chat, "search_history", bad)
        assert kind == "invalid_arguments" and "JSON" in message

    @pytest.mark.parametrize("bad", ["[1, 2]", '"query"', "42", "null", "true"])
    def test_json_that_is_not_an_object(self, chat: Session, bad: str) -> None:
        kind, message = error_of(chat, "search_history", bad)
        assert kind == "invalid_arguments" and "object" in message

    def test_deeply_nested_json(self, chat: Session) -> None:
        kind, _ = error_of(chat, "search_history", "[" * 100_000 + "]" * 100_000)
        assert kind == "invalid_arguments"


class TestValidation:
    def test_missing_required(self, chat: Session) -> None:
        kind, message = error_of(chat, "search_history", {"limit": 3})
        assert kind == "invalid_arguments" and "'query'" in message

    def test_null_for_required(self, chat: Session) -> None:
        kind, message = error_of(chat, "get_messages_by_date", {"date": None})
        assert kind == "invalid_arguments" and "'date'" in message

    def test_null_for_optional_means_default(self, chat: Session) -> None:
        answer = call(chat, "search_history", {"query": "pricing", "role": None, "date": None})
        assert answer["count"] > 0 and answer == call(chat, "search_history", {"query": "pricing"})

    def test_unknown_key(self, chat: Session) -> None:
        kind, message = error_of(chat, "search_history", {"query": "x", "chat_id": "other"})
        assert kind == "invalid_arguments"
        assert "'chat_id'" in message and "query" in message  # names what it accepts

    @pytest.mark.parametrize(
        ("name", "arguments", "needle"),
        [
            ("search_history", {"query": 42}, "string"),
            ("search_history", {"query": ["a"]}, "string"),
            ("search_history", {"query": "x", "limit": "5"}, "integer"),
            ("search_history", {"query": "x", "limit": 2.5}, "integer"),
            ("search_history", {"query": "x", "limit": True}, "integer"),
            ("search_history", {"query": "x", "all_sessions": "yes"}, "true or false"),
            ("search_history", {"query": "x", "all_sessions": 1}, "true or false"),
            ("get_message_by_id", {"message_id": "7"}, "integer"),
            ("get_message_by_id", {"message_id": {"id": 7}}, "integer"),
        ],
    )
    def test_wrong_type(
        self, chat: Session, name: str, arguments: dict[str, Any], needle: str
    ) -> None:
        kind, message = error_of(chat, name, arguments)
        assert kind == "invalid_arguments" and needle in message

    def test_integral_float_is_an_integer(self, chat: Session) -> None:
        assert call(chat, "search_history", '{"query": "pricing", "limit": 2.0}')["count"] == 2

    @pytest.mark.parametrize(
        ("name", "arguments"),
        [
            ("search_history", {"query": "x", "limit": 0}),
            ("search_history", {"query": "x", "limit": 51}),
            ("search_history", {"query": "x", "limit": -3}),
            ("get_messages_by_date", {"date": "today", "limit": 1000}),
            ("get_extended_context", {"count": 51}),
            ("get_extended_context", {"count": 0}),
            ("get_extended_context", {"before_id": 0}),
            ("get_message_by_id", {"message_id": -1}),
            ("get_message_by_id", {"message_id": 1, "offset": -1}),
        ],
    )
    def test_out_of_range(self, chat: Session, name: str, arguments: dict[str, Any]) -> None:
        kind, message = error_of(chat, name, arguments)
        assert kind == "invalid_arguments"
        assert "between" in message or "at least" in message

    @pytest.mark.parametrize("query", ["", "   "])
    def test_empty_query(self, chat: Session, query: str) -> None:
        kind, message = error_of(chat, "search_history", {"query": query})
        assert kind == "invalid_arguments" and "empty" in message

    def test_overlong_query(self, chat: Session) -> None:
        kind, message = error_of(chat, "search_history", {"query": "x" * 501})
        assert kind == "invalid_arguments" and "500" in message

    @pytest.mark.parametrize("role", ["admin", "User", "", "developer"])
    def test_unknown_role(self, chat: Session, role: str) -> None:
        kind, message = error_of(chat, "search_history", {"query": "x", "role": role})
        assert kind == "invalid_arguments" and "assistant" in message

    @pytest.mark.parametrize(
        "date", ["2025-02-30", "banana", "tomorrowish", "2025-03-05..2025-03-01"]
    )
    def test_impossible_date(self, chat: Session, date: str) -> None:
        for name, arguments in [
            ("get_messages_by_date", {"date": date}),
            ("search_history", {"query": "pricing", "date": date}),
        ]:
            kind, message = error_of(chat, name, arguments)
            assert kind == "invalid_date"
            assert repr(date) in message and "yesterday" in message


class TestUnknownTool:
    @pytest.mark.parametrize("name", ["delete_everything", "", "SEARCH_HISTORY", None, 42])
    def test_unknown(self, chat: Session, name: Any) -> None:
        kind, message = error_of(chat, name, "{}")
        assert kind == "unknown_tool" and "search_history" in message

    def test_tool_not_offered(self, chat: Session) -> None:
        answer = json.loads(dispatch(chat, "get_memory_stats", "{}", names=["search_history"]))
        assert answer["error"]["type"] == "unknown_tool"
        assert answer["error"]["message"].endswith("available: search_history")


class Exploding(Session):
    def stats(self) -> dict[str, Any]:
        raise RuntimeError("secret database path /var/lib/x.db")


class TestInternalErrors:
    def test_unexpected_exception_is_logged_not_leaked(
        self, chat: Session, caplog: pytest.LogCaptureFixture
    ) -> None:
        broken = Exploding(chat.runtime, chat.scope, chat.id, None)
        with caplog.at_level(logging.ERROR, logger="engram.tools"):
            kind, message = error_of(broken, "get_memory_stats", "{}")
        assert kind == "internal"
        assert "secret" not in message and "Traceback" not in message
        assert any("secret database path" in (r.exc_text or "") for r in caplog.records)

    def test_too_small_cap_is_the_callers_error(self, chat: Session) -> None:
        with pytest.raises(ConfigError, match="max_result_tokens"):
            dispatch(chat, "get_memory_stats", "{}", max_result_tokens=10)
