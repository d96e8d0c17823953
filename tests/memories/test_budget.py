"""Seed 003's energy: memory work is metered, and deferred (not dropped) over budget."""

from __future__ import annotations

import pytest

from engram.background.local import end_session
from engram.engine import Engram
from engram.errors import ConfigError
from engram.llm import LLMClient
from engram.memories import PENDING_KIND, PURPOSE_CREATE, Memories, MemoryBudget
from engram.testing import FakeLLMServer

from .helpers import converse, fill, smart_responder


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def topic_memory(prompt: str) -> str:
    return "User said: " + prompt.split("user: ", 1)[1].split("\n", 1)[0]


class TestEnergyBudget:
    def test_hourly_budget_defers_then_completes(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.default = smart_responder(memory_text=topic_memory)
        clock = Clock()
        budget = MemoryBudget(max_tokens_per_hour=50, clock=clock)
        memories = Memories(mem.store, "app", llm=client, budget=budget)
        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        converse(mem, "s2", "app", [("Our deadline is November 1.", "Noted.")])

        assert end_session(memories, "s1", "closed").result().status == "created"
        spent = budget.spent_this_hour("app")
        assert spent > 50  # one creation call exceeds this tiny budget
        usage = mem.store.usage_totals("app", "s1")["by_purpose"][PURPOSE_CREATE]
        assert usage["input_tokens"] + usage["output_tokens"] == spent

        outcome = end_session(memories, "s2", "closed").result()
        assert outcome.status == "deferred" and "this hour" in outcome.detail
        assert len(fake_llm.requests) == 1  # deferred work did not call the model
        state = mem.store.load_state("app", "s2", PENDING_KIND)
        assert state is not None and state.data["status"] == "pending"
        assert memories.audit()[0]["event"] == "deferred"
        assert budget.queued("app") == ["s2"]

        assert memories.run_deferred() == []  # still over budget: still pending
        assert budget.queued("app") == ["s2"]

        clock.now += 3601  # the hour passed: budget is back
        (done,) = memories.run_deferred()
        assert done.status == "created" and "November 1" in done.memory.content  # type: ignore[union-attr]
        assert [m.source_session for m in memories.list()] == ["s1", "s2"]
        state = mem.store.load_state("app", "s2", PENDING_KIND)
        assert state is not None and state.data["status"] == "done"
        assert budget.queued("app") == []
        snap = memories.metrics.snapshot()
        assert snap["deferred"] == 1 and snap["deferred_completed"] == 1

    def test_total_budget_reads_the_store(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.default = smart_responder(memory_text=topic_memory)
        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        converse(mem, "s2", "app", [("Our deadline is November 1.", "Noted.")])
        first = Memories(mem.store, "app", llm=client, budget=MemoryBudget(max_tokens_total=10))
        assert end_session(first, "s1", "x").result().status == "created"
        # A new budget object (another process) still sees the recorded total.
        second = Memories(mem.store, "app", llm=client, budget=MemoryBudget(max_tokens_total=10))
        assert end_session(second, "s2", "x").result().status == "deferred"
        # Other scopes have their own budget.
        converse(mem, "s3", "other", [("My project is called Atlas.", "Noted.")])
        third = Memories(mem.store, "other", llm=client, budget=MemoryBudget(max_tokens_total=10))
        assert end_session(third, "s3", "x").result().status == "created"

    def test_compaction_over_budget_uses_fifo_and_keeps_the_cap(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        clock = Clock()
        budget = MemoryBudget(max_tokens_per_hour=1, clock=clock)
        memories = Memories(mem.store, "app", llm=client, cap=2, budget=budget)
        fake_llm.reply_json({"action": "delete", "targetMemoryId": 0, "reason": "bad"})
        fill(memories, 3)  # the first compaction spends the budget (and falls back: bad id)
        fill(memories, 1, prefix="Later")
        assert len(memories.list()) == 2
        assert len(fake_llm.requests) == 1  # the second compaction did not ask the model
        latest = next(e for e in memories.audit() if e["event"] == "compaction")
        assert latest["fallback"] is True and "budget" in latest["error"]

    def test_free_work_is_never_deferred(self, mem: Engram) -> None:
        budget = MemoryBudget(max_tokens_total=1)
        mem.store.record_usage("app", None, _usage(500))
        memories = Memories(mem.store, "app", budget=budget)
        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        assert end_session(memories, "s1", "x").result().status == "created"

    @pytest.mark.parametrize("bad", [0, -5, 1.5, True])
    def test_bad_caps_are_refused(self, bad: object) -> None:
        with pytest.raises(ConfigError):
            MemoryBudget(max_tokens_per_hour=bad)  # type: ignore[arg-type]


def _usage(tokens: int):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from engram.models import UsageRecord

    return UsageRecord("gpt-4o-mini", PURPOSE_CREATE, tokens, 0, 0.0, datetime.now(UTC))
