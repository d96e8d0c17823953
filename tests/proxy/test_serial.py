"""One session, one turn at a time: in order in one server, and across servers on PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from tests.proxy.conftest import SESSION, proxy_app, refused, stored
from tests.proxy.live import serving

import engram
from engram.proxy import SessionBusy, SessionTurns
from engram.testing import FakeLLMServer, FakeResponse


def test_turns_are_served_in_arrival_order_and_a_long_wait_is_refused() -> None:
    async def main() -> tuple[list[int], str]:
        turns = SessionTurns()
        order: list[int] = []

        async def one(number: int) -> None:
            held = await turns.hold(object(), "s", "chat", wait=5)
            try:
                order.append(number)
                await asyncio.sleep(0.01)
            finally:
                await held.release()

        await asyncio.gather(*(one(n) for n in range(6)))
        first = await turns.hold(object(), "s", "chat", wait=5)
        other = await turns.hold(object(), "s", "other", wait=5)  # other sessions do not wait
        with pytest.raises(SessionBusy) as busy:
            await turns.hold(object(), "s", "chat", wait=0.05)
        await first.release()
        await first.release()  # twice is harmless
        await other.release()
        again = await turns.hold(object(), "s", "chat", wait=1)
        await again.release()
        assert turns._waiters == {}  # nothing kept for sessions nobody waits on
        return order, str(busy.value)

    order, message = asyncio.run(main())
    assert order == list(range(6))
    assert "'chat' is busy" in message


@pytest.mark.postgres
def test_two_servers_on_one_database_serve_a_session_one_turn_at_a_time(
    request: pytest.FixtureRequest,
) -> None:
    """Two Engram servers (each its own store and lock connection) share a PostgreSQL."""
    from tests.pg import fresh_postgres_url

    url = fresh_postgres_url(request)
    with (
        FakeLLMServer(strict=True) as upstream,
        engram.open(url, llm=None) as first,
        engram.open(url, llm=None) as second,
        serving(proxy_app(first, upstream, timeout=10)) as one,
        serving(proxy_app(second, upstream, timeout=10)) as two,
    ):
        # A slow upstream: without the cross-process lock the turns would interleave.
        upstream.default = lambda req: FakeResponse(
            content=f"ok: {req.messages[-1]['content']}", delay=0.05
        )

        async def main() -> None:
            clients = [
                openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0, timeout=60)
                for base in (one, two)
            ]
            # Each server's first request alone: both servers live in this one process
            # (two real servers are two processes), and FastAPI and pydantic build some
            # of their parts on first use, which two threads must not do at once.
            for number, client in enumerate(clients):
                await client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "warm up"}],
                    extra_headers={**SESSION, "X-Engram-Session": f"warm-{number}"},
                )
            calls: list[Any] = [
                clients[i % 2].chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": f"question {i}"}],
                    extra_headers=SESSION,
                )
                for i in range(8)
            ]
            await asyncio.gather(*calls)
            for client in clients:
                await client.close()

        asyncio.run(main())
        history = stored(first)
    assert len(history) == 16
    for (_, question), (role, answer) in zip(history[::2], history[1::2], strict=True):
        assert (role, answer) == ("assistant", f"ok: {question}")
    for sent in upstream.requests:
        texts = [m["content"] for m in sent.messages if m["role"] != "system"]
        assert all(b == f"ok: {a}" for a, b in zip(texts[:-1:2], texts[1::2], strict=True))
    assert refused(upstream) == []
