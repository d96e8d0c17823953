from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from engram import tokens
from engram.context import (
    FIRST_CHUNK,
    MIN_BUDGET,
    Context,
    HistoryTotals,
    Section,
    build_context,
)
from engram.errors import ConfigError, StoreError
from engram.models import Message
from engram.policy import PRESETS, Policy
from engram.testing import tool_sequence_error

from .support import STORAGE
from .support import stored as msg


class History:
    """A list-backed HistoryReader that records what it was asked for."""

    def __init__(self, messages: Iterable[Message]):
        self.messages = list(messages)
        self.calls: list[tuple[int, int | None]] = []
        self.rows = 0

    def __call__(self, limit: int, before_id: int | None) -> list[Message]:
        self.calls.append((limit, before_id))
        rows = [m for m in self.messages if before_id is None or m.id < before_id]
        out = rows[-limit:] if limit > 0 else []
        self.rows += len(out)
        return out


def chat(n: int, *, words: int = 10, start: int = 1) -> list[Message]:
    """Alternating user/assistant messages, user first; the last one is a user message
    when n is odd."""
    return [
        msg(start + i, "user" if i % 2 == 0 else "assistant", f"turn {i} " + "word " * words)
        for i in range(n)
    ]


def tool_group(start: int, calls: int, *, result_words: int = 5) -> list[Message]:
    ids = [f"call_{start}_{k}" for k in range(calls)]
    assistant = msg(
        start,
        "assistant",
        "",
        tool_calls=[
            {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for cid in ids
        ],
    )
    results = [
        msg(start + 1 + k, "tool", "result " * result_words, tool_call_id=cid)
        for k, cid in enumerate(ids)
    ]
    return [assistant, *results]


def exact(ctx: Context, counter: tokens.TokenCounter | None = None) -> int:
    return tokens.count_messages(counter or STORAGE, ctx.messages)


class TestBasics:
    def test_empty_history_gives_system_only(self) -> None:
        ctx = build_context(History([]), budget=100, system="Be brief.")
        assert ctx.messages == [{"role": "system", "content": "Be brief."}]
        assert ctx.message_ids == []
        assert ctx.omitted == []
        assert ctx.tokens == exact(ctx)

    def test_everything_fits(self) -> None:
        history = chat(9)
        ctx = build_context(History(history), budget=10_000, system="sys")
        assert ctx.message_ids == [m.id for m in history]
        assert ctx.messages[1:] == [m.to_openai() for m in history]
        assert (
            ctx.tokens
            == exact(ctx)
            == tokens.REPLY_PRIMING
            + sum(m.tokens for m in history)
            + tokens.count_message(STORAGE, "system", "sys")
        )
        assert ctx.omitted == []
        assert ctx.counter == "o200k_base"
        assert ctx.exact is True
        assert ctx.policy == "default"

    def test_budget_cuts_the_oldest_and_reports_it(self) -> None:
        history = chat(41, words=50)
        ctx = build_context(History(history), budget=1_000, reserve=200)
        assert ctx.tokens <= 800
        assert ctx.tokens == exact(ctx)
        assert ctx.message_ids == [m.id for m in history[-len(ctx.message_ids) :]]
        assert ctx.omitted[0].reason == "over budget"
        assert ctx.omitted[0].before_id == ctx.message_ids[0]
        # The next older message would not have fitted.
        older = history[-len(ctx.message_ids) - 1]
        assert ctx.tokens + older.tokens > 800

    def test_to_dict_is_json(self) -> None:
        ctx = build_context(History(chat(30, words=40)), budget=500)
        data = json.loads(json.dumps(ctx.to_dict()))
        assert data["tokens"] == ctx.tokens
        assert data["omitted"][0]["reason"] == "over budget"
        assert data["message_ids"] == ctx.message_ids

    def test_deterministic(self) -> None:
        history = chat(25, words=30) + tool_group(100, 2)
        history.append(msg(200, "user", "and now?"))
        args: dict[str, Any] = {
            "budget": 700,
            "system": "sys",
            "sections": [Section("CONVERSATION SUMMARY", "x " * 20)],
        }
        one = build_context(History(history), **args)
        two = build_context(History(history), **args)
        assert json.dumps(one.messages) == json.dumps(two.messages)
        assert one == two


class TestBudgetErrors:
    @pytest.mark.parametrize(
        ("budget", "reserve"), [(MIN_BUDGET - 1, 0), (100, 90), (-5, 0), (100, -1)]
    )
    def test_too_small_or_negative(self, budget: int, reserve: int) -> None:
        with pytest.raises(ConfigError, match=r"budget|reserve"):
            build_context(History(chat(3)), budget=budget, reserve=reserve)

    def test_not_an_integer(self) -> None:
        with pytest.raises(ConfigError, match="budget"):
            build_context(History(chat(3)), budget=True)
        with pytest.raises(ConfigError, match="reserve"):
            build_context(History(chat(3)), budget=100, reserve=1.5)  # type: ignore[arg-type]

    def test_smallest_budget_still_holds_the_user_message(self) -> None:
        history = chat(3, words=400)
        ctx = build_context(History(history), budget=MIN_BUDGET, system="s " * 100)
        assert ctx.tokens <= MIN_BUDGET
        assert ctx.tokens == exact(ctx)
        assert ctx.message_ids == [history[-1].id]
        assert ctx.messages[-1]["role"] == "user"


class TestPresets:
    def test_lean_is_the_last_12_messages(self) -> None:
        history = chat(101)
        reader = History(history)
        ctx = build_context(reader, budget=25_000, policy="lean")
        assert ctx.message_ids == [m.id for m in history[-12:]]
        assert ctx.omitted[0].reason == "older than window"
        assert ctx.omitted[0].before_id == history[-12].id
        assert ctx.policy == "lean"
        assert reader.rows <= 13  # one small read: the window plus one to see what is older

    def test_lean_never_splits_a_tool_group_at_the_edge(self) -> None:
        # 9 chat messages, then a 4-message tool group straddling the 12-message edge.
        history = chat(3) + tool_group(10, 3) + chat(9, start=20)
        ctx = build_context(History(history), budget=25_000, policy="lean")
        assert ctx.message_ids == [m.id for m in history[-9:]]
        assert not any(m["role"] == "tool" for m in ctx.messages)

    def test_lean_caps_messages_at_20k_tokens(self) -> None:
        history = chat(12, words=3_000)  # ~3K tokens each
        ctx = build_context(History(history), budget=200_000, policy="lean")
        window = sum(m.tokens for m in history if m.id in ctx.message_ids)
        assert window <= 20_000
        assert len(ctx.message_ids) < 12
        assert ctx.omitted[0].reason == "older than window"

    def test_full_recall_loads_everything_up_to_55k(self) -> None:
        history = chat(61, words=1_000)
        ctx = build_context(History(history), budget=200_000, policy="full_recall")
        window = sum(m.tokens for m in history if m.id in ctx.message_ids)
        assert window <= 55_000
        next_older = history[-len(ctx.message_ids) - 1]
        assert window + next_older.tokens > 55_000
        assert ctx.message_ids == [m.id for m in history[-len(ctx.message_ids) :]]

    def test_full_recall_small_history_is_all_of_it(self) -> None:
        history = chat(31, words=100)
        ctx = build_context(History(history), budget=60_000, policy="full_recall")
        assert ctx.message_ids == [m.id for m in history]
        assert ctx.omitted == []

    def test_summary_buffer_window_at_most_3000(self) -> None:
        history = chat(51, words=150)
        ctx = build_context(History(history), budget=8_000, policy="summary_buffer")
        window = sum(m.tokens for m in history if m.id in ctx.message_ids)
        assert 2_500 < window <= 3_000

    def test_exchanges_keeps_10_exchanges(self) -> None:
        history = chat(61)
        ctx = build_context(History(history), budget=16_000, policy="exchanges")
        roles = [m["role"] for m in ctx.messages]
        assert roles.count("user") == 10
        assert roles[0] == "user"  # starts at an exchange boundary
        assert ctx.message_ids == [m.id for m in history[-19:]]

    def test_agent_state_window_is_50_entries(self) -> None:
        history = chat(201)
        ctx = build_context(History(history), budget=110_000, policy="agent_state")
        assert len(ctx.message_ids) == 50

    def test_policy_as_dict_and_object(self) -> None:
        history = chat(21)
        one = build_context(
            History(history), budget=5_000, policy={"name": "lean", "max_messages": 5}
        )
        two = build_context(History(history), budget=5_000, policy=Policy(name="x", max_messages=5))
        assert one.message_ids == two.message_ids == [m.id for m in history[-5:]]

    def test_turn_longer_than_the_window_is_kept_whole(self) -> None:
        # An agent loop: one user message followed by 5 tool rounds (15 messages).
        history = chat(5)
        history.append(msg(10, "user", "run the tools"))
        for k in range(5):
            history += tool_group(20 + 10 * k, 2)
        ctx = build_context(History(history), budget=25_000, policy="lean")
        assert ctx.message_ids == [m.id for m in history[5:]]
        assert len(ctx.message_ids) > PRESETS["lean"].max_messages  # type: ignore[operator]


class TestFloor:
    def test_messages_at_or_below_floor_are_not_candidates(self) -> None:
        history = chat(21)
        ctx = build_context(History(history), budget=50_000, floor_id=history[9].id)
        assert ctx.message_ids == [m.id for m in history[10:]]
        assert ctx.omitted == []

    def test_floor_above_everything(self) -> None:
        history = chat(5)
        ctx = build_context(History(history), budget=1_000, system="s", floor_id=10_000)
        assert ctx.message_ids == []
        assert ctx.messages == [{"role": "system", "content": "s"}]

    def test_tool_result_whose_call_is_folded_is_an_orphan(self) -> None:
        group = tool_group(10, 1)
        history = [*chat(3), *group, msg(20, "user", "next")]
        ctx = build_context(History(history), budget=5_000, floor_id=group[0].id)
        assert ctx.message_ids == [20]
        assert ctx.omitted[0].reason == "orphan tool result"
        assert ctx.omitted[0].message_ids == (group[1].id,)


class TestSections:
    def test_order_system_sections_messages(self) -> None:
        history = chat(5)
        sections = [
            Section("IMPORTANT DATA FROM PREVIOUS CONVERSATIONS", '{"user_preferences": {}}'),
            Section("CONVERSATION SUMMARY", "They met."),
            Section("EMPTY", "  "),
        ]
        ctx = build_context(History(history), budget=5_000, system="sys", sections=sections)
        assert ctx.messages[0] == {"role": "system", "content": "sys"}
        assert ctx.messages[1]["content"].startswith(
            "[IMPORTANT DATA FROM PREVIOUS CONVERSATIONS]\n"
        )
        assert ctx.messages[2] == {"role": "system", "content": "[CONVERSATION SUMMARY]\nThey met."}
        assert ctx.messages[3:] == [m.to_openai() for m in history]
        assert ctx.sections == [
            "IMPORTANT DATA FROM PREVIOUS CONVERSATIONS",
            "CONVERSATION SUMMARY",
        ]
        assert ctx.tokens == exact(ctx)

    def test_sections_are_dropped_last_first_for_a_big_user_message(self) -> None:
        history = [*chat(4), msg(10, "user", "paste " * 3_000)]
        sections = [Section("FIRST", "a " * 200), Section("SECOND", "b " * 200)]
        ctx = build_context(History(history), budget=400, system="sys", sections=sections)
        assert ctx.sections == ["FIRST"]
        dropped = [o for o in ctx.omitted if o.reason == "section dropped"]
        assert [o.detail for o in dropped] == ["SECOND"]
        assert ctx.truncated_ids == [10]
        assert ctx.tokens <= 400
        assert ctx.tokens == exact(ctx)
        assert any("SECOND" in note for note in ctx.notes)

    def test_sections_kept_and_user_truncated_when_a_view_fits(self) -> None:
        history = [msg(10, "user", "paste " * 3_000)]
        sections = [Section("SUMMARY", "s " * 50)]
        ctx = build_context(History(history), budget=600, system="sys", sections=sections)
        assert ctx.sections == ["SUMMARY"]
        assert ctx.truncated_ids == [10]
        assert ctx.degraded is None

    def test_system_truncated_as_last_resort(self) -> None:
        history = [msg(10, "user", "paste " * 3_000)]
        system = "Rule one. " * 500
        ctx = build_context(
            History(history), budget=200, system=system, sections=[Section("S", "x " * 100)]
        )
        assert ctx.sections == []
        assert ctx.messages[0]["role"] == "system"
        assert "system prompt truncated by Engram" in ctx.messages[0]["content"]
        assert ctx.messages[0]["content"].startswith("Rule one.")
        assert ctx.degraded == "system prompt truncated"
        assert ctx.message_ids == [10]
        assert ctx.tokens <= 200
        assert ctx.tokens == exact(ctx)

    def test_huge_system_with_no_history_is_truncated(self) -> None:
        ctx = build_context(History([]), budget=100, system="Rule. " * 1_000)
        assert ctx.tokens <= 100
        assert ctx.tokens == exact(ctx)
        assert ctx.degraded == "system prompt truncated"


class TestTruncatedView:
    def test_head_tail_and_marker_and_store_untouched(self) -> None:
        text = "BEGIN " + "middle " * 5_000 + "END"
        big = msg(77, "user", text)
        history = [*chat(4), big]
        reader = History(history)
        ctx = build_context(reader, budget=500)
        view = ctx.messages[-1]["content"]
        assert ctx.truncated_ids == [77]
        assert ctx.message_ids[-1] == 77
        assert view.startswith("BEGIN middle")
        assert view.endswith("middle END")
        assert "truncated by Engram" in view
        assert "full message id=77 is stored" in view
        assert f"of {tokens.storage_counter().count_text(text)} tokens shown" in view
        assert big.content == text  # the stored message is unchanged
        assert reader.messages[-1] is big
        assert ctx.tokens <= 500
        assert ctx.tokens > 400  # the view uses the room it has
        assert ctx.tokens == exact(ctx)

    def test_not_truncated_when_it_fits(self) -> None:
        history = [msg(1, "user", "hello " * 100)]
        ctx = build_context(History(history), budget=history[0].tokens + tokens.REPLY_PRIMING)
        assert ctx.truncated_ids == []
        assert ctx.messages == [history[0].to_openai()]

    def test_one_token_short_is_truncated(self) -> None:
        history = [msg(1, "user", "hello " * 100)]
        ctx = build_context(History(history), budget=history[0].tokens + tokens.REPLY_PRIMING - 1)
        assert ctx.truncated_ids == [1]
        assert ctx.tokens == exact(ctx) <= history[0].tokens + tokens.REPLY_PRIMING - 1

    def test_agent_turn_keeps_tool_group_and_cuts_results(self) -> None:
        history = [*chat(6), msg(10, "user", "fetch it")]
        history += tool_group(20, 2, result_words=2_000)
        ctx = build_context(History(history), budget=800)
        assert ctx.message_ids == [10, 20, 21, 22]
        assert ctx.truncated_ids == [21, 22]
        assert ctx.tokens <= 800
        assert ctx.tokens == exact(ctx)
        assert ctx.degraded is None

    def test_turn_that_cannot_fit_keeps_user_and_newest(self) -> None:
        history = [msg(10, "user", "go")]
        for k in range(30):
            history += tool_group(100 + 10 * k, 1, result_words=200)
        ctx = build_context(History(history), budget=300)
        assert ctx.degraded == "turn over budget"
        assert ctx.message_ids[0] == 10
        assert ctx.message_ids[-1] == history[-1].id
        assert ctx.tokens <= 300
        assert ctx.tokens == exact(ctx)
        dropped = next(o for o in ctx.omitted if o.reason == "turn over budget")
        assert dropped.message_ids
        assert set(dropped.message_ids).isdisjoint(ctx.message_ids)


class TestToolGroups:
    def test_group_is_atomic_at_the_budget_edge(self) -> None:
        group = tool_group(10, 3, result_words=200)
        history = [*chat(3), *group, msg(20, "user", "thanks")]
        budget = tokens.REPLY_PRIMING + history[-1].tokens + sum(m.tokens for m in group) - 1
        ctx = build_context(History(history), budget=budget)
        assert ctx.message_ids == [20]
        budget += 1
        ctx = build_context(History(history), budget=budget)
        assert ctx.message_ids == [m.id for m in group] + [20]
        assert ctx.exact is False  # tool calls are counted as estimates

    def test_orphans_are_dropped_and_reported(self) -> None:
        history = [
            msg(1, "user", "hi"),
            msg(2, "tool", "stray", tool_call_id="nobody"),
            *tool_group(3, 1),
            msg(5, "tool", "late", tool_call_id="call_3_0_other"),
            msg(6, "user", "ok"),
        ]
        ctx = build_context(History(history), budget=5_000)
        assert ctx.message_ids == [1, 3, 4, 6]
        orphans = next(o for o in ctx.omitted if o.reason == "orphan tool result")
        assert orphans.message_ids == (2, 5)

    def test_results_after_another_message_are_orphans(self) -> None:
        # OpenAI wants tool results right after their call: the result is an orphan, and
        # the call it no longer answers is left out (the call message has no text: it goes).
        group = tool_group(3, 1)
        history = [msg(1, "user", "hi"), group[0], msg(9, "user", "x"), group[1]]
        ctx = build_context(History(history), budget=5_000)
        assert ctx.message_ids == [1, 9]
        assert tool_sequence_error(ctx.messages) is None

    def test_an_unanswered_call_is_left_out_and_the_text_kept(self) -> None:
        group = tool_group(3, 2)
        said = msg(3, "assistant", "Let me look.", tool_calls=group[0].tool_calls)
        history = [msg(1, "user", "hi"), said, group[1], msg(9, "user", "never mind")]
        ctx = build_context(History(history), budget=5_000)
        assert ctx.message_ids == [1, 3, 4, 9]
        shown = ctx.messages[1]
        assert shown["content"] == "Let me look."
        assert [c["id"] for c in shown["tool_calls"]] == ["call_3_0"]
        assert tool_sequence_error(ctx.messages) is None
        assert ctx.tokens == exact(ctx)
        left_out = next(o for o in ctx.omitted if o.reason == "unanswered tool call")
        assert left_out.message_ids == (3,)
        assert history[1].tool_calls is not None and len(history[1].tool_calls) == 2  # unchanged

    def test_a_pending_call_at_the_end_and_a_second_result_are_left_out(self) -> None:
        group = tool_group(3, 1)
        again = msg(5, "tool", "again", tool_call_id="call_3_0")
        pending = tool_group(6, 1)[0]
        history = [msg(1, "user", "hi"), *group, again, msg(7, "user", "go"), pending]
        ctx = build_context(History(history), budget=5_000)
        assert ctx.message_ids == [1, 3, 4, 7]
        assert tool_sequence_error(ctx.messages) is None


class TestCounting:
    def test_cl100k_recounts(self) -> None:
        counter = tokens.counter_for_model("gpt-4")
        history = chat(21, words=30)
        history.append(msg(100, "user", "Ünïcödé ✓ 中文 " * 40))
        ctx = build_context(History(history), budget=900, counter=counter, system="sys")
        assert ctx.counter == "cl100k_base"
        assert ctx.tokens == exact(ctx, counter) <= 900
        assert ctx.tokens != exact(ctx, STORAGE)

    def test_recount_is_cached(self) -> None:
        class Counting:
            name = "words"
            exact = False

            def __init__(self) -> None:
                self.calls = 0

            def count_text(self, text: str) -> int:
                self.calls += 1
                return len(text.split())

        counter = Counting()
        history = chat(21, words=30)
        first = build_context(History(history), budget=400, counter=counter, system="sys")
        calls = counter.calls
        second = build_context(History(history), budget=400, counter=counter, system="sys")
        assert second == first
        assert counter.calls == calls  # nothing counted again
        assert first.tokens == exact(first, counter)

    def test_approximate_scales_stored_counts(self) -> None:
        counter = tokens.ApproximateCounter(margin=0.15)
        history = chat(21, words=30)
        history.append(msg(50, "user", "named", name="alice"))
        ctx = build_context(History(history), budget=600, counter=counter, system="sys")
        assert ctx.tokens == exact(ctx, counter) <= 600
        assert ctx.tokens > exact(ctx, STORAGE)
        assert ctx.exact is False
        assert ctx.counter.startswith("approx(")

    def test_approximate_truncation(self) -> None:
        counter = tokens.ApproximateCounter(margin=0.5)
        history = [msg(1, "user", "data " * 4_000)]
        ctx = build_context(History(history), budget=300, counter=counter)
        assert ctx.truncated_ids == [1]
        assert ctx.tokens == exact(ctx, counter) <= 300


class TestReading:
    def test_reads_grow_with_the_window_not_the_history(self) -> None:
        history = chat(10_001, words=20)
        reader = History(history)
        ctx = build_context(reader, budget=2_000)
        assert len(ctx.message_ids) > 10
        # The first chunk, then about what the remaining budget can hold.
        assert reader.rows < 2 * len(ctx.message_ids) + 32
        assert all(limit <= 512 for limit, _ in reader.calls)

    def test_large_window_reads_in_growing_chunks(self) -> None:
        history = chat(3_001, words=3)
        reader = History(history)
        ctx = build_context(reader, budget=100_000)
        assert ctx.message_ids == [m.id for m in history]
        limits = [limit for limit, _ in reader.calls]
        assert limits[0] == FIRST_CHUNK
        assert max(limits) == 512  # the estimate is large, reads are capped
        assert len(limits) <= 8

    def test_stored_totals_size_the_first_read(self) -> None:
        """With the session's totals, one read sized from its average message takes the window."""
        history = chat(2_001, words=20)
        totals = HistoryTotals(len(history), sum(m.tokens for m in history))
        reader = History(history)
        policy = Policy(name="cached", cache_window=True)
        ctx = build_context(reader, budget=8_000, policy=policy, totals=totals)
        assert len(reader.calls) == 1
        assert len(ctx.message_ids) <= reader.rows <= len(ctx.message_ids) * 1.5 + 8
        without = History(history)
        assert build_context(without, budget=8_000, policy=policy) == build_context(
            History(history), budget=8_000, policy=policy
        )
        assert len(without.calls) > 1  # without totals: a first chunk, then more

    def test_reader_ignoring_before_id_is_an_error(self) -> None:
        history = chat(100)

        def broken(limit: int, before_id: int | None) -> list[Message]:
            return history[-limit:]

        with pytest.raises(StoreError, match="not older than"):
            build_context(broken, budget=100_000)

    def test_no_user_message_fills_newest_first(self) -> None:
        history = [msg(i, "assistant", f"log {i} " * 20) for i in range(1, 200)]
        ctx = build_context(History(history), budget=500)
        assert ctx.message_ids == [m.id for m in history[-len(ctx.message_ids) :]]
        assert ctx.message_ids
        assert any("no user message" in note for note in ctx.notes)


class TestViews:
    def test_view_replaces_content_and_is_counted(self) -> None:
        history = chat(5, words=400)
        answer = history[-2]
        ctx = build_context(History(history), budget=5_000, views={answer.id: "short answer"})
        shown = ctx.messages[ctx.message_ids.index(answer.id)]
        assert shown["content"] == "short answer"
        assert ctx.viewed_ids == [answer.id]
        assert ctx.tokens == exact(ctx)
        assert answer.content != "short answer"
