"""Seed 003's six test scenarios, end to end on a real SQLite file and a fake LLM over HTTP."""

from __future__ import annotations

import json

from engram.background.local import MemoryWorker, end_session
from engram.context import Section, build_context
from engram.engine import Engram
from engram.llm import LLMClient
from engram.memories import (
    CREATION_PROMPT,
    LIFECYCLE_KIND,
    PURPOSE_COMPACT,
    PURPOSE_CREATE,
    SECTION_TITLE,
    Memories,
)
from engram.testing import FakeLLMServer
from engram.tokens import count_messages, storage_counter

from .helpers import CREATION_MARK, DECISION_MARK, converse, fill, prompt_of


def memory_section(memories: Memories) -> list[Section]:
    text = memories.context_text()
    return [Section(SECTION_TITLE, text)] if text else []


class TestSeedScenarios:
    def test_creates_memory_when_conversation_ends(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient, worker: MemoryWorker
    ) -> None:
        chat = converse(
            mem,
            "c1",
            "calendar",
            [
                ("I prefer meetings after 2pm on weekdays.", "Noted, afternoons only."),
                ("Book the design review on Thursday.", "Booked for Thursday 3pm."),
            ],
        )
        fake_llm.reply(
            "User prefers meetings after 2pm on weekdays. Design review is Thursday 3pm."
        )
        memories = Memories(mem.store, "calendar", llm=client)
        future = end_session(memories, chat.id, "user closed", worker=worker, wait=True)
        outcome = future.result()
        assert outcome.status == "created"
        stored = memories.list()
        assert [m.content for m in stored] == [
            "User prefers meetings after 2pm on weekdays. Design review is Thursday 3pm."
        ]
        assert stored[0].source_session == "c1"
        assert stored[0].metadata["related_sessions"] == ["c1"]
        # Seed 003's prompt, verbatim, with the conversation in it.
        prompt = prompt_of(fake_llm.requests[0])
        assert prompt.startswith(CREATION_PROMPT.split("{conversation}")[0])
        assert prompt.endswith("\n\nCreate memory:")
        assert "user: I prefer meetings after 2pm on weekdays." in prompt
        assert "assistant: Booked for Thursday 3pm." in prompt
        # The session ended, and the energy spent is on record for the scope and session.
        state = mem.store.load_state("calendar", "c1", LIFECYCLE_KIND)
        assert state is not None and state.data["reason"] == "user closed"
        totals = mem.store.usage_totals("calendar", "c1")
        assert totals["by_purpose"][PURPOSE_CREATE]["calls"] == 1
        assert totals["input_tokens"] > 0

    def test_includes_memories_in_context_for_same_app(self, mem: Engram) -> None:
        memories = Memories(mem.store, "calendar")
        memories.create("User prefers meetings after 2pm on weekdays.")
        chat = converse(mem, "c2", "calendar", [("When can we meet?", "Let me check.")])
        chat.add("user", "Schedule a call with Ana.")
        ctx = build_context(
            lambda limit, before: mem.store.tail("calendar", "c2", limit=limit, before_id=before),
            budget=2000,
            system="You are a scheduling assistant.",
            sections=memory_section(memories),
        )
        assert ctx.messages[0]["content"] == "You are a scheduling assistant."
        block = ctx.messages[1]["content"]
        assert block.startswith("[LONG-TERM MEMORIES]\n(memories for app: calendar)\n")
        assert "1. [Created: " in block and "User prefers meetings after 2pm" in block
        assert ctx.sections == [SECTION_TITLE]
        # Counted in the budget: the reported size is the exact size of what is sent.
        assert ctx.tokens == count_messages(storage_counter(), ctx.messages)

    def test_isolates_memories_between_apps(self, mem: Engram) -> None:
        a = Memories(mem.store, "app-a")
        b = Memories(mem.store, "app-b")
        secret = a.create("User's launch codename is Bluebird.")
        b.create("User likes green themes.")
        assert "Bluebird" not in b.context_text()
        assert all(m.scope == "app-b" for m in b.list())
        assert [m.content for m in b.list()] == ["User likes green themes."]
        assert b.search("Bluebird codename") == []
        assert b.store.get_memory("app-b", secret.id) is None
        chat = converse(mem, "b1", "app-b", [("What is the codename?", "I do not know.")])
        ctx = build_context(
            lambda limit, before: mem.store.tail("app-b", "b1", limit=limit, before_id=before),
            budget=2000,
            sections=memory_section(b),
        )
        assert "Bluebird" not in json.dumps(ctx.messages)
        assert chat.scope == "app-b"

    def test_compacts_memories_when_limit_reached(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories = Memories(mem.store, "calendar", llm=client)
        ids = fill(memories, 10)
        assert fake_llm.requests == []  # no compaction at or under the cap
        fake_llm.reply_json(
            {"action": "delete", "targetMemoryId": ids[3], "reason": "superseded by later facts"}
        )
        eleventh = memories.create("User moved the Phoenix deadline to Nov 15.")
        remaining = [m.id for m in memories.list()]
        assert len(remaining) == 10
        assert ids[3] not in remaining and eleventh.id in remaining
        prompt = prompt_of(fake_llm.requests[0])
        assert prompt.startswith(
            f"{DECISION_MARK} You have 11 memories but can only keep 10.\n\n"
            "Analyze these memories and decide which ONE to either:\n"
        )
        assert f"- id {ids[0]} [Created: " in prompt
        assert f"New memory:\n- id {eleventh.id} " in prompt
        assert '"action": "delete" | "edit"' in prompt
        (event,) = [e for e in memories.audit() if e["event"] == "compaction"]
        assert event["action"] == "delete" and event["target"] == ids[3]
        assert event["source"] == "llm" and event["fallback"] is False
        assert event["reason"] == "superseded by later facts"
        assert (event["count_before"], event["count_after"]) == (11, 10)
        assert mem.store.usage_totals("calendar")["by_purpose"][PURPOSE_COMPACT]["calls"] == 1

    def test_retains_memories_after_app_uninstall(self, mem: Engram) -> None:
        memories = Memories(mem.store, "calendar")
        converse(mem, "c1", "calendar", [("I prefer tea over coffee.", "Noted.")])
        converse(mem, "c2", "calendar", [("My team is called Falcon.", "Nice name.")])
        end_session(memories, "c1", "done", wait=True)
        end_session(memories, "c2", "done", wait=True)
        before = memories.list()
        assert len(before) == 2
        for info in mem.store.list_sessions("calendar"):
            assert mem.store.delete_session("calendar", info.id)
        assert mem.store.list_sessions("calendar") == []
        assert memories.list() == before
        assert "calendar" in mem.store.list_scopes()

    def test_purges_memories_on_admin_request(self, mem: Engram) -> None:
        memories = Memories(mem.store, "calendar")
        fill(memories, 4)
        Memories(mem.store, "other").create("Another app's memory stays.")
        assert memories.purge() == 4
        assert memories.list() == []
        assert memories.context_text() == ""
        assert [m.content for m in Memories(mem.store, "other").list()] == [
            "Another app's memory stays."
        ]
        assert memories.audit()[0]["event"] == "purge"
        assert memories.audit()[0]["deleted"] == 4


def test_creation_mark_matches_prompt() -> None:
    assert CREATION_PROMPT.startswith(CREATION_MARK)
