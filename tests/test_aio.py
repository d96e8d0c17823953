"""The async facade and the async chat loop behave as the sync ones, on every backend.

Facade verbs run through ``tests.facades`` (one test, sync and async); the
chat loop's drivers (``run_turn``, ``arun_turn``, ``stream_turn``) are
parametrized the same way against the scripted model server.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from concurrent.futures import Future
from typing import Any

import pytest

import engram
from engram.aio import AsyncEngram, AsyncMemories, AsyncSession
from engram.chat import TurnResult, arun_turn, run_turn, stream_turn
from engram.engine import Engram
from engram.errors import EngramError, InvalidMessage, LLMError, SessionNotFound
from engram.llm import LLMClient
from engram.testing import FakeLLMServer

MODEL = "gpt-4o-mini"


def outcome(value: Any) -> Any:
    """``Session.end`` gives a future in sync code; the async facade awaits it."""
    return value.result(timeout=30) if isinstance(value, Future) else value


class TestFacadeVerbs:
    def test_write_read_and_budget(self, mem_each_api: Any) -> None:
        chat = mem_each_api.session("c", scope="s", policy="lean")
        chat.add("user", "The launch is on Monday.")
        chat.add_many([{"role": "assistant", "content": "Noted: Monday."}])
        contents = [m.content for m in chat.messages()]
        assert contents == ["The launch is on Monday.", "Noted: Monday."]
        ctx = chat.context(budget=1000, system="Be brief.", model=MODEL)
        assert ctx.tokens <= 1000 - ctx.reserve
        assert ctx.message_ids == [m.id for m in chat.messages()]
        assert chat.search("launch")[0].message.content == "The launch is on Monday."
        assert mem_each_api.search("monday", scope="s")
        assert len(chat.extended(10)) == 2
        assert chat.stats()["total_messages"] == 2
        assert chat.by_date("today")[0].content == "The launch is on Monday."
        assert mem_each_api.sessions("s")[0].id == "c"
        assert mem_each_api.scopes() == ["s"]

    def test_errors_cross_the_boundary_unchanged(self, mem_each_api: Any) -> None:
        chat = mem_each_api.session("c", scope="s")
        with pytest.raises(InvalidMessage, match="unknown role"):
            chat.add("robot", "hi")
        with pytest.raises(SessionNotFound):
            mem_each_api.require_session("nope", scope="s")
        assert chat.messages() == []

    def test_compaction_and_the_memory_of_an_ended_session(self, mem_each_api: Any) -> None:
        chat = mem_each_api.session("c", scope="s", policy="summary_buffer")
        for i in range(40):
            role = "user" if i % 2 == 0 else "assistant"
            chat.add(role, f"We decided to ship release {i} with the new billing page. " * 8)
        result = chat.compact()
        assert result.committed
        assert chat.compaction_state().summary
        done = outcome(chat.end("done"))
        assert done is not None
        memories = mem_each_api.memories("s")
        assert memories.list()
        created = memories.create("Pricing is 59 dollars per seat.")
        assert memories.get(created.id).content == "Pricing is 59 dollars per seat."
        memories.delete(created.id)


class TestAsyncOnly:
    def test_open_async_and_the_event_loop_stays_free(
        self, store_url: str, fake_llm: FakeLLMServer
    ) -> None:
        async def main() -> tuple[int, TurnResult]:
            async with await engram.open_async(store_url, llm=None) as mem:
                assert isinstance(mem, AsyncEngram)
                chat = await mem.session("c", scope="s")
                client = LLMClient(MODEL, base_url=fake_llm.base_url, backoff=0.0)
                fake_llm.slow(0.3, "Late but here.")
                ticks = 0
                turn = asyncio.create_task(arun_turn(chat, client, "Hi?", budget=4000))
                while not turn.done():
                    ticks += 1  # the loop runs other work while the turn waits
                    await asyncio.sleep(0.01)
                await client.aclose()
                return ticks, turn.result()

        ticks, result = asyncio.run(main())
        assert result.answer == "Late but here."
        assert ticks > 1

    def test_concurrent_writers_keep_every_message(self, store_url: str) -> None:
        async def main() -> list[int]:
            async with await engram.open_async(store_url, llm=None) as mem:
                sessions = [await mem.session(f"c{i}", scope="s") for i in range(4)]
                await asyncio.gather(
                    *(chat.add("user", f"m{j}") for chat in sessions for j in range(5))
                )
                return [len(await chat.messages()) for chat in sessions]

        assert asyncio.run(main()) == [5, 5, 5, 5]

    def test_import_engram_does_not_import_asyncio(self) -> None:
        code = "import sys, engram; print('asyncio' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stdout.strip() == "False", out.stderr


# -- the chat loop, three drivers -----------------------------------------------------

DRIVERS = ["run_turn", "arun_turn", "stream_turn"]


def drive(driver: str, mem: Engram, chat: engram.Session, client: LLMClient, text: str,
          **options: Any) -> tuple[TurnResult, list[str]]:  # fmt: skip
    """One turn through ``driver``; the streamed pieces too (empty unless streamed)."""
    if driver == "run_turn":
        return run_turn(chat, client, text, **options), []

    async def main() -> tuple[TurnResult, list[str]]:
        session = AsyncSession(chat)
        try:
            if driver == "arun_turn":
                return await arun_turn(session, client, text, **options), []
            stream = stream_turn(session, client, text, **options)
            pieces = [piece async for piece in stream]
            return stream.result, pieces
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("driver", DRIVERS)
class TestDrivers:
    def test_a_tool_round_then_an_answer(
        self, driver: str, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        chat = mem.session("c", scope="s", policy="lean")
        chat.add("user", "Pricing decision: 59 dollars per seat.")
        # Enough filler that the decision is out of the window (search skips the window).
        roles = ["assistant", "user"]
        chat.add_many(
            [{"role": roles[i % 2], "content": f"Filler {i} about the logo."} for i in range(40)]
        )
        fake_llm.reply_tool_calls(
            [{"id": "a", "name": "search_history", "arguments": {"query": "pricing"}}]
        )
        fake_llm.reply("We chose 59 dollars per seat, as decided earlier.")

        result, pieces = drive(driver, mem, chat, client, "What was the price?", budget=6000)

        assert result.answer == "We chose 59 dollars per seat, as decided earlier."
        assert [(r.name, r.ok) for r in result.tool_calls] == [("search_history", True)]
        roles = [m.role for m in chat.messages(limit=100)][-4:]
        assert roles == ["user", "assistant", "tool", "assistant"]
        tool_result = fake_llm.requests[1].messages[-1]
        assert "59 dollars" in tool_result["content"]
        if driver == "stream_turn":
            assert len(pieces) > 1 and "".join(pieces) == result.answer
            assert all(r.body and r.body.get("stream") for r in fake_llm.requests)
        else:
            assert pieces == []
        assert result.usage.calls == 2 and not result.usage.estimated

    def test_failure_then_retry_keeps_one_question(
        self, driver: str, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        chat = mem.session("c", scope="s")
        fake_llm.fail(500)
        fake_llm.fail(500)
        with pytest.raises(LLMError, match="500"):
            drive(driver, mem, chat, client, "Still there?", budget=4000, tools=None)
        fake_llm.reply("Yes.")
        result, _ = drive(driver, mem, chat, client, "Still there?", budget=4000, retry=True)
        assert result.answer == "Yes."
        assert [(m.role, m.content) for m in chat.messages()] == [
            ("user", "Still there?"),
            ("assistant", "Yes."),
        ]


def test_a_stream_is_read_once_and_has_no_result_before_its_end(
    mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
) -> None:
    chat = AsyncSession(mem.session("c", scope="s"))
    stream = stream_turn(chat, client, "Hi", budget=4000)
    with pytest.raises(EngramError, match="not finished"):
        _ = stream.result

    async def main() -> str:
        text = "".join([piece async for piece in stream])
        await client.aclose()
        with pytest.raises(EngramError, match="only once"):
            stream.__aiter__()
        return text

    assert asyncio.run(main()) == stream.result.answer == "ok: Hi"


# -- every verb of the sync API has its async twin ------------------------------------

#: Sync members with no async twin, and why.
SYNC_ONLY: dict[type, set[str]] = {
    Engram: {
        # plain values or objects, not store calls
        "config", "tz", "llm", "memory_cap", "memory_budget", "memory_metrics",
        "compaction_metrics", "flag_metrics", "jobs", "url",
        # runtime wiring for the interfaces (the server, the tools), not async verbs
        "summarizer", "compact", "memories_section", "api_keys", "ping", "job_counts",
    },
    engram.Session: {"tz", "policy", "exchanges"},  # values and a sync sub-API
    # the runtime's own steps (memories written at the end of a session)
    engram.Memories: {"context_text", "create_from_session", "run_deferred"},
}  # fmt: skip


@pytest.mark.parametrize("sync_class", list(SYNC_ONLY), ids=lambda c: c.__name__)
def test_every_public_sync_verb_has_an_async_twin(sync_class: type) -> None:
    async_class = {Engram: AsyncEngram, engram.Session: AsyncSession}.get(sync_class, AsyncMemories)
    names = {  # the class's own verbs and those of its mixins (Session's edit verbs)
        name: None
        for klass in reversed(sync_class.__mro__)
        if klass.__module__.startswith("engram")
        for name in vars(klass)
    }
    missing = [
        name
        for name in names
        if not name.startswith("_")
        and name not in SYNC_ONLY[sync_class]
        and not hasattr(async_class, name)
    ]
    assert missing == [], (
        f"add {missing} to engram/aio.py ({async_class.__name__}: name = _threaded(...)) "
        "or to SYNC_ONLY here with a reason"
    )
