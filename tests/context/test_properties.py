"""Invariants 1-4, 8 and 9 of DESIGN.md as properties of build_context (cache-aware window too)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram import tokens
from engram.context import Context, HistoryTotals, Section, build_context
from engram.models import Message
from engram.policy import PRESETS, Policy
from engram.testing import tool_sequence_error

from .support import STORAGE
from .support import stored as _message

APPROX = tokens.ApproximateCounter(margin=0.2)
CL100K = tokens.counter_for_model("gpt-4")
WORDS = ["alpha", "beta", "gamma", "42", "élan", "中文", "\n", "  ", "{}", "tool"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["tiny", "small", "small", "small", "small", "huge"]))
    if kind == "tiny":  # empty-ish
        size = draw(st.integers(0, 3))
    elif kind == "small":
        size = draw(st.integers(0, 60))
    else:  # huge single messages
        size = draw(st.integers(200, 2_500))
    word = draw(st.sampled_from(WORDS))
    return (word + " ") * size


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    events = draw(
        st.lists(
            st.sampled_from(
                ["user", "user", "assistant", "assistant", "group", "group", "orphan", "system"]
            ),
            max_size=40,
        )
    )
    out: list[Message] = []
    mid = draw(st.integers(1, 1_000))
    for event in events:
        mid += draw(st.integers(1, 3))  # ids increase, with gaps
        if event in ("user", "assistant", "system"):
            name = draw(st.sampled_from([None, None, None, "alice"]))
            out.append(_message(mid, event, draw(texts()), name=name))
        elif event == "orphan":
            out.append(_message(mid, "tool", draw(texts()), tool_call_id=f"lost{mid}"))
        else:
            calls = draw(st.integers(1, 3))
            ids = [f"c{mid}_{k}" for k in range(calls)]
            out.append(
                _message(
                    mid,
                    "assistant",
                    draw(st.sampled_from(["", "let me check"])),
                    tool_calls=[
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                        }
                        for cid in ids
                    ],
                )
            )
            answered = draw(st.integers(0, calls))  # sometimes results are missing
            for cid in ids[:answered]:
                mid += 1
                out.append(_message(mid, "tool", draw(texts()), tool_call_id=cid))
    return out


policies = st.one_of(
    st.sampled_from(list(PRESETS.values())),
    st.builds(
        Policy,
        name=st.just("custom"),
        max_messages=st.none() | st.integers(1, 20),
        max_window_tokens=st.none() | st.integers(1, 5_000),
        max_exchanges=st.none() | st.integers(1, 5),
        cache_window=st.booleans(),
        cache_chunk=st.floats(0.05, 0.5),
        cache_chunk_messages=st.none() | st.integers(1, 30),
    ),
)
counters = st.sampled_from([None, STORAGE, STORAGE, APPROX, CL100K])
sections = st.lists(
    st.builds(Section, title=st.sampled_from(["MEMORIES", "SUMMARY", "DATA"]), text=texts()),
    max_size=2,
)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    history = draw(histories())
    if draw(st.booleans()):
        # Relative to the history, so the window edge falls anywhere inside it.
        total = sum(m.tokens for m in history) + tokens.REPLY_PRIMING
        budget = max(16, int(total * draw(st.floats(0.0, 1.2))))
    else:
        budget = draw(st.integers(16, 400) | st.integers(400, 6_000) | st.integers(6_000, 60_000))
    reserve = draw(st.sampled_from([0, 0, min(500, budget - 16), budget - 16]))
    floor_id = None
    if history and draw(st.booleans()):
        floor_id = draw(st.sampled_from([m.id for m in history]))
    return {
        "history": history,
        "budget": budget,
        "reserve": reserve,
        "system": draw(st.none() | st.none() | texts()),
        "counter": draw(counters),
        "policy": draw(policies),
        "sections": draw(sections),
        "floor_id": floor_id,
        # The true stored totals (what the store keeps), or none: no cache alignment.
        "totals": draw(
            st.sampled_from([None, HistoryTotals(len(history), sum(m.tokens for m in history))])
        ),
        "merge_system": draw(st.booleans()),
    }


def run(case: dict[str, Any]) -> Context:
    history: list[Message] = case["history"]

    def read(limit: int, before_id: int | None) -> list[Message]:
        assert limit >= 1
        rows = [m for m in history if before_id is None or m.id < before_id]
        return rows[-limit:]

    args = {k: v for k, v in case.items() if k != "history"}
    return build_context(read, **args)


def candidates(case: dict[str, Any]) -> list[Message]:
    floor = case["floor_id"]
    return [m for m in case["history"] if floor is None or m.id > floor]


def is_orphan(pool: list[Message], index: int) -> bool:
    """A tool result answers only the assistant call right before its tool run, once."""
    m = pool[index]
    if m.role != "tool":
        return False
    k = index - 1
    while k >= 0 and pool[k].role == "tool":
        k -= 1
    if k < 0 or pool[k].role != "assistant" or not pool[k].tool_calls:
        return True
    if m.tool_call_id not in {c["id"] for c in pool[k].tool_calls or []}:
        return True
    return any(pool[j].tool_call_id == m.tool_call_id for j in range(k + 1, index))


def view(pool: list[Message], index: int) -> dict[str, Any] | None:
    """How ``pool[index]`` is shown: a call keeps only its answered calls (None: left out)."""
    m = pool[index]
    out = m.to_openai()
    if m.role != "assistant" or not m.tool_calls:
        return out
    answered = set()
    k = index + 1
    while k < len(pool) and pool[k].role == "tool":
        answered.add(pool[k].tool_call_id)
        k += 1
    calls = [c for c in m.tool_calls if c["id"] in answered]
    if calls:
        out["tool_calls"] = calls
        return out
    out.pop("tool_calls")
    return out if m.content.strip() else None


def left_out(pool: list[Message], index: int) -> bool:
    """Never shown: an orphan result, or a call message left with nothing to show."""
    return is_orphan(pool, index) or view(pool, index) is None


def counter_of(case: dict[str, Any]) -> tokens.TokenCounter:
    return case["counter"] or STORAGE


SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_1_fits_and_counts_exactly(case: dict[str, Any], ctx: Context) -> None:
    assert ctx.tokens <= case["budget"] - case["reserve"]
    assert ctx.tokens == tokens.count_messages(counter_of(case), ctx.messages)


def check_2_order_and_contiguous_suffix(case: dict[str, Any], ctx: Context) -> None:
    ids = ctx.message_ids
    assert ids == sorted(set(ids))
    pool = candidates(case)
    by_id = {m.id: m for m in pool}
    assert all(i in by_id for i in ids)
    # Non-stored messages (system prompt and sections) come first.
    stored = ctx.messages[len(ctx.messages) - len(ids) :]
    assert all(m["role"] == "system" for m in ctx.messages[: len(ctx.messages) - len(ids)])
    index = {m.id: k for k, m in enumerate(pool)}
    for out, mid in zip(stored, ids, strict=True):
        original = view(pool, index[mid])
        assert original is not None
        if mid not in ctx.truncated_ids:
            assert out == original
        else:
            assert {k: v for k, v in out.items() if k != "content"} == {
                k: v for k, v in original.items() if k != "content"
            }
    if not ids or ctx.degraded == "turn over budget":
        return
    start = next(i for i, m in enumerate(pool) if m.id == ids[0])
    expected = [m.id for k, m in enumerate(pool) if k >= start and not left_out(pool, k)]
    assert ids == expected


def check_3_and_9_tool_groups_never_split_prompt_valid(case: dict[str, Any], ctx: Context) -> None:
    assert tool_sequence_error(ctx.messages) is None
    pool = candidates(case)
    shown = ctx.messages
    for k, m in enumerate(shown):
        if m["role"] != "tool":
            continue
        j = k - 1
        while shown[j]["role"] == "tool":
            j -= 1
        parent = shown[j]
        assert parent["role"] == "assistant"
        assert m["tool_call_id"] in {c["id"] for c in parent["tool_calls"]}
    # Every answer to an included call is included (unless the turn itself was cut).
    if ctx.degraded == "turn over budget":
        return
    included = set(ctx.message_ids)
    for k, m in enumerate(pool):
        if m.role == "tool" and not is_orphan(pool, k):
            j = k - 1
            while pool[j].role == "tool":
                j -= 1
            assert (m.id in included) == (pool[j].id in included)
    for m in pool:  # a call is shown only with its answered calls
        if m.id in included and m.tool_calls:
            got = {c["id"] for c in shown[-len(ctx.message_ids) + ctx.message_ids.index(m.id)]
                   .get("tool_calls", [])}  # fmt: skip
            results = {x.tool_call_id for j, x in enumerate(pool) if x.id in included
                       and x.role == "tool" and not is_orphan(pool, j)}  # fmt: skip
            assert got <= results


def check_4_newest_user_message_always_in(case: dict[str, Any], ctx: Context) -> None:
    pool = candidates(case)
    users = [m for m in pool if m.role == "user"]
    if not users:
        return
    newest = users[-1]
    assert newest.id in ctx.message_ids
    counter = counter_of(case)
    turn = [
        shown
        for k, m in enumerate(pool)
        if m.id >= newest.id and not left_out(pool, k) and (shown := view(pool, k))
    ]
    turn_full = tokens.count_messages(counter, turn)
    fixed = tokens.count_messages(counter, ctx.messages[: len(ctx.messages) - len(ctx.message_ids)])
    limit = case["budget"] - case["reserve"]
    shown = ctx.messages[
        len(ctx.messages) - len(ctx.message_ids) + ctx.message_ids.index(newest.id)
    ]
    if newest.id in ctx.truncated_ids:
        assert shown["content"] != newest.content
        # It was cut only because the turn could not fit next to what is kept.
        assert turn_full + fixed - tokens.REPLY_PRIMING > limit
    else:
        assert shown["content"] == newest.content
    # If everything mandatory fits whole, nothing is cut or dropped.
    wanted = [s for s in case["sections"] if s.text.strip()]
    mandatory = [{"role": "system", "content": case["system"]}] if case["system"] else []
    mandatory += [{"role": "system", "content": s.render()} for s in wanted]
    if tokens.count_messages(counter, mandatory + turn) <= limit:
        assert ctx.truncated_ids == []
        assert ctx.degraded is None
        assert ctx.sections == [s.title for s in wanted]


def check_8_deterministic(case: dict[str, Any], ctx: Context) -> None:
    again = run(case)
    assert json.dumps(again.messages) == json.dumps(ctx.messages)
    assert again.to_dict() == ctx.to_dict()


# One generated case is checked against every invariant: generating (and
# counting) histories is the expensive part.
@SETTINGS
@given(cases())
def test_invariants(case: dict[str, Any]) -> None:
    ctx = run(case)
    check_1_fits_and_counts_exactly(case, ctx)
    check_2_order_and_contiguous_suffix(case, ctx)
    check_3_and_9_tool_groups_never_split_prompt_valid(case, ctx)
    check_4_newest_user_message_always_in(case, ctx)
    check_8_deterministic(case, ctx)
