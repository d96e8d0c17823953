from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.engine import Engram
from engram.errors import ConfigError
from engram.session import Session
from engram.tokens import storage_counter
from engram.tools import cap_result, dispatch


def tokens(text: str) -> int:
    return storage_counter().count_text(text)


def run(session: Any, name: str, cap: int = 4000, **arguments: Any) -> tuple[str, dict[str, Any]]:
    text = dispatch(session, name, json.dumps(arguments), max_result_tokens=cap)
    return text, json.loads(text)


@pytest.fixture
def wordy(mem: Engram) -> Session:
    """40 messages (ids 1-40, written today) of about 300 tokens each, all mentioning 'pricing'."""
    session = mem.session("big", scope="phoenix")
    session.add_many(
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"pricing note {i}: " + " ".join(f"word{i}x{j}" for j in range(120)),
        }
        for i in range(40)
    )
    return session


class TestDroppingItems:
    def test_search_drops_lowest_ranked(self, wordy: Session) -> None:
        full = json.loads(
            dispatch(
                wordy,
                "search_history",
                '{"query": "pricing", "limit": 40}',
                max_result_tokens=100_000,
            )
        )
        text, answer = run(wordy, "search_history", cap=300, query="pricing", limit=40)
        assert tokens(text) <= 300
        assert answer["truncated"] is True
        assert answer["omitted"] == full["count"] - len(answer["results"]) > 0
        kept = [r["id"] for r in answer["results"]]
        assert kept == [r["id"] for r in full["results"]][: len(kept)]  # a prefix: best kept

    def test_extended_drops_oldest_and_pages_on(self, wordy: Session) -> None:
        text, answer = run(wordy, "get_extended_context", cap=2000, count=20)
        assert tokens(text) <= 2000
        ids = [m["id"] for m in answer["messages"]]
        assert answer["truncated"] is True and answer["omitted"] == 20 - len(ids)
        assert ids[-1] == 40  # the newest survive
        assert answer["next_before_id"] == ids[0]  # nothing is skipped when paging back
        _, older = run(wordy, "get_extended_context", cap=2000, count=5, before_id=ids[0])
        assert [m["id"] for m in older["messages"]][-1] == ids[0] - 1

    def test_by_date_drops_from_the_end(self, wordy: Session) -> None:
        text, answer = run(wordy, "get_messages_by_date", cap=1500, date="today", limit=50)
        assert tokens(text) <= 1500
        ids = [m["id"] for m in answer["messages"]]
        assert ids == list(range(1, len(ids) + 1)) and answer["omitted"] == 40 - len(ids)

    def test_small_results_are_untouched(self, wordy: Session) -> None:
        _, answer = run(wordy, "get_extended_context", count=2)
        assert "truncated" not in answer and answer["count"] == 2


class TestCuttingOneMessage:
    def test_huge_message_is_cut_with_a_marker(self, mem: Engram) -> None:
        session = mem.session("log", scope="p")
        call = {"id": "call-1", "type": "function", "function": {"name": "logs", "arguments": "{}"}}
        session.add("assistant", None, tool_calls=[call])
        huge = session.add("tool", "line of a very long log file\n" * 2_000, tool_call_id="call-1")
        text, answer = run(session, "get_message_by_id", cap=1000, message_id=huge.id)
        assert tokens(text) <= 1000
        assert answer["content_truncated"] is True
        assert huge.content.startswith(answer["content"].split(" …[")[0])
        assert f"message_id={huge.id}" in answer["content"]
        assert f"offset={answer['next_offset']}" in answer["content"]

    def test_pages_rebuild_the_whole_text(self, mem: Engram) -> None:
        session = mem.session("log", scope="p")
        original = "".join(f'§{i} "quoted" \\ tab\t ünïcode 日本語\n' for i in range(1200))
        message = session.add("user", original)
        pieces, offset = [], 0
        for _ in range(200):
            text, answer = run(
                session, "get_message_by_id", cap=1500, message_id=message.id, offset=offset
            )
            assert tokens(text) <= 1500
            if not answer.get("content_truncated"):
                pieces.append(answer["content"])
                break
            kept = answer["next_offset"] - offset
            pieces.append(answer["content"][:kept])
            offset = answer["next_offset"]
        assert "".join(pieces) == original

    def test_single_huge_item_in_a_list(self, mem: Engram) -> None:
        session = mem.session("s", scope="p")
        big = session.add("user", "x y " * 50_000)
        text, answer = run(session, "get_extended_context", cap=500, count=1)
        assert tokens(text) <= 500
        (item,) = answer["messages"]
        assert item["content_truncated"] is True and item["next_offset"] > 0
        assert f"message_id={big.id}" in item["content"]


class TestCapResult:
    def test_cap_below_minimum(self) -> None:
        with pytest.raises(ConfigError):
            cap_result({"a": 1}, max_tokens=5)

    @settings(max_examples=40, deadline=None)
    @given(
        contents=st.lists(st.text(max_size=3000), min_size=1, max_size=12),
        cap=st.integers(200, 3000),
        drop_from=st.sampled_from(["start", "end"]),
    )
    def test_always_fits_and_keeps_order(
        self, contents: list[str], cap: int, drop_from: Any
    ) -> None:
        items = [{"id": i + 1, "content": c} for i, c in enumerate(contents)]
        payload = {"count": len(items), "next_before_id": 1, "messages": items}
        capped = cap_result(
            payload,
            max_tokens=cap,
            items_key="messages",
            drop_from=drop_from,
            cursor_key="next_before_id",
        )
        assert tokens(json.dumps(capped, ensure_ascii=False, separators=(",", ":"))) <= cap
        ids = [m["id"] for m in capped["messages"]]
        assert ids == sorted(ids) and len(ids) >= 1
        if capped is not payload and len(ids) < len(items):
            assert capped["omitted"] == len(items) - len(ids)
            expected = (
                [m["id"] for m in items][: len(ids)]
                if drop_from == "end"
                else [m["id"] for m in items][-len(ids) :]
            )
            assert ids == expected
        for kept in capped["messages"]:
            original = contents[kept["id"] - 1]
            if kept.get("content_truncated"):
                assert original.startswith(kept["content"][: kept["next_offset"]])
            else:
                assert kept["content"] == original
