"""The API takes JSON only: a cross-site "simple request" (text/plain, a form) writes nothing.

A page of another site can make a browser POST ``text/plain`` or a form to the server
without asking first. Every body-carrying API route (REST, proxy, MCP) answers 415 to a
body not declared JSON, before it stores anything or calls the upstream; the dashboard's
own forms keep their encoding. A real server on 127.0.0.1 over every backend.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from tests.proxy.live import serving

from engram.engine import Engram
from engram.proxy import ProxySettings
from engram.server import ServerSettings, create_app
from engram.server.json_only import is_json
from engram.testing import FakeLLMServer

#: Seconds a request may take: a loaded machine may be slow to answer.
TIMEOUT = 30

CHAT = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Spend the budget"}],
    "user": "victim",
    "metadata": {"session_id": "s1", "scope": "app"},
}
WRITES = [
    ("POST", "/v1/chat/completions", CHAT),
    ("POST", "/v1/scopes/app/sessions/s1/messages", {"role": "user", "content": "hi"}),
    ("PUT", "/v1/scopes/app/sessions/s2", {"policy": "lean"}),
    ("POST", "/v1/scopes/app/memories", {"content": "Planted memory."}),
    ("POST", "/v1/scopes/app/sessions/s1/compact", {}),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
]
SIMPLE = [
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    None,
]


@pytest.fixture
def site(mem: Engram) -> Iterator[tuple[str, FakeLLMServer]]:
    with FakeLLMServer() as upstream:
        proxy = ProxySettings(upstream.base_url, api_key="upstream-key", timeout=5)
        app = create_app(mem, ServerSettings(key_cache_seconds=0, proxy=proxy))
        with serving(app) as url:
            yield url, upstream


@pytest.mark.parametrize("content_type", SIMPLE)
def test_a_simple_request_is_refused_and_stores_and_calls_nothing(
    site: tuple[str, FakeLLMServer], mem: Engram, content_type: str | None
) -> None:
    url, upstream = site
    headers = {"Origin": "http://evil.example", "Accept": "application/json, text/event-stream"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    for method, path, body in WRITES:
        answer = httpx.request(
            method, url + path, content=json.dumps(body), headers=headers, timeout=TIMEOUT
        )
        assert answer.status_code == 415, (path, answer.text)
        error = answer.json()["error"]
        assert error["type"] == "unsupported_media_type" and error["field"] == "Content-Type"
        assert "Content-Type: application/json" in error["message"]
    assert upstream.requests == []
    assert mem.scopes() == []


def test_json_with_parameters_is_served(site: tuple[str, FakeLLMServer], mem: Engram) -> None:
    url, upstream = site
    upstream.reply("Noted.")
    for content_type in ("application/json; charset=utf-8", "Application/JSON"):
        answer = httpx.post(
            f"{url}/v1/scopes/app/sessions/s1/messages",
            content=json.dumps({"role": "user", "content": content_type}),
            headers={"Content-Type": content_type},
            timeout=TIMEOUT,
        )
        assert answer.status_code == 201, answer.text
    chat = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=TIMEOUT)
    assert chat.status_code == 200, chat.text
    assert len(upstream.requests) == 1


def test_what_counts_as_json() -> None:
    assert is_json("application/json") and is_json("application/problem+json; charset=utf-8")
    assert not is_json("text/json") and not is_json("application/jsonx") and not is_json(None)
