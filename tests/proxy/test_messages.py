"""``POST /v1/messages``: the official anthropic SDK against a live server, with the strict
scripted Anthropic server as the upstream."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import pytest
from tests.images import png_url
from tests.proxy.conftest import MODEL, SCOPE, SESSION, SESSION_ID, sdk, stored
from tests.proxy.live import serving

from engram.engine import Engram
from engram.proxy import ProxySettings
from engram.proxy.verbatim import ANTHROPIC, VERBATIM_KEY
from engram.server import ServerSettings, create_app
from engram.testing import FakeAnthropicServer, FakeLLMServer

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
THINKING = {"type": "enabled", "budget_tokens": 1024}
#: A session named in the metadata, beside the one key Anthropic takes there.
THEIR_METADATA: Any = {"session_id": SESSION_ID, "scope": SCOPE, "user_id": "u-1"}


def _bodies(claude: FakeAnthropicServer) -> list[dict[str, Any]]:
    return [r.body or {} for r in claude.requests]


class TestPlain:
    def test_answer_stored_and_keys_passed_on(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        key = sqlite_mem.api_keys().create(scopes=[SCOPE]).secret
        claude.reply("Hello! Pricing is per seat.")
        with both(sqlite_mem) as url:
            their_key = {**SESSION, "x-api-key": "sk-ant-client"}
            raw = sdk(
                url, api_key=key, default_headers=their_key
            ).messages.with_raw_response.create(
                model=MODEL,
                max_tokens=500,
                system="Be brief.",
                messages=[{"role": "user", "content": "hi"}],
            )
        message = raw.parse()
        assert message.content[0].type == "text"
        assert message.content[0].text == "Hello! Pricing is per seat."
        assert message.stop_reason == "end_turn" and message.usage.input_tokens > 0
        assert raw.headers["x-engram-session"] == SESSION_ID
        assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "Hello! Pricing is per seat.")]
        sent = claude.requests[-1]
        assert sent.headers["x-api-key"] == "sk-ant-client"
        assert sent.headers["anthropic-version"]
        assert "authorization" not in sent.headers  # Engram's key stays here
        assert key not in sent.raw.decode()
        body = sent.body or {}
        assert body["max_tokens"] == 500 and body["model"] == MODEL
        assert body["system"][0]["text"].startswith("Be brief.")
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        assert {tool["name"] for tool in body["tools"]} >= {"search_history"}
        assert claude.refused == []

    def test_without_engram_keys_the_sdks_bearer_is_passed_on(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        with both(sqlite_mem) as url, sdk(url) as app:
            app.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )
        sent = claude.requests[-1].headers
        assert sent["authorization"] == "Bearer sk-ant-client" and "x-api-key" not in sent
        assert sent["anthropic-version"]

    def test_the_session_from_metadata_which_stays_here(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        with both(sqlite_mem) as url, sdk(url, default_headers={}) as app:
            app.messages.create(
                model=MODEL,
                max_tokens=10,
                messages=[{"role": "user", "content": "hi"}],
                metadata=THEIR_METADATA,
            )
        assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "ok: hi")]
        assert (claude.requests[-1].body or {})["metadata"] == {"user_id": "u-1"}
        assert claude.refused == []

    def test_the_prompt_cache_hits_between_turns_and_is_recorded(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        messages: list[Any] = []
        with both(sqlite_mem) as url, sdk(url) as app:
            for question in ("first question", "second question", "third question"):
                messages.append({"role": "user", "content": question})
                raw = app.messages.with_raw_response.create(
                    model=MODEL, max_tokens=300, system="Be brief.", messages=messages
                )
                answer = raw.parse()
                messages.append({"role": "assistant", "content": answer.content})
        assert answer.usage.cache_read_input_tokens and answer.usage.cache_read_input_tokens > 0
        assert int(raw.headers["x-engram-cache-read-tokens"]) > 0
        last = _bodies(claude)[-1]
        marked = [
            i
            for i, m in enumerate(last["messages"])
            if any("cache_control" in b for b in m["content"])
        ]
        assert marked == [len(last["messages"]) - 2]  # the last message before the turn
        history = sqlite_mem.session(SESSION_ID, SCOPE).messages()
        assert [m.content for m in history if m.role == "user"] == [
            "first question",
            "second question",
            "third question",
        ]
        usage = history[-1].metadata["usage"]
        assert usage["cache_read_input_tokens"] == answer.usage.cache_read_input_tokens

    def test_an_image_block_is_stored_and_forwarded(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        data = png_url(64, 64).split(",", 1)[1]
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": data},
        }
        with both(sqlite_mem) as url, sdk(url) as app:
            app.messages.create(
                model=MODEL,
                max_tokens=100,
                messages=[
                    {"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}
                ],
            )
        question = sqlite_mem.session(SESSION_ID, SCOPE).messages()[0]
        assert question.content == "what is it?" and question.parts is not None
        sent = _bodies(claude)[-1]["messages"][-1]["content"]
        assert sent[1] == image


class TestThinkingAndTools:
    @pytest.mark.parametrize("resend", [True, False])
    def test_a_tool_loop_with_thinking_gets_its_thinking_back(
        self,
        sqlite_mem: Engram,
        claude: FakeAnthropicServer,
        both: Callable[..., Any],
        resend: bool,
    ) -> None:
        claude.reply_tool_use(
            [{"name": "get_weather", "input": {"city": "Oslo"}, "id": "toolu_1"}],
            thinking="The user wants Oslo's weather: call the tool.",
        )
        claude.reply("Sunny in Oslo.", thinking="The tool says sunny.")
        question = {"role": "user", "content": "weather in Oslo?"}
        with both(sqlite_mem) as url, sdk(url) as app:
            first = app.messages.create(
                model=MODEL,
                max_tokens=2000,
                thinking=THINKING,
                tools=[WEATHER],
                messages=[question],
            )
            assert [b.type for b in first.content] == ["thinking", "tool_use"]
            assert first.stop_reason == "tool_use"
            result = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
            }
            sent = [question, {"role": "assistant", "content": first.content}, result]
            second = app.messages.create(
                model=MODEL,
                max_tokens=2000,
                thinking=THINKING,
                tools=[WEATHER],
                messages=sent if resend else [result],
            )
        assert [b.type for b in second.content] == ["thinking", "text"]
        assert claude.refused == []  # the strict upstream checked the thinking block came back
        replayed = _bodies(claude)[-1]["messages"][-2]["content"][0]
        assert replayed == first.content[0].model_dump(exclude_none=True)
        history = sqlite_mem.session(SESSION_ID, SCOPE).messages()
        assert [(m.role, m.content) for m in history] == [
            ("user", "weather in Oslo?"),
            ("assistant", ""),
            ("tool", "sunny"),
            ("assistant", "Sunny in Oslo."),
        ]
        kept = history[1].metadata[VERBATIM_KEY]
        assert kept["format"] == ANTHROPIC and kept["items"][0]["item"]["type"] == "thinking"
        assert "Oslo's weather" not in " ".join(m.content for m in history)

    def test_engrams_own_round_keeps_the_thinking_block(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        claude.reply_tool_use(
            [{"name": "search_history", "input": {"query": "pricing"}}], thinking="Look it up."
        )
        claude.reply("Nothing about pricing yet.", thinking="Nothing found.")
        with both(sqlite_mem) as url, sdk(url) as app:
            answer = app.messages.create(
                model=MODEL,
                max_tokens=2000,
                thinking=THINKING,
                messages=[{"role": "user", "content": "what about pricing?"}],
            )
        assert [b.type for b in answer.content] == ["thinking", "text"]
        assert claude.refused == []
        roles = [role for role, _ in stored(sqlite_mem)]
        assert roles == ["user", "assistant", "tool", "assistant"]

    def test_streamed_thinking_tool_use_and_text(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        claude.reply_tool_use(
            [{"name": "get_weather", "input": {"city": "Oslo"}, "id": "toolu_1"}],
            thinking="Call the tool.",
        )
        claude.reply("It is sunny in Oslo today.", thinking="Sunny.")
        question = {"role": "user", "content": "weather in Oslo?"}
        with both(sqlite_mem) as url, sdk(url) as app:
            with app.messages.stream(
                model=MODEL,
                max_tokens=2000,
                thinking=THINKING,
                tools=[WEATHER],
                messages=[question],
            ) as stream:
                kinds = [event.type for event in stream]
                first = stream.get_final_message()
            assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
            assert [b.type for b in first.content] == ["thinking", "tool_use"]
            assert first.content[1].input == {"city": "Oslo"}
            result = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
            }
            with app.messages.stream(
                model=MODEL,
                max_tokens=2000,
                thinking=THINKING,
                tools=[WEATHER],
                messages=[result],
            ) as stream:
                text = "".join(stream.text_stream)
                second = stream.get_final_message()
        assert text == "It is sunny in Oslo today."
        assert [b.type for b in second.content] == ["thinking", "text"]
        assert second.stop_reason == "end_turn" and second.usage.output_tokens > 0
        assert claude.refused == []
        assert stored(sqlite_mem)[-1] == ("assistant", text)
        kept = sqlite_mem.session(SESSION_ID, SCOPE).messages()[1].metadata[VERBATIM_KEY]
        assert kept["items"][0]["item"] == first.content[0].model_dump(exclude_none=True)


class TestRefusals:
    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
            ({"max_tokens": 10, "messages": []}, "messages"),
            (
                {"max_tokens": 10, "messages": [{"role": "user", "content": [5]}]},
                "messages.0.content.0",
            ),
            (
                {
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": "x"}],
                    "tools": [{"type": "web_search_20250305", "name": "web_search"}],
                },
                "tools.0.type",
            ),
            (
                {"max_tokens": 10, "messages": [{"role": "system", "content": "x"}]},
                "messages.0.role",
            ),
        ],
    )
    def test_clear_error_nothing_stored(
        self,
        sqlite_mem: Engram,
        claude: FakeAnthropicServer,
        both: Callable[..., Any],
        body: dict[str, Any],
        field: str,
    ) -> None:
        with both(sqlite_mem) as url:
            answer = httpx.post(
                f"{url}/v1/messages", json={"model": MODEL, **body}, headers=SESSION
            )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["field"] == field
        assert stored(sqlite_mem) == [] and claude.requests == []

    def test_without_an_anthropic_upstream_it_says_how_to_name_one(
        self, sqlite_mem: Engram, strict: FakeLLMServer
    ) -> None:
        app = create_app(sqlite_mem, ServerSettings(proxy=ProxySettings(strict.base_url)))
        with serving(app) as url, sdk(url) as client:
            with pytest.raises(anthropic.InternalServerError, match="--anthropic-upstream"):
                client.messages.create(
                    model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]
                )

    def test_an_upstream_error_comes_back_as_it_was(
        self, sqlite_mem: Engram, claude: FakeAnthropicServer, both: Callable[..., Any]
    ) -> None:
        claude.fail(529, "overloaded_error", "Overloaded")
        with both(sqlite_mem) as url, sdk(url) as app:
            with pytest.raises(anthropic.APIStatusError) as caught:
                app.messages.create(
                    model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x"}]
                )
        assert caught.value.status_code == 529
        assert json.loads(caught.value.response.text)["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize("user_id", ["a\nb", "\U0001f600"])
def test_a_user_id_the_headers_cannot_carry_is_refused_naming_it(
    sqlite_mem: Engram, both: Callable[..., Any], claude: FakeAnthropicServer, user_id: str
) -> None:
    body = {
        "model": MODEL,
        "max_tokens": 50,
        "metadata": {"user_id": user_id},
        "messages": [{"role": "user", "content": "hi"}],
    }
    headers = {"x-api-key": "sk-ant-client", "anthropic-version": "2023-06-01"}
    with both(sqlite_mem) as url:
        answer = httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=30)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "metadata.user_id"  # was "user", not in this API
    assert claude.requests == [] and sqlite_mem.scopes() == []
