"""Seed 004 through the exchange API: 10 exchanges, answer views, summary size, tool cache."""

from __future__ import annotations

import hashlib
import json

import pytest

from engram.engine import Engram, Session
from engram.errors import InvalidQuery
from engram.exchanges import TOOL_CACHE_KIND, cache_key

LONG_ANSWER = "Droideka is a strong defensive champion. " * 40  # ~1.6 KB


def exchange(chat: Session, i: int, answer: str | None = None) -> None:
    ex = chat.exchanges
    ex.begin(f"Question {i}: what about champion {i}?")
    ex.add_agent_message(
        "assistant",
        None,
        tool_calls=[
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"n": i})},
            }
        ],
    )
    ex.add_agent_message("tool", f"tool result {i}", tool_call_id=f"call_{i}")
    ex.finalize(answer or f"Answer {i}: champion {i} is fine.")


def test_cache_key_is_seed_004s_md5() -> None:
    params = {"b": 2, "a": 1}
    expected = hashlib.md5(b'tool:{"a": 1, "b": 2}').hexdigest()
    assert cache_key("tool", params) == expected


def test_ten_exchanges_kept_older_ones_folded(mem: Engram) -> None:
    chat = mem.session("c", policy="exchanges")
    for i in range(13):
        exchange(chat, i)
    assert mem.wait_idle(timeout=30)
    state = chat.compaction_state()
    assert state.summary_version >= 1
    chat.exchanges.begin("Question 13: and now?")
    ctx = chat.context()
    users = [m for m in ctx.messages if m["role"] == "user"]
    assert len(users) == 10
    assert users[-1]["content"] == "Question 13: and now?"
    assert users[0]["content"].startswith("Question 4:")
    # Steps of finished exchanges are left out; every message is still stored.
    assert not any(m["role"] == "tool" for m in ctx.messages)
    assert "CONVERSATION SUMMARY" in ctx.sections
    assert len(chat.messages(limit=1000)) == 13 * 4 + 1


def test_steps_of_the_open_exchange_are_shown(mem: Engram) -> None:
    chat = mem.session("c", policy="exchanges")
    exchange(chat, 0)
    ex = chat.exchanges
    ex.begin("Question 1")
    ex.add_agent_message(
        "assistant",
        None,
        tool_calls=[{"id": "k", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    )
    ex.add_agent_message("tool", "result k", tool_call_id="k")
    roles = [m["role"] for m in chat.context().messages]
    assert roles == ["user", "assistant", "user", "assistant", "tool"]
    with pytest.raises(InvalidQuery):
        ex.begin("another question before finalize")
    ex.finalize("done")
    with pytest.raises(InvalidQuery):
        ex.add_agent_message("assistant", "no exchange open")
    with pytest.raises(InvalidQuery):
        ex.finalize("twice")


def test_long_answers_are_shown_as_views_and_stored_whole(mem: Engram) -> None:
    chat = mem.session("c", policy="exchanges")
    exchange(chat, 0, answer=LONG_ANSWER)
    chat.exchanges.begin("Next question")
    ctx = chat.context()
    stored = [m for m in chat.messages(limit=100) if m.content == LONG_ANSWER]
    assert len(stored) == 1
    shown = next(m for m in ctx.messages if m["role"] == "assistant")
    assert len(shown["content"].encode()) <= 500
    assert f"message {stored[0].id}" in shown["content"]
    assert ctx.viewed_ids == [stored[0].id]
    assert len(LONG_ANSWER.encode()) > 750
    chat.exchanges.finalize("short")
    exchange(chat, 1, answer="y" * 750)  # at the limit: shown whole
    chat.exchanges.begin("Third question")
    shown_all = [m["content"] for m in chat.context().messages if m["role"] == "assistant"]
    assert "y" * 750 in shown_all


def test_summary_over_the_limit_is_compressed(mem: Engram) -> None:
    policy = {"name": "exchanges", "summary_max_bytes": 600, "summary_target_bytes": 400}
    chat = mem.session("c", policy=policy)
    for i in range(14):
        points = " ".join(f"Point {k} says alpha{k} beta{i} gamma{i * k}." for k in range(15))
        exchange(chat, i, answer=f"Answer {i}: {points}")
    assert mem.wait_idle(timeout=30)
    state = chat.compaction_state()
    assert state.compressions >= 1
    assert len(state.summary.encode()) <= 600


def test_tool_cache_lifetime_counts_exchanges(mem: Engram) -> None:
    chat = mem.session("c", policy="exchanges")
    ex = chat.exchanges
    params = {"champion_name": "droideka"}
    ex.begin("q0")
    assert ex.lookup_tool("gcs_get_champion_details", params) is None
    entry = ex.cache_tool("gcs_get_champion_details", params, "armor: 40", 2, call_id="c1")
    assert entry is not None and entry.key == cache_key("gcs_get_champion_details", params)
    assert ex.cache_tool("no_cache", {}, "x", 0) is None
    ex.finalize("a0")
    assert [e.remaining_duration for e in ex.cached()] == [1]
    ex.begin("q1")
    hit = ex.lookup_tool("gcs_get_champion_details", {"champion_name": "droideka"})
    assert hit is not None and hit.result == "armor: 40" and hit.remaining_duration == 2
    ctx = chat.context()
    assert "CACHED TOOL RESULTS" in ctx.sections
    ex.finalize("a1")
    ex.begin("q2")
    ex.finalize("a2")
    assert ex.cached() == []  # 2 -> refreshed 2 -> 1 -> 0: removed
    assert "CACHED TOOL RESULTS" not in chat.context().sections
    assert ex.state().exchanges == 3


def test_session_start_injection_happens_once_and_is_cached(mem: Engram) -> None:
    chat = mem.session("c", policy="exchanges")
    ex = chat.exchanges
    proactive = [
        {"tool_name": "db_get_ux_details", "parameters": {"query": "screen help"}, "result": "ux"},
        {"tool_name": "screen", "result": {"id": 7}, "duration": 1},
    ]
    stored = ex.inject_session_start("The user is on the shop screen.", proactive)
    assert [m.role for m in stored] == ["assistant", "tool", "tool"]
    assert stored[0].content.startswith("I can see you're on a specific screen.")
    assert ex.inject_session_start("again", proactive) == []
    assert len(chat.messages(limit=100)) == 3
    assert ex.lookup_tool("db_get_ux_details", {"query": "screen help"}) is not None
    assert {e.tool_name for e in ex.cached()} == {"db_get_ux_details", "screen"}
    record = mem.store.load_state("default", "c", TOOL_CACHE_KIND)
    assert record is not None and record.data["screen_injection_done"] is True
    # A new handle (another process, say) sees the flag.
    assert mem.session("c").exchanges.inject_session_start("x", []) == []


def test_debug_view_matches_seed_004s_log(mem: Engram) -> None:
    chat = mem.session("ABC123", policy="exchanges")
    ex = chat.exchanges
    for i in range(3):
        exchange(chat, i)
    ex.begin("Question")
    ex.cache_tool("gcs_get_champion_details", {"champion_name": "droideka"}, "r", 3)
    view = ex.debug_view()
    lines = view.splitlines()
    assert lines[0] == "=== MEMORY STATE ==="
    assert lines[1] == "Session: ABC123 | Exchanges: 3 | Summary: 0 bytes | LLM compressions: 0"
    assert "=== FUNCTION CACHE STATE ===" in lines
    assert "Cached functions: 1" in lines
    assert (
        "  • gcs_get_champion_details({'champion_name': 'droideka'}): 3/3 exchanges remaining"
        in lines
    )
    header = next(line for line in lines if line.startswith("=== AGENT RECEIVES"))
    ctx = chat.context()
    assert header == f"=== AGENT RECEIVES ({len(ctx.messages)} messages) ==="
    assert lines[-1] == f"[{len(ctx.messages)}] USER: Question"
    assert "[1] SYSTEM: [CACHED TOOL RESULTS]" in view
