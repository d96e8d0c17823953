"""A model that trickles its answer (a few bytes now and then, never silent for long).

The client's timeout covers the whole call, not each read: a server that sends
8 bytes every 0.2 s for a minute is abandoned at the deadline. So a compaction
facing it frees its slot and commits (offline) soon after, the next turn's
``context()`` answers within the compaction deadline and inside the budget, a
later compaction asks the model again, and a turn or a proxy stream facing it
ends with a timeout error instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tests.proxy.live import serving

import engram
from engram.aio import AsyncSession
from engram.chat import run_turn, stream_turn
from engram.config import Config
from engram.engine import Engram
from engram.errors import LLMTimeout
from engram.llm import LLMClient
from engram.proxy import ProxySettings
from engram.proxy.history import CUT_KEY
from engram.server import ServerSettings, create_app
from engram.testing import FakeLLMServer, FakeResponse, RecordedRequest

#: Every test here waits out a deadline or a trickle (1-6 s each).
pytestmark = pytest.mark.slow

BUDGET = 4000
#: Seconds one turn may wait for a compaction.
DEADLINE = 0.5
#: The client's timeout: one attempt, connect to last byte.
TIMEOUT = 1.0
#: Seconds between the trickled pieces: far below the timeout, so no single read times out.
DRIP = 0.2
#: An answer that takes about a minute to trickle (8 bytes per piece).
LONG = "We chose Postgres for the Phoenix plan. " * 60
#: How long a bounded call may take at most: two attempts, the backoff, and slack for a busy host.
BOUND = 2 * TIMEOUT + 4
USAGE = {"prompt_tokens": 100, "completion_tokens": 100, "total_tokens": 200}


def _trickling(request: RecordedRequest) -> FakeResponse:
    return FakeResponse(content=LONG, usage=USAGE, chunk_delay=DRIP)


def _healthy(request: RecordedRequest) -> FakeResponse:
    if request.body and request.body.get("response_format"):
        return FakeResponse(content=json.dumps({"key_decisions": ["use Postgres"]}), usage=USAGE)
    return FakeResponse(content="The team chose Postgres for Phoenix.", usage=USAGE)


def _client(fake: FakeLLMServer) -> LLMClient:
    return LLMClient("gpt-4o-mini", base_url=fake.base_url, timeout=TIMEOUT, backoff=0.01)


def _fill(mem: Engram, session: str, turns: int = 14, start: int = 0) -> None:
    chat = mem.session(session, scope="p", policy="summary_buffer")
    for i in range(start, start + turns):
        role = "user" if i % 2 == 0 else "assistant"
        chat.add(role, f"turn {i}: we discussed the Phoenix database plan " + "detail " * 250)


def _committed(mem: Engram, session: str, within: float) -> str:
    """The summarizer of the session's stored state, waiting up to ``within`` for one."""
    chat = mem.session(session, scope="p")
    stop = time.monotonic() + within
    while time.monotonic() < stop:
        state = chat.compaction_state()
        if state.summary:
            return state.summarizer
        time.sleep(0.05)  # polling for the background commit, not asserting on time
    return ""


def test_a_trickling_model_is_abandoned_and_the_compaction_retries_later(
    open_engram: Callable[..., Engram], fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = _trickling
    with _client(fake_llm) as llm:
        mem = open_engram(llm=llm, config=Config.from_env(compaction_deadline=DEADLINE))
        _fill(mem, "s")
        started = time.monotonic()
        ctx = mem.session("s", scope="p").context(budget=BUDGET, system="You help.")
        assert time.monotonic() - started < DEADLINE + 2
        assert ctx.tokens <= BUDGET
        assert ctx.pending_compaction
        # The trickling calls end at the client's deadline: the offline summary commits
        # long before the minute the model would take.
        assert _committed(mem, "s", within=4 * BOUND) == "offline"
        mem.session("s", scope="p").add("user", "And the next steps?")
        started = time.monotonic()
        again = mem.session("s", scope="p").context(budget=BUDGET, system="You help.")
        assert time.monotonic() - started < DEADLINE + 2
        assert again.tokens <= BUDGET
        assert again.messages[-1]["content"] == "And the next steps?"
        # The model is back: the next compaction that is due asks it again.
        fake_llm.default = _healthy
        asked = len(fake_llm.requests)
        _fill(mem, "s", turns=12, start=100)
        mem.session("s", scope="p").context(budget=BUDGET, system="You help.")
        assert len(fake_llm.requests) > asked
        assert _committed(mem, "s", within=10) == "llm:gpt-4o-mini"


@pytest.fixture
def sqlite_mem(tmp_path: Path) -> Iterator[Engram]:
    with engram.open(f"sqlite:///{tmp_path / 'slow.db'}", llm=None) as opened:
        yield opened


def test_run_turn_facing_a_trickling_model_raises_a_timeout(
    sqlite_mem: Engram, fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = _trickling
    chat = sqlite_mem.session("c", scope="p")
    with _client(fake_llm) as llm:
        started = time.monotonic()
        with pytest.raises(LLMTimeout, match="did not answer within 1s"):
            run_turn(chat, llm, "Which database?", budget=BUDGET, tools=None)
        assert time.monotonic() - started < BOUND
    assert len(fake_llm.requests) == 2  # the one retry, itself bounded


def test_a_streamed_turn_facing_a_trickling_model_ends_with_a_timeout(
    sqlite_mem: Engram, fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = _trickling
    chat = AsyncSession(sqlite_mem.session("c", scope="p"))
    llm = _client(fake_llm)
    pieces: list[str] = []

    async def main() -> None:
        try:
            async for piece in stream_turn(chat, llm, "Which database?", budget=BUDGET):
                pieces.append(piece)
        finally:
            await llm.aclose()

    started = time.monotonic()
    with pytest.raises(LLMTimeout, match="did not answer within 1s"):
        asyncio.run(main())
    assert time.monotonic() - started < BOUND
    assert pieces, "the text that did arrive was streamed"
    assert LONG.startswith("".join(pieces)) and len("".join(pieces)) < len(LONG)


@pytest.fixture
def proxy_url(sqlite_mem: Engram, fake_llm: FakeLLMServer) -> Iterator[str]:
    settings = ProxySettings(fake_llm.base_url, api_key="upstream-key", timeout=TIMEOUT)
    with serving(
        create_app(sqlite_mem, ServerSettings(key_cache_seconds=0, proxy=settings))
    ) as url:
        yield url


STREAM = {"stream": True}
SESSION = {"X-Engram-Session": "chat-1", "X-Engram-Scope": "proj"}


def _ask(url: str, **options: Any) -> list[str]:
    """Ask through the proxy; the text received (every piece, when streamed)."""
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60) as ai:
        answer = ai.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Which database?"}],
            extra_headers=SESSION,
            **options,
        )
        if not options.get("stream"):
            return [answer.choices[0].message.content or ""]
        received: list[str] = []
        try:
            for chunk in answer:
                if chunk.choices and chunk.choices[0].delta.content:
                    received.append(chunk.choices[0].delta.content)
        except openai.APIError as exc:
            exc.received = received  # type: ignore[attr-defined]
            raise
        return received


def test_the_proxy_answers_504_when_the_upstream_trickles(
    proxy_url: str, fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = _trickling
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        _ask(proxy_url)
    assert time.monotonic() - started < BOUND
    assert caught.value.status_code == 504


#: The proxy's timeout in the mid-stream test: long enough that the first trickled piece
#: arrives within it even on a busy host (else the answer is a 504 before any text), far
#: shorter than the whole trickle.
STREAM_TIMEOUT = 3.0


def test_a_proxy_stream_facing_a_trickling_upstream_ends_with_an_error_event(
    sqlite_mem: Engram, fake_llm: FakeLLMServer
) -> None:
    fake_llm.default = _trickling
    settings = ProxySettings(fake_llm.base_url, api_key="upstream-key", timeout=STREAM_TIMEOUT)
    app = create_app(sqlite_mem, ServerSettings(key_cache_seconds=0, proxy=settings))
    with serving(app) as proxy_url:
        _a_stream_cut_by_the_deadline(proxy_url, sqlite_mem)


def _a_stream_cut_by_the_deadline(proxy_url: str, sqlite_mem: Engram) -> None:
    started = time.monotonic()
    with pytest.raises(openai.APIError, match="did not answer within 3 seconds") as caught:
        _ask(proxy_url, stream=True)
    received = caught.value.received  # type: ignore[attr-defined]
    assert time.monotonic() - started < 2 * STREAM_TIMEOUT + 4
    assert received, "the text that did arrive was relayed"
    stored = sqlite_mem.session("chat-1", "proj").messages()[-1]
    assert stored.role == "assistant" and stored.metadata.get(CUT_KEY) is True
    assert LONG.startswith(stored.content) and stored.content == "".join(received)
    # The raw stream: an error event, never a silent cut.
    with (
        httpx.Client(timeout=60) as http,
        http.stream(
            "POST",
            f"{proxy_url}/v1/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "Again?"}],
                "stream": True,
            },
            headers=SESSION,
        ) as response,
    ):
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    error = json.loads(lines[-1][5:])["error"]
    assert error["type"] == "llm_timeout"
