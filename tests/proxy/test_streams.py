"""Streamed answers: replays, cut answers asked again, Engram's calls kept out of the relay."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from tests.proxy.conftest import SESSION, client, refused, stored

from engram.engine import Engram
from engram.proxy.history import CUT_KEY
from engram.testing import FakeLLMServer, FakeResponse


def _text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_a_retried_stream_gets_the_stored_answer_as_a_stream(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.reply("streamed once")
    hi = [{"role": "user", "content": "hi"}]
    with served(sqlite_mem) as url, client(url) as app:
        first = list(app.chat.completions.create(model="m", messages=hi, stream=True,
                                                 extra_headers=SESSION))  # fmt: skip
        again = list(
            app.chat.completions.create(
                model="m",
                messages=hi,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers={**SESSION, "x-stainless-retry-count": "1"},
            )
        )
    assert _text(first) == _text(again) == "streamed once"
    assert again[-1].usage is not None and again[-1].usage.total_tokens == 0  # nothing billed
    assert [c.choices[0].finish_reason for c in again if c.choices][-1] == "stop"
    assert len(strict.requests) == 1
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "streamed once")]


def test_a_cut_answer_is_replaced_when_the_same_turn_comes_again(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    strict.push(FakeResponse(content=words, chunk_delay=0.05))
    strict.reply("the whole answer")
    body = {"model": "m", "messages": [{"role": "user", "content": "talk"}], "stream": True}
    with served(sqlite_mem) as url:
        with (
            httpx.Client(timeout=30) as http,
            http.stream(
                "POST", f"{url}/v1/chat/completions", json=body,
                headers={**SESSION, "x-stainless-retry-count": "1"},
            ) as response,
        ):  # fmt: skip
            for received, _ in enumerate(response.iter_lines()):
                if received >= 4:
                    break
        session = sqlite_mem.session("chat-1", "proj")
        deadline = time.monotonic() + 20
        while len(session.messages()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session.messages()[-1].metadata.get(CUT_KEY) is True
        with client(url) as app:  # the SDK retries the same request
            again = app.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "talk"}],
                extra_headers={**SESSION, "x-stainless-retry-count": "1"},
            )
    assert again.choices[0].message.content == "the whole answer"
    assert stored(sqlite_mem) == [("user", "talk"), ("assistant", "the whole answer")]


def test_engrams_calls_after_streamed_text_are_not_relayed(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    call = {
        "id": "e1",
        "type": "function",
        "function": {"name": "search_history", "arguments": '{"query": "x"}'},
    }
    strict.push(FakeResponse(content="Let me look.", tool_calls=[call], finish_reason="tool_calls"))
    with served(sqlite_mem) as url, client(url) as app:
        chunks = list(
            app.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "what did we say?"}],
                stream=True,
                extra_headers=SESSION,
            )
        )
    assert _text(chunks) == "Let me look."
    assert all(not c.choices[0].delta.tool_calls for c in chunks if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    messages = sqlite_mem.session("chat-1", "proj").messages()
    assert [(m.role, m.content, m.tool_calls) for m in messages] == [
        ("user", "what did we say?", None),
        ("assistant", "Let me look.", None),
    ]
    assert refused(strict) == []


def test_a_bad_single_system_header_is_refused_by_name(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    with served(sqlite_mem) as url, client(url) as app:
        with pytest.raises(openai.UnprocessableEntityError) as bad:
            app.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={**SESSION, "X-Engram-Single-System": "maybe"},
            )
    assert bad.value.body["field"] == "X-Engram-Single-System"
    assert strict.requests == [] and stored(sqlite_mem) == []
