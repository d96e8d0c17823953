"""Hits carry their exchange partner (the question with its answer, the answer with its
question) within the hit's budget, and ``search_history`` packs hits, partners and
neighbours into ``max_tokens``, on every backend (each test failed before)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engram
from engram import tools
from engram.searching import PAIR_CHARS, PARTNER_MIN_CHARS
from engram.tokens import storage_counter
from engram.tools.results import to_json

T0 = datetime(2024, 3, 4, 10, 0, tzinfo=UTC)
LONG = " ".join(f"Sentence {i} of a long answer about the garden and its roses." for i in range(40))


def add(chat: engram.Session, *turns: tuple[str, str]) -> list[Any]:
    return chat.add_many(
        [
            {"role": role, "content": text, "created_at": T0 + timedelta(minutes=i)}
            for i, (role, text) in enumerate(turns)
        ]
    )


@pytest.fixture
def kiln(mem: engram.Engram) -> tuple[engram.Session, list[Any]]:
    chat = mem.session("kiln", scope="p")
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    stored = chat.add_many(
        [
            {"role": "user", "content": "Where should I fire my first pottery pieces?"},
            # A tool round between the question and its answer: never a partner.
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "studio list"},
            {"role": "assistant", "content": "The community studio has a kiln to rent."},
            {"role": "user", "content": "Great, I also wrote a haiku about it."},
            {"role": "assistant", "content": LONG},
            {"role": "user", "content": "What about glazes?"},
        ]
    )
    return chat, [stored[0], stored[1], stored[3], stored[4], stored[5], stored[6]]


class TestPartners:
    def test_a_question_carries_its_answer_and_an_answer_its_question(
        self, kiln: tuple[engram.Session, list[Any]]
    ) -> None:
        chat, stored = kiln
        hits = {h.message.id: h for h in chat.search("pottery kiln studio", partner=True)}
        question, answer = hits[stored[0].id], hits[stored[2].id]
        assert question.partner is not None and question.partner.id == stored[2].id
        assert answer.partner is not None and answer.partner.id == stored[0].id
        assert "[pottery]" in answer.partner_snippet

    def test_no_partner_without_an_answer_or_unless_asked(
        self, kiln: tuple[engram.Session, list[Any]]
    ) -> None:
        chat, stored = kiln
        (last,) = chat.search("glazes", partner=True)
        assert last.message.id == stored[5].id and last.partner is None
        assert all(h.partner is None for h in chat.search("pottery"))

    def test_the_partner_fits_the_hit_budget(self, kiln: tuple[engram.Session, list[Any]]) -> None:
        chat, stored = kiln
        hits = {h.message.id: h for h in chat.search("haiku", partner=True)}
        haiku = hits[stored[3].id]
        assert haiku.partner is not None and haiku.partner.id == stored[4].id
        room = max(PARTNER_MIN_CHARS, PAIR_CHARS - len(haiku.snippet))
        assert len(haiku.partner_snippet) <= room < len(LONG)

    def test_a_visible_partner_is_left_out(self, mem: engram.Engram) -> None:
        chat = mem.session("seen", scope="p")
        add(chat, ("user", "What is the wifi password?"), ("assistant", "It is tulip42."))
        add(chat, *[("user", f"filler {i}") for i in range(30)])
        chat.context(budget=200)  # the prompt shows the newest messages only
        add(chat, ("user", "Remind me of the wifi password, please?"))
        add(chat, ("assistant", "Sure."))
        found = json.loads(tools.dispatch(chat, "search_history", {"query": "wifi password"}))
        shown = {r["id"] for r in found["results"]}
        ids = {r["id"] for r in found["results"]} | {
            r["partner"]["id"] for r in found["results"] if "partner" in r
        }
        assert shown and ids.isdisjoint(set(chat.runtime.visible(chat.scope, chat.id)))


def corpus(chat: engram.Session) -> None:
    turns = []
    for i in range(12):
        turns.append(("user", f"Question {i}: what about the roses in bed {i}? {LONG[:200]}"))
        turns.append(("assistant", f"Answer {i}: the roses need pruning. {LONG[: 100 + 40 * i]}"))
    add(chat, *turns)


class TestPacking:
    def test_the_result_fits_and_says_its_size(self, mem: engram.Engram) -> None:
        chat = mem.session("pack", scope="p")
        corpus(chat)
        arguments = {"query": "roses pruning", "limit": 10, "context": 1}
        whole = json.loads(tools.dispatch(chat, "search_history", arguments))
        small = json.loads(tools.dispatch(chat, "search_history", {**arguments, "max_tokens": 400}))
        count = storage_counter().count_text
        assert count(to_json(small)) == small["tokens"] <= 400
        assert 0 < small["count"] < whole["count"]
        assert small["truncated"] is True and small["omitted"] == whole["count"] - small["count"]
        big = json.loads(tools.dispatch(chat, "search_history", {**arguments, "max_tokens": 30000}))
        assert big["count"] == whole["count"] and "truncated" not in big
        assert all("partner" in r and "context" in r for r in big["results"])

    @settings(
        max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(budget=st.integers(200, 3000), context=st.integers(0, 2))
    def test_any_budget_is_kept(self, mem: engram.Engram, budget: int, context: int) -> None:
        chat = mem.session("budget", scope="p")
        if not chat.messages(limit=1):
            corpus(chat)
        arguments = {"query": "roses", "limit": 20, "context": context, "max_tokens": budget}
        found = json.loads(tools.dispatch(chat, "search_history", arguments))
        assert storage_counter().count_text(to_json(found)) == found["tokens"] <= budget
        ranked = chat.search("roses", limit=20, exclude_visible=True, exclude_question=True)
        packed = [r["id"] for r in found["results"]]
        assert packed == [h.message.id for h in ranked][: len(packed)]  # rank order kept
