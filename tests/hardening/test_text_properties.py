"""Arbitrary text in every string field: stored and read back identically, or refused whole.

Hypothesis generates text with control characters, NUL and lone surrogates
for each field a message or a session has, and sends it through ``add``,
the tools dispatcher and the JSONL import, on every backend. Each value is
either accepted and read back exactly, or refused with an ``EngramError``
that names the field, with nothing written.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engram
from engram.engine import Engram
from engram.errors import EngramError
from engram.ingest import ingest
from engram.models import Message
from engram.transfer.importers import parse_jsonl

SPECIAL = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "\n", "\r\n", "\x7f", "\u2028", "é"]
#: Any code point, surrogates and control characters included.
ANY_CHAR = st.characters(exclude_categories=())
TEXT = st.one_of(st.sampled_from(SPECIAL), st.text(ANY_CHAR, max_size=24))

_serial = itertools.count()

# field -> (how to add a message with the value there, how to read it back, name in errors)
Adder = Callable[[Engram, str, str], Message]


def _call(call_id: str = "c1", name: str = "lookup", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_calls(message: Message) -> dict[str, Any]:
    assert message.tool_calls is not None
    return message.tool_calls[0]


FIELDS: dict[str, tuple[Adder, Callable[[Message], object], str]] = {
    "content": (
        lambda m, s, v: m.session(s, scope="p").add("user", v),
        lambda x: x.content,
        "content",
    ),
    "name": (
        lambda m, s, v: m.session(s, scope="p").add("user", "hi", name=v),
        lambda x: x.name,
        "name",
    ),
    "tool call id": (
        lambda m, s, v: m.session(s, scope="p").add("assistant", None, tool_calls=[_call(v)]),
        lambda x: _tool_calls(x)["id"],
        "tool_calls[0].id",
    ),
    "tool name": (
        lambda m, s, v: m.session(s, scope="p").add("assistant", None, tool_calls=[_call(name=v)]),
        lambda x: _tool_calls(x)["function"]["name"],
        "function.name",
    ),
    "arguments": (
        lambda m, s, v: m.session(s, scope="p").add(
            "assistant", None, tool_calls=[_call(arguments=v)]
        ),
        lambda x: _tool_calls(x)["function"]["arguments"],
        "arguments",
    ),
    "tool_call_id": (
        lambda m, s, v: _answer(m, s, v),
        lambda x: x.tool_call_id,
        "tool_call_id",
    ),
    "metadata key": (
        lambda m, s, v: m.session(s, scope="p").add("user", "hi", metadata={v: 1}),
        lambda x: next(iter(x.metadata)),
        "metadata",
    ),
    "metadata value": (
        lambda m, s, v: m.session(s, scope="p").add("user", "hi", metadata={"k": [v]}),
        lambda x: x.metadata["k"][0],
        "metadata",
    ),
    "scope": (
        lambda m, s, v: m.session(s, scope=v).add("user", "hi"),
        lambda x: x.scope,
        "scope",
    ),
    "session": (
        lambda m, s, v: m.session(v, scope="p").add("user", "hi"),
        lambda x: x.session,
        "session",
    ),
}


def _answer(mem: Engram, session: str, call_id: str) -> Message:
    chat = mem.session(session, scope="p")
    try:
        chat.add("assistant", None, tool_calls=[_call(call_id)])
    except EngramError:
        pass  # refused: then the tool message below must be refused for the same reason
    return chat.add("tool", "result", tool_call_id=call_id)


def _count(mem: Engram) -> int:
    return sum(info.message_count for info in mem.sessions(None, limit=1000))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(field=st.sampled_from(sorted(FIELDS)), value=TEXT)
def test_add_reads_back_identically_or_refuses_the_field(
    mem: Engram, field: str, value: str
) -> None:
    add, read, named = FIELDS[field]
    session = f"s{next(_serial)}"
    before = _count(mem)
    try:
        stored = add(mem, session, value)
    except EngramError as exc:
        assert named in str(exc), f"{field}: {exc}"
        written = _count(mem) - before
        assert written == (1 if field == "tool_call_id" and _call_ok(value) else 0)
        return
    again = mem.message(stored.id, scope=stored.scope)
    assert read(again) == value
    assert read(stored) == value
    assert again == stored


def _call_ok(call_id: str) -> bool:
    """The assistant call of the tool_call_id case was accepted (only the answer refused)."""
    return bool(call_id.strip()) and "\x00" not in call_id and _encodable(call_id)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(text) <= 256


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    tool=st.sampled_from(["search_history", "get_messages_by_date", "get_message_by_id"]),
    value=TEXT,
    raw=st.booleans(),
)
def test_the_dispatcher_answers_json_never_internal(
    mem: Engram, tool: str, value: str, raw: bool
) -> None:
    chat = mem.session("tools", scope="p")
    if not chat.info():
        chat.add("user", "hello pricing")
    key = {"search_history": "query", "get_messages_by_date": "date"}.get(tool, "message_id")
    arguments: Any = value if raw else {key: value}
    answer = engram.tools.dispatch(chat, tool, arguments)
    decoded = json.loads(answer)
    assert isinstance(decoded, dict)
    assert decoded.get("error", {}).get("type") != "internal", answer


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    field=st.sampled_from(["content", "name", "session", "metadata"]),
    value=TEXT,
)
def test_import_reads_back_identically_or_refuses_whole(
    mem: Engram, field: str, value: str
) -> None:
    first: dict[str, Any] = {"role": "user", "content": "before", "session": "imp"}
    line: dict[str, Any] = {"role": "user", "content": "hi", "session": "imp"}
    if field == "metadata":
        line["metadata"] = {"k": value}
    else:
        line[field] = value
    data = (json.dumps(first) + "\n" + json.dumps(line) + "\n").encode("utf-8", "surrogatepass")
    scope = f"i{next(_serial)}"
    try:
        batches = parse_jsonl(data, file="in.jsonl")
        ingest(mem, scope, batches)
    except EngramError:
        assert mem.sessions(scope) == [], "a refused import wrote something"
        return
    session = value if field == "session" else "imp"
    stored = mem.session(session, scope=scope).messages()
    last = stored[-1]
    got = {"content": last.content, "name": last.name, "session": last.session}.get(field)
    if field == "metadata":
        got = last.metadata["k"]
    assert got == value
