"""Every recorded turn whose parts are kept replays to its SHA-256: what was sent, exactly.

A random sequence of turns (plain, long enough to be cut, with tool rounds,
with long answers shown as views), compactions, agent-state updates, memory
writes and deletions, and message deletions runs on every backend under a
policy that compacts quickly; then each recorded turn is replayed and
compared, message for message, with what ``context()`` returned for it.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.agent_state import add_facts
from engram.engine import Engram
from engram.provenance.digest import canonical

_sessions = itertools.count()

WORDS = (
    "kiwi rollback budget Maya owns the plan we decided to ship Friday I prefer short "
    "answers Postgres cluster migration deadline invoice Jonas reviewed latency"
).split()

#: Policies that compact within a few turns, synchronously (deterministic examples).
POLICIES: dict[str, dict[str, Any]] = {
    "summary": {"name": "t_summary", "summarize_over_tokens": 400, "keep_tokens": 200,
                "max_window_tokens": 600, "sync_compaction": True},
    "agent": {"name": "t_agent", "max_history_messages": 10, "keep_messages": 5,
              "max_messages": 10, "sync_compaction": True},
    "exchanges": {"name": "t_exchanges", "max_exchanges": 3, "answer_over_bytes": 200,
                  "answer_view_bytes": 100, "sync_compaction": True, "cache_window": False},
    "lean": {"name": "t_lean", "max_messages": 6},
}  # fmt: skip

sentence = st.lists(st.sampled_from(WORDS), min_size=2, max_size=14).map(" ".join)
op = st.one_of(
    st.tuples(st.just("turn"), sentence, st.integers(0, 3)),
    st.tuples(st.just("long"), sentence, st.integers(0, 0)),
    st.tuples(st.just("tools"), sentence, st.integers(1, 2)),
    st.tuples(st.just("compact"), st.just(""), st.integers(0, 0)),
    st.tuples(st.just("fact"), sentence, st.integers(0, 0)),
    st.tuples(st.just("memory"), sentence, st.integers(0, 0)),
    st.tuples(st.just("forget_memory"), st.just(""), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.just(""), st.integers(0, 40)),
)


def run(
    mem: Engram, policy: str, ops: list[tuple[str, str, int]], budget: int
) -> tuple[Any, list[Any], bool]:
    """Play ``ops``; returns the session, what each recorded turn sent, and whether any
    stored message was deleted."""
    session = mem.session(f"prop-{next(_sessions)}", scope="prop", policy=POLICIES[policy])
    memories = mem.memories("prop")
    sent: list[list[dict[str, Any]]] = []
    deleted = False
    for kind, text, n in ops:
        if kind in ("turn", "long", "tools"):
            question = text * 60 if kind == "long" else text
            session.add("user", question)
            if kind == "tools":
                call = {"type": "function", "function": {"name": "lookup", "arguments": "{}"}}
                calls = [{"id": f"c{len(sent)}_{i}", **call} for i in range(n)]
                session.add("assistant", None, tool_calls=calls)
                for call in calls:
                    session.add("tool", f"result {text}", tool_call_id=call["id"])
            system = "You are careful." if n % 2 else None
            ctx = session.context(budget, system=system, merge_system=n == 3)
            sent.append(ctx.messages)
            session.add("assistant", f"answer: {text} " * (8 if n == 2 else 1))
        elif kind == "compact":
            session.compact()
        elif kind == "fact":
            session.update_agent_state(lambda state, t=text: add_facts(state, t))
        elif kind == "memory":
            memories.create(text)
        elif kind == "forget_memory":
            listed = memories.list()
            if listed:
                memories.delete(listed[n % len(listed)].id)  # the prompts that showed it lose it
                deleted = True
        elif kind == "delete":
            stored = session.messages(limit=200)
            if stored:
                session.delete_message(stored[n % len(stored)].id)
                deleted = True
    return session, sent, deleted


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    ops=st.lists(op, min_size=1, max_size=24),
    budget=st.sampled_from([300, 900, 4000]),
)
def test_every_kept_turn_replays_to_what_was_sent(
    mem: Engram, policy: str, ops: list[tuple[str, str, int]], budget: int
) -> None:
    session, sent, deleted = run(mem, policy, ops, budget)
    assert [t.turn for t in session.prompts()] == list(range(1, len(sent) + 1))
    for number, messages in enumerate(sent, start=1):
        replayed = session.prompt(number)
        if replayed.missing:
            # Only a deleted message or memory (or a summary of one) makes a part go.
            assert deleted, replayed.missing
            assert replayed.messages is None
            continue
        assert replayed.verified, (number, replayed.mismatch)
        assert replayed.messages is not None
        assert canonical(replayed.messages) == canonical(messages)
        assert session.prompt_diff(number, number).identical
