"""Invariant 8 extended: between compactions, consecutive prompts share their prefix.

The cache-aware window moves its start in chunks (engram.context.cache_window):
while the start stays, each prompt begins with the whole previous prompt up to
its current turn; moves are rare (about one per chunk of new history); and the
window never holds less than its low-water mark.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import tokens
from engram.context import Context, HistoryTotals, build_context
from engram.context.cache_window import MIN_TOKEN_CHUNK
from engram.engine import Engram
from engram.models import Message
from engram.policy import Policy

from .support import STORAGE, stored

SYSTEM = "You are a careful assistant."


def _message(mid: int, role: str, words: int) -> Message:
    return stored(mid, role, " ".join(f"w{mid}x{i}" for i in range(words)))


def _chunk(share: float) -> int:
    return max(MIN_TOKEN_CHUNK, int(share))


def _build(history: list[Message], policy: Policy, budget: int) -> Context:
    def read(limit: int, before_id: int | None) -> list[Message]:
        rows = [m for m in history if before_id is None or m.id < before_id]
        return rows[-limit:]

    totals = HistoryTotals(len(history), sum(m.tokens for m in history))
    return build_context(read, budget=budget, system=SYSTEM, policy=policy, totals=totals)


def _stable(ctx: Context) -> list[dict[str, Any]]:
    assert ctx.turn_start is not None
    return ctx.messages[: ctx.turn_start]


def _window_start(ctx: Context) -> int | None:
    return ctx.message_ids[0] if ctx.message_ids else None


def _replay(
    turns: list[tuple[int, int]], policy: Policy, budget: int
) -> tuple[list[Context], list[Message]]:
    history: list[Message] = []
    prompts = []
    for question, answer in turns:
        history.append(_message(len(history) + 1, "user", question))
        prompts.append(_build(history, policy, budget))
        history.append(_message(len(history) + 1, "assistant", answer))
    return prompts, history


turns_strategy = st.lists(
    st.tuples(st.integers(1, 30), st.integers(1, 60)), min_size=10, max_size=60
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns_strategy, st.integers(300, 3000), st.floats(0.1, 0.5))
def test_a_token_bound_window_keeps_the_prefix_between_moves(
    turns: list[tuple[int, int]], budget: int, share: float
) -> None:
    policy = Policy(name="custom", cache_chunk=share)
    prompts, history = _replay(turns, policy, budget)
    room = budget - tokens.REPLY_PRIMING - tokens.count_message(STORAGE, "system", SYSTEM)
    chunk = _chunk(share * room)
    moves = 0
    for before, after in itertools.pairwise(prompts):
        assert after.tokens <= budget
        if _window_start(before) == _window_start(after):
            previous = _stable(before)
            assert after.messages[: len(previous)] == previous
        else:
            moves += 1
    new_tokens = sum(m.tokens for m in history)
    # Without chunks the start moves on every turn once the window is full.
    assert moves <= new_tokens // chunk + 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns_strategy, st.integers(1, 12), st.none() | st.integers(1, 20))
def test_a_message_capped_window_holds_from_its_cap_to_cap_plus_chunk(
    turns: list[tuple[int, int]], cap: int, chunk: int | None
) -> None:
    policy = Policy(name="custom", max_messages=cap, cache_chunk_messages=chunk)
    prompts, _ = _replay(turns, policy, budget=1_000_000)
    step = chunk or cap
    for number, ctx in enumerate(prompts):
        available = 2 * number + 1  # stored messages when this prompt was built
        shown = len(ctx.message_ids)
        assert min(cap, available) <= shown <= min(available, cap + step - 1)
    for before, after in itertools.pairwise(prompts):
        if _window_start(before) == _window_start(after):
            previous = _stable(before)
            assert after.messages[: len(previous)] == previous


def test_off_the_window_starts_at_the_oldest_message_that_fits() -> None:
    turns = [(20, 40)] * 40  # about 240 tokens a turn; chunks of about 1,190 tokens
    on, _ = _replay(turns, Policy(name="custom"), budget=4000)
    off, _ = _replay(turns, Policy(name="custom", cache_window=False), budget=4000)
    moves_on = sum(_window_start(a) != _window_start(b) for a, b in itertools.pairwise(on))
    moves_off = sum(_window_start(a) != _window_start(b) for a, b in itertools.pairwise(off))
    assert moves_off > 2 * moves_on
    # The plain window holds at least as much as the chunked one, turn by turn.
    assert all(len(a.message_ids) >= len(b.message_ids) for a, b in zip(off, on, strict=True))


@pytest.mark.parametrize("preset", ["default", "lean"])
def test_sessions_share_their_prefix_turn_after_turn(
    open_engram: Callable[..., Engram], preset: str
) -> None:
    mem = open_engram(llm=None)
    chat = mem.session("c", policy=preset)
    prompts = []
    for turn in range(40):
        chat.add("user", f"Question {turn}: " + "tell me more about the plan " * 8)
        prompts.append(chat.context(budget=3000, system=SYSTEM))
        chat.add("assistant", f"Answer {turn}: " + "here is what we know so far " * 12)
    full = prompts[10:]
    kept = sum(
        1
        for before, after in itertools.pairwise(full)
        if after.messages[: before.turn_start] == _stable(before)
    )
    assert kept >= 0.7 * (len(full) - 1)
    assert all(p.tokens <= 3000 for p in prompts)


def test_merged_system_is_one_message_and_counted_exactly(
    open_engram: Callable[..., Engram],
) -> None:
    mem = open_engram(llm=None)
    mem.memories("default").create("The user prefers tea over coffee in the mornings.")
    chat = mem.session("c")
    chat.add("user", "What do I drink?")
    separate = chat.context(budget=2000, system=SYSTEM)
    merged = chat.context(budget=2000, system=SYSTEM, merge_system=True)
    assert sum(1 for m in separate.messages if m["role"] == "system") == 2
    assert [m["role"] for m in merged.messages] == ["system", "user"]
    assert merged.messages[0]["content"].startswith(SYSTEM + "\n\n")
    assert merged.tokens == tokens.count_messages(STORAGE, merged.messages)
    assert merged.tokens < separate.tokens
    anthropic = merged.to_anthropic()
    assert anthropic["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert anthropic["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What do I drink?"}]}
    ]
