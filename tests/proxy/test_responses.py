"""``POST /v1/responses``: the official openai SDK (and the Agents SDK) against a live server,
with the strict scripted chat-completions server as the upstream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from tests.proxy.conftest import SCOPE, SESSION, SESSION_ID, client, refused, stored

from engram.engine import Engram
from engram.proxy.responses import RESPONSE_ID, read_response_id
from engram.proxy.verbatim import RESPONSES, VERBATIM_KEY
from engram.testing import FakeLLMServer

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
OSLO_CALL = {"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "c1"}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "The user greets; answer kindly."}],
    "encrypted_content": "gAAAAB-opaque-blob",
}


def _texts(upstream: FakeLLMServer, index: int = -1) -> list[Any]:
    return [m.get("content") for m in upstream.requests[index].messages]


class TestPlain:
    def test_text_in_text_out_stored_once(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply("Hello! Pricing is per seat.")
        with served(sqlite_mem) as url, client(url) as app:
            raw = app.responses.with_raw_response.create(
                model="gpt-4o-mini", input="hi", instructions="Be brief.", extra_headers=SESSION
            )
        response = raw.parse()
        assert response.output_text == "Hello! Pricing is per seat."
        assert response.status == "completed" and response.model == "gpt-4o-mini"
        assert response.usage is not None and response.usage.input_tokens > 0
        assert read_response_id(response.id).session == SESSION_ID
        assert raw.headers["x-engram-session"] == SESSION_ID
        assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "Hello! Pricing is per seat.")]
        sent = strict.requests[-1]
        assert sent.body is not None and sent.body["model"] == "gpt-4o-mini"
        assert sent.messages[0]["role"] == "system"
        assert sent.messages[0]["content"].startswith("Be brief.")
        assert sent.messages[-1] == {"role": "user", "content": "hi"}
        answer = sqlite_mem.session(SESSION_ID, SCOPE).messages()[-1]
        assert answer.metadata[RESPONSE_ID] == response.id
        assert answer.metadata["usage"]["prompt_tokens"] > 0

    def test_settings_translated_and_echoed(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
        with served(sqlite_mem) as url, client(url) as app:
            response = app.responses.create(
                model="gpt-4o-mini",
                input=[{"role": "user", "content": [{"type": "input_text", "text": "json, pls"}]}],
                max_output_tokens=300,
                temperature=0.2,
                text={"format": {"type": "json_schema", "name": "a", "schema": schema}},
                reasoning={"effort": "low"},
                include=["reasoning.encrypted_content"],
                truncation="auto",
                metadata={"session_id": SESSION_ID, "scope": SCOPE, "team": "x"},
            )
        body = strict.requests[-1].body or {}
        assert body["max_completion_tokens"] == 300 and body["temperature"] == 0.2
        assert body["response_format"]["json_schema"]["schema"] == schema
        assert body["reasoning_effort"] == "low"
        assert body["metadata"] == {"team": "x"}  # Engram's keys stay here
        for dropped in ("include", "truncation", "input", "max_output_tokens", "text", "store"):
            assert dropped not in body
        assert response.max_output_tokens == 300 and response.temperature == 0.2
        assert stored(sqlite_mem) == [("user", "json, pls"), ("assistant", "ok: json, pls")]

    def test_engrams_own_tool_round_is_not_shown(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply_tool_calls([{"name": "search_history", "arguments": {"query": "pricing"}}])
        strict.reply("Nothing about pricing yet.")
        with served(sqlite_mem) as url, client(url) as app:
            response = app.responses.create(
                model="gpt-4o-mini", input="what did we say on pricing?", extra_headers=SESSION
            )
        assert [item.type for item in response.output] == ["message"]
        assert response.output_text == "Nothing about pricing yet."
        roles = [role for role, _ in stored(sqlite_mem)]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert refused(strict) == []


class TestToolLoop:
    def test_previous_response_id_continues_the_session(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply_tool_calls([OSLO_CALL])
        strict.reply("Sunny in Oslo.")
        with served(sqlite_mem) as url, client(url) as app:
            first = app.responses.create(
                model="gpt-4o-mini",
                input="weather in Oslo?",
                tools=[WEATHER],
                extra_headers=SESSION,
            )
            (call,) = first.output
            assert call.type == "function_call" and call.call_id == "c1"
            assert json.loads(call.arguments) == {"city": "Oslo"}
            # No session header: the previous response names the conversation.
            second = app.responses.create(
                model="gpt-4o-mini",
                previous_response_id=first.id,
                input=[{"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
                tools=[WEATHER],
            )
        assert second.output_text == "Sunny in Oslo."
        assert second.previous_response_id == first.id
        assert stored(sqlite_mem) == [
            ("user", "weather in Oslo?"),
            ("assistant", ""),
            ("tool", "sunny"),
            ("assistant", "Sunny in Oslo."),
        ]
        assert strict.requests[-1].messages[-2]["tool_calls"][0]["id"] == "c1"
        assert refused(strict) == []

    def test_a_client_resending_every_item_stores_each_once(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply_tool_calls([OSLO_CALL])
        strict.reply("Sunny in Oslo.")
        strict.reply("Bye!")
        items: list[Any] = [{"role": "user", "content": "weather in Oslo?"}]
        with served(sqlite_mem) as url, client(url) as app:
            first = app.responses.create(
                model="gpt-4o-mini", input=items, tools=[WEATHER], extra_headers=SESSION
            )
            items += [item.model_dump(exclude_none=True) for item in first.output]
            items.append({"type": "function_call_output", "call_id": "c1", "output": "sunny"})
            second = app.responses.create(
                model="gpt-4o-mini", input=items, tools=[WEATHER], extra_headers=SESSION
            )
            items += [item.model_dump(exclude_none=True) for item in second.output]
            items.append({"role": "user", "content": "thanks"})
            app.responses.create(model="gpt-4o-mini", input=items, extra_headers=SESSION)
        assert stored(sqlite_mem) == [
            ("user", "weather in Oslo?"),
            ("assistant", ""),
            ("tool", "sunny"),
            ("assistant", "Sunny in Oslo."),
            ("user", "thanks"),
            ("assistant", "Bye!"),
        ]
        assert _texts(strict).count("weather in Oslo?") == 1
        assert refused(strict) == []

    def test_streamed_tool_call_then_streamed_answer(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply_tool_calls([OSLO_CALL])
        strict.reply("Sunny in Oslo, 21 degrees.")
        with served(sqlite_mem) as url, client(url) as app:
            with app.responses.stream(
                model="gpt-4o-mini", input="weather?", tools=[WEATHER], extra_headers=SESSION
            ) as stream:
                kinds = [event.type for event in stream]
                first = stream.get_final_response()
            assert kinds[:2] == ["response.created", "response.in_progress"]
            assert "response.function_call_arguments.done" in kinds
            assert kinds[-1] == "response.completed"
            (call,) = first.output
            assert call.type == "function_call" and call.name == "get_weather"
            with app.responses.stream(
                model="gpt-4o-mini",
                previous_response_id=first.id,
                input=[{"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
                tools=[WEATHER],
            ) as stream:
                deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
                second = stream.get_final_response()
        assert "".join(deltas) == "Sunny in Oslo, 21 degrees." and len(deltas) > 1
        assert second.output_text == "Sunny in Oslo, 21 degrees."
        assert second.usage is not None and second.usage.output_tokens > 0
        assert stored(sqlite_mem)[-2:] == [("tool", "sunny"), ("assistant", second.output_text)]
        assert refused(strict) == []


class TestStreaming:
    def test_events_in_order_and_the_answer_stored(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply("A streamed answer in several pieces.")
        with served(sqlite_mem) as url, client(url) as app:
            events = list(
                app.responses.create(
                    model="gpt-4o-mini", input="stream it", stream=True, extra_headers=SESSION
                )
            )
        kinds = [event.type for event in events]
        assert kinds[:4] == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
        ]
        assert kinds[-4:] == [
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
        assert [e.sequence_number for e in events] == list(range(len(events)))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "A streamed answer in several pieces."
        done = events[-1].response
        assert done.output_text == text and done.id == events[0].response.id
        assert stored(sqlite_mem)[-1] == ("assistant", text)


class TestStoreFalse:
    def test_nothing_stored_but_the_prompt_holds_the_history_and_the_question(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply("first answer")
        strict.reply_tool_calls([{"name": "search_history", "arguments": {"query": "x"}}])
        strict.reply("a private answer")
        with served(sqlite_mem) as url, client(url) as app:
            app.responses.create(model="gpt-4o-mini", input="first", extra_headers=SESSION)
            before = stored(sqlite_mem)
            log = sqlite_mem.session(SESSION_ID, SCOPE).prompt_log().turns
            private = app.responses.create(
                model="gpt-4o-mini",
                input="a private question",
                store=False,
                extra_headers=SESSION,
            )
        assert private.output_text == "a private answer" and private.store is False
        assert stored(sqlite_mem) == before
        assert sqlite_mem.session(SESSION_ID, SCOPE).prompt_log().turns == log
        last = strict.requests[-1].messages
        assert [m.get("content") for m in last if m["role"] == "user"] == [
            "first",
            "a private question",
        ]
        assert last[-2]["tool_calls"][0]["function"]["name"] == "search_history"
        assert refused(strict) == []

    def test_streamed_and_keyed_nothing_stored(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        strict.reply("a private streamed answer")
        with served(sqlite_mem) as url, client(url) as app:
            events = list(
                app.responses.create(
                    model="gpt-4o-mini",
                    input="private",
                    store=False,
                    stream=True,
                    extra_headers={**SESSION, "Idempotency-Key": "k-private"},
                )
            )
        assert events[-1].type == "response.completed"
        assert events[-1].response.output_text == "a private streamed answer"
        assert stored(sqlite_mem) == [] and sqlite_mem.session(SESSION_ID, SCOPE).info() is None


class TestVerbatim:
    def test_reasoning_kept_verbatim_never_as_text(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        items: list[Any] = [
            {"role": "user", "content": "hello"},
            REASONING,
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "content": [{"type": "output_text", "text": "Hi there!", "annotations": []}],
            },
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque-summary"},
            {"role": "user", "content": "how are you?"},
        ]
        with served(sqlite_mem) as url, client(url) as app:
            app.responses.create(model="gpt-4o-mini", input=items, extra_headers=SESSION)
        history = sqlite_mem.session(SESSION_ID, SCOPE).messages()
        assert [(m.role, m.content) for m in history] == [
            ("user", "hello"),
            ("assistant", "Hi there!"),
            ("user", "how are you?"),
            ("assistant", "ok: how are you?"),
        ]
        assert history[1].metadata[VERBATIM_KEY] == {
            "format": RESPONSES,
            "items": [{"at": 0, "item": REASONING}],
        }
        assert history[2].metadata[VERBATIM_KEY]["items"][0]["item"]["type"] == "compaction"
        sent = json.dumps(strict.requests[-1].body)
        assert "opaque" not in sent and "greets" not in sent and "reasoning" not in sent


class TestRefusals:
    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"input": "x", "tools": [{"type": "web_search"}]}, "tools.0.type"),
            ({"input": []}, "input"),
            ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
            ({"input": "x", "previous_response_id": "resp_abc"}, "previous_response_id"),
            ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
            ({"input": "x", "background": True}, "background"),
        ],
    )
    def test_clear_error_nothing_stored(
        self,
        sqlite_mem: Engram,
        strict: FakeLLMServer,
        served: Callable[..., Any],
        body: dict[str, Any],
        field: str,
    ) -> None:
        with served(sqlite_mem) as url:
            answer = httpx.post(
                f"{url}/v1/responses", json={"model": "gpt-4o-mini", **body}, headers=SESSION
            )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["field"] == field
        assert stored(sqlite_mem) == [] and strict.requests == []

    def test_previous_response_of_another_session_is_refused(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
    ) -> None:
        with served(sqlite_mem) as url, client(url) as app:
            first = app.responses.create(model="gpt-4o-mini", input="hi", extra_headers=SESSION)
            with pytest.raises(openai.UnprocessableEntityError, match="belongs to session"):
                app.responses.create(
                    model="gpt-4o-mini",
                    input="again",
                    previous_response_id=first.id,
                    extra_headers={**SESSION, "X-Engram-Session": "other"},
                )
        assert len(stored(sqlite_mem)) == 2 and stored(sqlite_mem, "other") == []


class TestRetries:
    @pytest.mark.parametrize("stream", [False, True])
    def test_a_retry_gets_the_stored_response_back(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any], stream: bool
    ) -> None:
        strict.reply("the only answer")
        keyed = {**SESSION, "Idempotency-Key": "k-1"}
        with served(sqlite_mem) as url, client(url) as app:
            first = app.responses.create(model="gpt-4o-mini", input="q", extra_headers=keyed)
            if stream:  # the SDK's own retry after a lost answer (no key)
                events = list(
                    app.responses.create(
                        model="gpt-4o-mini",
                        input="q",
                        stream=True,
                        extra_headers={**SESSION, "x-stainless-retry-count": "1"},
                    )
                )
                assert events[-1].response.id == first.id
                assert events[-1].response.output_text == "the only answer"
            again = app.responses.with_raw_response.create(
                model="gpt-4o-mini", input="q", extra_headers=keyed
            )
        assert again.headers["x-engram-replayed"] == "true"
        assert again.parse().id == first.id and again.parse().output_text == "the only answer"
        assert len(strict.requests) == 1
        assert stored(sqlite_mem) == [("user", "q"), ("assistant", "the only answer")]

    @pytest.mark.parametrize("turns", [1, 12])
    def test_previous_response_id_of_an_earlier_turn_forks_there(
        self, sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any], turns: int
    ) -> None:
        with served(sqlite_mem) as url, client(url) as app:
            strict.reply("one")
            first = app.responses.create(model="gpt-4o-mini", input="1?", extra_headers=SESSION)
            previous = first.id
            for number in range(turns):
                strict.reply(f"answer {number}")
                previous = app.responses.create(
                    model="gpt-4o-mini", input=f"{number}?", previous_response_id=previous
                ).id
            strict.reply("two, again")
            app.responses.create(
                model="gpt-4o-mini", input="2, differently?", previous_response_id=first.id
            )
        assert stored(sqlite_mem) == [
            ("user", "1?"),
            ("assistant", "one"),
            ("user", "2, differently?"),
            ("assistant", "two, again"),
        ]
        audit = sqlite_mem.store.list_audit(SCOPE)
        assert any(entry.get("action") == "proxy_edit" for entry in audit)


def test_agents_sdk_on_its_default_responses_model_stores_its_real_items(
    any_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny and 21 C in {city}"

    strict.reply("Hello! How can I help?")
    strict.reply_tool_calls([{**OSLO_CALL, "id": "c_oslo"}])
    strict.reply("It is sunny and 21 C in Oslo.")
    strict.reply("You're welcome.")

    async def run(url: str) -> None:
        async with openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="unused", max_retries=0, default_headers=SESSION
        ) as sdk:
            model = OpenAIResponsesModel(model="gpt-4o-mini", openai_client=sdk)
            agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[get_weather])
            history: list[Any] = []
            for question in ["hi", "what is the weather in Oslo?", "thanks"]:
                result = await Runner.run(agent, [*history, {"role": "user", "content": question}])
                history = result.to_input_list()

    with served(any_mem) as url:
        asyncio.run(run(url))
    messages = any_mem.session(SESSION_ID, SCOPE).messages()
    assert [(m.role, m.content) for m in messages] == [
        ("user", "hi"),
        ("assistant", "Hello! How can I help?"),
        ("user", "what is the weather in Oslo?"),
        ("assistant", ""),
        ("tool", "sunny and 21 C in Oslo"),
        ("assistant", "It is sunny and 21 C in Oslo."),
        ("user", "thanks"),
        ("assistant", "You're welcome."),
    ]
    assert messages[3].tool_calls is not None and messages[3].tool_calls[0]["id"] == "c_oslo"
    assert messages[4].tool_call_id == "c_oslo"
    assert refused(strict) == []
