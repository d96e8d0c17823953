"""Bad library input is refused the same way on every backend, naming the field.

Each case was found by a probe of the library: before the fix it raised a raw
Python exception, was accepted by one backend and refused by another, or let
an unbounded field through. Nothing of a refused message is ever written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import engram
from engram.engine import Engram, Session
from engram.errors import EngramError, InvalidMessage, InvalidQuery
from engram.intake.validation import MAX_ARGUMENTS_BYTES, MAX_ID_CHARS, MAX_JSON_DEPTH

EAST = timezone(timedelta(hours=5))
WEST = timezone(timedelta(hours=-5))


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


def _call(call_id: str = "c1", arguments: object = "{}", name: str = "f") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# (label, action, field named in the error)
ADD_CASES: list[tuple[str, Callable[[Session], object], str]] = [
    ("unhashable role", lambda s: s.add(["user"], "x"), "role"),  # type: ignore[arg-type]
    (
        "set as arguments",
        lambda s: s.add("assistant", None, tool_calls=[_call(arguments={1, 2})]),
        "arguments",
    ),
    ("deep metadata", lambda s: s.add("user", "x", metadata=_nested(5000)), "metadata"),
    (
        "metadata just over the depth",
        lambda s: s.add("user", "x", metadata=_nested(MAX_JSON_DEPTH)),
        "metadata",
    ),
    (
        "created_at below year 1 in UTC",
        lambda s: s.add("user", "x", created_at=datetime(1, 1, 1, tzinfo=EAST)),
        "created_at",
    ),
    (
        "created_at past 9999 in UTC",
        lambda s: s.add("user", "x", created_at=datetime(9999, 12, 31, 23, tzinfo=WEST)),
        "created_at",
    ),
    ("add_many(None)", lambda s: s.add_many(None), "messages"),  # type: ignore[arg-type]
    ("add_many(5)", lambda s: s.add_many(5), "messages"),  # type: ignore[arg-type]
    ("name with a newline", lambda s: s.add("user", "x", name="bob\n"), "name"),
    (
        "surrogate in a tool-call id",
        lambda s: s.add("assistant", None, tool_calls=[_call("c\ud800")]),
        "tool_calls[0].id",
    ),
    (
        "surrogate in arguments",
        lambda s: s.add("assistant", None, tool_calls=[_call(arguments='{"a": "\ud800"}')]),
        "arguments",
    ),
    (
        "surrogate in a tool name",
        lambda s: s.add("assistant", None, tool_calls=[_call(name="f\udc00")]),
        "function.name",
    ),
    ("NUL in metadata", lambda s: s.add("user", "x", metadata={"k": "a\x00b"}), "metadata"),
    ("NUL in a metadata key", lambda s: s.add("user", "x", metadata={"k\x00": 1}), "metadata"),
    (
        "surrogate in metadata",
        lambda s: s.add("user", "x", metadata={"k": "\udfff"}),
        "metadata",
    ),
    ("non-string metadata key", lambda s: s.add("user", "x", metadata={1: "a"}), "metadata"),
    ("NaN in metadata", lambda s: s.add("user", "x", metadata={"k": float("nan")}), "metadata"),
    (
        "NUL in a tool-call id",
        lambda s: s.add("assistant", None, tool_calls=[_call("c\x00")]),
        "tool_calls[0].id",
    ),
    (
        "arguments over the limit",
        lambda s: s.add(
            "assistant", None, tool_calls=[_call(arguments="x" * (MAX_ARGUMENTS_BYTES + 1))]
        ),
        "arguments",
    ),
    (
        "arguments over the limit in total",
        lambda s: s.add(
            "assistant",
            None,
            tool_calls=[_call(f"c{i}", "x" * (MAX_ARGUMENTS_BYTES // 2)) for i in range(3)],
        ),
        "arguments",
    ),
    (
        "a call id over the limit",
        lambda s: s.add("assistant", None, tool_calls=[_call("c" * (MAX_ID_CHARS + 1))]),
        "tool_calls[0].id",
    ),
    (
        "a tool_call_id over the limit",
        lambda s: s.add("tool", "r", tool_call_id="c" * (MAX_ID_CHARS + 1)),
        "tool_call_id",
    ),
    (
        "NUL in tool_call_id",
        lambda s: s.add("tool", "r", tool_call_id="c1\x00"),
        "tool_call_id",
    ),
    ("tool_calls not a list", lambda s: s.add("assistant", None, tool_calls=5), "tool_calls"),  # type: ignore[arg-type]
    ("metadata a list", lambda s: s.add("user", "x", metadata=[1]), "metadata"),  # type: ignore[arg-type]
]


class TestAddRefusesNamingTheField:
    @pytest.mark.parametrize(
        ("action", "field"), [pytest.param(a, f, id=label) for label, a, f in ADD_CASES]
    )
    def test_refused_with_the_field_and_nothing_written(
        self, mem: Engram, action: Callable[[Session], object], field: str
    ) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "first")
        with pytest.raises(InvalidMessage) as caught:
            action(chat)
        assert field in str(caught.value)
        assert [m.content for m in chat.messages()] == ["first"]

    def test_accepted_values_read_back_alike(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        meta = {"nested": _nested(MAX_JSON_DEPTH - 2), "tab\tkey": "ctrl \x01\x1f ok", "n": 1.5}
        stored = chat.add(
            "assistant",
            None,
            tool_calls=[_call("call\x01id", {"q": "é\u2028"})],
            metadata=meta,
        )
        again = mem.message(stored.id, scope="p")
        assert again.metadata == meta
        assert again.tool_calls == stored.tool_calls
        assert again.tool_calls is not None
        assert again.tool_calls[0]["id"] == "call\x01id"


QUERY_CASES: list[tuple[str, Callable[[Engram, Session], object], str]] = [
    ("message id 2**63", lambda m, s: m.message(2**63, scope="p"), "message id"),
    ("message id 0", lambda m, s: m.message(0, scope="p"), "message id"),
    ("message(scope=None)", lambda m, s: m.message(1, scope=None), "scope"),  # type: ignore[arg-type]
    ("string before_id", lambda m, s: s.extended(5, before_id="7"), "before_id"),  # type: ignore[arg-type]
    ("huge before_id", lambda m, s: s.extended(5, before_id=2**64), "before_id"),
    ("string after_id", lambda m, s: s.messages(after_id="7"), "after_id"),  # type: ignore[arg-type]
    ("huge after_id", lambda m, s: s.messages(after_id=2**63), "after_id"),
    ("search start not a date", lambda m, s: s.search("x", start="soon"), "start"),  # type: ignore[arg-type]
    ("search end a list", lambda m, s: s.search("x", end=[1]), "end"),  # type: ignore[arg-type]
    ("search roles a string", lambda m, s: s.search("x", roles="user"), "roles"),
    ("search unknown role", lambda m, s: s.search("x", roles=["robot"]), "role"),
    ("search NUL query", lambda m, s: s.search("a\x00b"), "query"),
    ("scope search surrogate", lambda m, s: m.search("a\ud800", scope="p"), "query"),
]


class TestReadsRefuseNamingTheArgument:
    @pytest.mark.parametrize(
        ("action", "field"), [pytest.param(a, f, id=label) for label, a, f in QUERY_CASES]
    )
    def test_refused(
        self, mem: Engram, action: Callable[[Engram, Session], object], field: str
    ) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "hello")
        with pytest.raises(InvalidQuery) as caught:
            action(mem, chat)
        assert field in str(caught.value)

    def test_search_start_as_iso_text_is_read(self, mem: Engram) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "hello pricing", created_at="2024-05-01T10:00:00Z")
        assert [h.message.content for h in chat.search("pricing", start="2024-04-30")] == [
            "hello pricing"
        ]
        assert chat.search("pricing", start="2024-05-02") == []


class TestToolsDispatcherNeverAnswersInternal:
    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("get_message_by_id", {"message_id": 2**63}),
            ("get_message_by_id", '{"message_id": 99999999999999999999999}'),
            ("get_extended_context", {"before_id": 2**63}),
            ("search_history", {1: "a", "query": "x"}),
            ("search_history", {"query": "a\x00b"}),
            ("search_history", {"query": "a\ud800b"}),
            ("get_messages_by_date", {"date": "2024-01-01\x00"}),
        ],
    )
    def test_invalid_arguments(self, mem: Engram, tool: str, arguments: Any) -> None:
        chat = mem.session("s", scope="p")
        chat.add("user", "hello")
        answer = engram.tools.dispatch(chat, tool, arguments)
        assert '"invalid_arguments"' in answer, answer


class TestStoresRefuseWhatTheEngineRefuses:
    """A direct Store caller cannot write what the engine refuses (second line of defence)."""

    def test_surrogate_tool_calls_refused_by_the_store(self, mem: Engram) -> None:
        from engram.models import NewMessage

        bad = NewMessage(
            role="assistant",
            content="",
            created_at=datetime.now(UTC),
            tool_calls=[_call("c\ud800")],
        )
        with pytest.raises(EngramError):
            mem.store.append("p", "s", [bad], [5])
        assert mem.store.get_session("p", "s") is None


MEMORY_CASES: list[tuple[str, Callable[[Engram], object], str]] = [
    ("NUL in a memory", lambda m: m.memories("p").create("a\x00b"), "memory content"),
    ("surrogate in a memory", lambda m: m.memories("p").create("a\ud800b"), "memory content"),
    (
        "NUL in memory metadata",
        lambda m: m.memories("p").create("tea please", metadata={"k": "\x00"}),
        "memory metadata",
    ),
    ("NUL in an end reason", lambda m: m.session("s", scope="p").end("r\x00"), "end reason"),
    ("NUL in a scope listing", lambda m: m.sessions("p\x00"), "scope"),
]


@pytest.mark.parametrize(
    ("action", "field"), [pytest.param(a, f, id=label) for label, a, f in MEMORY_CASES]
)
def test_memories_and_ends_refuse_alike(
    mem: Engram, action: Callable[[Engram], object], field: str
) -> None:
    mem.session("s", scope="p").add("user", "I drink tea every morning before work.")
    with pytest.raises(EngramError) as caught:
        action(mem)
    assert field in str(caught.value)
    assert mem.memories("p").list() == []
