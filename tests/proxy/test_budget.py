"""The proxy's budget: the model's window by default, settable, and never a silent cut."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from tests.proxy.conftest import SESSION, client, stored

from engram.engine import Engram
from engram.testing import FakeLLMServer
from engram.tokens import REPLY_PRIMING, count_messages, counter_for_model


def _tool(i: int) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": f"client_tool_{i}",
            "description": f"Tool number {i}: does one thing the app knows how to do, well. " * 3,
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what to look for"},
                    "limit": {"type": "integer", "description": "how many results"},
                },
                "required": ["query"],
            },
        },
    }


def _words(tokens: int) -> str:
    return " ".join(f"w{i % 97}" for i in range(tokens // 2))


def test_max_tokens_valid_for_the_model_is_accepted(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    with served(sqlite_mem) as url, client(url) as app:
        raw = app.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=7900,
            extra_headers=SESSION,
        )
    assert raw.parse().choices[0].message.content == "ok: hi"
    assert raw.headers["x-engram-budget"] == "128000"  # gpt-4o-mini's context window


def test_thirty_client_tools_fit(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    tools: Any = [_tool(i) for i in range(30)]
    with served(sqlite_mem) as url, client(url) as app:
        answer = app.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            tools=tools,
            extra_headers=SESSION,
        )
    assert answer.choices[0].message.content == "ok: hi"


def test_a_long_message_that_fits_the_window_goes_whole(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    text = _words(12_000)
    with served(sqlite_mem) as url, client(url) as app:
        app.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": text}],
            extra_headers=SESSION,
        )
    assert strict.requests[-1].messages[-1]["content"] == text
    assert stored(sqlite_mem)[0] == ("user", text)


def test_a_message_that_cannot_fit_is_refused_naming_the_sizes_and_the_knob(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    text = _words(3_000)
    with served(sqlite_mem) as url, client(url) as app:
        with pytest.raises(openai.APIStatusError) as refused:
            app.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": text}],
                extra_headers={**SESSION, "X-Engram-Budget": "2500"},
            )
    assert refused.value.status_code == 413
    message = refused.value.message
    assert "2,500 tokens" in message and "X-Engram-Budget" in message and "--budget" in message
    size = count_messages(counter_for_model("gpt-4o-mini"), [{"role": "user", "content": text}])
    assert f"takes {size - REPLY_PRIMING:,} tokens" in message
    assert refused.value.body["field"] == "messages"
    assert strict.requests == [] and stored(sqlite_mem) == []


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"max_tokens": 127_990}, "max_tokens"),
        ({"max_completion_tokens": 200_000}, "max_completion_tokens"),
    ],
)
def test_a_reserve_that_leaves_no_room_is_refused_in_the_clients_terms(
    sqlite_mem: Engram,
    strict: FakeLLMServer,
    served: Callable[..., Any],
    extra: dict[str, Any],
    field: str,
) -> None:
    with served(sqlite_mem) as url, client(url) as app:
        with pytest.raises(openai.APIStatusError) as refused:
            app.chat.completions.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers=SESSION,
                **extra,
            )
    assert refused.value.status_code == 413
    assert field in refused.value.message and "non-negative" not in refused.value.message
    assert strict.requests == [] and stored(sqlite_mem) == []


def test_budget_header_then_server_setting_then_the_models_window(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    hi = [{"role": "user", "content": "hi"}]
    with served(sqlite_mem, budget=20_000) as url, client(url) as app:
        set_ = app.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=hi, extra_headers=SESSION
        )
        header = app.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=hi, extra_headers={**SESSION, "X-Engram-Budget": "9000"}
        )
        with pytest.raises(openai.UnprocessableEntityError) as bad:
            app.chat.completions.create(
                model="gpt-4o-mini", messages=hi, extra_headers={**SESSION, "X-Engram-Budget": "x"}
            )
    assert set_.headers["x-engram-budget"] == "20000"
    assert header.headers["x-engram-budget"] == "9000"
    assert bad.value.body["field"] == "X-Engram-Budget"
    with served(sqlite_mem) as url, client(url) as app:
        unknown = app.chat.completions.with_raw_response.create(
            model="my-local-model", messages=hi, extra_headers=SESSION
        )
    assert unknown.headers["x-engram-budget"] == "8192"  # the server default for unknown models
