from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from engram.compaction import (
    CompactionState,
    LLMSummarizer,
    OfflineSummarizer,
    PlanState,
    Row,
    fold,
    parse_state,
    plan_compaction,
)
from engram.compaction.fold import FoldResult
from engram.compaction.summarizer import Summarizer, SummaryOutput
from engram.compaction.words import count_words
from engram.errors import ConfigError
from engram.llm import LLMClient
from engram.policy import get_policy
from engram.testing import FakeLLMServer

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def conversation(n: int, start: int = 1) -> list[dict[str, object]]:
    out = []
    for i in range(start, start + n):
        role = "user" if i % 2 else "assistant"
        text = (
            f"I prefer dark mode. Message {i} about the launch of https://example.com/p{i}. "
            if role == "user"
            else f"Reply {i}: the launch plan is on track. "
        )
        out.append({"id": i, "role": role, "content": text * 20})
    return out


def fold_forty(summarizer: Summarizer) -> FoldResult:
    """One ``summary_buffer`` fold of a 40-message conversation (300 tokens each)."""
    messages = conversation(40)
    rows = [Row(m["id"], m["role"], 300) for m in messages]  # type: ignore[arg-type]
    plan = plan_compaction(get_policy("summary_buffer"), rows)
    assert plan is not None
    folded = [m for m in messages if m["id"] in plan.fold_ids]
    return fold(CompactionState(), plan, folded, summarizer, now=NOW)


class TestParseState:
    def test_roundtrip(self):
        state = CompactionState(
            summary="S.",
            summary_version=2,
            watermark=9,
            messages_summarized_count=9,
            summarizer="offline",
            last_summarized_at=NOW,
            compactions=2,
        )
        assert parse_state(state.to_dict()) == state

    def test_none_is_fresh_without_warning(self, caplog: pytest.LogCaptureFixture):
        assert parse_state(None) == CompactionState()
        assert not caplog.records

    @pytest.mark.parametrize(
        "bad",
        [
            "not a dict",
            ["a", "list"],
            {"summary": 42, "summary_version": 1, "watermark": 3},
            {"summary": "s", "summary_version": "two", "watermark": 3},
            {"summary": "s", "summary_version": 1, "watermark": -1},
            {"summary": "s", "summary_version": 1, "watermark": 0},
            {"summary": "s", "summary_version": 0, "watermark": 5},
            {"summary_version": 1, "watermark": 3, "important_data": ["x"]},
            {"summary_version": 1, "watermark": 3, "last_summarized_at": "yesterday"},
            {"summary_version": True, "watermark": 3},
        ],
    )
    def test_corruption_resets_with_warning(self, bad: object, caplog: pytest.LogCaptureFixture):
        with caplog.at_level(logging.WARNING, logger="engram.compaction.state"):
            state = parse_state(bad)
        assert state.summary_version == 0 and state.watermark == 0 and state.summary == ""
        assert state.reset_reason
        assert "corrupted" in caplog.text
        assert "reset_reason" not in state.to_dict()


class TestFold:
    def test_offline_cycle_then_second_cycle(self):
        policy = get_policy("summary_buffer")
        messages = conversation(30)
        rows = [Row(m["id"], m["role"], 300) for m in messages]  # type: ignore[arg-type]
        plan = plan_compaction(policy, rows, PlanState())
        assert plan is not None
        folded = [m for m in messages if m["id"] in plan.fold_ids]
        result = fold(CompactionState(), plan, folded, OfflineSummarizer(), now=NOW)
        state = result.state
        assert not result.degraded and result.usage == ()
        assert state.summary_version == 1 and state.watermark == plan.new_watermark
        assert 100 <= count_words(state.summary) <= 150
        assert state.summarizer == "offline"
        assert state.messages_summarized_count == len(plan.fold_ids)
        assert state.important_data["user_preferences"] == {"theme": "dark"}
        assert "https://example.com/p1" in state.important_data["source_urls"]
        assert state.last_summarized_at == NOW

        more = conversation(20, start=31)
        rows2 = [Row(m["id"], m["role"], 300) for m in messages + more]  # type: ignore[arg-type]
        plan2 = plan_compaction(policy, rows2, PlanState(state.watermark, 1, 200))
        assert plan2 is not None and plan2.next_version == 2
        folded2 = [m for m in messages + more if m["id"] in plan2.fold_ids]
        state2 = fold(state, plan2, folded2, OfflineSummarizer(), now=NOW).state
        assert 200 <= count_words(state2.summary) <= 250
        assert state2.messages_summarized_count == len(plan.fold_ids) + len(plan2.fold_ids)
        # old important data kept, new added (seed 001 scenario 4)
        urls = state2.important_data["source_urls"]
        assert "https://example.com/p1" in urls
        newest_user = max(int(m["id"]) for m in folded2 if m["role"] == "user")  # type: ignore[call-overload]
        assert f"https://example.com/p{newest_user}" in urls

    def test_messages_must_match_plan(self):
        rows = [Row(i, "user", 5) for i in range(1, 53)]
        plan = plan_compaction(get_policy("agent_state"), rows)
        assert plan is not None
        with pytest.raises(ConfigError):
            fold(
                CompactionState(),
                plan,
                [{"id": 99, "role": "user", "content": "x"}],
                OfflineSummarizer(),
                now=NOW,
            )

    def test_llm_failure_degrades_to_offline(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.fail(500).fail(500).reply("not json").reply("")
        result = fold_forty(LLMSummarizer(client))
        assert result.degraded
        assert result.state.summarizer == "offline"
        assert result.state.llm_failures == 1
        assert result.state.last_error
        assert 100 <= count_words(result.state.summary) <= 150
        assert len(result.usage) == 1  # the invalid-JSON extraction was still paid for

    def test_llm_cycle_records_usage_and_name(self, fake_llm: FakeLLMServer, client: LLMClient):
        fake_llm.reply("The user planned a launch. " * 20)
        fake_llm.reply_json({"key_decisions": ["launch on Monday"]})
        result = fold_forty(LLMSummarizer(client))
        assert not result.degraded
        assert result.state.summarizer == "llm:gpt-4o-mini"
        assert result.state.important_data["key_decisions"] == ["launch on Monday"]
        assert [u.purpose for u in result.usage] == ["summary", "important_data"]
        assert all(u.cost_usd is not None for u in result.usage)

    def test_summary_compressed_by_policy_limits(self):
        class Wordy(OfflineSummarizer):
            def summarize(self, messages, *, previous_summary, version):  # type: ignore[no-untyped-def]
                return SummaryOutput("A long sentence about the launch. " * 150, "offline")

        rows = [Row(i, "user" if i % 2 else "assistant", 10) for i in range(1, 31)]
        plan = plan_compaction(get_policy("exchanges"), rows)
        assert plan is not None
        folded = [{"id": i, "role": "user", "content": "x"} for i in plan.fold_ids]
        result = fold(
            CompactionState(),
            plan,
            folded,
            Wordy(),
            now=NOW,
            summary_max_bytes=4096,
            summary_target_bytes=3072,
        )
        assert len(result.state.summary.encode()) <= 3072
        assert result.state.compressions == 1
        assert not result.degraded  # no model configured: truncation is the plan, not a failure
