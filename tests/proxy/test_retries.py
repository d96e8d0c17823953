"""Retries and concurrency: the SDK's retries, lost responses, keys, ten requests at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
import pytest
from tests.proxy.conftest import SESSION, client, refused, stored

from engram.engine import Engram
from engram.testing import FakeLLMServer, FakeResponse

HI = [{"role": "user", "content": "hi"}]


def test_sdk_default_retries_after_transient_errors_store_the_question_once(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.fail(500).fail(429, "slow down")
    with served(sqlite_mem) as url, client(url, max_retries=2) as app:
        answer = app.chat.completions.create(model="m", messages=HI, extra_headers=SESSION)
    assert answer.choices[0].message.content == "ok: hi"
    assert len(strict.requests) == 3
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "ok: hi")]


def test_three_failures_then_the_app_asks_again(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    strict.fail(500).fail(500).fail(500)
    with served(sqlite_mem) as url, client(url, max_retries=2) as app:
        with pytest.raises(openai.InternalServerError):
            app.chat.completions.create(model="m", messages=HI, extra_headers=SESSION)
        assert stored(sqlite_mem) == [("user", "hi")]
        app.chat.completions.create(model="m", messages=HI, extra_headers=SESSION)
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "ok: hi")]


def test_a_request_the_client_gave_up_on_is_answered_once(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    """The SDK times out and retries while the first attempt still runs: one answer, replayed."""
    strict.push(FakeResponse(content="the late answer", delay=2.0))
    with served(sqlite_mem) as url, client(url, max_retries=6, timeout=0.6) as app:
        answer = app.chat.completions.create(model="m", messages=HI, extra_headers=SESSION)
    assert answer.choices[0].message.content == "the late answer"
    assert len(strict.requests) == 1  # the retries never reached the upstream
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "the late answer")]


def test_full_history_retry_after_a_lost_response_gets_the_stored_answer(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    messages = [{"role": "user", "content": "first"}]
    with served(sqlite_mem) as url, client(url) as app:
        app.chat.completions.create(model="m", messages=messages, extra_headers=SESSION)
        raw = app.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,
            extra_headers={**SESSION, "x-stainless-retry-count": "1"},
        )
    assert raw.parse().choices[0].message.content == "ok: first"
    assert raw.headers["x-engram-replayed"] == "true"
    assert len(strict.requests) == 1
    assert stored(sqlite_mem) == [("user", "first"), ("assistant", "ok: first")]


def test_same_idempotency_key_after_success_replays_the_answer(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    keyed = {**SESSION, "Idempotency-Key": "turn-1"}
    with served(sqlite_mem, retry_window=0) as url, client(url) as app:
        first = app.chat.completions.create(model="m", messages=HI, extra_headers=keyed)
        again = app.chat.completions.create(model="m", messages=HI, extra_headers=keyed)
    assert again.choices[0].message.content == first.choices[0].message.content == "ok: hi"
    assert len(strict.requests) == 1
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "ok: hi")]


def test_a_reused_key_with_a_different_body_is_refused_naming_the_key(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    keyed = {**SESSION, "Idempotency-Key": "turn-7"}
    with served(sqlite_mem) as url, client(url) as app:
        app.chat.completions.create(model="m", messages=HI, extra_headers=keyed)
        with pytest.raises(openai.UnprocessableEntityError) as refused_error:
            app.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "bye"}], extra_headers=keyed
            )
    assert "turn-7" in refused_error.value.message
    assert refused_error.value.body["field"] == "Idempotency-Key"
    assert len(strict.requests) == 1
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "ok: hi")]


def test_a_new_key_is_a_new_request(
    sqlite_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    with served(sqlite_mem) as url, client(url) as app:
        for key in ("a", "b"):
            app.chat.completions.create(
                model="m", messages=HI, extra_headers={**SESSION, "Idempotency-Key": key}
            )
    assert stored(sqlite_mem) == [("user", "hi"), ("assistant", "ok: hi")] * 2
    assert len(strict.requests) == 2


def test_ten_requests_at_once_on_one_session_are_served_one_turn_at_a_time(
    any_mem: Engram, strict: FakeLLMServer, served: Callable[..., Any]
) -> None:
    async def main(url: str) -> None:
        async with openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60
        ) as sdk:
            await asyncio.gather(
                *(
                    sdk.chat.completions.create(
                        model="m",
                        messages=[{"role": "user", "content": f"question {i}"}],
                        extra_headers=SESSION,
                    )
                    for i in range(10)
                )
            )

    with served(any_mem) as url:
        asyncio.run(main(url))
    history = stored(any_mem)
    assert len(history) == 20
    for (role_q, question), (role_a, answer) in zip(history[::2], history[1::2], strict=True):
        assert (role_q, role_a) == ("user", "assistant")
        assert answer == f"ok: {question}"  # each answer right after its own question
    for request in strict.requests:  # each prompt: finished turns, then its own question
        texts = [m["content"] for m in request.messages if m["role"] != "system"]
        assert all(b == f"ok: {a}" for a, b in zip(texts[:-1:2], texts[1::2], strict=True))
    assert refused(strict) == []
