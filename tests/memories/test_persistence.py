"""Memories, their audit trail and pending work survive closing and reopening the store."""

from __future__ import annotations

import engram
from engram.background.local import end_session
from engram.memories import Memories, MemoryBudget

from .helpers import converse, fill


class TestPersistence:
    def test_memories_and_audit_survive_reopening(self, store_url: str) -> None:
        with engram.open(store_url) as mem:
            memories = Memories(mem.store, "app", cap=3)
            fill(memories, 4)
            kept = memories.list()
            text = memories.context_text()
            audit = memories.audit()
        with engram.open(store_url) as mem:
            again = Memories(mem.store, "app", cap=3)
            assert again.list() == kept
            assert again.context_text() == text
            assert again.audit() == audit
            assert [e["event"] for e in audit].count("compaction") == 1

    def test_deferred_work_is_found_after_a_restart(self, store_url: str) -> None:

        class Exhausted(MemoryBudget):
            def exhausted(self, store: object, scope: str) -> str | None:
                return "test budget is empty"

        with engram.open(store_url) as mem:
            converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
            memories = Memories(mem.store, "app", budget=Exhausted())
            # No LLM: free work is never deferred. Defer by hand, as the worker does when full.
            memories.budget.defer(mem.store, "app", "s1", "worker full")
        with engram.open(store_url) as mem:
            memories = Memories(mem.store, "app")
            assert memories.run_deferred() == []  # the new process's queue is empty
            (outcome,) = memories.run_deferred(scan=True)
            assert outcome.status == "created" and "Phoenix" in outcome.memory.content  # type: ignore[union-attr]
            assert memories.run_deferred(scan=True) == []  # done, not redone
            assert end_session(memories, "s1", "closed").result().status == "duplicate"
