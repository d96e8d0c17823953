from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.compaction import PlanState, Row, plan_compaction, should_compact
from engram.compaction.planner import (
    HEADROOM,
    count_exchanges,
    group_starts,
    trigger_reasons,
)
from engram.policy import Policy, get_policy
from engram.tokens import count_message, storage_counter

COUNTER = storage_counter()
SYSTEM = "You are a helpful assistant."


def seed001_rows(pairs: int = 15, start_id: int = 1) -> list[Row]:
    rows = []
    next_id = start_id
    for i in range(pairs):
        for role, label in (("user", "Message"), ("assistant", "Response")):
            text = f"{label} {i}: " + "word " * 200
            rows.append(Row(next_id, role, count_message(COUNTER, role, text)))
            next_id += 1
    return rows


def fixed() -> PlanState:
    return PlanState(fixed_tokens=count_message(COUNTER, "system", SYSTEM))


class TestSeed001:
    policy = get_policy("summary_buffer")

    def test_long_conversation_should_summarize(self):
        assert should_compact(self.policy, seed001_rows(), fixed())

    def test_two_tiny_messages_do_not(self):
        rows = [
            Row(1, "user", count_message(COUNTER, "user", "Hello")),
            Row(2, "assistant", count_message(COUNTER, "assistant", "Hi!")),
        ]
        assert not should_compact(self.policy, rows, fixed())
        assert plan_compaction(self.policy, rows, fixed()) is None

    def test_keep_window_up_to_2500_tokens_leaving_headroom(self):
        rows = seed001_rows()
        plan = plan_compaction(self.policy, rows, fixed())
        assert plan is not None
        assert plan.reason == "tokens"
        assert plan.first_cycle and plan.next_version == 1
        # seed 001 keeps ~2,500 tokens; Engram also leaves 30% of the 3,000 threshold free
        # after the fixed parts, so the next turns do not trigger again at once
        limit = min(2500, 3000 - fixed().fixed_tokens - int(3000 * HEADROOM))
        assert 1500 <= plan.keep_tokens <= limit
        assert plan.keep_tokens + rows[0].tokens > limit  # no room for one more message
        kept = [r for r in rows if r.id >= plan.keep_from_id]
        assert sum(r.tokens for r in kept) == plan.keep_tokens
        # everything before the window is folded, in order
        assert plan.fold_ids == tuple(r.id for r in rows if r.id < plan.keep_from_id)
        assert plan.new_watermark == plan.keep_from_id - 1

    def test_second_cycle_folds_only_new_since_watermark(self):
        rows = seed001_rows()
        first = plan_compaction(self.policy, rows, fixed())
        assert first is not None
        summary_tokens = 250
        state = PlanState(
            watermark=first.new_watermark,
            summary_version=1,
            summary_tokens=summary_tokens,
            fixed_tokens=fixed().fixed_tokens,
        )
        # right after the fold: nothing to do
        assert plan_compaction(self.policy, rows, state) is None
        more = rows + seed001_rows(3, start_id=rows[-1].id + 1)
        second = plan_compaction(self.policy, more, state)
        assert second is not None
        assert not second.first_cycle and second.next_version == 2
        assert min(second.fold_ids) == first.new_watermark + 1
        assert all(i > first.new_watermark for i in second.fold_ids)


class TestSeed002:
    policy = get_policy("agent_state")

    def test_52_entries_keep_30(self):
        rows = [Row(i, "user" if i % 2 else "assistant", 5) for i in range(1, 53)]
        plan = plan_compaction(self.policy, rows)
        assert plan is not None
        assert plan.reason == "messages"
        assert plan.fold_ids == tuple(range(1, 23))  # the oldest len - 30 = 22
        assert plan.keep_from_id == 23

    def test_50_entries_is_not_over(self):
        rows = [Row(i, "user", 5) for i in range(1, 51)]
        assert plan_compaction(self.policy, rows) is None

    def test_over_100k_tokens_folds_oldest_half(self):
        rows = [Row(i, "user" if i % 2 else "assistant", 2600) for i in range(1, 41)]
        plan = plan_compaction(self.policy, rows)
        assert plan is not None
        assert plan.reason == "fold_half"
        assert plan.fold_ids == tuple(range(1, 21))

    def test_both_rules_apply_in_order(self):
        rows = [Row(i, "user" if i % 2 else "assistant", 4000) for i in range(1, 61)]
        plan = plan_compaction(self.policy, rows)
        assert plan is not None
        assert plan.reason == "messages+fold_half"
        # keep 30 (120K tokens, still > 100K) then fold the oldest half of those: keep 15
        assert plan.keep_from_id == 46


class TestExchanges:
    def test_eleven_exchanges_keep_ten(self):
        rows = []
        for i in range(11):
            rows += [
                Row(3 * i + 1, "user", 10),
                Row(3 * i + 2, "assistant", 10, True),
                Row(3 * i + 3, "tool", 10, tool_call_id=f"c{i}"),
            ]
        assert count_exchanges(rows) == 11
        plan = plan_compaction(get_policy("exchanges"), rows)
        assert plan is not None
        assert plan.reason == "exchanges"
        assert plan.fold_ids == (1, 2, 3)

    def test_ten_exchanges_nothing(self):
        rows = [Row(i, "user" if i % 2 else "assistant", 10) for i in range(1, 21)]
        assert trigger_reasons(get_policy("exchanges"), rows) == []


class TestToolGroups:
    def test_window_start_moves_past_tool_results(self):
        policy = Policy(name="t", max_history_messages=4, keep_messages=3)
        rows = [
            Row(1, "user", 1),
            Row(2, "assistant", 1, True),
            Row(3, "tool", 1, False, "a"),
            Row(4, "tool", 1, False, "b"),
            Row(5, "assistant", 1),
            Row(6, "user", 1),
        ]
        plan = plan_compaction(policy, rows)
        assert plan is not None
        # keep 3 would start at id 4 (a tool result): the window shrinks to start at 5
        assert plan.keep_from_id == 5

    def test_lean_policy_never_compacts(self):
        rows = [Row(i, "user", 5000) for i in range(1, 200)]
        assert plan_compaction(get_policy("lean"), rows) is None


def _row_lists() -> st.SearchStrategy[list[Row]]:
    kinds = st.sampled_from(["user", "assistant", "call", "tool"])
    return st.lists(st.tuples(kinds, st.integers(1, 400)), min_size=1, max_size=60).map(
        lambda items: [
            Row(
                i + 1,
                "assistant" if k == "call" else k,
                t,
                k == "call",
                f"c{i}" if k == "tool" else None,
            )
            for i, (k, t) in enumerate(items)
        ]
    )


POLICIES = [
    get_policy("summary_buffer"),
    get_policy("agent_state").replace(
        max_history_messages=8, keep_messages=4, fold_over_tokens=3000
    ),
    get_policy("exchanges").replace(max_exchanges=3),
    Policy(name="small", summarize_over_tokens=800, keep_tokens=300),
]


@settings(deadline=None, max_examples=200)
@given(_row_lists(), st.sampled_from(POLICIES), st.integers(0, 500))
def test_plans_never_split_tool_groups_and_fold_a_prefix(rows, policy, fixed_tokens):
    plan = plan_compaction(policy, rows, PlanState(fixed_tokens=fixed_tokens))
    if plan is None:
        return
    ids = [r.id for r in rows]
    cut = ids.index(plan.keep_from_id) if plan.keep_from_id is not None else len(ids)
    assert plan.fold_ids == tuple(ids[:cut])  # a contiguous prefix
    assert cut in group_starts(rows)  # never inside a tool group
    assert rows[cut].role != "tool"
    assert plan.keep_from_id is not None  # the newest group is always kept
    assert plan.new_watermark == ids[cut - 1]
    if policy.keep_tokens is not None and plan.keep_tokens > policy.keep_tokens:
        # only when the newest group alone is larger than the window
        assert cut == group_starts(rows)[-1]


@settings(deadline=None, max_examples=100)
@given(_row_lists(), st.sampled_from(POLICIES))
def test_replanning_after_commit_is_idempotent(rows, policy):
    plan = plan_compaction(policy, rows)
    if plan is None:
        return
    state = PlanState(watermark=plan.new_watermark, summary_version=1)
    again = plan_compaction(policy, rows, state)
    if again is not None:  # a second cycle folds only rows after the first watermark
        assert min(again.fold_ids) > plan.new_watermark


class TestHeadroom:
    def test_fixed_parts_shrink_the_keep_window_so_the_next_turn_does_not_compact(self):
        policy = get_policy("summary_buffer")
        rows = [Row(id=i, role="user" if i % 2 else "assistant", tokens=150) for i in range(1, 41)]
        state = PlanState(fixed_tokens=900, summary_tokens=400)
        plan = plan_compaction(policy, rows, state)
        assert plan is not None
        after = PlanState(
            watermark=plan.new_watermark,
            summary_version=1,
            summary_tokens=400,
            fixed_tokens=900,
        )
        # five more 150-token messages fit before the threshold fires again (seed 001 scenario 3)
        more = [Row(id=100 + i, role="user", tokens=150) for i in range(5)]
        kept = [r for r in rows if r.id > plan.new_watermark]
        assert plan_compaction(policy, kept + more, after) is None
