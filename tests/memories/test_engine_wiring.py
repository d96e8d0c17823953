"""Memories reached through the engine on every backend: Session.end, prompt injection, the tool,
isolation."""

from __future__ import annotations

import json
from collections.abc import Callable

import engram
from engram.engine import Engram
from engram.llm import LLMClient
from engram.testing import FakeLLMServer
from engram.tokens import count_messages, storage_counter


def _talk(mem: Engram, scope: str, session: str, facts: str) -> None:
    chat = mem.session(session, scope=scope)
    chat.add("user", facts)
    chat.add("assistant", "Noted, I will keep that in mind.")


class TestSessionEnd:
    def test_memory_written_by_the_model_and_injected_in_the_next_conversation(
        self, open_engram: Callable[..., Engram]
    ) -> None:
        with FakeLLMServer() as server:
            server.reply("User prefers meetings after 2pm; Phoenix launches on November 1.")
            client = LLMClient("gpt-4o-mini", base_url=server.base_url, timeout=5, backoff=0.01)
            with client, open_engram(llm=client) as mem:
                _talk(mem, "phoenix", "c1", "I prefer meetings after 2pm. Launch is November 1.")
                outcome = mem.session("c1", scope="phoenix").end("user closed", wait=True).result()
                assert outcome.status == "created"
                prompt = json.dumps(server.requests[-1].messages)
                assert "I prefer meetings after 2pm" in prompt  # the conversation went to the model

                nxt = mem.session("c2", scope="phoenix")
                nxt.add("user", "When do we launch?")
                ctx = nxt.context(budget=2000, system="You are a project assistant.")
                text = json.dumps(ctx.messages)
                assert "Phoenix launches on November 1" in text
                assert "LONG-TERM MEMORIES" in ctx.sections
                assert ctx.tokens == count_messages(storage_counter(), ctx.messages)
                # seed 001's order: system, memories, then the conversation
                assert ctx.messages[0]["content"] == "You are a project assistant."
                assert "memories for app: phoenix" in ctx.messages[1]["content"]

    def test_end_does_not_wait_and_offline_memory_is_written(
        self, open_engram: Callable[..., Engram]
    ) -> None:
        with open_engram(llm=None) as mem:
            _talk(mem, "p", "c1", "We decided to price the Pro plan at 14 dollars.")
            future = mem.session("c1", scope="p").end("done")
            outcome = future.result(timeout=30)
            assert outcome.status == "created"
            assert [m.content for m in mem.memories("p").list()] == [outcome.memory.content]


class TestIsolation:
    def test_scope_b_never_sees_scope_a_memories(self, open_engram: Callable[..., Engram]) -> None:
        with open_engram(llm=None) as mem:
            mem.memories("a").create("Secret plan of scope A: codename Falcon.")
            chat_b = mem.session("c", scope="b")
            chat_b.add("user", "What is the codename?")
            ctx = chat_b.context(budget=2000)
            assert "Falcon" not in json.dumps(ctx.messages)
            found = json.loads(
                engram.tools.dispatch(chat_b, "search_memories", {"query": "Falcon"})
            )
            assert found["count"] == 0
            chat_a = mem.session("c", scope="a")
            chat_a.add("user", "What is the codename?")
            found = json.loads(
                engram.tools.dispatch(chat_a, "search_memories", {"query": "Falcon"})
            )
            assert found["count"] == 1

    def test_memories_survive_reopening(self, store_url: str) -> None:
        with engram.open(store_url, llm=None) as mem:
            mem.memories("p").create("The team ships on Fridays.")
        with engram.open(store_url, llm=None) as mem:
            assert [m.content for m in mem.memories("p").list()] == ["The team ships on Fridays."]

    def test_cap_is_configurable_on_open(self, open_engram: Callable[..., Engram]) -> None:
        with open_engram(llm=None, memory_cap=3) as mem:
            memories = mem.memories("p")
            for topic in ["alpha", "bravo", "charlie", "delta", "echo"]:
                memories.create(f"Distinct fact about {topic} number {len(topic)} here.")
            assert len(memories.list()) == 3
