"""Compaction state through the engine: corrupted documents, background timing, policies."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Sequence

import pytest

import engram
from engram.background.pool import BackgroundCompactor
from engram.compaction.cycle import compact_session
from engram.compaction.state import STATE_KIND
from engram.compaction.summarizer import OfflineSummarizer, SummaryOutput
from engram.compaction.transcript import MessageLike
from engram.engine import Engram, Session
from engram.policy import get_policy

from .engine_support import long_text

SMALL = get_policy(
    {"name": "small", "max_history_messages": 10, "keep_messages": 4, "max_messages": 20}
)


def fill(chat: Session, n: int) -> None:
    chat.add_many(
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} about topic {i}."}
        for i in range(n)
    )


@pytest.mark.parametrize(
    "document",
    [
        {"summary": 5, "summary_version": "x", "watermark": 3},
        {"summary": "orphan summary", "summary_version": 0, "watermark": 7},
        {"summary": "s", "summary_version": 2, "watermark": 0},
        {"summary": "s", "summary_version": 1, "watermark": 4, "important_data": [1, 2]},
        {"summary": "s", "summary_version": 1, "watermark": 4, "last_summarized_at": "yesterday"},
    ],
)
def test_corrupted_state_is_reset_and_rebuilt_from_messages(
    mem: Engram, caplog: pytest.LogCaptureFixture, document: dict[str, object]
) -> None:
    chat = mem.session("c", policy="summary_buffer")
    chat.add("user", "I prefer dark mode.")
    for i in range(12):
        chat.add("user", long_text(f"Question {i}:", 150))
        chat.add("assistant", long_text(f"Answer {i}:", 150))
    assert mem.store.save_state("default", "c", STATE_KIND, document, expected_version=0)
    with caplog.at_level(logging.WARNING):
        ctx = chat.context(system="sys")
    assert "corrupted" in caplog.text
    state = chat.compaction_state()
    assert state.reset_reason is None
    assert state.summary_version == 1  # rebuilt from the first stored message on
    assert state.messages_summarized_count == state.watermark - chat.messages(limit=1)[0].id + 1
    assert state.important_data["user_preferences"].get("theme") == "dark"
    assert ctx.tokens <= ctx.budget
    assert "CONVERSATION SUMMARY" in ctx.sections


def test_corrupted_state_with_nothing_due_is_replaced_once(
    mem: Engram, caplog: pytest.LogCaptureFixture
) -> None:
    chat = mem.session("c", policy="summary_buffer")
    chat.add("user", "hello")
    mem.store.save_state("default", "c", STATE_KIND, {"summary_version": -3}, expected_version=0)
    with caplog.at_level(logging.WARNING):
        ctx = chat.context()
    assert "corrupted" in caplog.text
    assert [m["content"] for m in ctx.messages] == ["hello"]
    record = mem.store.load_state("default", "c", STATE_KIND)
    assert record is not None and record.version == 2 and record.data["summary_version"] == 0
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        chat.context()
    assert "corrupted" not in caplog.text


def test_undecodable_state_does_not_break_the_turn(
    tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = f"{tmp_path}/raw.db"
    with engram.open(f"sqlite:///{path}", llm=None) as mem:
        chat = mem.session("c", policy=SMALL)
        fill(chat, 12)
        mem.store.save_state("default", "c", STATE_KIND, {"x": 1}, expected_version=0)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE session_state SET data = '{broken'")
    conn.close()
    with engram.open(f"sqlite:///{path}", llm=None) as mem:
        chat = mem.session("c")
        with caplog.at_level(logging.WARNING):
            ctx = chat.context(policy=SMALL)
            result = chat.compact(policy=SMALL)
        assert "cannot be read" in caplog.text
        assert ctx.messages[-1]["content"] == "message 11 about topic 11."
        assert not result.committed and result.reason == "state unreadable"


def test_background_compaction_is_pending_then_committed(mem: Engram) -> None:
    chat = mem.session("c", policy=SMALL)
    fill(chat, 12)
    ctx = chat.context()
    assert ctx.pending_compaction
    assert any("background" in note for note in ctx.notes)
    assert ctx.message_ids[-1] == chat.messages(limit=100)[-1].id  # built now, within budget
    assert mem.wait_idle(timeout=30)
    state = chat.compaction_state()
    assert state.summary_version == 1
    ctx2 = chat.context()
    assert not ctx2.pending_compaction
    assert len(ctx2.message_ids) == 4
    assert "CONVERSATION SUMMARY" in ctx2.sections


def test_policy_override_for_one_call(mem: Engram) -> None:
    chat = mem.session("c")  # default policy: never compacts
    fill(chat, 12)
    assert not chat.context().pending_compaction
    assert chat.compact().reason == "nothing due"
    sync = SMALL.replace(sync_compaction=True)
    ctx = chat.context(policy=sync)
    assert not ctx.pending_compaction
    assert chat.compaction_state().summary_version == 1
    assert ctx.policy == "small"
    assert chat.policy.name == "default"  # the stored policy is unchanged


def test_compact_returns_the_result(mem: Engram) -> None:
    chat = mem.session("c", policy=SMALL)
    fill(chat, 12)
    result = chat.compact()
    assert result.committed and result.reason == "messages"
    assert result.folded == 8 and result.version == 1 and result.summary_version == 1
    assert result.watermark == chat.messages(limit=100)[7].id
    again = chat.compact()
    assert not again.committed and again.reason == "nothing due"
    assert again.watermark == result.watermark


def test_lean_policy_reads_no_state(mem: Engram) -> None:
    chat = mem.session("c", policy="lean")
    fill(chat, 30)
    calls: list[str] = []
    real = mem.store.load_state

    def spy(*args: object, **kw: object) -> object:
        calls.append(str(args))
        return real(*args, **kw)  # type: ignore[arg-type]

    mem.store.load_state = spy  # type: ignore[method-assign]
    ctx = chat.context()
    # 30 messages stored: the cache-aware window starts at position 12 (a multiple of 12).
    assert len(ctx.message_ids) == 18
    plain = chat.context(policy={"name": "lean", "cache_window": False})
    assert len(plain.message_ids) == 12
    # The prompt log is written in batches after prompts are built, never to build one.
    assert [call for call in calls if "prompt_log" not in call] == []


class _BarrierSummarizer(OfflineSummarizer):
    """Waits until both threads have planned, so both fold from the same state."""

    def __init__(self, barrier: threading.Barrier):
        self.barrier = barrier

    def summarize(
        self, messages: Sequence[MessageLike], *, previous_summary: str | None, version: int
    ) -> SummaryOutput:
        self.barrier.wait(timeout=10)
        return super().summarize(messages, previous_summary=previous_summary, version=version)


def test_two_threads_compacting_one_session_commit_once(mem: Engram) -> None:
    chat = mem.session("c", policy=SMALL)
    fill(chat, 12)
    barrier = threading.Barrier(2)
    results = []
    lock = threading.Lock()

    def run() -> None:
        result = compact_session(mem.store, "default", "c", SMALL, _BarrierSummarizer(barrier))
        with lock:
            results.append(result)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(r.committed for r in results) == [False, True]
    loser = next(r for r in results if not r.committed)
    winner = next(r for r in results if r.committed)
    assert loser.reason == "superseded"
    assert loser.watermark == winner.watermark and loser.version == winner.version == 1
    record = mem.store.load_state("default", "c", STATE_KIND)
    assert record is not None and record.version == 1


def test_background_worker_runs_one_task_per_key_at_a_time() -> None:
    worker = BackgroundCompactor(workers=2)
    started = threading.Event()
    release = threading.Event()
    running = 0
    peak = 0
    runs = 0
    lock = threading.Lock()

    def task() -> None:
        nonlocal running, peak, runs
        with lock:
            running += 1
            runs += 1
            peak = max(peak, running)
        started.set()
        release.wait(timeout=10)
        with lock:
            running -= 1

    try:
        assert worker.submit("k", task)
        assert started.wait(timeout=10)
        for _ in range(5):  # while running: remembered once, not five times
            assert worker.submit("k", task)
        assert worker.pending("k")
        release.set()
        assert worker.wait_idle(timeout=10)
        assert runs == 2 and peak == 1
        assert not worker.pending("k")
        assert worker.completed == 2
    finally:
        release.set()
        worker.close()
    assert not worker.submit("k", task)  # closed


def test_background_errors_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    worker = BackgroundCompactor(workers=1)

    def boom() -> None:
        raise RuntimeError("boom")

    try:
        worker.submit("k", boom)
        assert worker.wait_idle(timeout=10)
    finally:
        worker.close()
    assert worker.failed == 1
    assert "boom" in caplog.text
