"""Memories from conversations: the offline extractive memory, de-duplication, ending."""

from __future__ import annotations

import pytest

from engram.background.local import MemoryWorker, end_session
from engram.compaction.transcript import split_sentences
from engram.engine import Engram
from engram.errors import InvalidQuery, MemoryNotFound
from engram.llm import LLMClient
from engram.memories import LIFECYCLE_KIND, Memories
from engram.memories.creation import clean_memory_text, extractive_memory, read_transcript
from engram.testing import FakeLLMServer

from .helpers import converse


class TestExtractiveMemory:
    def test_keeps_user_facts_preferences_and_decisions(self, mem: Engram) -> None:
        converse(
            mem,
            "s1",
            "app",
            [
                ("Hi there!", "Hello! How can I help?"),
                ("I prefer meetings after 2pm on weekdays.", "Noted."),
                ("What time is it in Tokyo?", "It is 3am."),
                ("We decided to launch Phoenix on November 1.", "Great, I will track it."),
                ("Thanks.", "You're welcome."),
            ],
        )
        memories = Memories(mem.store, "app")
        outcome = end_session(memories, "s1", "closed").result()
        assert outcome.status == "created"
        text = outcome.memory.content  # type: ignore[union-attr]
        # One or two sentences of what was decided or learned, the user in the third person.
        assert text == (
            "The user prefers meetings after 2pm on weekdays. "
            "We decided to launch Phoenix on November 1."
        )
        assert outcome.memory.metadata["origin"] == "extractive"  # type: ignore[union-attr]

    def test_deterministic_and_bounded(self, mem: Engram) -> None:
        turns = [
            (f"My task number {i} is to review module {i} carefully.", "Ok.") for i in range(30)
        ]
        chat = converse(mem, "s1", "app", turns)
        read = lambda limit, before: mem.store.tail("app", chat.id, limit=limit, before_id=before)  # noqa: E731
        transcript = read_transcript(read)
        first = extractive_memory(transcript)
        assert first is not None and first == extractive_memory(transcript)
        assert len(split_sentences(first)) <= 2 and len(first) <= 300
        assert first.startswith("The user's task number")  # not a quote: "My task ..."

    def test_pleasantries_left_out_and_a_long_decision_kept_whole(self, mem: Engram) -> None:
        decision = (
            "After comparing the three vendors on price and support hours, we decided to sign "
            "the two-year contract with Zendesk at $19 per agent per month starting on July 1."
        )
        chat = converse(
            mem,
            "s1",
            "app",
            [(decision, "Noted."), ("Perfect, thank you so much.", "You're welcome!")],
        )
        read = lambda limit, before: mem.store.tail("app", chat.id, limit=limit, before_id=before)  # noqa: E731
        memory = extractive_memory(read_transcript(read))
        assert memory == decision

    def test_nothing_to_keep_is_skipped(self, mem: Engram) -> None:
        converse(mem, "s1", "app", [("Hi!", "Hello!"), ("Is it raining?", "No.")])
        outcome = end_session(Memories(mem.store, "app"), "s1", "closed").result()
        assert outcome.status == "skipped"

    def test_transcript_is_bounded_to_the_newest_tokens(self, mem: Engram) -> None:
        chat = converse(mem, "s1", "app", [("word " * 500, "ok")] * 10)
        read = lambda limit, before: mem.store.tail("app", chat.id, limit=limit, before_id=before)  # noqa: E731
        transcript = read_transcript(read, max_tokens=1200)
        assert 0 < sum(m.tokens for m in transcript) <= 1200
        assert transcript[-1].id == chat.messages(limit=100)[-1].id  # the newest is in


class TestDeduplication:
    def test_a_repeated_memory_is_not_added(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories = Memories(mem.store, "app", llm=client)
        converse(mem, "s1", "app", [("I prefer tea.", "Noted.")])
        converse(mem, "s2", "app", [("Tea, I prefer it.", "Noted.")])
        fake_llm.reply("User prefers tea over coffee.")
        fake_llm.reply("user prefers TEA over coffee!")
        first = end_session(memories, "s1", "closed").result()
        second = end_session(memories, "s2", "closed").result()
        assert (first.status, second.status) == ("created", "duplicate")
        assert second.memory == first.memory
        assert len(memories.list()) == 1
        assert memories.audit()[0]["event"] == "duplicate_skipped"

    def test_high_overlap_is_a_duplicate_low_overlap_is_not(self, mem: Engram) -> None:
        memories = Memories(mem.store, "app")
        kept = memories.create("User is working on a project called Phoenix with deadline Nov 1.")
        same = memories.create("User is working on the project called Phoenix, deadline Nov 1.")
        assert same.id == kept.id
        other = memories.create("User moved the Phoenix deadline to December 15 after review.")
        assert other.id != kept.id and len(memories.list()) == 2


class TestEnding:
    def test_ending_twice_without_new_messages_remembers_once(self, mem: Engram) -> None:
        memories = Memories(mem.store, "app")
        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        assert end_session(memories, "s1", "a").result().status == "created"
        assert end_session(memories, "s1", "b").result().status == "skipped"
        state = mem.store.load_state("app", "s1", LIFECYCLE_KIND)
        assert state is not None and state.data["ends"] == 2 and state.data["reason"] == "b"

    def test_ending_a_session_never_written_is_skipped(self, mem: Engram) -> None:
        outcome = end_session(Memories(mem.store, "app"), "nope", "closed").result()
        assert (outcome.status, outcome.detail) == ("skipped", "the session has no messages")
        converse(mem, "s1", "other", [("My project is called Phoenix.", "Noted.")])
        # a session of another scope is not ours
        assert end_session(Memories(mem.store, "app"), "s1", "closed").result().status == "skipped"
        assert mem.store.load_state("app", "s1", LIFECYCLE_KIND) is None
        assert mem.store.get_session("app", "nope") is None  # nothing was created

    def test_session_end_on_a_fresh_handle_returns_skipped(self, mem: Engram) -> None:
        outcome = mem.session("never-written", "app").end(wait=True).result()
        assert outcome.status == "skipped" and outcome.memory is None

    def test_ending_does_not_wait_for_the_model(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient, worker: MemoryWorker
    ) -> None:
        import time

        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        fake_llm.slow(1.0, "User's project is called Phoenix.")
        memories = Memories(mem.store, "app", llm=client)
        started = time.monotonic()
        future = end_session(memories, "s1", "closed", worker=worker)
        assert time.monotonic() - started < 0.5 and not future.done()
        assert mem.store.load_state("app", "s1", LIFECYCLE_KIND) is not None  # ended already
        assert future.result(timeout=10).status == "created"

    def test_a_crash_in_the_job_is_logged_and_skipped(
        self, mem: Engram, worker: MemoryWorker, caplog: pytest.LogCaptureFixture
    ) -> None:
        class Broken(Memories):
            def create_from_session(self, session: str, *, reason: str | None = None):  # type: ignore[no-untyped-def]
                raise RuntimeError("disk on fire")

        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        outcome = end_session(Broken(mem.store, "app"), "s1", "x", worker=worker).result()
        assert outcome.status == "failed" and "disk on fire" in outcome.detail
        assert "memory creation failed" in caplog.text

    def test_closed_worker_defers_instead_of_dropping(self, mem: Engram) -> None:
        pool = MemoryWorker(1)
        pool.close()
        converse(mem, "s1", "app", [("My project is called Phoenix.", "Noted.")])
        memories = Memories(mem.store, "app")
        assert end_session(memories, "s1", "x", worker=pool).result().status == "deferred"
        (done,) = memories.run_deferred()
        assert done.status == "created"


class TestCrud:
    def test_get_update_delete_in_scope_only(self, mem: Engram) -> None:
        a, b = Memories(mem.store, "a"), Memories(mem.store, "b")
        memory = a.create("User prefers tea.", metadata={"importance": 7, "tags": ["drinks"]})
        assert a.get(memory.id).metadata == {"importance": 7, "tags": ["drinks"]}
        with pytest.raises(MemoryNotFound):
            b.get(memory.id)
        with pytest.raises(MemoryNotFound):
            b.update(memory.id, content="hijacked")
        with pytest.raises(MemoryNotFound):
            b.delete(memory.id)
        updated = a.update(memory.id, content="User prefers green tea.")
        assert (
            updated.content == "User prefers green tea." and updated.updated_at >= memory.updated_at
        )
        a.delete(memory.id)
        assert a.list() == []
        assert [e["event"] for e in a.audit()] == ["delete", "update", "create"]

    @pytest.mark.parametrize(
        ("content", "metadata"),
        [("", None), ("x" * 601, None), ("ok", {"importance": 11}), ("ok", {"tags": "a"})],
    )
    def test_bad_input_is_refused(self, mem: Engram, content: str, metadata: object) -> None:
        with pytest.raises(InvalidQuery):
            Memories(mem.store, "a").create(content, metadata=metadata)  # type: ignore[arg-type]
        assert Memories(mem.store, "a").list() == []


def test_clean_memory_text() -> None:
    assert clean_memory_text('Memory: "User likes tea."') == "User likes tea."
    assert clean_memory_text("  a\n\n b ") == "a b"
    assert len(clean_memory_text("word. " * 500)) <= 600
