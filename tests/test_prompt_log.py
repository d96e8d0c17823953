"""The prompt log: every turn's prompt tokens against the full history, recorded by context()."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram.engine import Engram
from engram.errors import StoreError
from engram.prompt_log import (
    MAX_BUFFERED,
    MAX_TURNS_KEPT,
    PROMPT_LOG_KIND,
    PromptLog,
    PromptRecorder,
    Turn,
    load_prompt_log,
)


class TestRecording:
    def test_a_turn_reads_the_session_once(
        self, mem: Engram, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The cache-aware window and the prompt log share one read of the stored totals."""
        chat = mem.session("s", scope="p")
        chat.add("user", "what did we decide about the launch?")
        assert chat.policy.cache_window  # read once per Session object, before counting
        reads = []
        real = mem.store.get_session

        def counting(name: str) -> None:
            method = getattr(mem.store, name, None)
            if method is None:
                return

            def counted(scope: str, session: str) -> object:
                reads.append((scope, session))
                return method(scope, session)

            monkeypatch.setattr(mem.store, name, counted)

        counting("get_session")
        counting("history_totals")  # the stores that read history as rows
        chat.context(500)
        assert reads == [("p", "s")]
        info = real("p", "s")
        assert info is not None
        recent = chat.prompt_log().recent[-1]
        assert (recent.history_messages, recent.history_tokens) == (1, info.token_count)

    def test_each_turn_is_recorded_with_the_history_size_then(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        sizes = []
        for i in range(3):
            chat.add("user", f"question number {i} about the launch plan")
            info = chat.info()
            assert info is not None
            sizes.append((info.token_count, info.message_count))
            ctx = chat.context(500, system="Be brief.")
            chat.add("assistant", f"answer {i}")
            assert chat.prompt_log().recent[-1].sent_tokens == ctx.tokens
        log = chat.prompt_log()
        assert log.turns == 3
        assert [(t.history_tokens, t.history_messages) for t in log.recent] == sizes
        assert [t.budget for t in log.recent] == [500, 500, 500]
        assert log.sent_tokens == sum(t.sent_tokens for t in log.recent)
        assert log.history_tokens == sum(size for size, _ in sizes)

    def test_a_read_only_prompt_records_nothing(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "hello")
        chat.context(500, compact=False)
        assert chat.prompt_log() == PromptLog()
        assert mem.store.load_state("p", "s", PROMPT_LOG_KIND) is None

    def test_a_prompt_of_a_session_never_written_creates_nothing(self, mem: Engram) -> None:
        mem.session("ghost", scope="p").context(500)
        assert mem.session_info("ghost", "p") is None
        assert mem.scopes() == []

    def test_activity_adds_up_the_sessions_of_a_scope(self, mem: Engram) -> None:
        for name in ("a", "b"):
            chat = mem.session(name, scope="p")
            chat.add("user", "a question about pricing " * 20)
            chat.context(60)
        a, b = mem.activity("p", "a"), mem.activity("p", "b")
        scope = mem.activity("p")
        assert scope.prompts.turns == 2
        assert scope.prompts.sent_tokens == a.prompts.sent_tokens + b.prompts.sent_tokens
        assert scope.prompts.history_tokens == a.prompts.history_tokens + b.prompts.history_tokens
        assert a.prompts.savings is not None and a.prompts.savings > 0  # the budget cut it down


class TestBatches:
    def test_turns_wait_in_memory_until_a_flush(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "hello")
        recorder = PromptRecorder(mem.store, flush_seconds=3600)
        for _ in range(3):
            recorder.record("p", "s", sent_tokens=10, budget=100)
        assert load_prompt_log(mem.store, "p", "s") == PromptLog()  # nothing written yet
        assert recorder.load("p", "s").turns == 3  # reading through the recorder writes first
        assert load_prompt_log(mem.store, "p", "s").turns == 3

    def test_many_waiting_turns_are_written_by_the_next_turn(self, mem: Engram) -> None:
        mem.session("s", scope="p").add("user", "hello")
        recorder = PromptRecorder(mem.store, flush_seconds=3600)
        for _ in range(MAX_BUFFERED):
            recorder.record("p", "s", sent_tokens=1, budget=100)
        assert load_prompt_log(mem.store, "p", "s").turns == MAX_BUFFERED

    def test_another_engram_sees_the_turns_once_this_one_closes(
        self, open_engram: Callable[..., Engram]
    ) -> None:
        writer, reader = open_engram(), open_engram()
        chat = writer.session("s", scope="p")
        chat.add("user", "hello")
        chat.context(300)
        writer.close()
        assert reader.session("s", scope="p").prompt_log().turns == 1

    def test_a_store_failure_drops_the_batch_and_never_fails_the_turn(
        self, mem: Engram, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "hello")

        def broken(*args: object, **kwargs: object) -> None:
            raise StoreError("disk full")

        monkeypatch.setattr(mem.store, "save_state", broken)
        mem.runtime.prompts = PromptRecorder(mem.store, flush_seconds=0)
        ctx = chat.context(300)  # the write fails inside this turn
        assert ctx.tokens > 0
        assert "not recorded: disk full" in caplog.text
        monkeypatch.undo()
        assert chat.prompt_log() == PromptLog()


class TestDocument:
    def test_only_the_newest_turns_are_kept_one_by_one(self) -> None:
        log = PromptLog()
        for i in range(MAX_TURNS_KEPT + 5):
            log = log.add(Turn(_at(), i, 2 * i, i, 9))
        assert log.turns == MAX_TURNS_KEPT + 5
        assert len(log.recent) == MAX_TURNS_KEPT
        assert log.recent[0].sent_tokens == 5
        assert log.sent_tokens == sum(range(MAX_TURNS_KEPT + 5))

    def test_a_malformed_document_reads_as_empty(self) -> None:
        assert PromptLog.from_dict({"turns": "many", "recent": [[1, 2]]}) == PromptLog()

    @given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**7)), max_size=30))
    def test_round_trip_and_savings_bounds(self, turns: list[tuple[int, int]]) -> None:
        log = PromptLog()
        for sent, history in turns:
            log = log.add(Turn(_at(), sent, history, 1, 100))
        assert PromptLog.from_dict(log.to_dict()) == log
        assert log.savings is None or 0.0 <= log.savings <= 1.0
        assert log.saved_tokens == max(0, log.history_tokens - log.sent_tokens)


def _at() -> datetime:
    return datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("budget", [None, 300])
def test_the_budget_recorded_is_the_one_used(mem: Engram, budget: int | None) -> None:
    chat = mem.session("s", scope="p")
    chat.add("user", "hi")
    ctx = chat.context(budget)
    assert chat.prompt_log().last_budget == ctx.budget
