"""The chat loop against a real SQLite engine and the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engram
from engram.chat import HISTORY_TOOLS_PROMPT, TurnResult, run_turn
from engram.chat.loop import MAX_ROUNDS, ToolCallRecord
from engram.errors import ConfigError, LLMError
from engram.llm import LLMClient
from engram.testing import FakeLLMServer, RecordedRequest
from engram.tokens import count_messages, count_tools, counter_for_model

MODEL = "gpt-4o-mini"
COUNTER = counter_for_model(MODEL)
OLD_DECISION = "Pricing decision: we settle on 59 dollars per seat, billed monthly."
BASE = datetime(2025, 3, 3, 15, 0, tzinfo=UTC)
TOPICS = ["launch date", "beta invites", "logo colours", "hiring plan", "office move"]


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """The shared ``mem``/``open_engram`` fixtures on SQLite only.

    Why: the loop is about the model and the budget, not storage."""
    return f"sqlite:///{tmp_path}/engram.db"


@pytest.fixture
def client(fake_llm: FakeLLMServer) -> Iterator[LLMClient]:
    """The shared LLM client, without backoff and with a shorter timeout."""
    with LLMClient(MODEL, base_url=fake_llm.base_url, backoff=0.0, timeout=10.0) as llm:
        yield llm


def fill(chat: engram.Session, filler: int = 20, *, size: int = 1) -> None:
    """An old pricing decision followed by ``filler`` messages about other things."""
    chat.add("user", OLD_DECISION, created_at=BASE)
    for i in range(filler):
        role = "user" if i % 2 == 0 else "assistant"
        topic = TOPICS[i % len(TOPICS)]
        text = f"Note {i} about the {topic}. " + "Nothing else to add here. " * size
        chat.add(role, text, created_at=BASE + timedelta(hours=i + 1))


@pytest.fixture
def chat(mem: engram.Engram) -> engram.Session:
    session = mem.session("chat-1", scope="phoenix", policy="lean")
    # 40 later messages: the decision is outside even the cache-aware lean window (12-23).
    fill(session, 40)
    return session


def tool_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "tool"]


def decoded(message: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(message["content"])
    return result


def everything(request: RecordedRequest) -> str:
    return json.dumps(request.messages)


class TestSeedFlow:
    """Seed 000: the user asks about the past, the model searches, then answers from the result."""

    def test_search_then_answer(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        before = len(chat.messages(limit=500))
        fake_llm.reply_tool_calls([{"name": "search_history", "arguments": {"query": "pricing"}}])
        fake_llm.reply("We decided on 59 dollars per seat.")
        result = run_turn(
            chat, client, "What did we decide about pricing last week?",
            budget=6000, model=MODEL, system="You are a project assistant.",
        )  # fmt: skip

        first, second = fake_llm.requests
        # The old decision is outside the lean window: the model had to ask for it.
        assert "59 dollars" not in everything(first)
        assert first.body is not None
        assert "search_history" in [t["function"]["name"] for t in first.body["tools"]]
        assert first.messages[0]["role"] == "system"
        assert first.messages[0]["content"].startswith("You are a project assistant.")
        assert HISTORY_TOOLS_PROMPT in first.messages[0]["content"]
        assert first.messages[-1] == {
            "role": "user",
            "content": "What did we decide about pricing last week?",
        }
        # The next request carries the tool call and its result, which has the decision.
        (tool,) = tool_messages(second)
        assert tool["tool_call_id"] == "call_1"
        found = decoded(tool)
        assert any("59 dollars" in hit["snippet"] for hit in found["results"])
        call = second.messages[-2]
        assert call["role"] == "assistant"
        assert call["tool_calls"][0]["function"]["name"] == "search_history"
        assert second.body is not None
        assert "tools" in second.body  # round 2 of 4 may still call tools

        assert result.answer == "We decided on 59 dollars per seat."
        assert result.rounds == 2
        assert result.tool_calls == [ToolCallRecord("search_history", '{"query": "pricing"}', True)]
        stored = chat.messages(limit=500)[before:]
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert stored[-1].content == "We decided on 59 dollars per seat."
        assert stored[1].tool_calls and stored[1].tool_calls[0]["id"] == "call_1"
        assert "59 dollars" in stored[2].content
        assert result.message_ids == [m.id for m in stored]
        assert result.degraded == []
        assert result.usage.calls == 2
        assert result.usage.input_tokens > 0
        assert len(result.context_tokens) == 2


class TestRounds:
    def test_several_rounds_then_an_answer_without_tools(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        first_id = chat.messages(limit=1)[0].id
        fake_llm.reply_tool_calls([{"name": "search_history", "arguments": {"query": "pricing"}}])
        fake_llm.reply_tool_calls(
            [{"id": "c2", "name": "get_extended_context", "arguments": {"count": 3}}]
        )
        fake_llm.reply_tool_calls(
            [{"id": "c3", "name": "get_message_by_id", "arguments": {"message_id": first_id}}]
        )
        fake_llm.reply("59 dollars per seat.")
        result = run_turn(chat, client, "Remind me of the price?", budget=8000, model=MODEL)

        assert len(fake_llm.requests) == 4
        bodies = [r.body or {} for r in fake_llm.requests]
        assert ["tools" in b for b in bodies] == [True, True, True, False]
        assert result.rounds == 4
        assert [r.name for r in result.tool_calls] == [
            "search_history", "get_extended_context", "get_message_by_id",
        ]  # fmt: skip
        assert all(r.ok for r in result.tool_calls)
        # Every round sees the results of all earlier rounds of the turn.
        last = fake_llm.requests[-1]
        assert [m["tool_call_id"] for m in tool_messages(last)] == ["call_1", "c2", "c3"]
        assert decoded(tool_messages(last)[2])["content"] == OLD_DECISION
        roles = [m.role for m in chat.messages(limit=500)][-8:]
        assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                         "assistant"]  # fmt: skip
        assert result.answer == "59 dollars per seat."

    def test_last_round_offers_no_tools_and_ignored_calls_are_not_stored(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply_tool_calls([{"name": "search_history", "arguments": {"query": "pricing"}}])
        # A misbehaving model asks for tools even though none were offered.
        fake_llm.reply_tool_calls([{"id": "late", "name": "search_history", "arguments": {}}])
        result = run_turn(chat, client, "Price?", budget=6000, model=MODEL, max_rounds=2)

        assert [("tools" in (r.body or {})) for r in fake_llm.requests] == [True, False]
        assert result.rounds == 2
        assert result.answer == ""
        assert any("offered no tools" in note for note in result.degraded)
        assert any("no answer" in note for note in result.degraded)
        stored = chat.messages(limit=500)
        # The late call was neither run nor stored: no call without its results.
        assert not any(call["id"] == "late" for m in stored for call in (m.tool_calls or []))
        assert stored[-1].role == "tool"
        assert len(result.tool_calls) == 1
        # The history is still a valid prompt for the next turn.
        ctx = chat.context(budget=6000, model=MODEL)
        assert ctx.messages[-1]["role"] == "tool"

    def test_no_tools_is_one_plain_round(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply("plain")
        result = run_turn(chat, client, "Hi", budget=4000, model=MODEL, tools=None,
                          system="Be brief.")  # fmt: skip
        (request,) = fake_llm.requests
        assert "tools" not in (request.body or {})
        assert request.messages[0] == {"role": "system", "content": "Be brief."}
        assert (result.answer, result.rounds, result.tools_tokens) == ("plain", 1, 0)

    def test_a_subset_of_tools_and_no_tool_prompt(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply_tool_calls([{"name": "get_memory_stats", "arguments": {}}])
        fake_llm.reply("done")
        result = run_turn(
            chat, client, "How long is our history?", budget=4000, model=MODEL,
            tools=["search_history"], tool_prompt=False,
        )  # fmt: skip
        first = fake_llm.requests[0].body or {}
        assert [t["function"]["name"] for t in first["tools"]] == ["search_history"]
        assert all(m["role"] != "system" for m in fake_llm.requests[0].messages)
        # A tool that exists but was not offered is unknown to this turn.
        (tool,) = tool_messages(fake_llm.requests[1])
        assert decoded(tool)["error"]["type"] == "unknown_tool"
        assert result.tool_calls == [ToolCallRecord("get_memory_stats", "{}", False)]


class TestBadToolCalls:
    def test_unknown_tool_and_bad_arguments_come_back_as_errors(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply_tool_calls(
            [
                {"id": "a", "name": "delete_everything", "arguments": {}},
                {"id": "b", "name": "search_history", "arguments": "{not json"},
                {"id": "c", "name": "search_history", "arguments": {"limit": "many"}},
                {"id": "d", "name": "get_messages_by_date", "arguments": {"date": "someday"}},
            ]
        )
        fake_llm.reply("Sorry, I could not look that up.")
        result = run_turn(chat, client, "Price?", budget=6000, model=MODEL)

        errors = [decoded(m)["error"]["type"] for m in tool_messages(fake_llm.requests[1])]
        assert errors == ["unknown_tool", "invalid_arguments", "invalid_arguments",
                          "invalid_date"]  # fmt: skip
        assert [r.ok for r in result.tool_calls] == [False] * 4
        assert result.tool_calls[1].arguments == "{not json"
        assert result.answer == "Sorry, I could not look that up."
        assert chat.messages(limit=500)[-1].content == result.answer

    def test_missing_and_repeated_call_ids_are_replaced(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply_tool_calls(
            [
                {"id": "", "name": "get_memory_stats", "arguments": {}},
                {"id": "x", "name": "get_memory_stats", "arguments": {}},
                {"id": "x", "name": "get_memory_stats", "arguments": {}},
            ]
        )
        fake_llm.reply("ok")
        run_turn(chat, client, "Stats?", budget=6000, model=MODEL)
        second = fake_llm.requests[1]
        call = next(m for m in second.messages if m.get("tool_calls"))
        ids = [c["id"] for c in call["tool_calls"]]
        assert ids == ["call_1_1", "x", "call_1_3"]
        assert [m["tool_call_id"] for m in tool_messages(second)] == ids


class TestBudget:
    def check_requests(self, fake_llm: FakeLLMServer, result: TurnResult, budget: int,
                       reserve: int) -> None:  # fmt: skip
        assert len(result.context_tokens) == len(fake_llm.requests)
        for request, tokens in zip(fake_llm.requests, result.context_tokens, strict=True):
            body = request.body or {}
            sent = count_messages(COUNTER, request.messages)
            assert sent == tokens
            assert sent + count_tools(COUNTER, body.get("tools") or []) <= budget - reserve

    @pytest.mark.parametrize("store_steps", [True, False])
    def test_each_round_fits_with_large_results(
        self, mem: engram.Engram, fake_llm: FakeLLMServer, client: LLMClient, store_steps: bool
    ) -> None:
        chat = mem.session("big", scope="phoenix", policy="lean")
        fill(chat, 30, size=60)  # long messages: tool results hit their caps
        for _ in range(3):
            fake_llm.reply_tool_calls(
                [
                    {"name": "get_extended_context", "arguments": {"count": 50}},
                    {"name": "search_history", "arguments": {"query": "note", "limit": 50}},
                ]
            )
        fake_llm.reply("done")
        budget, reserve = 2500, 300
        result = run_turn(chat, client, "Summarise everything we said.", budget=budget,
                          reserve=reserve, model=MODEL, store_steps=store_steps)  # fmt: skip
        assert result.rounds == 4
        self.check_requests(fake_llm, result, budget, reserve)
        # The results really were in the prompts (cut or whole), not dropped silently.
        assert tool_messages(fake_llm.requests[1])

    @settings(
        max_examples=12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        budget=st.integers(min_value=1600, max_value=9000),
        reserve=st.integers(min_value=0, max_value=600),
        filler=st.integers(min_value=0, max_value=25),
        size=st.integers(min_value=0, max_value=40),
        rounds=st.integers(min_value=0, max_value=4),
        store_steps=st.booleans(),
    )
    def test_invariant_1_every_round(
        self, budget: int, reserve: int, filler: int, size: int, rounds: int, store_steps: bool
    ) -> None:
        with (
            tempfile.TemporaryDirectory() as folder,
            FakeLLMServer() as server,
            LLMClient(MODEL, base_url=server.base_url, backoff=0.0) as client,
        ):
            mem = engram.open(f"sqlite:///{folder}/x.db", llm=None)
            try:
                chat = mem.session("p", scope="s", policy="lean")
                fill(chat, filler, size=size)
                for _ in range(rounds):
                    server.reply_tool_calls(
                        [
                            {"name": "search_history", "arguments": {"query": "note about"}},
                            {"name": "get_extended_context", "arguments": {"count": 40}},
                        ]
                    )
                server.reply("answer")
                result = run_turn(chat, client, "What about the pricing? " * 5, budget=budget,
                                  reserve=reserve, model=MODEL, store_steps=store_steps,
                                  max_rounds=4)  # fmt: skip
                assert result.rounds == min(rounds + 1, 4)
                self.check_requests(server, result, budget, reserve)
            finally:
                mem.close()

    @pytest.mark.parametrize("store_steps", [True, False])
    def test_results_that_cannot_be_shown_end_the_tool_rounds(
        self, mem: engram.Engram, fake_llm: FakeLLMServer, client: LLMClient, store_steps: bool
    ) -> None:
        chat = mem.session("tiny", scope="phoenix", policy="lean")
        fill(chat, 10, size=60)
        for _ in range(5):
            fake_llm.reply_tool_calls(
                [
                    {"name": "get_extended_context", "arguments": {"count": 50}},
                    {"name": "search_history", "arguments": {"query": "note", "limit": 50}},
                    {"name": "get_memory_stats", "arguments": {}},
                ]
            )
        fake_llm.reply("I cannot see enough to answer.")
        budget, reserve = 1520, 600  # about 72 tokens of prompt once the schemas are set aside
        result = run_turn(chat, client, "Summarise everything. " * 30, budget=budget,
                          reserve=reserve, model=MODEL, max_rounds=6,
                          store_steps=store_steps)  # fmt: skip
        # Round 2 could not show round 1's results: it was the answer round, with no tools.
        assert result.rounds == 2
        assert "tools" not in (fake_llm.requests[1].body or {})
        assert any("did not fit" in note for note in result.degraded)
        self.check_requests(fake_llm, result, budget, reserve)

    def test_budget_too_small_for_the_schemas_stores_nothing(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        before = len(chat.messages(limit=500))
        with pytest.raises(ConfigError, match="tool schemas"):
            run_turn(chat, client, "Hi", budget=300, reserve=100, model=MODEL)
        assert len(chat.messages(limit=500)) == before
        assert fake_llm.requests == []

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"max_rounds": 0},
            {"max_rounds": MAX_ROUNDS + 1},
            {"tools": ["search_history", "no_such_tool"]},
            {"tools": "some"},
            {"reserve": -1},
            {"max_result_tokens": 10},
        ],
    )
    def test_bad_arguments_store_nothing(
        self, chat: engram.Session, client: LLMClient, kwargs: dict[str, Any]
    ) -> None:
        before = len(chat.messages(limit=500))
        with pytest.raises(ConfigError):
            run_turn(chat, client, "Hi", budget=6000, model=MODEL, **kwargs)
        assert len(chat.messages(limit=500)) == before


class TestScope:
    def test_a_message_of_another_scope_is_not_found(
        self, mem: engram.Engram, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        other = mem.session("chat-1", scope="other-project")
        secret = other.add("user", "Secret pricing: 12 dollars for insiders.")
        fake_llm.reply_tool_calls(
            [
                {"id": "a", "name": "get_message_by_id", "arguments": {"message_id": secret.id}},
                {"id": "b", "name": "search_history",
                 "arguments": {"query": "secret pricing insiders", "all_sessions": True}},
                {"id": "c", "name": "search_history",
                 "arguments": {"query": "pricing", "scope": "other-project"}},
            ]
        )  # fmt: skip
        fake_llm.reply("I found nothing about that.")
        result = run_turn(chat, client, "What is the secret price?", budget=6000, model=MODEL)

        by_id, search, scoped = (decoded(m) for m in tool_messages(fake_llm.requests[1]))
        assert by_id["error"]["type"] == "not_found"
        assert search["results"] == [] or all(
            "insiders" not in hit["snippet"] for hit in search["results"]
        )
        assert scoped["error"]["type"] == "invalid_arguments"
        assert all("12 dollars" not in everything(r) for r in fake_llm.requests)
        assert [r.ok for r in result.tool_calls] == [False, True, False]
        # Nothing of this turn leaked into the other scope either.
        assert [m.content for m in other.messages()] == [secret.content]


class TestModelFailure:
    def test_http_500_twice_raises_after_storing_the_user_message(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        before = chat.messages(limit=500)
        fake_llm.fail(500)
        fake_llm.fail(500)
        with pytest.raises(LLMError, match="500"):
            run_turn(chat, client, "Still there?", budget=6000, model=MODEL)
        assert len(fake_llm.requests) == 2  # the client's one retry
        after = chat.messages(limit=500)
        assert [m.id for m in after[: len(before)]] == [m.id for m in before]
        (added,) = after[len(before) :]
        assert (added.role, added.content) == ("user", "Still there?")

    def test_failure_after_a_tool_round_keeps_whole_rounds_only(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        before = len(chat.messages(limit=500))
        fake_llm.reply_tool_calls(
            [
                {"id": "a", "name": "search_history", "arguments": {"query": "pricing"}},
                {"id": "b", "name": "get_memory_stats", "arguments": {}},
            ]
        )
        fake_llm.fail(503)
        fake_llm.fail(503)
        with pytest.raises(LLMError):
            run_turn(chat, client, "Price?", budget=6000, model=MODEL)
        added = chat.messages(limit=500)[before:]
        assert [m.role for m in added] == ["user", "assistant", "tool", "tool"]
        assert [c["id"] for c in added[1].tool_calls or []] == ["a", "b"]
        assert [m.tool_call_id for m in added[2:]] == ["a", "b"]
        # The next turn can go on from this history.
        fake_llm.reply("59 dollars.")
        result = run_turn(chat, client, "Price, again?", budget=6000, model=MODEL)
        assert result.answer == "59 dollars."


class TestAccounting:
    def test_unstored_steps_reach_the_model_but_not_the_history(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        before = len(chat.messages(limit=500))
        fake_llm.reply_tool_calls([{"name": "search_history", "arguments": {"query": "pricing"}}])
        fake_llm.reply_tool_calls([{"id": "two", "name": "get_memory_stats", "arguments": {}}])
        fake_llm.reply("59 dollars.")
        result = run_turn(chat, client, "Price?", budget=6000, model=MODEL, store_steps=False)
        added = chat.messages(limit=500)[before:]
        assert [(m.role, m.content) for m in added] == [("user", "Price?"),
                                                        ("assistant", "59 dollars.")]  # fmt: skip
        assert result.message_ids == [m.id for m in added]
        last = fake_llm.requests[-1]
        assert [m["tool_call_id"] for m in tool_messages(last)] == ["call_1", "two"]
        assert "59 dollars" in tool_messages(last)[0]["content"]
        assert last.messages[-5]["content"] == "Price?"

    def test_usage_is_summed_and_recorded_for_the_session(
        self, mem: engram.Engram, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply_tool_calls(
            [{"name": "get_memory_stats", "arguments": {}}],
            usage={"prompt_tokens": 1000, "completion_tokens": 20},
        )
        fake_llm.reply("ok", usage={"prompt_tokens": 1200, "completion_tokens": 5})
        result = run_turn(chat, client, "Stats?", budget=6000, model=MODEL)
        assert (result.usage.calls, result.usage.input_tokens, result.usage.output_tokens) == (
            2, 2200, 25,
        )  # fmt: skip
        assert result.usage.cost_usd == pytest.approx(2200 * 0.15e-6 + 25 * 0.60e-6)
        totals = mem.store.usage_totals("phoenix", "chat-1")
        assert totals["calls"] == 2
        assert totals["input_tokens"] == 2200

    def test_usage_recording_can_be_switched_off(
        self, mem: engram.Engram, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply("ok")
        run_turn(chat, client, "Hi", budget=6000, model=MODEL, record_usage=False)
        assert mem.store.usage_totals("phoenix", "chat-1")["calls"] == 0

    def test_a_cut_answer_is_stored_and_reported(
        self, chat: engram.Session, fake_llm: FakeLLMServer, client: LLMClient
    ) -> None:
        fake_llm.reply("The price is 59 dol", finish_reason="length")
        result = run_turn(chat, client, "Price?", budget=6000, model=MODEL)
        assert chat.messages(limit=500)[-1].content == "The price is 59 dol"
        assert result.finish_reason == "length"
        assert any("token limit" in note for note in result.degraded)
