"""Edit and regenerate on the facade, on every backend: deleted text leaves history,
search and the summary; every edit is audited; nothing else changes."""

from __future__ import annotations

import pytest

from engram.edits import AUDIT_EVENT, FORGOTTEN_EVENT
from engram.engine import Engram, Session
from engram.errors import InvalidMessage, InvalidQuery, MessageNotFound
from engram.store.base import can_edit


@pytest.fixture(autouse=True)
def _editable(mem: Engram) -> None:
    assert can_edit(mem.store), f"{mem.store.url} cannot delete messages"


CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}


def chat(mem: Engram, session: str = "s", scope: str = "default") -> Session:
    s = mem.session(session, scope)
    s.add("user", "What is the capital of Australia?")
    s.add("assistant", "Sydney.")
    return s


def contents(session: Session) -> list[str]:
    return [m.content for m in session.messages()]


def edit_events(mem: Engram, scope: str = "default") -> list[dict[str, object]]:
    return [e for e in mem.memories(scope).audit() if e["event"] == AUDIT_EVENT]


class TestRegenerate:
    def test_pop_answer_removes_the_answer_and_its_tool_rounds(self, mem: Engram) -> None:
        s = chat(mem)
        s.add("user", "And the weather in Canberra?")
        s.add("assistant", "", tool_calls=[CALL])
        s.add("tool", "sunny, 24 degrees", tool_call_id="call_1")
        s.add("assistant", "Sunny and warm in Canberra.")
        gone = s.pop_answer()
        assert [m.role for m in gone] == ["assistant", "tool", "assistant"]
        assert contents(s)[-1] == "And the weather in Canberra?"
        assert s.search("sunny") == []
        assert s.pop_answer() == []  # the newest message is the user's: nothing to pop
        (event,) = edit_events(mem)
        assert event["action"] == "pop_answer" and event["ids"] == [m.id for m in gone]
        assert "Sunny" not in str(event)  # the deleted text is not kept anywhere

    def test_pop_answer_without_a_user_message_takes_only_the_newest(self, mem: Engram) -> None:
        s = mem.session("log")
        s.add("assistant", "Step one done.")
        s.add("assistant", "Step two done.")
        assert [m.content for m in s.pop_answer()] == ["Step two done."]
        assert contents(s) == ["Step one done."]

    def test_replace_answer_links_the_new_answer(self, mem: Engram) -> None:
        s = chat(mem)
        old = s.messages()[-1]
        new = s.replace_answer("Canberra.")
        assert contents(s) == ["What is the capital of Australia?", "Canberra."]
        assert new.metadata["replaces"] == [old.id] and new.id > old.id
        info = s.info()
        assert info is not None and info.message_count == 2

    def test_replace_answer_refused_whole(self, mem: Engram) -> None:
        s = chat(mem)
        with pytest.raises(InvalidMessage):
            s.replace_answer(None)  # type: ignore[arg-type]
        assert contents(s)[-1] == "Sydney."  # nothing was deleted
        s.pop_answer()
        with pytest.raises(MessageNotFound):
            s.replace_answer("Canberra.")

    def test_pop_item_is_the_newest_message(self, mem: Engram) -> None:
        s = chat(mem)
        popped = s.pop_item()
        assert popped is not None and popped.content == "Sydney."
        assert contents(s) == ["What is the capital of Australia?"]
        assert s.pop_item() is not None and s.pop_item() is None


class TestEdit:
    def test_edit_a_user_message_and_continue_from_it(self, mem: Engram) -> None:
        s = chat(mem)
        s.add("user", "And of Canada?")
        s.add("assistant", "Ottawa.")
        first = s.messages()[0]
        new = s.edit(first.id, "What is the capital of New Zealand?")
        assert contents(s) == ["What is the capital of New Zealand?"]
        assert new.role == "user" and new.metadata["edited_from"] == first.id
        assert s.search("Ottawa") == [] and s.search("Australia") == []
        (event,) = edit_events(mem)
        assert event["action"] == "edit" and event["replaced"] == first.id
        assert len(event["ids"]) == 4  # type: ignore[arg-type]

    def test_edit_refusals_change_nothing(self, mem: Engram) -> None:
        s = chat(mem)
        other = chat(mem, "other")
        s.add("assistant", "", tool_calls=[CALL])
        s.add("tool", "sunny", tool_call_id="call_1")
        before = contents(s)
        with pytest.raises(MessageNotFound):
            s.edit(other.messages()[0].id, "hijack")
        with pytest.raises(InvalidQuery):
            s.edit(s.messages()[-1].id, "not a tool result")
        with pytest.raises(InvalidMessage):
            s.edit(s.messages()[0].id, None)  # type: ignore[arg-type]
        assert contents(s) == before and edit_events(mem) == []


class TestDelete:
    def test_delete_one_message_on_the_engram_facade(self, mem: Engram) -> None:
        s = chat(mem)
        question = s.messages()[0]
        assert [m.id for m in mem.delete_message(question.id).messages] == [question.id]
        assert contents(s) == ["Sydney."]
        with pytest.raises(MessageNotFound):
            mem.message(question.id)
        with pytest.raises(MessageNotFound):  # another scope's message is not found
            mem.delete_message(s.messages()[0].id, scope="elsewhere")

    def test_a_tool_result_goes_with_its_call(self, mem: Engram) -> None:
        s = chat(mem)
        s.add("assistant", "", tool_calls=[CALL])
        s.add("tool", "sunny", tool_call_id="call_1")
        s.add("assistant", "Sunny.")
        result = s.messages()[-2]
        gone = s.delete_message(result.id).messages
        assert [m.role for m in gone] == ["assistant", "tool"]
        assert contents(s) == ["What is the capital of Australia?", "Sydney.", "Sunny."]

    def test_clear_keeps_the_session_and_its_policy(self, mem: Engram) -> None:
        s = mem.session("s", policy="summary_buffer")
        s.add("user", "remember the kumquat")
        assert s.clear().message_count == 1
        assert contents(s) == [] and s.search("kumquat") == []
        assert mem.session("s").policy.name == "summary_buffer"
        info = s.info()
        assert info is not None and info.message_count == 0
        s.add("user", "a new start")
        assert contents(s) == ["a new start"]
        assert [e["action"] for e in edit_events(mem)] == ["clear"]

    def test_forget_scope(self, mem: Engram) -> None:
        chat(mem, "a", "user-1")
        chat(mem, "b", "user-1")
        kept = chat(mem, "a", "user-2")
        mem.memories("user-1").create("User thinks Sydney is the capital.")
        counts = mem.forget_scope("user-1").counts
        assert counts == {"sessions": 2, "messages": 4, "memories": 1}
        assert mem.sessions("user-1") == [] and mem.search("Sydney", "user-1") == []
        assert mem.memories("user-1").list() == []
        (event,) = mem.memories("user-1").audit()
        assert event["event"] == FORGOTTEN_EVENT and event["messages"] == 4
        assert contents(kept) == ["What is the capital of Australia?", "Sydney."]
        assert "user-1" not in mem.scopes()

    def test_a_forgotten_scope_stays_forgotten(self, mem: Engram) -> None:
        s = chat(mem, "a", "user-1")
        s.context()  # a turn waiting to be written to the prompt log
        mem.forget_scope("user-1")
        mem.runtime.prompts.flush()
        assert mem.sessions("user-1") == [] and mem.session_info("a", "user-1") is None


class TestSummaryFollows:
    def fill(self, s: Session, turns: int = 12) -> None:
        s.add("user", "My secret codename is Bluebird. " + "detail " * 200)
        for i in range(turns):
            s.add("user", f"Question {i}: " + "word " * 200)
            s.add("assistant", f"Answer {i}: " + "word " * 200)

    def test_a_summary_that_covered_a_deleted_message_is_rebuilt(self, mem: Engram) -> None:
        s = mem.session("s", policy="summary_buffer")
        self.fill(s)
        s.context(budget=4000)
        state = s.compaction_state()
        assert state.summary_version >= 1 and "Bluebird" in state.summary
        secret = s.messages()[0]
        assert secret.id <= state.watermark
        s.delete_message(secret.id)
        stale = s.compaction_state()
        assert stale.summary == "" and stale.reset_reason is not None  # never shown again
        ctx = s.context(budget=4000)
        assert "Bluebird" not in str(ctx.messages)
        rebuilt = s.compaction_state()
        assert rebuilt.summary_version >= 1 and rebuilt.reset_reason is None
        assert "Bluebird" not in rebuilt.summary

    def test_deleting_past_the_watermark_keeps_the_summary(self, mem: Engram) -> None:
        s = mem.session("s", policy="summary_buffer")
        self.fill(s)
        s.context(budget=4000)
        before = s.compaction_state()
        s.pop_answer()
        after = s.compaction_state()
        assert after.summary == before.summary and after.reset_reason is None
