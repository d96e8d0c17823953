"""The proxy end to end: the official openai SDK against a real uvicorn server on 127.0.0.1,
with the scripted OpenAI-compatible server as the upstream."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tests.images import png_url
from tests.proxy.live import serving

import engram
from engram.engine import Engram
from engram.idempotency import key_of
from engram.proxy import ProxySettings
from engram.proxy.history import CUT_KEY
from engram.server import ServerSettings, create_app
from engram.testing import FakeLLMServer, FakeResponse

SESSION = {"X-Engram-Session": "chat-1", "X-Engram-Scope": "proj"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The shared ``mem`` fixture (an Engram with no model) on SQLite only."""
    return f"sqlite:///{tmp_path / 'proxy.db'}"


@pytest.fixture
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def _app(mem: Engram, upstream: FakeLLMServer, **options: Any) -> Any:
    proxy = ProxySettings(upstream.base_url, api_key="upstream-key", **options)
    return create_app(mem, ServerSettings(key_cache_seconds=0, proxy=proxy))


@pytest.fixture
def base_url(mem: Engram, upstream: FakeLLMServer) -> Iterator[str]:
    with serving(_app(mem, upstream, timeout=5)) as url:
        yield url


def _client(base_url: str, api_key: str = "unused", **options: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{base_url}/v1", api_key=api_key, max_retries=0, timeout=30, **options
    )


def _history(mem: Engram, session: str = "chat-1") -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in mem.session(session, "proj").messages()]


class TestCompletions:
    def test_answer_stored_and_reported(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        upstream.reply("Hello! Pricing is per seat.")
        with _client(base_url) as client:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini",
                messages=[
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "hi"},
                ],
                extra_headers=SESSION,
            )
        completion = raw.parse()
        assert completion.choices[0].message.content == "Hello! Pricing is per seat."
        assert completion.model == "gpt-4o-mini"  # the client's model passed through
        assert _history(mem) == [("user", "hi"), ("assistant", "Hello! Pricing is per seat.")]
        sent = upstream.requests[-1]
        assert sent.headers["authorization"] == "Bearer upstream-key"
        assert sent.body["model"] == "gpt-4o-mini"
        assert sent.messages[0]["role"] == "system" and sent.messages[0]["content"].startswith(
            "Be brief."
        )
        assert completion.usage is not None and completion.usage.prompt_tokens > 0
        assert raw.headers["x-engram-session"] == "chat-1"
        assert raw.headers["x-engram-scope"] == "proj"
        assert int(raw.headers["x-engram-prompt-tokens"]) > 0
        assert raw.headers["x-engram-compaction-pending"] == "false"
        assert raw.headers["x-engram-rounds"] == "1"
        assert "x-engram-tokens-left-out" in raw.headers

    def test_an_image_part_is_stored_whole_and_forwarded_as_it_was(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        url = png_url(1024, 1024)
        parts: list[Any] = [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
        ]
        with _client(base_url) as client:
            client.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": parts}],
                extra_headers=SESSION,
            )
        (question, _answer) = mem.session("chat-1", "proj").messages()
        assert question.parts == parts and question.content == "What is in this picture?"
        assert upstream.requests[-1].messages[-1]["content"] == parts

    def test_client_sends_only_new_messages_engram_sends_the_history(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        with _client(base_url) as client:
            for text in ("first question", "second question"):
                client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": text}],
                    user="chat-1",
                    extra_headers={"X-Engram-Scope": "proj"},
                )
        contents = [m.get("content") for m in upstream.requests[-1].messages]
        assert "first question" in contents and "ok: first question" in contents
        assert contents[-1] == "second question"
        assert len(_history(mem)) == 4

    def test_engram_tool_rounds_run_inside_and_usage_is_the_sum(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        said = mem.session("chat-1", "proj").add(
            "user", "We decided the price is 20 dollars per seat"
        )
        upstream.reply_tool_calls(
            [{"name": "get_message_by_id", "arguments": {"message_id": said.id}}]
        )
        upstream.reply("It was 20 dollars per seat.")
        with _client(base_url) as client:
            raw = client.chat.completions.with_raw_response.create(
                model="m",
                messages=[{"role": "user", "content": "what price?"}],
                extra_headers=SESSION,
            )
        completion = raw.parse()
        assert completion.choices[0].message.content == "It was 20 dollars per seat."
        assert completion.choices[0].message.tool_calls is None
        first, second = upstream.requests[-2:]
        offered = [t["function"]["name"] for t in first.body["tools"]]
        assert "search_history" in offered and "search_memories" in offered
        tool_result = next(m for m in second.messages if m["role"] == "tool")
        assert "20 dollars" in tool_result["content"]
        usage = completion.usage
        assert usage is not None
        expected = sum(r.body and _usage_of(upstream, r) for r in (first, second))
        assert usage.prompt_tokens == expected
        roles = [role for role, _ in _history(mem)]
        assert roles == ["user", "user", "assistant", "tool", "assistant"]
        assert raw.headers["x-engram-rounds"] == "2"

    def test_client_tools_go_back_unchanged_and_their_results_are_stored(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        upstream.reply_tool_calls(
            [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_w"}]
        )
        with _client(base_url) as client:
            first = client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "weather?"}],
                tools=[WEATHER],
                extra_headers=SESSION,
            )
            call = first.choices[0].message.tool_calls[0]
            assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
                "call_w",
                "get_weather",
                {"city": "Oslo"},
            )
            assert first.choices[0].finish_reason == "tool_calls"
            upstream.reply("Sunny in Oslo.")
            second = client.chat.completions.create(
                model="m",
                messages=[{"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 C"}],
                tools=[WEATHER],
                extra_headers=SESSION,
            )
        assert second.choices[0].message.content == "Sunny in Oslo."
        sent = upstream.requests[0].body["tools"]
        assert sent[0] == WEATHER  # the client's schema, unchanged, first
        assert [role for role, _ in _history(mem)] == ["user", "assistant", "tool", "assistant"]

    def test_round_limit_last_round_offers_only_the_clients_tools(
        self, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        for _ in range(3):
            upstream.reply_tool_calls([{"name": "get_memory_stats", "arguments": {}}])
        with serving(_app(mem, upstream, max_rounds=2)) as url, _client(url) as client:
            completion = client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                tools=[WEATHER],
                extra_headers=SESSION,
            )
        assert len(upstream.requests) == 2
        assert [t["function"]["name"] for t in upstream.requests[1].body["tools"]] == [
            "get_weather"
        ]
        # Engram's tool was not offered on the last round: its call is dropped, never run.
        assert completion.choices[0].message.tool_calls is None

    def test_models_come_from_the_upstream(self, base_url: str) -> None:
        with _client(base_url) as client:
            assert [m.id for m in client.models.list()] == ["fake-model"]


class TestStreaming:
    def test_stream_with_usage(self, base_url: str, mem: Engram, upstream: FakeLLMServer) -> None:
        upstream.reply("one two three four")
        with _client(base_url) as client:
            chunks = list(
                client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "count"}],
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_headers=SESSION,
                )
            )
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "one two three four"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
        assert _history(mem) == [("user", "count"), ("assistant", "one two three four")]

    def test_engram_rounds_run_before_the_stream(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        upstream.reply_tool_calls([{"name": "get_memory_stats", "arguments": {}}])
        upstream.reply("You have two messages.")
        with _client(base_url) as client:
            chunks = list(
                client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "how many?"}],
                    stream=True,
                    extra_headers=SESSION,
                )
            )
        assert all(not (c.choices and c.choices[0].delta.tool_calls) for c in chunks)
        assert (
            "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            == "You have two messages."
        )
        assert all(c.usage is None for c in chunks)  # not asked for
        assert [r for r, _ in _history(mem)] == ["user", "assistant", "tool", "assistant"]

    def test_client_tool_calls_stream_back(self, base_url: str, upstream: FakeLLMServer) -> None:
        upstream.reply_tool_calls(
            [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "call_w"}]
        )
        with _client(base_url) as client:
            stream = client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "weather?"}],
                tools=[WEATHER],
                stream=True,
                extra_headers=SESSION,
            )
            calls = [
                call
                for chunk in stream
                if chunk.choices
                for call in chunk.choices[0].delta.tool_calls or []
            ]
        assert [(c.id, c.function.name) for c in calls] == [("call_w", "get_weather")]

    def test_disconnect_mid_stream_stores_the_partial_answer_marked_cut(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        words = " ".join(f"word{i}" for i in range(200))
        upstream.push(FakeResponse(content=words, chunk_delay=0.05))
        body = {"model": "m", "messages": [{"role": "user", "content": "talk"}], "stream": True}
        with (
            httpx.Client(timeout=30) as http,
            http.stream(
                "POST", f"{base_url}/v1/chat/completions", json=body, headers=SESSION
            ) as response,
        ):
            assert response.status_code == 200
            received = 0
            for line in response.iter_lines():
                received += line.startswith("data:")
                if received >= 4:
                    break
        session = mem.session("chat-1", "proj")
        deadline = time.monotonic() + 20
        while len(session.messages()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        answer = session.messages()[-1]
        assert answer.role == "assistant" and answer.metadata.get(CUT_KEY) is True
        assert words.startswith(answer.content) and len(answer.content) < len(words)


class TestAsync:
    def test_async_client_and_two_clients_on_one_session_at_once(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        async def main() -> list[str]:
            async with (
                openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as a,
                openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as b,
            ):
                calls = [
                    client.chat.completions.create(
                        model="m",
                        messages=[{"role": "user", "content": f"question {i}"}],
                        extra_headers=SESSION,
                    )
                    for i, client in enumerate((a, b, a, b))
                ]
                done = await asyncio.gather(*calls)
            return [c.choices[0].message.content or "" for c in done]

        answers = asyncio.run(main())
        # Every request is answered and every message stored exactly once; a request's
        # prompt holds its own question (and any turn stored before it was built: the
        # scripted model echoes the prompt's last message, which may be another request's
        # answer when that request finished first).
        assert len(answers) == 4 and all(a.startswith("ok: ") for a in answers)
        assert all("question " in a for a in answers)
        history = _history(mem)
        assert sorted(c for r, c in history if r == "user") == [f"question {i}" for i in range(4)]
        assert sorted(c for r, c in history if r == "assistant") == sorted(answers)
        for request in upstream.requests:
            assert any(str(m.get("content", "")).startswith("question ") for m in request.messages)


class TestErrors:
    def test_upstream_error_passes_through_and_a_retry_stores_the_question_once(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        upstream.fail(429, "slow down")
        key = {**SESSION, "Idempotency-Key": "turn-1"}
        with _client(base_url) as client:
            with pytest.raises(openai.RateLimitError) as refused:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=key
                )
            assert refused.value.status_code == 429
            assert refused.value.body == {"message": "slow down", "type": "server_error"}
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=key
            )
        history = mem.session("chat-1", "proj").messages()
        assert [(m.role, m.content) for m in history] == [("user", "hi"), ("assistant", "ok: hi")]
        assert key_of(history[0]) == "turn-1"

    def test_sdk_retries_with_one_idempotency_key_store_once(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        upstream.fail(500).fail(500)
        with openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=2) as client:
            answer = client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers={**SESSION, "Idempotency-Key": "k-2"},
            )
        assert answer.choices[0].message.content == "ok: hi"
        assert [r for r, _ in _history(mem)] == ["user", "assistant"]

    def test_upstream_timeout_is_504_with_a_clear_body(
        self, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        upstream.slow(5)
        with serving(_app(mem, upstream, timeout=0.3)) as url, _client(url) as client:
            with pytest.raises(openai.APIStatusError) as refused:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=SESSION
                )
        assert refused.value.status_code == 504
        assert "did not answer within 0.3 seconds" in refused.value.message
        assert _history(mem) == [("user", "hi")]

    def test_no_session_is_refused(
        self, base_url: str, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        with _client(base_url) as client:
            with pytest.raises(openai.UnprocessableEntityError) as refused:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
        assert refused.value.body["field"] == "X-Engram-Session"
        assert upstream.requests == [] and mem.scopes() == []


def _usage_of(upstream: FakeLLMServer, request: Any) -> int:
    from engram.testing import _usage

    return int(_usage(request.messages, FakeResponse())["prompt_tokens"])


class TestKeys:
    def test_readme_example_runs_as_written_with_an_engram_key(
        self, mem: Engram, upstream: FakeLLMServer
    ) -> None:
        readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
        section = readme.split("## Memory for any OpenAI client", 1)[1]
        code = re.search(r"```py\n(.*?)```", section, re.DOTALL)
        assert code is not None
        key = mem.api_keys().create(scopes=["phoenix"]).secret
        upstream.reply("We chose 14 dollars.")
        with serving(_app(mem, upstream)) as url:
            namespace: dict[str, Any] = {"ENGRAM_KEY": key}
            exec(code.group(1).replace("http://127.0.0.1:8000", url), namespace)
        assert namespace["answer"].choices[0].message.content == "We chose 14 dollars."
        stored = mem.session("chat-42", "phoenix").messages()
        assert [m.content for m in stored] == [
            "What did we decide about pricing?",
            "We chose 14 dollars.",
        ]

    def test_the_key_must_write_the_scope(self, mem: Engram, upstream: FakeLLMServer) -> None:
        keys = mem.api_keys()
        outsider = keys.create(scopes=["other"]).secret
        reader = keys.create(scopes=["proj"], read_only=True).secret
        writer = keys.create(scopes=["proj"]).secret
        hi = [{"role": "user", "content": "hi"}]
        with serving(_app(mem, upstream)) as url:
            for secret in (outsider, reader):
                with _client(url, api_key=secret) as client:
                    with pytest.raises(openai.PermissionDeniedError):
                        client.chat.completions.create(
                            model="m", messages=hi, extra_headers=SESSION
                        )
            with _client(url, api_key="not-a-key") as client:
                with pytest.raises(openai.AuthenticationError):
                    client.chat.completions.create(model="m", messages=hi, extra_headers=SESSION)
            assert upstream.requests == [] and mem.session("chat-1", "proj").messages() == []
            # A key of one scope needs no scope header: its own is used.
            with _client(url, api_key=writer) as client:
                client.chat.completions.create(model="m", messages=hi, user="chat-1")
        assert _history(mem) == [("user", "hi"), ("assistant", "ok: hi")]


@pytest.mark.slow
def test_engram_serve_upstream_proxies(tmp_path: Path, upstream: FakeLLMServer) -> None:
    """``engram serve --upstream URL`` as users run it, in its own process."""
    from tests.server.live import LiveServer

    url = f"sqlite:///{tmp_path / 'served.db'}"
    upstream.reply("served")
    args = ("--upstream", upstream.base_url, "--budget", "9000", "--single-system")
    with LiveServer(url, *args) as server, _client(server.base_url) as c:
        raw = c.chat.completions.with_raw_response.create(
            model="m",
            messages=[
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
            extra_headers=SESSION,
        )
    answer = raw.parse()
    assert answer.choices[0].message.content == "served"
    assert raw.headers["x-engram-budget"] == "9000"
    assert [m["role"] for m in upstream.requests[-1].messages] == ["system", "user"]
    assert "/v1/chat/completions" in server.output and "9,000 tokens" in server.output
    with engram.open(url, llm=None) as mem:
        assert [m.content for m in mem.session("chat-1", "proj").messages()] == ["hi", "served"]


def test_without_an_upstream_the_proxy_says_so(mem: Engram) -> None:
    with serving(create_app(mem, ServerSettings())) as url, _client(url) as client:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=SESSION
            )
    assert refused.value.status_code == 503 and "--upstream" in refused.value.message
    assert mem.scopes() == []
