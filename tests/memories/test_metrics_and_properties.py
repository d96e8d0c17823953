"""Counters for the server's metrics, and the cap invariant as a property."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.engine import Engram
from engram.llm import LLMClient
from engram.memories import Memories, MemoryMetrics
from engram.memories.records import find_duplicate, jaccard, word_set
from engram.store import open_store
from engram.testing import FakeLLMServer

from .helpers import fill


class TestMetrics:
    def test_counters_follow_memory_work(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        metrics = MemoryMetrics()
        memories = Memories(mem.store, "a", llm=client, cap=2, metrics=metrics)
        fake_llm.reply_json({"action": "delete", "targetMemoryId": 1, "reason": "old"})
        fake_llm.fail(500).fail(500)
        fill(memories, 4)  # 2 compactions: one by the model, one FIFO after errors
        memories.create("Fact 3: the user mentioned delta number 24.")  # a duplicate
        Memories(mem.store, "b", metrics=metrics).create("User in b likes tea.")
        memories.context_text()
        memories.context_text()
        snap = metrics.snapshot()
        assert snap == {
            "memories_created": 5,
            "memories_duplicate_skipped": 1,
            "memory_creation_failures": 0,
            "compactions_llm": 1,
            "compactions_fifo": 1,
            "injections": 2,
            "deferred": 0,
            "deferred_completed": 0,
            "flagged_kept_out": 0,
            "scopes_with_memories": 2,
        }
        Memories(mem.store, "b", metrics=metrics).purge()
        assert metrics.snapshot()["scopes_with_memories"] == 1
        text = metrics.prometheus()
        assert "# TYPE engram_memory_compactions_llm_total counter" in text
        assert "engram_memory_scopes_with_memories 1" in text

    def test_thread_safe(self) -> None:
        metrics = MemoryMetrics()

        def bump() -> None:
            for _ in range(1000):
                metrics.incr("injections")

        threads = [threading.Thread(target=bump) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert metrics.snapshot()["injections"] == 4000


texts = st.text(alphabet="abcdefghij ", min_size=1, max_size=40).filter(lambda t: t.strip())


class TestProperties:
    @settings(max_examples=40, deadline=None)
    @given(cap=st.integers(1, 6), n=st.integers(0, 14))
    def test_count_is_min_of_created_and_cap(self, cap: int, n: int) -> None:
        store = open_store("sqlite:///:memory:")
        try:
            memories = Memories(store, "p", cap=cap)
            ids = fill(memories, n)
            kept = [m.id for m in memories.list()]
            assert kept == ids[max(0, n - cap) :]  # FIFO keeps the newest
            compactions = [e for e in memories.audit(1000) if e["event"] == "compaction"]
            assert len(compactions) == max(0, n - cap)
        finally:
            store.close()

    @given(a=texts, b=texts)
    def test_similarity_is_symmetric_and_bounded(self, a: str, b: str) -> None:
        x, y = word_set(a), word_set(b)
        assert jaccard(x, y) == jaccard(y, x)
        assert 0.0 <= jaccard(x, y) <= 1.0
        assert jaccard(x, x) == 1.0

    @given(text=texts)
    def test_a_text_repeats_itself_in_any_case(self, text: str) -> None:
        from datetime import UTC, datetime

        from engram.models import MemoryRecord

        now = datetime.now(UTC)
        record = MemoryRecord(1, "p", text, now, now)
        assert find_duplicate(text.upper() + " !", [record]) == record
