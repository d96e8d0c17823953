"""Recorded prompts through the library: list, replay, diff, provider usage; what-if."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import engram
from engram.engine import Engram
from engram.errors import InvalidQuery, TurnNotFound
from engram.provenance.digest import canonical
from engram.store.base import archives_prompts

SAMPLE = Path(engram.__file__).parent / "data" / "sample_conversation.jsonl"
#: Summarizes within a few turns, synchronously.
QUICK = {
    "name": "quick",
    "summarize_over_tokens": 600,
    "keep_tokens": 300,
    "max_window_tokens": 800,
    "sync_compaction": True,
}


#: One per turn: an answer names one, and the question two turns later asks about it.
NAMES = "Harriet Oswaldo Penelope Quentin Rosalind Sebastian Theodora Ulysses".split()


def chat(mem: Engram, turns: int = 6, session: str = "s") -> list[list[dict[str, Any]]]:
    handle = mem.session(session, "p", policy=QUICK)
    sent = []
    for i in range(turns):
        about = f"What did {NAMES[i - 2]} decide? " if i >= 2 else ""
        handle.add("user", about + f"Question {i} about the Phoenix launch budget " * 12)
        sent.append(handle.context(900, system="Be brief.").messages)
        answer = f"Answer {i}: {NAMES[i]} keeps the budget at forty thousand. "
        handle.add("assistant", answer + "The plan holds. " * 20)
    return sent


def snapshot(mem: Engram, scope: str, session: str) -> Any:
    """Everything stored about a session: its document, recorded turns, usage, memories."""
    store = mem.runtime.store
    assert archives_prompts(store)
    mem.runtime.prompts.flush()
    return (
        mem.export_session(session, scope),
        [(r.turn, r.data, r.usage) for r in store.list_prompts(scope, session, limit=1000)],
        store.usage_totals(scope),
        [(m.id, m.content) for m in mem.memories(scope).list()],
        mem.sessions(scope),
    )


class TestLibrary:
    def test_turns_are_listed_and_replayed(self, mem: Engram) -> None:
        sent = chat(mem)
        handle = mem.session("s", "p")
        turns = handle.prompts()
        assert [t.turn for t in turns] == [1, 2, 3, 4, 5, 6]
        assert turns[0].cacheable is None and turns[1].cacheable is not None
        for number, messages in enumerate(sent, start=1):
            replayed = handle.prompt(number)
            assert replayed.verified and canonical(replayed.messages) == canonical(messages)
        assert handle.prompt_diff(4, 4).identical
        changed = handle.prompt_diff(1, 6)
        assert not changed.identical and changed.entered and changed.left
        assert any(s["title"] == "CONVERSATION SUMMARY" for s in changed.sections)

    def test_bad_turns_are_refused_clearly(self, mem: Engram) -> None:
        chat(mem, turns=1)
        handle = mem.session("s", "p")
        with pytest.raises(TurnNotFound, match="no recorded turn 7"):
            handle.prompt(7)
        with pytest.raises(InvalidQuery, match="turn must be an integer >= 1"):
            handle.prompt(0)

    def test_the_provider_usage_is_kept_with_its_turn(self, mem: Engram) -> None:
        handle = mem.session("s", "p")
        handle.add("user", "hello")
        handle.context(500)
        handle.answered({"input_tokens": 10, "cache_read_input_tokens": 1024, "output_tokens": 5})
        handle.context(500)
        handle.answered({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}})
        turns = handle.prompts()
        assert [t.cached_tokens for t in turns] == [1024, 0]
        assert turns[0].record.usage == {
            "prompt_tokens": 1034,
            "cached_tokens": 1024,
            "output_tokens": 5,
        }

    def test_what_if_writes_nothing(self, mem: Engram) -> None:
        chat(mem)
        before = snapshot(mem, "p", "s")
        for policy in ("current", "lean", "exchanges", "summary_buffer"):
            found = mem.what_if("s", "p", policy=policy, budget=700)
            assert len(found.turns) == 6
        assert snapshot(mem, "p", "s") == before

    def test_what_if_measures_the_history(self, mem: Engram) -> None:
        chat(mem, turns=8)
        lean = mem.what_if("s", "p", policy={"name": "two", "max_messages": 2}, budget=4000)
        whole = mem.what_if("s", "p", policy="default", budget=100_000)
        assert lean.tokens < whole.tokens
        assert whole.evidence_kept == 1.0
        assert lean.evidence_kept is not None and lean.evidence_kept < 1.0
        assert whole.cacheable_share is not None and whole.cacheable_share > 0.5
        assert whole.cost_cached_usd is not None and whole.cost_usd is not None
        assert whole.cost_cached_usd < whole.cost_usd
        assert whole.to_dict()["budget_violations"] == 0
        tight = mem.what_if("s", "p", policy="current", budget=80)
        assert tight.to_dict()["compactions"] > 0
        assert any(t.over_budget for t in tight.turns)
