"""Seed 001's eight test scenarios (phase 9), through the engine with the summary_buffer preset.

A scripted OpenAI-compatible server on 127.0.0.1 plays gpt-4o-mini; storage is
real SQLite. The preset compacts synchronously (seed 001): the turn that goes
over 3,000 tokens summarizes first, then builds the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from engram.compaction.state import STATE_KIND
from engram.compaction.words import count_words
from engram.engine import Engram, Session
from engram.testing import FakeLLMServer
from engram.tokens import count_message, count_messages, counter_for_model, storage_counter

from .engine_support import long_text, summarizer_responder

SYSTEM = "You are a helpful writing assistant."


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """The scripted model answers as a summarizer (``mem_llm`` on every backend uses it)."""
    with FakeLLMServer(default=summarizer_responder) as server:
        yield server


def fill_until(chat: Session, tokens: int, start: int = 0) -> int:
    """Add user/assistant pairs until the unfolded history passes ``tokens``; returns next index."""
    i = start
    total = 0
    while total <= tokens:
        for m in chat.add_many(
            [
                {"role": "user", "content": long_text(f"User message {i}:", 150)},
                {"role": "assistant", "content": long_text(f"Response {i}:", 150)},
            ]
        ):
            total += m.tokens
        i += 1
    return i


def test_scenario_1_short_conversation_is_not_summarized(
    mem_llm: Engram, fake_llm: FakeLLMServer
) -> None:
    chat = mem_llm.session("s1", policy="summary_buffer")
    for text in ("Hello", "Hi! How can I help?", "Tell me a joke", "Why did...", "Ha"):
        chat.add("user" if text in ("Hello", "Tell me a joke", "Ha") else "assistant", text)
    ctx = chat.context(system=SYSTEM)
    assert [m["content"] for m in ctx.messages[1:]] == [
        "Hello",
        "Hi! How can I help?",
        "Tell me a joke",
        "Why did...",
        "Ha",
    ]
    assert ctx.sections == []
    assert not ctx.pending_compaction
    assert mem_llm.store.load_state("default", "s1", STATE_KIND) is None
    assert fake_llm.requests == []


def test_scenario_2_first_summarization(mem_llm: Engram, fake_llm: FakeLLMServer) -> None:
    chat = mem_llm.session("s2", policy="summary_buffer")
    fill_until(chat, 3000)
    ctx = chat.context(system=SYSTEM)
    state = chat.compaction_state()
    assert state.summary_version == 1
    assert 100 <= count_words(state.summary) <= 150
    assert state.important_data["important_facts"]
    assert state.last_summarized_at is not None
    assert state.summarizer == "llm:gpt-4o-mini"
    # The prompt after compaction: system, important data, summary, recent messages.
    assert ctx.sections == ["IMPORTANT DATA FROM PREVIOUS CONVERSATIONS", "CONVERSATION SUMMARY"]
    assert ctx.messages[1]["content"].startswith("[IMPORTANT DATA FROM PREVIOUS CONVERSATIONS]")
    assert ctx.messages[2]["content"].startswith("[CONVERSATION SUMMARY]")
    assert ctx.tokens < 3000
    assert min(ctx.message_ids) > state.watermark  # folded messages are not in the prompt
    assert not ctx.pending_compaction and ctx.degraded is None
    # The next turn uses the summaries and does not summarize again.
    before = len(fake_llm.requests)
    chat.add("user", "New message after summarization")
    ctx2 = chat.context(system=SYSTEM)
    assert ctx2.messages[-1]["content"] == "New message after summarization"
    assert "CONVERSATION SUMMARY" in ctx2.sections
    assert len(fake_llm.requests) == before


def test_scenario_3_incremental_summarization(mem_llm: Engram, fake_llm: FakeLLMServer) -> None:
    chat = mem_llm.session("s3", policy="summary_buffer")
    nxt = fill_until(chat, 3000)
    chat.context(system=SYSTEM)
    first = chat.compaction_state()
    assert first.summary_version == 1
    fill_until(chat, 2000, start=nxt)
    ctx = chat.context(system=SYSTEM)
    second = chat.compaction_state()
    assert second.summary_version == 2
    assert 200 <= count_words(second.summary) <= 250
    assert second.watermark > first.watermark
    # Merged: the first cycle's facts are kept, the second cycle's added.
    facts = second.important_data["important_facts"]
    assert (
        facts[: len(first.important_data["important_facts"])]
        == first.important_data["important_facts"]
    )
    assert len(facts) > len(first.important_data["important_facts"])
    assert ctx.tokens < 3000
    # The second cycle sent the previous summary with only the new messages.
    summary_prompts = [
        r.messages[-1]["content"]
        for r in fake_llm.requests
        if "Word count target" in str(r.messages[-1].get("content"))
    ]
    assert len(summary_prompts) == 2
    assert first.summary in summary_prompts[1]
    assert "User message 0:" not in summary_prompts[1]


def test_scenario_4_important_data_preserved_across_cycles(
    open_engram: Callable[..., Engram],
) -> None:
    # Offline (no model): the rule-based extraction keeps what the user said.
    with open_engram() as mem:
        chat = mem.session("s4", policy="summary_buffer")
        chat.add("user", "I prefer dark mode.")
        chat.add("user", "Document structure: Intro, Methods, Results, Conclusion")
        chat.add("user", "Key sources: https://example.com/paper1, https://example.com/paper2")
        chat.add("assistant", "Noted, I will follow that structure.")
        nxt = fill_until(chat, 3000)
        chat.compact(system=SYSTEM)
        first = chat.compaction_state()
        assert first.summary_version == 1
        assert first.important_data["user_preferences"].get("theme") == "dark"
        assert "https://example.com/paper1" in first.important_data["source_urls"]
        chat.add("user", "New topic: we decided to use the APA citation style.")
        chat.add("user", "Another source: https://example.org/new-paper")
        fill_until(chat, 3000, start=nxt)
        chat.compact(system=SYSTEM)
        second = chat.compaction_state()
        assert second.summary_version == 2
        data = second.important_data
        assert data["user_preferences"].get("theme") == "dark"
        urls = data["source_urls"]
        assert "https://example.com/paper1" in urls and "https://example.com/paper2" in urls
        assert "https://example.org/new-paper" in urls
        assert data["document_structure"] == first.important_data["document_structure"] or (
            data["document_structure"].items() >= first.important_data["document_structure"].items()
        )
        assert second.summarizer == "offline"


def test_scenario_5_token_accuracy(mem_llm: Engram) -> None:
    chat = mem_llm.session("s5", policy="summary_buffer")
    fill_until(chat, 3000)
    stored = chat.messages(limit=5)
    counter = storage_counter()
    for m in stored:
        assert m.tokens == count_message(counter, m.role, m.content)
    for model in ("gpt-4o-mini", "gpt-4"):
        ctx = chat.context(system=SYSTEM, model=model)
        assert ctx.tokens == count_messages(counter_for_model(model), ctx.messages)
        assert ctx.tokens <= ctx.budget - ctx.reserve


def test_scenario_6_turns_without_summarization_do_not_call_the_model(
    mem_llm: Engram, fake_llm: FakeLLMServer
) -> None:
    chat = mem_llm.session("s6", policy="summary_buffer")
    fill_until(chat, 3000)
    chat.context(system=SYSTEM)
    calls = len(fake_llm.requests)
    assert calls >= 2  # summary + important data
    for i in range(3):
        chat.add("user", f"short question {i}")
        chat.add("assistant", f"short answer {i}")
        ctx = chat.context(system=SYSTEM)
        assert not ctx.pending_compaction
    assert len(fake_llm.requests) == calls


def test_scenario_7_every_message_still_returned(mem_llm: Engram) -> None:
    chat = mem_llm.session("s7", policy="summary_buffer")
    nxt = fill_until(chat, 3000)
    before = chat.messages(limit=1000)
    chat.context(system=SYSTEM)
    fill_until(chat, 3000, start=nxt)
    chat.context(system=SYSTEM)
    assert chat.compaction_state().summary_version == 2
    after = chat.messages(limit=1000)
    assert after[: len(before)] == before  # nothing lost or changed
    assert len({m.id for m in after}) == len(after) == chat.stats()["total_messages"]
    page = chat.messages(after_id=after[9].id, limit=5)
    assert page == after[10:15]


def test_scenario_8_sessions_are_isolated(mem_llm: Engram) -> None:
    a = mem_llm.session("a", scope="p1", policy="summary_buffer")
    b = mem_llm.session("a", scope="p2", policy="summary_buffer")
    c = mem_llm.session("c", scope="p1", policy="summary_buffer")
    a.add("user", "I prefer dark mode. Source: https://a.example/only-a")
    fill_until(a, 3000)
    b.add("user", "Source: https://b.example/only-b")
    fill_until(b, 3000)
    for chat in (a, b):
        chat.context(system=SYSTEM)
    sa, sb, sc = a.compaction_state(), b.compaction_state(), c.compaction_state()
    assert sa.summary_version == sb.summary_version == 1
    assert sc.summary_version == 0
    assert sa.important_data != sb.important_data
    assert not any("only-b" in fact for fact in sa.important_data["important_facts"])
    assert not any("only-a" in fact for fact in sb.important_data["important_facts"])
    assert mem_llm.store.usage_totals("p1", "a")["calls"] >= 2
    assert mem_llm.store.usage_totals("p1", "c")["calls"] == 0
    ids_a = set(a.context(system=SYSTEM).message_ids)
    ids_b = {m.id for m in b.messages(limit=1000)}
    assert not ids_a & ids_b
