"""The library API on every backend: bad input is refused whole, reads are scoped and capped.

Every test runs on the sync API and on the async facade (``engram.aio``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engram.engine import Engram
from engram.errors import DateParseError, InvalidMessage, InvalidQuery, MessageNotFound
from engram.intake.validation import MAX_CONTENT_BYTES
from engram.limits import MAX_EXTENDED_CONTEXT


def stored(mem_each_api: Engram, session: str = "s", scope: str = "p") -> list[str]:
    return [m.content for m in mem_each_api.session(session, scope=scope).messages(limit=1000)]


class TestBadInputIsRefusedWhole:
    @pytest.mark.parametrize(
        ("role", "content", "fragment"),
        [
            ("user", "", "empty"),
            ("user", "   \n", "empty"),
            ("robot", "hi", "unknown role"),
            ("user", "nul\x00byte", "NUL"),
            ("user", "lone \ud800 surrogate", "unicode"),
            ("user", b"\xff\xfe not utf-8", "UTF-8"),
            ("user", "x" * (MAX_CONTENT_BYTES + 1), "limit"),
        ],
    )
    def test_one_bad_message_names_the_problem(
        self, mem_each_api: Engram, role: str, content: object, fragment: str
    ) -> None:
        chat = mem_each_api.session("s", scope="p")
        with pytest.raises(InvalidMessage, match=fragment):
            chat.add(role, content)  # type: ignore[arg-type]
        assert stored(mem_each_api) == []

    def test_a_bad_message_in_a_batch_writes_nothing(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        chat.add("user", "kept from before")
        batch = [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "second"},
            {"role": "user", "content": "bad\x00third"},
        ]
        with pytest.raises(InvalidMessage, match="message #2"):
            chat.add_many(batch)
        assert stored(mem_each_api) == ["kept from before"]

    def test_tool_result_without_a_matching_call_is_refused(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        with pytest.raises(InvalidMessage, match="answers no earlier"):
            chat.add("tool", '{"ok": true}', tool_call_id="call_missing")
        call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        chat.add("assistant", None, tool_calls=[call])
        chat.add("tool", '{"ok": true}', tool_call_id="call_1")  # answers a stored call
        assert [m.role for m in chat.messages()] == ["assistant", "tool"]

    def test_impossible_dates_are_errors_not_today(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        chat.add("user", "hello")
        for phrase in ["2025-02-30", "banana", "", "march 32"]:
            with pytest.raises(DateParseError):
                chat.by_date(phrase)

    def test_search_metacharacters_are_text(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        chat.add("user", 'We said "pricing" (final) at 100% for pro_plan*')
        for query in ['"pricing', "pricing*", "NEAR(pricing", "100%", "pro_plan", "(", '"']:
            chat.search(query)  # never an error
        assert chat.search("pricing")[0].message.content.startswith("We said")


class TestReads:
    def test_extended_is_capped_at_fifty_and_pages_backwards(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        chat.add_many([{"role": "user", "content": f"message {i}"} for i in range(120)])
        page = chat.extended(500)
        assert len(page) == MAX_EXTENDED_CONTEXT
        assert page[-1].content == "message 119"
        older = chat.extended(30, before_id=page[0].id)
        assert [m.content for m in older] == [f"message {i}" for i in range(40, 70)]
        with pytest.raises(InvalidQuery):
            chat.extended(0)

    def test_message_by_id_is_scoped(self, mem_each_api: Engram) -> None:
        theirs = mem_each_api.session("s", scope="other").add("user", "secret of another scope")
        mine = mem_each_api.session("s", scope="p").add("user", "mine")
        assert mem_each_api.message(mine.id, scope="p").content == "mine"
        with pytest.raises(MessageNotFound):
            mem_each_api.message(theirs.id, scope="p")

    def test_by_date_and_stats(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        day = datetime(2025, 3, 3, 15, tzinfo=UTC)
        chat.add("user", "on the third", created_at=day)
        chat.add("user", "on the fourth", created_at=day + timedelta(days=1))
        assert [m.content for m in chat.by_date("2025-03-03")] == ["on the third"]
        stats = chat.stats()
        assert stats["total_messages"] == 2
        assert stats["first_message_at"].startswith("2025-03-03")
        assert stats["stored_tokens"] == sum(m.tokens for m in chat.messages())

    def test_context_fits_and_reports_what_went_in(self, mem_each_api: Engram) -> None:
        chat = mem_each_api.session("s", scope="p")
        chat.add_many([{"role": "user", "content": "word " * 300} for _ in range(20)])
        ctx = chat.context(budget=2000, reserve=200, model="gpt-4o-mini")
        assert ctx.tokens <= 1800
        assert ctx.message_ids == sorted(ctx.message_ids)
        assert ctx.message_ids[-1] == chat.messages(limit=1000)[-1].id
        assert ctx.omitted  # the older messages are reported, not silently dropped
