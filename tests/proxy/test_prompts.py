"""What the proxy sends upstream and back: valid tool sequences, edits, headers, system messages."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
from tests.proxy.conftest import SESSION, client, refused, stored

from engram.edits import AUDIT_EVENT
from engram.engine import Engram
from engram.testing import FakeLLMServer, FakeResponse

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _call(city: str, call_id: str) -> dict[str, Any]:
    return {"name": "get_weather", "arguments": {"city": city}, "id": call_id}


def test_the_standard_tool_loop_sends_valid_prompts_and_stores_each_message_once(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.reply_tool_calls([_call("Oslo", "call_1")])
    strict.reply("Sunny in Oslo.")
    messages: list[Any] = [{"role": "user", "content": "weather in Oslo?"}]
    with served(sqlite_mem) as url, client(url) as app:
        first = app.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER], extra_headers=SESSION
        )
        message = first.choices[0].message
        messages.append(message)
        for call in message.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"})
        second = app.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER], extra_headers=SESSION
        )
    assert second.choices[0].message.content == "Sunny in Oslo."
    assert refused(strict) == []
    assert [role for role, _ in stored(sqlite_mem)] == ["user", "assistant", "tool", "assistant"]
    roles = [m["role"] for m in strict.requests[-1].messages if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool"]


def test_a_call_the_app_never_answered_is_left_out_of_later_prompts(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.reply_tool_calls([_call("Oslo", "call_1"), _call("Rome", "call_2")])
    strict.reply("Fine.")
    strict.reply("Bergen is rainy.")
    with served(sqlite_mem) as url, client(url) as app:
        app.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "weather?"}],
            tools=[WEATHER],
            extra_headers=SESSION,
        )
        # The app answers one call of two, then moves on.
        app.chat.completions.create(
            model="m",
            messages=[{"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
            tools=[WEATHER],
            extra_headers=SESSION,
        )
        app.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "and Bergen?"}],
            tools=[WEATHER],
            extra_headers=SESSION,
        )
    assert refused(strict) == []
    last = strict.requests[-1].messages
    calls = [c["id"] for m in last for c in m.get("tool_calls") or []]
    assert calls == ["call_1"]  # the unanswered call_2 is left out with nothing else
    stored_call = sqlite_mem.session("chat-1", "proj").messages()[1]
    assert [c["id"] for c in stored_call.tool_calls or []] == ["call_1", "call_2"]  # kept whole


def test_an_edited_earlier_turn_replaces_what_followed_it_audited(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    messages: list[Any] = []
    with served(sqlite_mem) as url, client(url) as app:
        for text in ("one", "two", "three"):
            messages.append({"role": "user", "content": text})
            reply = app.chat.completions.create(model="m", messages=messages, extra_headers=SESSION)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        edited = [*messages[:2], {"role": "user", "content": "TWO, edited"}]
        raw = app.chat.completions.with_raw_response.create(
            model="m", messages=edited, extra_headers=SESSION
        )
    assert stored(sqlite_mem) == [
        ("user", "one"),
        ("assistant", "ok: one"),
        ("user", "TWO, edited"),
        ("assistant", "ok: TWO, edited"),
    ]
    assert raw.headers["x-engram-replaced"] == "4"
    audit = [e for e in sqlite_mem.store.list_audit("proj") if e.get("event") == AUDIT_EVENT]
    assert len(audit) == 1 and audit[0]["action"] == "proxy_edit" and len(audit[0]["ids"]) == 4
    assert refused(strict) == []


def test_an_edit_forgets_what_was_made_from_the_replaced_messages(
    any_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    """Replaced messages go like a deletion: a memory quoting one goes; the audit has a receipt."""
    secret = "We decided the passport number X7Q4481ZB stays in the blue folder."
    messages: list[Any] = []
    with served(any_mem) as url, client(url) as app:
        for text in ("one", secret, "three"):
            messages.append({"role": "user", "content": text})
            reply = app.chat.completions.create(model="m", messages=messages, extra_headers=SESSION)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        quoted = any_mem.memories("proj").create(secret)
        kept = any_mem.memories("proj").create("The team prefers trams to taxis.")
        edited = [*messages[:2], {"role": "user", "content": "two, said otherwise"}]
        app.chat.completions.create(model="m", messages=edited, extra_headers=SESSION)
    assert [m.id for m in any_mem.memories("proj").list()] == [kept.id]
    assert any_mem.search("X7Q4481ZB", "proj") == []
    (event,) = [e for e in any_mem.store.list_audit("proj") if e.get("event") == AUDIT_EVENT]
    receipt = event["receipt"]
    assert event["action"] == receipt["action"] == "proxy_edit" and receipt["message_count"] == 4
    assert receipt["messages"] == [[event["ids"][0], event["ids"][-1]]]
    derived = {(line["kind"], line["ref"], line["outcome"]) for line in receipt["derived"]}
    assert ("memory", f"memory {quoted.id}", "removed") in derived
    assert ("search_index", "4 rows", "removed") in derived
    assert "X7Q4481ZB" not in json.dumps(event)
    assert refused(strict) == []


def test_an_edit_far_back_in_a_long_conversation_is_followed(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    """The edited turn is older than the newest messages read first: reading goes on."""
    messages: list[Any] = []
    with served(sqlite_mem) as url, client(url) as app:
        for number in range(12):
            if number % 3 == 0:  # Engram's own rounds add stored messages the app never sees
                strict.reply_tool_calls([{"name": "get_memory_stats", "arguments": {}}])
            strict.reply(f"answer {number}")
            messages.append({"role": "user", "content": f"question {number}"})
            reply = app.chat.completions.create(model="m", messages=messages, extra_headers=SESSION)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        strict.reply("a new answer 1")
        edited = [*messages[:2], {"role": "user", "content": "question 1, edited"}]
        app.chat.completions.create(model="m", messages=edited, extra_headers=SESSION)
    history = sqlite_mem.session("chat-1", "proj").messages(limit=1000)
    seen = [(m.role, m.content) for m in history if m.role != "tool" and not m.tool_calls]
    assert seen == [
        ("user", "question 0"),
        ("assistant", "answer 0"),
        ("user", "question 1, edited"),
        ("assistant", "a new answer 1"),
    ]
    assert refused(strict) == []


def test_a_regenerated_answer_replaces_the_old_one(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.reply("hello")
    strict.reply("first try")
    strict.reply("second try")
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    with served(sqlite_mem) as url, client(url) as app:
        hello = app.chat.completions.create(model="m", messages=messages, extra_headers=SESSION)
        messages += [
            {"role": "assistant", "content": hello.choices[0].message.content},
            {"role": "user", "content": "tell me a joke"},
        ]
        app.chat.completions.create(model="m", messages=messages, extra_headers=SESSION)
        again = app.chat.completions.create(  # the app's regenerate button: same list again
            model="m", messages=messages, extra_headers=SESSION
        )
    assert again.choices[0].message.content == "second try"
    assert stored(sqlite_mem) == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "tell me a joke"),
        ("assistant", "second try"),
    ]
    audit = [e for e in sqlite_mem.store.list_audit("proj") if e.get("event") == AUDIT_EVENT]
    assert [e["action"] for e in audit] == ["proxy_edit"]


def test_a_new_only_app_asking_the_same_again_is_a_new_question(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    """The SDK marks a first attempt: the same message again is asked again, not replayed."""
    strict.reply("the first page").reply("the second page")
    with served(sqlite_mem) as url, client(url) as app:
        for _ in range(2):
            app.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "next"}], extra_headers=SESSION
            )
    assert stored(sqlite_mem) == [
        ("user", "next"),
        ("assistant", "the first page"),
        ("user", "next"),
        ("assistant", "the second page"),
    ]


def test_text_parts_are_joined_by_the_librarys_rule(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    parts: Any = [{"type": "text", "text": "first line"}, {"type": "text", "text": "second line"}]
    with served(sqlite_mem) as url, client(url) as app:
        app.chat.completions.create(
            model="m",
            messages=[
                {
                    "role": "system",
                    "content": [{"type": "text", "text": "Be"}, {"type": "text", "text": "brief."}],
                },
                {"role": "user", "content": parts},
            ],
            extra_headers=SESSION,
        )
    assert stored(sqlite_mem)[0] == ("user", "first line\nsecond line")
    assert strict.requests[0].messages[0]["content"].startswith("Be\nbrief.")


def test_rate_limit_headers_pass_through(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    limits = {"x-ratelimit-remaining-requests": "41", "x-ratelimit-reset-tokens": "6m0s"}
    strict.fail(429, "slow down", headers={"Retry-After": "7", **limits})
    strict.push(FakeResponse(content="fine", headers=limits))
    with served(sqlite_mem) as url, client(url) as app:
        try:
            app.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                        extra_headers=SESSION)  # fmt: skip
        except openai.RateLimitError as exc:
            assert exc.response.headers["retry-after"] == "7"
            assert exc.response.headers["x-ratelimit-remaining-requests"] == "41"
        else:
            raise AssertionError("the 429 should come through")
        raw = app.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=SESSION
        )
    assert raw.headers["x-ratelimit-reset-tokens"] == "6m0s"


def test_the_round_limit_ends_with_a_coherent_finish_reason(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    for _ in range(2):
        strict.reply_tool_calls([{"name": "get_memory_stats", "arguments": {}}])
    with served(sqlite_mem, max_rounds=2) as url, client(url) as app:
        answer = app.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=SESSION
        )
        streamed = list(
            app.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "again"}],
                stream=True,
                extra_headers=SESSION,
            )
        )
    choice = answer.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    reasons = [c.choices[0].finish_reason for c in streamed if c.choices]
    assert reasons[-1] == "stop"
    assert all(not c.choices[0].delta.tool_calls for c in streamed if c.choices)
    assert refused(strict) == []


def test_one_system_message_on_request(sqlite_mem: Engram, served: Callable[..., Any]) -> None:
    sqlite_mem.memories("proj").create("The user prefers metric units.")
    with FakeLLMServer(strict=True, max_system_messages=1) as strict_one:
        from tests.proxy.conftest import proxy_app
        from tests.proxy.live import serving

        with serving(proxy_app(sqlite_mem, strict_one, single_system=True)) as url:
            with client(url) as app:
                app.chat.completions.create(
                    model="m",
                    messages=[
                        {"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "hi"},
                    ],
                    extra_headers=SESSION,
                )
        with serving(proxy_app(sqlite_mem, strict_one)) as url, client(url) as app:
            app.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi again"}],
                extra_headers={**SESSION, "X-Engram-Single-System": "true"},
            )
        assert refused(strict_one) == []
        for request in strict_one.requests:
            system = [m for m in request.messages if m["role"] == "system"]
            assert len(system) == 1 and "metric units" in system[0]["content"]


def test_client_tool_arguments_come_back_unchanged(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.reply_tool_calls([_call("Oslo", "call_w")])
    with served(sqlite_mem) as url, client(url) as app:
        first = app.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "weather?"}],
            tools=[WEATHER],
            extra_headers=SESSION,
        )
    call = (first.choices[0].message.tool_calls or [])[0]
    assert json.loads(call.function.arguments) == {"city": "Oslo"}


def test_the_readme_tool_loop_runs_as_written(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Memory for any OpenAI client", 1)[1].split("\n## ", 1)[0]
    loop = re.findall(r"```py\n(.*?)```", section, re.DOTALL)[1]
    strict.reply_tool_calls([_call("Oslo", "call_1")])
    strict.reply("Sunny, 21 C in Oslo.")
    with served(sqlite_mem) as url, client(url) as app:
        namespace: dict[str, Any] = {
            "client": app,
            "json": json,
            "WEATHER_TOOL": WEATHER,
            "get_weather": lambda city: f"sunny, 21 C in {city}",
        }
        exec(loop, namespace)
    assert namespace["message"].content == "Sunny, 21 C in Oslo."
    history = sqlite_mem.session("chat-42", "default").messages()
    assert [(m.role, m.content) for m in history] == [
        ("user", "What is the weather in Oslo?"),
        ("assistant", ""),
        ("tool", "sunny, 21 C in Oslo"),
        ("assistant", "Sunny, 21 C in Oslo."),
    ]
    assert refused(strict) == []
