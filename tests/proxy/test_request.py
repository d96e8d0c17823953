"""The proxy's pure parts: which session a request continues, and how it is translated."""

from __future__ import annotations

from typing import Any

import pytest

from engram import tools
from engram.chat.loop import DEFAULT_RESERVE, HISTORY_TOOLS_PROMPT
from engram.errors import ConfigError, InvalidMessage, InvalidQuery
from engram.llm.windows import DEFAULT_WINDOW
from engram.proxy import (
    InvalidRequest,
    MissingSession,
    ProxySettings,
    find_target,
    parse_request,
    resolve,
)

BODY: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


class TestTarget:
    def test_header_wins_over_every_other_source(self) -> None:
        body = {**BODY, "metadata": {"session_id": "m"}, "prompt_cache_key": "p", "user": "u"}
        target = find_target({"X-Engram-Session": "h", "X-Engram-Scope": "proj"}, body)
        assert (target.scope, target.session, target.source) == ("proj", "h", "header")

    @pytest.mark.parametrize(
        ("extra", "session", "source"),
        [
            (
                {"metadata": {"session_id": "m", "scope": "s"}, "prompt_cache_key": "p"},
                "m",
                "metadata",
            ),
            ({"prompt_cache_key": "p", "user": "u"}, "p", "prompt_cache_key"),
            ({"user": "u"}, "u", "user"),
        ],
    )
    def test_then_metadata_then_prompt_cache_key_then_user(
        self, extra: dict[str, Any], session: str, source: str
    ) -> None:
        target = find_target({}, {**BODY, **extra})
        assert (target.session, target.source) == (session, source)

    def test_metadata_scope_and_no_scope(self) -> None:
        assert find_target({}, {**BODY, "metadata": {"session_id": "m", "scope": "s"}}).scope == "s"
        assert find_target({}, {**BODY, "user": "u"}).scope is None

    @pytest.mark.parametrize(
        "extra", [{}, {"user": ""}, {"user": 5}, {"metadata": {"session_id": " "}}]
    )
    def test_no_session_is_refused_never_defaulted(self, extra: dict[str, Any]) -> None:
        with pytest.raises(MissingSession, match="X-Engram-Session") as refused:
            find_target({}, {**BODY, **extra})
        assert refused.value.field == "X-Engram-Session"

    def test_unusable_ids_are_refused(self) -> None:
        with pytest.raises(InvalidMessage, match="session id"):
            find_target({"x-engram-session": "a\x00b"}, BODY)


class TestRequest:
    def test_system_messages_are_instructions_not_history(self) -> None:
        body = {
            **BODY,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "developer", "content": [{"type": "text", "text": "Use SI units."}]},
                {"role": "user", "content": "hi"},
            ],
            "max_completion_tokens": 300,
        }
        chat = parse_request(body)
        assert chat.new == [{"role": "user", "content": "hi"}]
        assert chat.system == "Be brief.\n\nUse SI units."
        assert chat.reserve == 300
        assert chat.system_prompt(True) == f"Be brief.\n\nUse SI units.\n\n{HISTORY_TOOLS_PROMPT}"
        assert parse_request(BODY).reserve == DEFAULT_RESERVE
        assert parse_request({**BODY, "max_tokens": 50}).reserve == 50

    def test_upstream_body_keeps_the_clients_parameters(self) -> None:
        client_tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
        body = {
            **BODY,
            "temperature": 0.2,
            "tools": [client_tool],
            "tool_choice": "auto",
            "metadata": {"session_id": "s", "scope": "p", "trace": "t1"},
            "stream": True,
        }
        chat = parse_request(body)
        sent = chat.upstream_body(
            [{"role": "user", "content": "ctx"}], [client_tool, *tools.schemas()]
        )
        assert sent["model"] == "gpt-4o-mini" and sent["temperature"] == 0.2
        assert sent["messages"] == [{"role": "user", "content": "ctx"}]
        assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather", *tools.TOOLS]
        assert sent["metadata"] == {"trace": "t1"}
        assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
        bare = chat.upstream_body([], [])
        assert "tools" not in bare and "tool_choice" not in bare
        assert body["metadata"] == {"session_id": "s", "scope": "p", "trace": "t1"}  # untouched

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ([], "body"),
            ({"messages": BODY["messages"]}, "model"),
            ({"model": "m", "messages": []}, "messages"),
            ({**BODY, "n": 2}, "n"),
            ({**BODY, "max_tokens": 0}, "max_tokens"),
            ({**BODY, "max_completion_tokens": True}, "max_completion_tokens"),
            ({**BODY, "tools": {"a": 1}}, "tools"),
            ({**BODY, "tools": [{"type": "function"}]}, "tools"),
            (
                {**BODY, "tools": [{"type": "function", "function": {"name": "search_history"}}]},
                "tools",
            ),
        ],
    )
    def test_bad_requests_name_the_field(self, body: Any, field: str) -> None:
        with pytest.raises(InvalidRequest) as refused:
            parse_request(body)
        assert refused.value.field == field

    def test_a_message_that_is_not_an_object(self) -> None:
        with pytest.raises(InvalidMessage, match=r"messages\[0\]"):
            parse_request({**BODY, "messages": ["hi"]})


class TestSettingsAndBudget:
    def test_proxy_settings_read_the_config_and_the_options_win(self) -> None:
        env = {
            "ENGRAM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "ENGRAM_PROXY_BUDGET": "20000",
            "ENGRAM_PROXY_MAX_ROUNDS": "2",
            "ENGRAM_PROXY_RETRY_WINDOW": "5",
        }
        settings = ProxySettings.from_env(env)
        assert settings is not None
        assert (settings.budget, settings.max_rounds, settings.retry_window) == (20_000, 2, 5.0)
        assert settings.single_system is False
        given = ProxySettings.from_env(env, budget=9000, single_system=True)
        assert given is not None and (given.budget, given.single_system) == (9000, True)
        assert ProxySettings.from_env({}) is None
        with pytest.raises(ConfigError, match="ENGRAM_PROXY_RETRY_WINDOW"):
            ProxySettings.from_env({**env, "ENGRAM_PROXY_RETRY_WINDOW": "-1"})
        with pytest.raises(ConfigError, match="ENGRAM_PROXY_MAX_ROUNDS"):
            ProxySettings.from_env({**env, "ENGRAM_PROXY_MAX_ROUNDS": "17"})
        with pytest.raises(ConfigError, match="budget"):
            ProxySettings("http://x/v1", budget=0)

    @pytest.mark.parametrize(
        ("header", "setting", "model", "total", "source"),
        [
            ("9000", 20_000, "gpt-4o-mini", 9000, "X-Engram-Budget"),
            (None, 20_000, "gpt-4o-mini", 20_000, "--budget"),
            (None, None, "gpt-4o-mini-2024-07-18", 128_000, "context window"),
            (None, None, "openai/gpt-4.1", 1_047_576, "context window"),
            (None, None, "llama3:8b", DEFAULT_WINDOW, "does not know"),
        ],
    )
    def test_the_budget_comes_from_the_header_the_server_or_the_model(
        self, header: str | None, setting: int | None, model: str, total: int, source: str
    ) -> None:
        budget = resolve(header, setting, model)
        assert budget.total == total and source in budget.source

    @pytest.mark.parametrize("header", ["", "-5", "1e6", "0", "999999999999", "ten"])
    def test_a_bad_budget_header_is_refused_by_name(self, header: str) -> None:
        with pytest.raises(InvalidQuery, match="X-Engram-Budget") as refused:
            resolve(header, None, "gpt-4o-mini")
        assert getattr(refused.value, "field", None) == "X-Engram-Budget"

    def test_the_reserve_field_and_joined_instructions(self) -> None:
        parts = [{"type": "text", "text": "Be"}, {"type": "text", "text": "brief."}]
        chat = parse_request({**BODY, "messages": [{"role": "system", "content": parts}]})
        assert chat.system == "Be\nbrief." and chat.reserve_field == "reserve"
        assert parse_request({**BODY, "max_tokens": 5}).reserve_field == "max_tokens"
