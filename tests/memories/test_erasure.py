"""Erasure erases: a deleted, purged or forgotten memory leaves no text in the audit trail.

The trail keeps what was done (event, action, ids, session, counts, time) and a SHA-256
of each text it held; the text of memories that still exist stays. On every backend.
"""

from __future__ import annotations

import hashlib
import json

from engram.engine import Engram
from engram.llm import LLMClient
from engram.memories import Memories
from engram.testing import FakeLLMServer

SECRET = "Alice's passport number is X1234567."
OTHER = "Bob prefers meetings after 2pm on weekdays."


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def trail(memories: Memories) -> str:
    return json.dumps(memories.audit(1000))


class TestDeleteOne:
    def test_the_deleted_memorys_text_leaves_the_audit_and_its_hash_stays(
        self, mem: Engram
    ) -> None:
        memories = mem.memories("app")
        secret = memories.create(SECRET)
        other = memories.create(OTHER)
        memories.update(secret.id, SECRET + " It expires in 2031.")
        assert memories.create(SECRET + " It expires in 2031.").status == "duplicate"
        assert "X1234567" in trail(memories)  # the live memory's history is shown
        memories.delete(secret.id)
        assert "X1234567" not in trail(memories)
        events = memories.audit()
        assert [e["event"] for e in reversed(events)] == [
            "create",
            "create",
            "update",
            "duplicate_skipped",
            "delete",
        ]
        created = next(e for e in events if e["event"] == "create" and e["memory"] == secret.id)
        assert created["content_sha256"] == sha(SECRET) and created["redacted"] is True
        assert "content" not in created and created["at"] and created["id"]
        kept = next(e for e in events if e["event"] == "create" and e["memory"] == other.id)
        assert kept["content"] == OTHER and "redacted" not in kept

    def test_text_an_older_version_left_is_scrubbed_by_the_next_deletion(self, mem: Engram) -> None:
        memories = mem.memories("app")
        gone = memories.create(OTHER)
        memories.delete(gone.id)
        # A trail written before erasure existed: the deleted memory's text in an event.
        mem.store.add_audit("app", {"event": "update", "memory": gone.id, "content": SECRET})
        later = memories.create("Carol leads the launch.")
        memories.delete(later.id)
        assert "X1234567" not in trail(memories)
        assert "Carol" not in trail(memories)

    def test_a_memory_merged_into_a_deleted_one_leaves_no_text_either(
        self, mem: Engram, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        memories = Memories(mem.store, "app", llm=client, cap=1)
        target = memories.create(OTHER)
        fake_llm.reply_json(
            {
                "action": "edit",
                "targetMemoryId": target.id,
                "newContent": f"{OTHER} {SECRET}",
                "reason": f"merged: {SECRET}",
            }
        )
        merged = memories.create(SECRET)
        assert merged.status == "merged" and merged.id == target.id
        assert "X1234567" in trail(memories)
        memories.delete(target.id)
        assert "X1234567" not in trail(memories)
        assert "Bob prefers" not in trail(memories)
        (step,) = [e for e in memories.audit() if e["event"] == "compaction"]
        assert step["action"] == "edit" and step["target"] == target.id
        assert step["new_content_sha256"] == sha(f"{OTHER} {SECRET}")
        assert step["reason_sha256"] == sha(f"merged: {SECRET}")


class TestWholeScope:
    def test_purge_leaves_no_memory_text(self, mem: Engram) -> None:
        memories = mem.memories("app")
        memories.create(SECRET)
        memories.create(OTHER)
        mem.memories("other").create(SECRET)
        assert memories.purge() == 2
        assert "X1234567" not in trail(memories) and "Bob" not in trail(memories)
        assert memories.audit()[0] == {**memories.audit()[0], "event": "purge", "deleted": 2}
        assert "X1234567" in trail(mem.memories("other"))  # another scope is untouched

    def test_deleting_the_scope_leaves_no_memory_text(self, mem: Engram) -> None:
        mem.session("s1", "app").add("user", "hello")
        mem.memories("app").create(SECRET)
        assert mem.purge_scope("app") == {"sessions": 1, "messages": 1, "memories": 1}
        assert "X1234567" not in trail(mem.memories("app"))

    def test_forgetting_the_scope_keeps_only_the_counts(self, mem: Engram) -> None:
        mem.memories("app").create(SECRET)
        mem.forget_scope("app")
        (event,) = mem.memories("app").audit()
        assert event["event"] == "scope_forgotten" and event["memories"] == 1
