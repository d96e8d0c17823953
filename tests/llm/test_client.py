"""The model client, through chat, achat and astream alike (the ``ask`` fixture)."""

from __future__ import annotations

import json
import re
import time

import pytest
from tests.llm.conftest import Ask

from engram.errors import ConfigError, LLMBadResponse, LLMError, LLMTimeout
from engram.llm import LLMClient, parse_json_object
from engram.llm.prices import cost_usd
from engram.testing import FakeLLMServer, FakeResponse

USER = [{"role": "user", "content": "Hello there"}]


class TestAnswers:
    def test_text_answer_with_usage_and_cost(
        self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient
    ):
        fake_llm.reply("Hi!", usage={"prompt_tokens": 1000, "completion_tokens": 500})
        result = ask(client, USER, purpose="test")
        assert result.text == "Hi!"
        assert (result.input_tokens, result.output_tokens) == (1000, 500)
        # gpt-4o-mini: 0.15 / 0.60 USD per 1M tokens
        assert result.cost_usd == pytest.approx(1000 * 0.15e-6 + 500 * 0.60e-6)
        assert result.model == "gpt-4o-mini"
        assert result.purpose == "test"
        assert not result.usage_estimated
        record = result.usage_record()
        assert (record.input_tokens, record.output_tokens, record.purpose) == (1000, 500, "test")

    def test_request_is_openai_format(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply("ok")
        ask(client, USER, purpose="test", max_tokens=77, json_mode=True)
        (request,) = fake_llm.requests
        assert request.path == "/v1/chat/completions"
        assert request.body is not None
        assert request.body["model"] == "gpt-4o-mini"
        assert request.body["messages"] == USER
        assert request.body["max_tokens"] == 77
        assert request.body["response_format"] == {"type": "json_object"}
        assert request.headers["authorization"].startswith("Bearer ")

    def test_unknown_model_has_no_cost(self, ask: Ask, fake_llm: FakeLLMServer):
        with LLMClient("llama3.1:8b", base_url=fake_llm.base_url) as local:
            fake_llm.reply("ok")
            result = ask(local, USER, purpose="test")
        assert result.cost_usd is None
        assert result.input_tokens > 0

    def test_missing_usage_is_estimated(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.push(FakeResponse(content="three words here", omit_usage=True))
        result = ask(client, USER, purpose="test")
        assert result.usage_estimated
        assert result.output_tokens == 3
        assert result.input_tokens >= 5

    def test_tool_calls(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply_tool_calls([{"name": "search_messages", "arguments": {"query": "pricing"}}])
        tools = [{"type": "function", "function": {"name": "search_messages", "parameters": {}}}]
        result = ask(client, USER, purpose="chat", tools=tools)
        assert result.finish_reason == "tool_calls"
        (call,) = result.tool_calls
        assert call["function"]["name"] == "search_messages"
        assert json.loads(call["function"]["arguments"]) == {"query": "pricing"}
        assert fake_llm.requests[0].body is not None
        assert fake_llm.requests[0].body["tools"] == tools

    def test_default_responder_when_queue_empty(
        self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient
    ):
        assert ask(client, USER, purpose="t").text == "ok: Hello there"


class TestJSON:
    def test_json_object(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply_json({"a": [1, 2]})
        data, result = client.chat_json(USER, purpose="extract")
        assert data == {"a": [1, 2]}
        assert result.output_tokens > 0

    def test_fenced_json(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply_json({"theme": "dark"}, fenced=True)
        data, _ = client.chat_json(USER, purpose="extract")
        assert data == {"theme": "dark"}

    def test_invalid_json(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply("Sure! Here is the data: theme=dark")
        with pytest.raises(LLMBadResponse, match="invalid JSON") as info:
            client.chat_json(USER, purpose="extract")
        # the call was paid for anyway: its usage travels with the error
        assert info.value.result.output_tokens > 0  # type: ignore[attr-defined]
        assert len(fake_llm.requests) == 1  # a bad answer is not retried

    def test_truncated_json(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.truncated_json({"important_facts": ["X causes Y", "Z"] * 10})
        with pytest.raises(LLMBadResponse, match="truncated"):
            client.chat_json(USER, purpose="extract")

    def test_json_array_is_refused(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply_json([1, 2])
        with pytest.raises(LLMBadResponse, match="not an object"):
            client.chat_json(USER, purpose="extract")

    @pytest.mark.parametrize("text", ["", "   ", "```json\n```", "{'a': 1}", '{"a": 1'])
    def test_parse_json_object_rejects(self, text: str):
        with pytest.raises(LLMBadResponse):
            parse_json_object(text)


class TestRetries:
    def test_500_then_success_retries_once(
        self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient
    ):
        fake_llm.fail(500).reply("recovered")
        assert ask(client, USER, purpose="t").text == "recovered"
        assert len(fake_llm.requests) == 2

    def test_two_500s_raise_after_exactly_two_requests(
        self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient
    ):
        fake_llm.fail(500).fail(503).reply("never served")
        with pytest.raises(LLMError, match="HTTP 503") as info:
            ask(client, USER, purpose="t")
        assert not isinstance(info.value, LLMTimeout | LLMBadResponse)
        assert len(fake_llm.requests) == 2
        assert fake_llm.pending == 1

    def test_400_is_not_retried(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.fail(400, "bad model").reply("never served")
        with pytest.raises(LLMError, match="HTTP 400"):
            ask(client, USER, purpose="t")
        assert len(fake_llm.requests) == 1

    def test_429_is_retried(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.fail(429, "slow down").reply("ok")
        assert ask(client, USER, purpose="t").text == "ok"
        assert len(fake_llm.requests) == 2

    def test_timeout_twice_raises_llm_timeout(self, ask: Ask, fake_llm: FakeLLMServer):
        fake_llm.slow(2).slow(2)
        with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=0.5, backoff=0) as c:
            started = time.monotonic()
            with pytest.raises(LLMTimeout, match=r"0\.5s"):
                ask(c, USER, purpose="t")
            elapsed = time.monotonic() - started
        assert len(fake_llm.requests) == 2
        assert 0.9 < elapsed < 1.9

    def test_timeout_then_success(self, ask: Ask, fake_llm: FakeLLMServer):
        fake_llm.slow(2).reply("fast")
        with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=0.5, backoff=0) as c:
            assert ask(c, USER, purpose="t").text == "fast"

    def test_slow_but_within_timeout(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.slow(0.2, "patient")
        assert ask(client, USER, purpose="t").text == "patient"
        assert len(fake_llm.requests) == 1

    def test_connection_refused(self, ask: Ask):
        server = FakeLLMServer().start()
        url = server.base_url
        server.stop()
        with LLMClient("gpt-4o-mini", base_url=url, timeout=1, backoff=0) as c:
            with pytest.raises(LLMError, match="cannot reach"):
                ask(c, USER, purpose="t")


class TestGarbage:
    def test_html_body(self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.garbage()
        with pytest.raises(LLMBadResponse):
            ask(client, USER, purpose="t")

    def test_json_that_is_not_a_completion(
        self, ask: Ask, fake_llm: FakeLLMServer, client: LLMClient
    ):
        fake_llm.garbage(b'{"hello": "world"}', content_type="application/json")
        with pytest.raises(LLMBadResponse, match="no choices"):
            ask(client, USER, purpose="t")


class TestConfig:
    def test_from_env_none_when_unset(self):
        assert LLMClient.from_env({}) is None

    def test_from_env_reads_variables(self):
        env = {
            "ENGRAM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "ENGRAM_LLM_API_KEY": "k",
            "ENGRAM_LLM_MODEL": "grok-4",
            "ENGRAM_LLM_TIMEOUT": "7",
        }
        client = LLMClient.from_env(env)
        assert client is not None
        with client:
            assert (client.model, client.base_url, client.timeout) == (
                "grok-4",
                "http://127.0.0.1:9/v1",
                7.0,
            )
            assert client.name == "llm:grok-4"

    def test_from_env_model_defaults(self):
        client = LLMClient.from_env({"ENGRAM_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
        assert client is not None
        with client:
            assert client.model == "gpt-4o-mini"

    def test_bad_timeout(self):
        with pytest.raises(ConfigError):
            LLMClient.from_env({"ENGRAM_LLM_MODEL": "x", "ENGRAM_LLM_TIMEOUT": "soon"})
        with pytest.raises(ConfigError):
            LLMClient("x", timeout=0)


class TestPrices:
    @pytest.mark.parametrize(
        ("model", "expected"),
        [
            ("gpt-4o-mini", 0.15 + 0.60),
            ("gpt-4o-mini-2024-07-18", 0.15 + 0.60),
            ("gpt-4o", 2.50 + 10.00),
            ("openai/gpt-4.1-mini", 0.40 + 1.60),
        ],
    )
    def test_known(self, model: str, expected: float):
        assert cost_usd(model, 1_000_000, 1_000_000) == pytest.approx(expected)

    @pytest.mark.parametrize("model", ["llama", "my-local-model", "qwen"])
    def test_unknown(self, model: str):
        assert cost_usd(model, 10, 10) is None


class TestKeyResolution:
    """Engram's variables, then the SDK's, are honoured; a placeholder only for this machine."""

    @pytest.fixture(autouse=True)
    def _no_engram_variables(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("ENGRAM_LLM_API_KEY", raising=False)
        monkeypatch.delenv("ENGRAM_LLM_BASE_URL", raising=False)

    def test_openai_api_key_is_sent(
        self, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-reader")
        with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url) as client:
            client.chat([{"role": "user", "content": "hi"}], purpose="test")
        assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-reader"

    def test_openai_base_url_is_honoured(
        self, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        with LLMClient("gpt-4o-mini") as client:
            client.chat([{"role": "user", "content": "hi"}], purpose="test")
        assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-env"

    def test_explicit_key_wins(
        self, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        with LLMClient("m", base_url=fake_llm.base_url, api_key="sk-given") as client:
            client.chat([{"role": "user", "content": "hi"}], purpose="test")
        assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-given"

    def test_local_server_needs_no_key(
        self, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        with LLMClient("m", base_url=fake_llm.base_url) as client:
            assert client.chat([{"role": "user", "content": "hi"}], purpose="test").text

    @pytest.mark.parametrize("base_url", [None, "https://api.x.ai/v1"])
    def test_remote_server_without_a_key_is_a_clear_error(
        self, base_url: str | None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        said = "set ENGRAM_LLM_API_KEY (or the SDK's OPENAI_API_KEY)"
        with pytest.raises(ConfigError, match=re.escape(said)):
            LLMClient("gpt-4o-mini", base_url=base_url)

    def test_the_variable_the_error_names_is_read(
        self, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("ENGRAM_LLM_API_KEY", "sk-engram")
        with LLMClient("m", base_url="https://api.x.ai/v1") as remote:  # no error: a key is set
            assert remote.base_url == "https://api.x.ai/v1"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")  # Engram's own variable comes first
        with LLMClient("m", base_url=fake_llm.base_url) as client:
            client.chat([{"role": "user", "content": "hi"}], purpose="test")
        assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-engram"

    def test_engrams_base_url_goes_with_its_key(
        self, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The key set for Engram's server never travels to the SDK's default host.
        monkeypatch.setenv("ENGRAM_LLM_BASE_URL", fake_llm.base_url)
        monkeypatch.setenv("ENGRAM_LLM_API_KEY", "sk-engram")
        monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
        with LLMClient("m") as client:
            assert client.base_url == fake_llm.base_url
            client.chat([{"role": "user", "content": "hi"}], purpose="test")
        assert fake_llm.requests[-1].headers["authorization"] == "Bearer sk-engram"


def test_import_engram_does_not_load_the_openai_sdk() -> None:
    import subprocess
    import sys

    code = "import engram, sys; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
