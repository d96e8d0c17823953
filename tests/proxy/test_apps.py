"""Unmodified apps through the proxy: each leaves exactly its real messages stored, once, in order.

Three apps as people write them, with the official SDKs and a strict upstream
(it refuses every prompt OpenAI would refuse): a chat app that keeps its own
list and re-sends it every turn, an Agents SDK app with a tool, and an app
that sends only its newest message. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import openai
from tests.proxy.conftest import SESSION, client, refused, stored

from engram.engine import Engram
from engram.testing import FakeLLMServer

QUESTIONS = [f"question number {i}: what about topic {i}?" for i in range(1, 6)]


def _script_answers(upstream: FakeLLMServer, count: int) -> list[str]:
    answers = [f"answer number {i}" for i in range(1, count + 1)]
    for answer in answers:
        upstream.reply(answer)
    return answers


def test_chat_app_that_resends_its_history(
    any_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    answers = _script_answers(strict, len(QUESTIONS))
    messages: list[Any] = [{"role": "system", "content": "Be brief."}]
    with served(any_mem) as url, client(url) as app:
        for question in QUESTIONS:
            messages.append({"role": "user", "content": question})
            reply = app.chat.completions.create(
                model="gpt-4o-mini", messages=messages, extra_headers=SESSION
            )
            messages.append(reply.choices[0].message)  # the SDK's own object, as apps do
    expected = [x for pair in zip(QUESTIONS, answers, strict=True) for x in pair]
    assert stored(any_mem) == [
        (role, text) for role, text in zip(["user", "assistant"] * 5, expected, strict=True)
    ]
    last_prompt = [m.get("content") for m in strict.requests[-1].messages]
    assert last_prompt.count(QUESTIONS[0]) == 1
    assert refused(strict) == []


def test_new_only_app(any_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]) -> None:
    answers = _script_answers(strict, len(QUESTIONS))
    with served(any_mem) as url, client(url) as app:
        for question in QUESTIONS:
            app.chat.completions.create(
                model="gpt-4o-mini",
                messages=[
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": question},
                ],
                extra_headers=SESSION,
            )
    expected = [x for pair in zip(QUESTIONS, answers, strict=True) for x in pair]
    assert [text for _, text in stored(any_mem)] == expected
    assert refused(strict) == []


def test_new_only_and_full_history_apps_get_the_same_history_and_prompts(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    prompts: dict[str, list[Any]] = {}
    for style in ("new-only", "full"):
        session = {**SESSION, "X-Engram-Session": style}
        _script_answers(strict, 3)
        start = len(strict.requests)
        messages: list[Any] = []
        with served(sqlite_mem) as url, client(url) as app:
            for question in QUESTIONS[:3]:
                messages.append({"role": "user", "content": question})
                sent = messages if style == "full" else messages[-1:]
                reply = app.chat.completions.create(
                    model="gpt-4o-mini", messages=sent, extra_headers=session
                )
                messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        prompts[style] = [r.messages for r in strict.requests[start:]]
    assert prompts["new-only"] == prompts["full"]
    assert stored(sqlite_mem, "new-only") == stored(sqlite_mem, "full")


def test_agents_sdk_app_with_a_tool(
    any_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny and 21 C in {city}"

    strict.reply("Hello! How can I help?")
    strict.reply_tool_calls(
        [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_oslo"}]
    )
    strict.reply("It is sunny and 21 C in Oslo.")
    strict.reply("You're welcome.")
    questions = ["hi", "what is the weather in Oslo?", "thanks"]

    async def run(url: str) -> None:
        async with openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="unused", max_retries=0, default_headers=SESSION
        ) as sdk:
            model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=sdk)
            agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[get_weather])
            history: list[Any] = []
            for question in questions:
                result = await Runner.run(agent, [*history, {"role": "user", "content": question}])
                history = result.to_input_list()

    with served(any_mem) as url:
        asyncio.run(run(url))
    messages = any_mem.session("chat-1", "proj").messages()
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
    call = messages[3].tool_calls
    assert call is not None and call[0]["id"] == "call_oslo"
    assert json.loads(call[0]["function"]["arguments"]) == {"city": "Oslo"}
    assert messages[4].tool_call_id == "call_oslo"
    assert refused(strict) == []
