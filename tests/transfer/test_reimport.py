"""Importing an exported session document again adds nothing, like JSONL, on every backend."""

from __future__ import annotations

import json
from typing import Any

from tests.images import png_url

from engram.engine import Engram
from engram.idempotency import RECORD

CALL = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def _history(mem: Engram, session: str = "s") -> list[tuple[Any, ...]]:
    return [
        (m.role, m.content, m.parts, m.tool_calls, m.tool_call_id, m.created_at, m.metadata)
        for m in mem.session(session, "p").messages()
    ]


def _fill(mem: Engram) -> dict[str, Any]:
    chat = mem.session("s", "p", policy="summary_buffer")
    chat.add_many(
        [
            {"role": "user", "content": "Pro price?", "created_at": "2025-03-06T10:00:00Z"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "$14"},
            {"role": "assistant", "content": "Pro is $14."},
        ]
    )
    parts = [
        {"type": "text", "text": "And this?"},
        {"type": "image_url", "image_url": {"url": png_url(8, 8)}},
    ]
    chat.add_many([{"role": "user", "content": parts}], idempotency_key="turn-2")
    chat.add("user", "ok", created_at="2025-03-06T10:05:00Z")
    chat.add("user", "ok", created_at="2025-03-06T10:05:00Z")  # the same message twice
    return mem.export_session("s", "p")


def test_a_second_import_of_an_export_adds_nothing(mem: Engram) -> None:
    document = _fill(mem)
    assert RECORD not in json.dumps(document)  # idempotency records stay in the store
    before, info = _history(mem), mem.session_info("s", "p")
    state = mem.session("s", "p").compaction_state()
    [report] = mem.import_documents([document])
    assert (len(report.messages), report.skipped) == (0, 7)
    assert _history(mem) == before
    after = mem.session_info("s", "p")
    assert after is not None and info is not None
    assert (after.message_count, after.policy) == (info.message_count, info.policy)
    assert mem.session("s", "p").compaction_state() == state


def test_an_import_adds_only_the_messages_the_session_lacks(mem: Engram) -> None:
    document = _fill(mem)
    extra = {"role": "user", "content": "Launch date?", "created_at": "2025-03-07T09:00:00+00:00"}
    document["recent_history"] = [*document["recent_history"], extra]
    again = dict(document)  # the same document twice in one import: its new message once
    reports = mem.import_documents([document, again])
    assert [(len(r.messages), r.skipped) for r in reports] == [(1, 7), (0, 8)]
    contents = [m.content for m in mem.session("s", "p").messages()]
    assert contents[-3:] == ["ok", "ok", "Launch date?"] and len(contents) == 8


def test_a_session_that_went_on_takes_nothing_from_an_older_export(mem: Engram) -> None:
    document = _fill(mem)
    mem.session("s", "p").add("user", "Something new")
    before = _history(mem)
    [report] = mem.import_documents([document])
    assert (len(report.messages), report.skipped) == (0, 7)
    assert _history(mem) == before


def test_into_another_session_everything_comes_with_its_policy(mem: Engram) -> None:
    document = {**_fill(mem), "session_id": "copy"}
    [report] = mem.import_documents([document])
    assert (len(report.messages), report.skipped) == (7, 0)
    assert [row[:6] for row in _history(mem, "copy")] == [row[:6] for row in _history(mem)]
    copied = mem.session_info("copy", "p")
    assert copied is not None and copied.policy == mem.session("s", "p").policy.to_dict()
