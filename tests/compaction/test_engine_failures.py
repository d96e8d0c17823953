"""Model failures during compaction, through the engine on every backend: the turn always
succeeds, on the offline summary when the model fails, and says so."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from engram.engine import Engram, Session
from engram.llm import LLMClient
from engram.prompt import NO_MODEL_NOTE
from engram.testing import FakeLLMServer

from .engine_support import long_text, summarizer_responder

SYSTEM = "You are a helpful writing assistant."


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """The scripted model answers as a summarizer unless a test queues other answers."""
    with FakeLLMServer(default=summarizer_responder) as server:
        yield server


def fill(chat: Session, pairs: int = 12) -> None:
    chat.add("user", "I prefer dark mode. Sources: https://example.com/a")
    for i in range(pairs):
        chat.add("user", long_text(f"Question {i}:", 150))
        chat.add("assistant", long_text(f"Answer {i}:", 150))


@pytest.fixture
def chat(mem_llm: Engram) -> Session:
    """A ``summary_buffer`` session with a model, filled so that the next context() compacts."""
    session = mem_llm.session("c", policy="summary_buffer")
    fill(session)
    return session


def test_http_500_twice_falls_back_offline_and_the_turn_succeeds(
    mem_llm: Engram, chat: Session, fake_llm: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.fail(500).fail(500)  # the summary call and its single retry
    ctx = chat.context(system=SYSTEM)
    state = chat.compaction_state()
    assert state.summary_version == 1
    assert state.summarizer == "offline"
    assert state.llm_failures == 1
    assert 100 <= len(state.summary.split()) <= 150
    assert ctx.degraded is not None and "offline" in ctx.degraded
    assert any("HTTP 500" in note for note in ctx.notes)
    assert ctx.messages[-1]["content"].startswith("Answer 11:")
    assert "degraded" in caplog.text
    # The important data still came from the model (its call succeeded).
    assert state.important_data["important_facts"]
    # Usage: the successful JSON call is recorded for this session.
    totals = mem_llm.store.usage_totals("default", "c")
    assert totals["by_purpose"]["important_data"]["calls"] == 1
    # The next successful cycle clears the degraded flag.
    for i in range(12):
        chat.add("user", long_text(f"More {i}:", 150))
    ctx2 = chat.context(system=SYSTEM)
    assert chat.compaction_state().summary_version == 2
    assert ctx2.degraded is None


def test_timeout_falls_back_offline(
    open_engram: Callable[..., Engram], fake_llm: FakeLLMServer
) -> None:
    with LLMClient("gpt-4o-mini", base_url=fake_llm.base_url, timeout=0.3, backoff=0.01) as llm:
        chat = open_engram(llm=llm).session("c", policy="summary_buffer")
        fill(chat)
        fake_llm.slow(3.0).slow(3.0)
        ctx = chat.context(system=SYSTEM)
        state = chat.compaction_state()
        assert state.summarizer == "offline"
        assert state.last_error is not None and "did not answer" in state.last_error
        assert ctx.degraded is not None
        assert ctx.tokens <= ctx.budget


def test_invalid_json_for_important_data_uses_the_rules(
    chat: Session, fake_llm: FakeLLMServer
) -> None:
    fake_llm.reply("A fine summary of the talk. " * 20)  # the summary
    fake_llm.reply("{not json at all")  # the important data
    ctx = chat.context(system=SYSTEM)
    state = chat.compaction_state()
    assert state.summarizer == "llm:gpt-4o-mini"  # the summary is the model's
    assert state.important_data["user_preferences"].get("theme") == "dark"  # rules
    assert "https://example.com/a" in state.important_data["source_urls"]
    assert ctx.degraded is not None
    assert any("invalid JSON" in note for note in ctx.notes)


def test_truncated_json_for_important_data_uses_the_rules(
    chat: Session, fake_llm: FakeLLMServer
) -> None:
    fake_llm.reply("Summary. " * 120)
    fake_llm.truncated_json({"important_facts": ["a" * 50, "b" * 50]})
    chat.context(system=SYSTEM)
    state = chat.compaction_state()
    assert state.important_data["user_preferences"].get("theme") == "dark"
    assert state.last_error is not None and "truncated" in state.last_error


def test_no_model_is_a_note_not_a_degradation(mem: Engram) -> None:
    """With no model the offline summary is the normal path: ``notes`` says so, not ``degraded``."""

    chat = mem.session("offline", policy="summary_buffer")
    before = chat.context(system=SYSTEM)
    assert NO_MODEL_NOTE not in before.notes  # nothing summarized yet: nothing to say
    fill(chat)
    ctx = chat.context(system=SYSTEM)
    assert chat.compaction_state().summary_version >= 1
    assert ctx.degraded is None
    assert NO_MODEL_NOTE in ctx.notes
    assert NO_MODEL_NOTE in chat.context(system=SYSTEM, compact=False).notes


def test_a_configured_model_adds_no_offline_note(chat: Session) -> None:
    ctx = chat.context(system=SYSTEM)
    assert chat.compaction_state().summary_version >= 1
    assert ctx.degraded is None and NO_MODEL_NOTE not in ctx.notes
