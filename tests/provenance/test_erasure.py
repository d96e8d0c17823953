"""Erasure reaches the prompt archive: a recorded prompt never gives back forgotten text."""

from __future__ import annotations

import json

import pytest

from engram.engine import Engram
from engram.store.base import archives_prompts

SECRET = "passport number X9Q-771-ZZ"
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "search_history", "arguments": '{"query": "passport"}'},
        }
    ],
}


def _archives(mem: Engram) -> None:
    if not archives_prompts(mem.store):
        pytest.skip("this backend keeps no prompt archive")


def test_a_deleted_memory_is_gone_from_every_recorded_prompt(mem: Engram) -> None:
    _archives(mem)
    first, second = mem.session("s1", "sc"), mem.session("s2", "sc")
    for chat in (first, second):
        chat.add("user", "hello there")
    memory = first.memories().create(f"The user's {SECRET}.")
    for chat in (first, second):
        assert any(SECRET in str(m.get("content")) for m in chat.context(4000).messages)
    first.memories().delete(memory.id)
    for chat in (first, second):
        replay = chat.prompt(1)
        assert SECRET not in json.dumps(replay.to_dict())
        assert not replay.verified and replay.missing  # it says what is gone, never guesses


def test_a_forgotten_message_quoted_by_a_recorded_tool_round_is_gone(mem: Engram) -> None:
    _archives(mem)
    chat = mem.session("s1", "sc")
    first = chat.add("user", f"my {SECRET}")
    for i in range(20):
        chat.add("user", f"note {i} " + "museums and trams " * 20)
        chat.add("assistant", f"ok {i} " + "noted " * 20)
    chat.add("user", "what was my passport number?")
    tool = {"role": "tool", "tool_call_id": "c1", "content": f"#1 user: my {SECRET}"}
    ctx = chat.context(800, extra=[CALL, tool])
    assert first.id not in ctx.message_ids  # only the tool round quotes it
    chat.delete_message(first.id)
    replay = chat.prompt(1)
    assert SECRET not in json.dumps(replay.to_dict())
    assert replay.missing


def test_a_cleared_scope_memory_purge_reaches_the_archive_too(mem: Engram) -> None:
    _archives(mem)
    chat = mem.session("s1", "sc")
    chat.add("user", "hello there")
    chat.memories().create(f"The user's {SECRET}.")
    chat.context(4000)
    chat.memories().clear()
    assert SECRET not in json.dumps(chat.prompt(1).to_dict())
