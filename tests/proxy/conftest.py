"""Fixtures of the drop-in tests: a real server on SQLite or PostgreSQL, a strict upstream."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from tests.proxy.live import serving

import engram
from engram.engine import Engram
from engram.proxy import ProxySettings
from engram.server import ServerSettings, create_app
from engram.testing import FakeAnthropicServer, FakeLLMServer

#: The conversation of the drop-in tests.
SCOPE, SESSION_ID = "proj", "chat-1"
SESSION = {"X-Engram-Session": SESSION_ID, "X-Engram-Scope": SCOPE}
#: The Claude model the Messages tests name.
MODEL = "claude-sonnet-4-6"


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def any_mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engram]:
    """An Engram on SQLite, then on PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'proxy.db'}"
    else:
        from tests.pg import fresh_postgres_url

        url = fresh_postgres_url(request)
    with engram.open(url, llm=None) as opened:
        yield opened


@pytest.fixture
def sqlite_mem(tmp_path: Path) -> Iterator[Engram]:
    """An Engram on SQLite."""
    with engram.open(f"sqlite:///{tmp_path / 'proxy.db'}", llm=None) as opened:
        yield opened


@pytest.fixture
def strict() -> Iterator[FakeLLMServer]:
    """The upstream: refuses every prompt OpenAI would refuse (400, OpenAI's body)."""
    with FakeLLMServer(strict=True) as server:
        yield server


def proxy_app(mem: Engram, upstream: FakeLLMServer, **options: Any) -> Any:
    """The server app with the proxy in front of ``upstream``."""
    proxy = ProxySettings(upstream.base_url, api_key="upstream-key", **options)
    return create_app(mem, ServerSettings(key_cache_seconds=0, proxy=proxy))


@pytest.fixture
def served(strict: FakeLLMServer) -> Callable[..., Any]:
    """``served(mem, **proxy_options)``: a context manager yielding the server's base URL."""

    def start(mem: Engram, **options: Any) -> Any:
        return serving(proxy_app(mem, strict, **{"timeout": 10, **options}))

    return start


def client(base_url: str, **options: Any) -> openai.OpenAI:
    """The official SDK pointed at the proxy (no retries unless asked)."""
    options = {"max_retries": 0, "timeout": 30, **options}
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", **options)


def stored(mem: Engram, session: str = SESSION_ID) -> list[tuple[str, str]]:
    """The session's stored history as (role, content) pairs."""
    return [(m.role, m.content) for m in mem.session(session, SCOPE).messages(limit=1000)]


def refused(upstream: FakeLLMServer) -> list[str]:
    """What the strict upstream refused."""
    return [message for _, message in upstream.refused]


@pytest.fixture
def claude() -> Iterator[FakeAnthropicServer]:
    """The Anthropic-format upstream: refuses what Anthropic refuses."""
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def both(strict: FakeLLMServer, claude: FakeAnthropicServer) -> Callable[..., Any]:
    """``both(mem)``: a server with the chat and the Anthropic upstreams; yields its URL."""

    def start(mem: Engram, **options: Any) -> Any:
        chat = ProxySettings(strict.base_url, api_key="openai-key", timeout=10, **options)
        messages = ProxySettings(claude.base_url, timeout=10, **options)
        return serving(
            create_app(mem, ServerSettings(key_cache_seconds=0, proxy=chat, anthropic=messages))
        )

    return start


def sdk(url: str, **options: Any) -> anthropic.Anthropic:
    """The official SDK pointed at Engram, with its own Anthropic key."""
    options = {
        "max_retries": 0,
        "timeout": 30,
        "default_headers": SESSION,
        "api_key": "sk-ant-client",
        **options,
    }
    return anthropic.Anthropic(base_url=url, **options)
