"""Through the proxy, every recorded turn replays to exactly what the upstream received.

The official openai SDK talks to a real server on 127.0.0.1; the upstream is
the scripted server, which records every request. Each round the proxy sends
(Engram's own tool rounds included, streamed or not) is a recorded turn whose
replay equals, message for message, the request's messages, and whose tools
are the request's tools; the upstream's cached tokens are kept with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from tests.proxy.live import serving

import engram
from engram.engine import Engram
from engram.proxy import ProxySettings
from engram.server import ServerSettings, create_app
from engram.testing import FakeLLMServer

SESSION = {"X-Engram-Session": "chat-1", "X-Engram-Scope": "proj"}
CACHED = {"prompt_tokens": 1400, "completion_tokens": 9,
          "prompt_tokens_details": {"cached_tokens": 1280}}  # fmt: skip


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Engram]:
    with engram.open(f"sqlite:///{tmp_path / 'proxy.db'}", llm=None) as opened:
        yield opened


@pytest.fixture
def upstream() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def client(mem: Engram, upstream: FakeLLMServer) -> Iterator[openai.OpenAI]:
    proxy = ProxySettings(upstream.base_url, api_key="upstream-key", timeout=5)
    app = create_app(mem, ServerSettings(key_cache_seconds=0, proxy=proxy))
    with (
        serving(app) as url,
        openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=30) as sdk,
    ):
        yield sdk


@pytest.mark.parametrize("stream", [False, True])
def test_every_turn_replays_to_what_the_upstream_received(
    mem: Engram, upstream: FakeLLMServer, client: openai.OpenAI, stream: bool
) -> None:
    upstream.reply("Noted: launch on April 8.")
    upstream.reply_tool_calls([{"name": "search_history", "arguments": {"query": "launch"}}])
    upstream.reply("It is April 8.", usage=CACHED)
    asked = [
        {"role": "system", "content": "You are the launch assistant."},
        {"role": "user", "content": "We launch on April 8."},
    ]
    for question in (None, "When do we launch?"):
        if question is not None:
            asked += [{"role": "assistant", "content": "Noted: launch on April 8."},
                      {"role": "user", "content": question}]  # fmt: skip
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=asked, extra_headers=SESSION, stream=stream,
            **({"stream_options": {"include_usage": True}} if stream else {}),
        )  # fmt: skip
        if stream:
            list(answer)  # type: ignore[arg-type]
    chat = mem.session("chat-1", "proj")
    sent = [r for r in upstream.requests if r.path.endswith("/chat/completions")]
    turns = chat.prompts()
    assert len(turns) == len(sent) == 3  # one turn, then Engram's tool round and the answer
    for turn, request in zip(turns, sent, strict=True):
        replayed = chat.prompt(turn.turn)
        assert replayed.verified, replayed.missing
        assert replayed.messages == request.messages
        assert request.body is not None
        assert replayed.tools == request.body.get("tools")
        assert replayed.recipe["via"] == "proxy"
    assert turns[-1].cached_tokens == 1280
