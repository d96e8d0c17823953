"""The three proxy routes are one memory: the same conversation leaves the same history
through chat completions, Responses and Messages, and a session goes on from one to another."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
from click.testing import CliRunner
from tests.proxy.conftest import MODEL, SCOPE, SESSION, client, sdk

from engram.cli import main
from engram.engine import Engram
from engram.testing import FakeAnthropicServer, FakeLLMServer

TOOL = {
    "name": "get_weather",
    "description": "Weather of a city",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
OSLO = {"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_oslo"}


def _history(mem: Engram, session: str) -> list[tuple[Any, ...]]:
    """Role, text, calls (id, name, arguments) and the call answered, of every stored message."""
    return [
        (
            m.role,
            m.content,
            [
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in m.tool_calls or ()
            ],
            m.tool_call_id,
        )
        for m in mem.session(session, SCOPE).messages()
    ]


def _script(strict: FakeLLMServer, claude: FakeAnthropicServer) -> None:
    strict.reply("Hello!")
    strict.reply_tool_calls([OSLO])
    strict.reply("Sunny in Oslo.")
    strict.reply("Bye!")
    claude.reply("Hello!")
    claude.reply_tool_use([{"name": "get_weather", "input": {"city": "Oslo"}, "id": "call_oslo"}])
    claude.reply("Sunny in Oslo.")
    claude.reply("Bye!")


def _chat(app: openai.OpenAI, session: dict[str, str]) -> None:
    tools: Any = [
        {
            "type": "function",
            "function": {
                "name": TOOL["name"],
                "description": TOOL["description"],
                "parameters": TOOL["schema"],
            },
        }
    ]
    ask = app.chat.completions.create
    ask(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_headers=session)
    ask(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "weather in Oslo?"}],
        tools=tools,
        extra_headers=session,
    )
    ask(
        model="gpt-4o-mini",
        messages=[{"role": "tool", "tool_call_id": "call_oslo", "content": "sunny"}],
        tools=tools,
        extra_headers=session,
    )
    ask(model="gpt-4o-mini", messages=[{"role": "user", "content": "bye"}], extra_headers=session)


def _responses(app: openai.OpenAI, session: dict[str, str]) -> None:
    tools: Any = [
        {
            "type": "function",
            "name": TOOL["name"],
            "description": TOOL["description"],
            "parameters": TOOL["schema"],
        }
    ]
    first = app.responses.create(model="gpt-4o-mini", input="hi", extra_headers=session)
    second = app.responses.create(
        model="gpt-4o-mini", input="weather in Oslo?", tools=tools, previous_response_id=first.id
    )
    third = app.responses.create(
        model="gpt-4o-mini",
        tools=tools,
        previous_response_id=second.id,
        input=[{"type": "function_call_output", "call_id": "call_oslo", "output": "sunny"}],
    )
    app.responses.create(model="gpt-4o-mini", input="bye", previous_response_id=third.id)


def _messages(app: anthropic.Anthropic, session: dict[str, str]) -> None:
    tools: Any = [
        {"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["schema"]}
    ]
    ask = app.messages.create
    ask(
        model=MODEL,
        max_tokens=500,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers=session,
    )
    ask(
        model=MODEL,
        max_tokens=500,
        messages=[{"role": "user", "content": "weather in Oslo?"}],
        tools=tools,
        extra_headers=session,
    )
    result = {"type": "tool_result", "tool_use_id": "call_oslo", "content": "sunny"}
    ask(
        model=MODEL,
        max_tokens=500,
        messages=[{"role": "user", "content": [result]}],
        tools=tools,
        extra_headers=session,
    )
    ask(
        model=MODEL,
        max_tokens=500,
        messages=[{"role": "user", "content": "bye"}],
        extra_headers=session,
    )


def test_the_three_routes_store_the_same_history(
    sqlite_mem: Engram,
    strict: FakeLLMServer,
    claude: FakeAnthropicServer,
    both: Callable[..., Any],
) -> None:
    _script(strict, claude)
    with both(sqlite_mem) as url, client(url) as openai_app, sdk(url) as anthropic_app:
        _chat(openai_app, {**SESSION, "X-Engram-Session": "by-chat"})
        strict.requests.clear()
        _script(strict, claude)
        _responses(openai_app, {**SESSION, "X-Engram-Session": "by-responses"})
        _messages(anthropic_app, {**SESSION, "X-Engram-Session": "by-messages"})
    expected = [
        ("user", "hi", [], None),
        ("assistant", "Hello!", [], None),
        ("user", "weather in Oslo?", [], None),
        ("assistant", "", [("call_oslo", "get_weather", {"city": "Oslo"})], None),
        ("tool", "sunny", [], "call_oslo"),
        ("assistant", "Sunny in Oslo.", [], None),
        ("user", "bye", [], None),
        ("assistant", "Bye!", [], None),
    ]
    for session in ("by-chat", "by-responses", "by-messages"):
        assert _history(sqlite_mem, session) == expected, session
    assert strict.refused == [] and claude.refused == []


def test_a_session_goes_on_from_route_to_route(
    sqlite_mem: Engram,
    strict: FakeLLMServer,
    claude: FakeAnthropicServer,
    both: Callable[..., Any],
) -> None:
    claude.reply("Hello from Claude.", thinking="Greet back.")
    strict.reply("Hello from Responses.")
    strict.reply("Hello from chat.")
    claude.reply("Hello again from Claude.")
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with both(sqlite_mem) as url, client(url) as openai_app, sdk(url) as anthropic_app:
        anthropic_app.messages.create(
            model=MODEL,
            max_tokens=2000,
            thinking=thinking,
            messages=[{"role": "user", "content": "one (messages)"}],
        )
        openai_app.responses.create(
            model="gpt-4o-mini", input="two (responses)", extra_headers=SESSION
        )
        openai_app.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "three (chat)"}],
            extra_headers=SESSION,
        )
        anthropic_app.messages.create(
            model=MODEL,
            max_tokens=2000,
            thinking=thinking,
            messages=[{"role": "user", "content": "four (messages)"}],
        )
    assert [text for _, text, _, _ in _history(sqlite_mem, "chat-1")] == [
        "one (messages)",
        "Hello from Claude.",
        "two (responses)",
        "Hello from Responses.",
        "three (chat)",
        "Hello from chat.",
        "four (messages)",
        "Hello again from Claude.",
    ]
    chat_prompt = [m.get("content") for m in strict.requests[-1].messages]
    assert "one (messages)" in chat_prompt and "two (responses)" in chat_prompt
    assert "Greet back" not in json.dumps(strict.requests[-1].body)  # thinking is not text
    last = (claude.requests[-1].body or {})["messages"]
    assert last[1]["content"][0]["type"] == "thinking"  # sent back to its own kind, as it came
    assert [b["text"] for m in last for b in m["content"] if b["type"] == "text"][-1] == (
        "four (messages)"
    )
    assert strict.refused == [] and claude.refused == []


def test_the_dashboard_and_engram_context_show_them_like_any_session(
    sqlite_mem: Engram,
    strict: FakeLLMServer,
    claude: FakeAnthropicServer,
    both: Callable[..., Any],
) -> None:
    claude.reply("A Claude answer.", thinking="Private reasoning here.")
    strict.reply("A Responses answer.")
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with both(sqlite_mem) as url, client(url) as openai_app, sdk(url) as anthropic_app:
        anthropic_app.messages.create(
            model=MODEL,
            max_tokens=2000,
            thinking=thinking,
            messages=[{"role": "user", "content": "a Messages question"}],
            extra_headers={**SESSION, "X-Engram-Session": "by-messages"},
        )
        openai_app.responses.create(
            model="gpt-4o-mini",
            input="a Responses question",
            extra_headers={**SESSION, "X-Engram-Session": "by-responses"},
        )
        sessions = httpx.get(f"{url}/p/{SCOPE}", timeout=10)
        pages = {
            name: httpx.get(f"{url}/p/{SCOPE}/s/{name}", timeout=10)
            for name in ("by-messages", "by-responses")
        }
    assert sessions.status_code == 200
    assert "by-messages" in sessions.text and "by-responses" in sessions.text
    for name, question, answer in (
        ("by-messages", "a Messages question", "A Claude answer."),
        ("by-responses", "a Responses question", "A Responses answer."),
    ):
        page = pages[name]
        assert page.status_code == 200 and question in page.text and answer in page.text
        # The prompt log recorded the turn sent upstream, like any other.
        assert sqlite_mem.session(name, SCOPE).prompt_log().turns == 1
        shown = CliRunner().invoke(
            main,
            ["--db", sqlite_mem.url, "context", "--session", name, "--scope", SCOPE, "--json"],
            catch_exceptions=False,
        )
        assert shown.exit_code == 0, shown.output
        prompt = json.loads(shown.output)["messages"]
        assert [m["content"] for m in prompt if m["role"] != "system"] == [question, answer]
    assert "Private reasoning" not in pages["by-messages"].text


def test_the_readme_examples_run_as_written(
    sqlite_mem: Engram,
    strict: FakeLLMServer,
    claude: FakeAnthropicServer,
    both: Callable[..., Any],
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The Responses and Anthropic Messages APIs", 1)[1]
    responses_example, messages_example = re.findall(
        r"```py\n(.*?)```", section.split("\n## ", 1)[0], re.DOTALL
    )
    key = sqlite_mem.api_keys().create(scopes=["phoenix"]).secret
    strict.reply("Pro is $14 per month.")
    strict.reply("Teams pay $12 per seat.")
    claude.reply("We chose $14 per month for Pro.")
    with both(sqlite_mem) as url:
        namespace: dict[str, Any] = {"ENGRAM_KEY": key, "ANTHROPIC_KEY": "sk-ant-reader"}
        for example in (responses_example, messages_example):
            exec(example.replace("http://127.0.0.1:8000", url), namespace)
    assert namespace["follow_up"].output_text == "Teams pay $12 per seat."
    assert namespace["message"].content[0].text == "We chose $14 per month for Pro."
    history = sqlite_mem.session("chat-42", "phoenix").messages()
    assert [m.content for m in history if m.role == "user"] == [
        "What did we decide about pricing?",
        "And for teams?",
        "What did we decide about pricing?",
    ]
    sent = claude.requests[-1].headers
    assert sent["x-api-key"] == "sk-ant-reader" and "authorization" not in sent
