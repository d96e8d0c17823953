"""Reading a client's list against the stored history (pure: no store, no server)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engram.intake.validation import build_messages
from engram.models import Message
from engram.proxy.align import UPSTREAM_KEY, Kind, align, fingerprint, visible
from engram.proxy.rounds import is_ours

WHEN = datetime(2025, 1, 1, tzinfo=UTC)


def _call(call_id: str, name: str = "lookup", arguments: Any = None) -> dict[str, Any]:
    args = json.dumps(arguments if arguments is not None else {"q": "x", "n": 1})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def stored(*items: dict[str, Any]) -> list[Message]:
    """Stored messages from chat dicts; assistant ones are the upstream's answers."""
    out = []
    for number, item in enumerate(items, start=1):
        metadata = {UPSTREAM_KEY: {"id": f"c{number}"}} if item["role"] == "assistant" else {}
        out.append(
            Message(
                id=number,
                scope="s",
                session="chat",
                role=item["role"],
                content=item.get("content") or "",
                created_at=WHEN,
                tokens=10,
                tool_calls=item.get("tool_calls"),
                tool_call_id=item.get("tool_call_id"),
                metadata=metadata,
            )
        )
    return out


def read(history: list[Message], client: list[dict[str, Any]]) -> Any:
    prints = [fingerprint(m) for m in build_messages(client)]
    return align(prints, visible(history, is_ours))


U1, A1 = {"role": "user", "content": "one"}, {"role": "assistant", "content": "first"}
U2, A2 = {"role": "user", "content": "two"}, {"role": "assistant", "content": "second"}
U3 = {"role": "user", "content": "three"}


def test_new_only_and_full_lists_add_the_same_new_message() -> None:
    history = stored(U1, A1, U2, A2)
    for client in ([U3], [U1, A1, U2, A2, U3], [U2, A2, U3]):
        found = read(history, client)
        assert found.kind is Kind.APPEND
        assert [client[i] for i in found.new] == [U3]


def test_a_list_that_ends_at_an_unanswered_question_resumes() -> None:
    history = stored(U1, A1, U2)
    assert read(history, [U2]).kind is Kind.RESUME
    assert read(history, [U1, A1, U2]).kind is Kind.RESUME


def test_the_newest_turn_again_is_a_repeat_with_its_answer() -> None:
    history = stored(U1, A1, U2, A2)
    for client, with_history in (([U2], False), ([U1, A1, U2], True)):
        found = read(history, client)
        assert (found.kind, found.answer, found.history) == (Kind.REPEAT, history[-1], with_history)


def test_an_edited_turn_diverges_after_the_last_agreeing_message() -> None:
    history = stored(U1, A1, U2, A2, U3, {"role": "assistant", "content": "third"})
    edited = {"role": "user", "content": "TWO"}
    found = read(history, [U1, A1, edited])
    assert (found.kind, found.after, found.new) == (Kind.DIVERGE, history[1], (2,))
    short = read(history, [U1, A1, U2])  # stops short of the end: the later turns go
    assert (short.kind, short.after, short.new) == (Kind.DIVERGE, history[2], ())


def test_a_fixed_preamble_of_example_turns_is_never_read_as_an_edit() -> None:
    example = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    history = stored(*example, U1, A1)
    for message in history[:2]:
        message.metadata.clear()  # the app's own examples, not answers Engram stored
    found = read(history, [*example, U2])
    assert found.kind is Kind.APPEND and found.new == (2,)


def test_engrams_own_rounds_are_invisible_and_a_mixed_call_shows_the_clients_calls() -> None:
    ours, theirs = _call("e1", "search_history"), _call("w1", "get_weather")
    history = stored(
        U1,
        {"role": "assistant", "content": None, "tool_calls": [ours]},
        {"role": "tool", "tool_call_id": "e1", "content": "found"},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [_call("e2", "search_history"), theirs],
        },
        {"role": "tool", "tool_call_id": "e2", "content": "found again"},
    )
    shown = visible(history, is_ours)
    assert [v.message.id for v in shown] == [1, 4]
    client_copy = {"role": "assistant", "content": "checking", "tool_calls": [theirs]}
    result = {"role": "tool", "tool_call_id": "w1", "content": "sunny"}
    found = read(history, [U1, client_copy, result])
    assert found.kind is Kind.APPEND and found.new == (2,)


def test_the_clients_copy_matches_whatever_its_spacing_order_and_parts() -> None:
    call = _call("c1", arguments={"q": "x", "n": 1})
    history = stored(U1, {"role": "assistant", "content": "ok ", "tool_calls": [call]})
    respaced = {**call, "function": {"name": "lookup", "arguments": '{ "n": 1,  "q": "x" }'}}
    parts = [{"type": "text", "text": "one"}]
    copy = [
        {"role": "user", "content": parts},
        {"role": "assistant", "content": "ok", "tool_calls": [respaced], "refusal": None},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    found = read(history, copy)
    assert found.kind is Kind.APPEND and found.new == (2,)
    joined = stored({"role": "user", "content": "a\nb"})
    two_parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert read(joined, [{"role": "user", "content": two_parts}]).kind is Kind.RESUME


def test_a_list_that_shares_nothing_is_all_new() -> None:
    history = stored(U1, A1)
    found = read(history, [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])
    assert found.kind is Kind.APPEND and found.new == (0, 1)
    assert read([], [U1]).new == (0,)
