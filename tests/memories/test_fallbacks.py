"""Every way the model can fail a compaction or a creation, and what Engram does then."""

from __future__ import annotations

import time

import pytest

from engram.background.local import end_session
from engram.engine import Engram
from engram.llm import LLMClient
from engram.memories import LIFECYCLE_KIND, MAX_CONTENT_CHARS, Memories
from engram.models import MemoryRecord
from engram.testing import FakeLLMServer

from .helpers import converse, fill, smart_responder


def compaction_events(memories: Memories) -> list[dict[str, object]]:
    return [e for e in memories.audit() if e["event"] == "compaction"]


def full_scope(mem: Engram, client: LLMClient, scope: str = "app") -> tuple[Memories, list[int]]:
    memories = Memories(mem.store, scope, llm=client, cap=3)
    return memories, fill(memories, 3)


def assert_fifo(memories: Memories, ids: list[int], new: MemoryRecord, error_part: str) -> None:
    remaining = [m.id for m in memories.list()]
    assert remaining == [ids[1], ids[2], new.id]  # the oldest went, nothing else changed
    (event,) = compaction_events(memories)
    assert event["source"] == "fifo" and event["fallback"] is True
    assert event["target"] == ids[0]
    assert error_part in str(event["error"])
    assert "FIFO" in str(event["reason"])


class TestCompactionFallbacks:
    def test_llm_error_twice_falls_back_to_fifo(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        fake_llm.fail(500).fail(500)
        new = memories.create("User switched the build system to Bazel.")
        assert len(fake_llm.requests) == 2  # first try and exactly one retry
        assert_fifo(memories, ids, new, "HTTP 500")

    def test_invalid_json_falls_back_to_fifo(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        fake_llm.reply("I would delete the second one, it seems old.")
        new = memories.create("User switched the build system to Bazel.")
        assert_fifo(memories, ids, new, "invalid JSON")
        # The unusable answer still cost tokens: recorded.
        assert mem.store.usage_totals("app")["calls"] == 1

    def test_unknown_action_falls_back_to_fifo(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        fake_llm.reply_json({"action": "archive", "targetMemoryId": ids[1], "reason": "x"})
        new = memories.create("User switched the build system to Bazel.")
        assert_fifo(memories, ids, new, "action")

    def test_decision_naming_another_scopes_memory_falls_back(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        other = Memories(mem.store, "other-app").create("Other app's precious memory.")
        memories, ids = full_scope(mem, client)
        fake_llm.reply_json({"action": "delete", "targetMemoryId": other.id, "reason": "x"})
        new = memories.create("User switched the build system to Bazel.")
        assert_fifo(memories, ids, new, "not a memory of this scope")
        assert mem.store.get_memory("other-app", other.id) == other

    def test_decision_editing_another_scopes_memory_changes_nothing_there(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        other = Memories(mem.store, "other-app").create("Other app's precious memory.")
        memories, ids = full_scope(mem, client)
        fake_llm.reply_json(
            {"action": "edit", "targetMemoryId": other.id, "newContent": "hijacked", "reason": "x"}
        )
        new = memories.create("User switched the build system to Bazel.")
        assert_fifo(memories, ids, new, "not a memory of this scope")
        assert mem.store.get_memory("other-app", other.id) == other

    def test_decision_naming_a_missing_id_falls_back(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        fake_llm.reply_json({"action": "delete", "targetMemoryId": 987654, "reason": "x"})
        new = memories.create("User switched the build system to Bazel.")
        assert_fifo(memories, ids, new, "987654")

    @pytest.mark.parametrize("content", ["", "   ", None, "x" * (MAX_CONTENT_CHARS + 1)])
    def test_edit_without_usable_content_falls_back(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient, content: object
    ) -> None:
        memories, ids = full_scope(mem, client)
        before = {m.id: m.content for m in memories.list()}
        fake_llm.reply_json(
            {"action": "edit", "targetMemoryId": ids[1], "newContent": content, "reason": "merge"}
        )
        new = memories.create("User switched the build system to Bazel.")
        assert_fifo(memories, ids, new, "newContent")
        assert memories.get(ids[1]).content == before[ids[1]]  # the target was not touched

    def test_timeout_falls_back_to_fifo(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories = Memories(mem.store, "app", llm=client, cap=3, timeout=0.6)
        ids = fill(memories, 3)
        fake_llm.slow(3.0, '{"action": "delete"}').slow(3.0, '{"action": "delete"}')
        started = time.monotonic()
        new = memories.create("User switched the build system to Bazel.")
        assert time.monotonic() - started < 2.0  # bounded by the memory timeout, not the model
        assert_fifo(memories, ids, new, "did not answer")


class TestValidDecisions:
    def test_edit_merges_the_new_memory_into_the_target(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        merged_text = "Fact 1 merged: user mentioned bravo and now uses Bazel."
        fake_llm.reply_json(
            {"action": "edit", "targetMemoryId": ids[1], "newContent": merged_text, "reason": "m"}
        )
        before = memories.get(ids[1])
        returned = memories.create("User switched the build system to Bazel.")
        assert returned.id == ids[1] and returned.content == merged_text
        assert returned.status == "merged" and returned.merged_from == before
        assert returned.evicted == ()
        assert [m.id for m in memories.list()] == ids  # the new memory was absorbed
        assert memories.get(ids[1]).content == merged_text
        (event,) = compaction_events(memories)
        assert event["action"] == "edit" and event["new_content"] == merged_text
        assert event["fallback"] is False

    def test_string_id_and_uppercase_action_are_accepted(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        fake_llm.reply_json({"action": "DELETE", "targetMemoryId": str(ids[2]), "reason": "dup"})
        new = memories.create("User switched the build system to Bazel.")
        assert [m.id for m in memories.list()] == [ids[0], ids[1], new.id]

    def test_deleting_the_new_memory_keeps_the_old_ones(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories, ids = full_scope(mem, client)
        fake_llm.default = smart_responder(
            decide=lambda shown: {"action": "delete", "targetMemoryId": shown[-1], "reason": "dup"}
        )
        returned = memories.create("User mentioned nothing new at all today.")
        assert returned.id not in ids
        assert returned.status == "dropped" and [m.id for m in returned.evicted] == [returned.id]
        assert [m.id for m in memories.list()] == ids
        (event,) = compaction_events(memories)
        assert event["target"] == returned.id == event["new_memory"]

    def test_create_at_the_cap_returns_what_was_evicted(self, mem: Engram) -> None:
        memories = Memories(mem.store, "app", cap=3)
        ids = fill(memories, 3)
        oldest = memories.get(ids[0])
        returned = memories.create("User switched the build system to Bazel.")
        assert returned.status == "created" and returned.evicted == (oldest,)
        assert returned == memories.get(returned.id)  # still the stored record
        under_cap = Memories(mem.store, "roomy", cap=3).create("User likes tea.")
        assert under_cap.status == "created" and under_cap.evicted == ()
        again = memories.create("User switched the build system to Bazel.")
        assert again.status == "duplicate" and again.id == returned.id

    def test_no_llm_uses_fifo_without_calling_it_a_fallback(self, mem: Engram) -> None:
        memories = Memories(mem.store, "app", cap=2)
        ids = fill(memories, 3)
        assert [m.id for m in memories.list()] == ids[1:]
        (event,) = compaction_events(memories)
        assert event["source"] == "fifo" and event["fallback"] is False

    def test_lowering_the_cap_compacts_to_the_new_cap(self, mem: Engram) -> None:
        ids = fill(Memories(mem.store, "app", cap=10), 6)
        decisions = Memories(mem.store, "app", cap=2).compact()
        assert len(decisions) == 4
        assert [m.id for m in Memories(mem.store, "app").list()] == ids[4:]


class TestCreationFailures:
    def test_llm_error_skips_the_memory_but_the_session_ends(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        converse(mem, "s1", "app", [("I prefer dark mode everywhere.", "Done.")])
        memories = Memories(mem.store, "app", llm=client)
        fake_llm.fail(500).fail(503)
        outcome = end_session(memories, "s1", "closed").result()
        assert outcome.status == "failed" and "HTTP 503" in outcome.detail
        assert memories.list() == []
        state = mem.store.load_state("app", "s1", LIFECYCLE_KIND)
        assert state is not None and state.data["reason"] == "closed"
        assert memories.audit()[0]["event"] == "create_failed"
        assert memories.metrics.snapshot()["memory_creation_failures"] == 1

    def test_timeout_skips_the_memory(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        converse(mem, "s1", "app", [("I prefer dark mode everywhere.", "Done.")])
        memories = Memories(mem.store, "app", llm=client, timeout=0.5)
        fake_llm.slow(3.0).slow(3.0)
        started = time.monotonic()
        outcome = end_session(memories, "s1", "closed").result()
        assert time.monotonic() - started < 2.0
        assert outcome.status == "failed" and memories.list() == []

    def test_empty_answer_is_refused(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        converse(mem, "s1", "app", [("I prefer dark mode everywhere.", "Done.")])
        memories = Memories(mem.store, "app", llm=client)
        fake_llm.reply("   ")
        assert end_session(memories, "s1", "closed").result().status == "failed"
        assert memories.list() == []
        assert mem.store.usage_totals("app")["calls"] == 1  # spent anyway, so recorded
