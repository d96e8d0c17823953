"""An upstream breaking off a stream with an error that quotes a credential: never sent on."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from tests.proxy.live import serving

import engram
from engram.errors import LLMError
from engram.proxy import ProxySettings
from engram.proxy.redact import REDACTED
from engram.proxy.responses.upstream import EventReader
from engram.server import ServerSettings, create_app
from engram.testing import FakeAnthropicServer
from engram.testing_anthropic import AnthropicResponse

SERVER_KEY = "server-anthropic-key-7f3a9c1e"


def _event(kind: str, data: dict[str, object]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def test_a_messages_stream_error_never_quotes_the_servers_key(tmp_path: Path) -> None:
    said = f"invalid x-api-key {SERVER_KEY}; Authorization: Bearer abcdef123456"
    start = {"type": "message_start", "message": {"id": "m1", "model": "x", "usage": {}}}
    error = {"type": "error", "error": {"type": "authentication_error", "message": said}}
    sse = (_event("message_start", start) + _event("error", error)).encode()
    with (
        FakeAnthropicServer(strict=False) as upstream,
        engram.open(f"sqlite:///{tmp_path}/e.db", llm=None) as mem,
    ):
        upstream.push(
            AnthropicResponse(raw_body=sse, headers={"content-type": "text/event-stream"})
        )
        settings = ProxySettings(upstream.base_url, api_key=SERVER_KEY, timeout=10)
        app = create_app(mem, ServerSettings(key_cache_seconds=0, anthropic=settings))
        body = {
            "model": "claude-sonnet-4-6",
            "max_tokens": 50,
            "stream": True,
            "metadata": {"user_id": "u1"},
            "messages": [{"role": "user", "content": "hi"}],
        }
        with serving(app) as url:
            answer = httpx.post(f"{url}/v1/messages", json=body, timeout=30)
    assert "broke off" in answer.text
    assert SERVER_KEY not in answer.text and "abcdef123456" not in answer.text
    assert REDACTED in answer.text


def test_a_responses_stream_failure_is_redacted_before_it_is_raised() -> None:
    reader = EventReader(("the-configured-key",))
    failed = {"error": {"message": "bad key the-configured-key, also sk-proj-abcdefgh1234"}}
    with pytest.raises(LLMError) as raised:
        reader.feed({"type": "response.failed", "response": failed})
    assert "the-configured-key" not in str(raised.value)
    assert "sk-proj-abcdefgh1234" not in str(raised.value) and REDACTED in str(raised.value)
