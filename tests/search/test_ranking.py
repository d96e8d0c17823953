"""Search finds the answer: query cleanup, participants, dates as words, neighbour context,
exclusions and snippets, on every backend (each test failed before the search rework)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engram
from engram import tools
from engram.search.query import STOP_WORDS, parse, with_speakers
from engram.searching import date_phrase

T0 = datetime(2023, 5, 8, 15, 0, tzinfo=UTC)  # a Monday


def contents(hits: list[Any]) -> list[str]:
    return [h.message.content for h in hits]


class TestQueryCleanup:
    def test_question_words_and_generic_verbs_leave_the_match(self) -> None:
        assert parse("What did Joanna say about her recipes?").terms == ("joanna", "recipes")

    def test_nothing_left_falls_back_to_every_word(self) -> None:
        assert parse("what did you do").terms == ("what", "did", "you", "do")

    def test_a_month_next_to_a_number_stays(self) -> None:
        assert parse("what happened in May 2023").terms == ("may", "2023")

    def test_quoted_text_is_a_phrase(self) -> None:
        query = parse('where is "blue door cafe" now')
        assert query.phrases == (("blue", "door", "cafe"),)
        assert "blue" not in query.terms

    def test_names_become_a_boost_not_a_match(self) -> None:
        query = with_speakers(parse("What did Joanna say about recipes"), ["Joanna", "Nate"])
        assert query.terms == ("recipes",) and query.speakers == ("joanna",)
        alone = with_speakers(parse("Joanna"), ["Joanna"])
        assert alone.terms == ("joanna",)  # a name alone still matches

    @settings(max_examples=200, deadline=None)
    @given(st.text(max_size=200))
    def test_any_text_parses_and_keeps_only_words(self, text: str) -> None:
        query = parse(text)
        for word in query.words():
            assert word and all(ch.isalnum() for ch in word)
        kept = [w for w in query.terms if w not in STOP_WORDS]
        assert kept or not any(w not in STOP_WORDS for w in parse(text, stop_words=False).terms)


class TestDatePhrases:
    def test_relative_phrase_is_a_range_and_leaves_the_match(self) -> None:
        now = datetime(2023, 5, 17, 12, tzinfo=UTC)
        found = date_phrase("what did we say last week about tea", now, ZoneInfo("UTC"))
        assert found is not None
        start, end, words = found
        assert (start, end) == (datetime(2023, 5, 8, tzinfo=UTC), datetime(2023, 5, 15, tzinfo=UTC))
        assert words == {"last", "week"}

    def test_absolute_date_stays_in_the_match(self) -> None:
        found = date_phrase("what happened on 8 May 2023", T0, ZoneInfo("UTC"))
        assert found is not None and found[2] == frozenset()

    def test_no_date(self) -> None:
        assert date_phrase("pottery class", T0, ZoneInfo("UTC")) is None


FILLER = [
    "The weather was lovely on the coast.",
    "Traffic on the bridge was slow again.",
    "I finished the crossword before lunch.",
    "The garden needs water after this heat.",
    "My phone battery died during the call.",
    "We watched a film about old trains.",
    "The library closes early on Sundays.",
    "Coffee at the station tasted burnt.",
]


@pytest.fixture
def talk(mem: engram.Engram) -> engram.Session:
    chat = mem.session("talk", scope="p")
    chat.add_many(
        [
            {"role": "user", "content": text, "created_at": T0 - timedelta(days=9, minutes=-i)}
            for i, text in enumerate(FILLER)
        ]
    )
    chat.add_many(
        [
            {"role": "user", "name": "Caroline", "content": "Wow, Melanie! Great to see you.",
             "created_at": T0},
            {"role": "assistant", "name": "Melanie", "content": "How long have you had the dog?",
             "created_at": T0 + timedelta(minutes=1)},
            {"role": "user", "name": "Caroline", "content": "Three years now, since spring.",
             "created_at": T0 + timedelta(minutes=2)},
            {"role": "assistant", "name": "Melanie", "content": "I baked bread with my recipes.",
             "created_at": T0 + timedelta(days=3)},
            {"role": "user", "name": "Caroline", "content": "Melanie, you and your recipes!",
             "created_at": T0 + timedelta(days=3, minutes=1)},
        ]
    )  # fmt: skip
    return chat


class TestRanking:
    def test_the_answer_in_the_next_turn_is_found(self, talk: engram.Session) -> None:
        hits = talk.search("How long has Caroline had the dog?", exclude=())
        assert "Three years now, since spring." in contents(hits)[:2]

    def test_a_statement_ranks_above_a_question(self, talk: engram.Session) -> None:
        hits = talk.search("dog years", exclude=())
        assert contents(hits)[0] == "Three years now, since spring."

    def test_a_named_participant_lifts_their_messages(self, talk: engram.Session) -> None:
        hits = talk.search("What did Melanie say about her recipes?", exclude=())
        assert contents(hits)[0] == "I baked bread with my recipes."

    def test_date_words_match(self, talk: engram.Session) -> None:
        hits = talk.search("what was said on Thursday 11 May 2023", exclude=())
        assert set(contents(hits)[:2]) == {
            "I baked bread with my recipes.",
            "Melanie, you and your recipes!",
        }

    def test_neighbours_come_with_a_hit(self, talk: engram.Session) -> None:
        (hit,) = talk.search("spring", context=1, exclude=(), limit=1)
        assert [m.content for m in hit.context] == [
            "How long have you had the dog?",
            "I baked bread with my recipes.",
        ]

    def test_bad_context_is_refused(self, talk: engram.Session) -> None:
        with pytest.raises(engram.errors.InvalidQuery, match="context"):
            talk.search("dog", context=-1)


class TestExclusions:
    def test_the_question_being_asked_is_left_out(self, mem: engram.Engram) -> None:
        import json

        chat = mem.session("q", scope="p")
        chat.add("assistant", "The launch is set for June.")
        chat.add("user", "When is the launch?")
        assert contents(chat.search("launch", exclude_question=True)) == [
            "The launch is set for June."
        ]
        assert len(chat.search("launch")) == 2
        answer = json.loads(tools.dispatch(chat, "search_history", {"query": "launch"}))
        assert answer["count"] == 1 and "June" in answer["results"][0]["snippet"]

    def test_the_visible_prompt_is_left_out(self, mem: engram.Engram) -> None:
        chat = mem.session("v", scope="p")
        chat.add("user", "old note about zebras", created_at=T0)
        for i in range(20):
            chat.add("assistant", f"filler {i}", created_at=T0 + timedelta(minutes=i + 1))
        chat.add("user", "recent zebras again", created_at=T0 + timedelta(hours=1))
        chat.add("assistant", "ok", created_at=T0 + timedelta(hours=1, minutes=1))
        ctx = chat.context(budget=120)
        shown = set(ctx.message_ids)
        assert {h.message.id for h in chat.search("zebras")} & shown  # app code: everything
        hits = chat.search("zebras", exclude_visible=True)
        assert hits and not {h.message.id for h in hits} & shown
        assert contents(hits)[0] == "old note about zebras"
        answer = json.loads(tools.dispatch(chat, "search_history", {"query": "zebras"}))
        assert answer["results"] and not {r["id"] for r in answer["results"]} & shown

    def test_own_tool_results_are_left_out(self, mem: engram.Engram) -> None:
        chat = mem.session("t", scope="p")
        chat.add_many([{"role": "user", "content": text} for text in FILLER])
        chat.add("assistant", "the budget is 40 dollars")
        chat.add("user", "remind me")
        chat.add_many(
            [
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "search_history", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1",
                 "content": '{"results": [{"snippet": "the [budget] is 40"}]}'},
            ]
        )  # fmt: skip
        chat.add("assistant", "Done.")
        found = [h.message.role for h in chat.search("budget")]
        assert found[0] == "assistant" and "tool" not in found
        roles = [h.message.role for h in chat.search("budget", include_tool_results=True)]
        assert "tool" in roles


class TestSnippets:
    def test_a_short_message_is_shown_whole(self, mem: engram.Engram) -> None:
        chat = mem.session("s", scope="p")
        text = " ".join(f"word{i}" for i in range(40)) + " the answer is blue"
        chat.add("assistant", text)
        chat.add("assistant", "ok")
        (hit, *_) = chat.search("blue")
        assert "word0" in hit.snippet and "[blue]" in hit.snippet

    def test_tool_returns_neighbours_within_the_cap(self, talk: engram.Session) -> None:
        import json

        answer = json.loads(
            tools.dispatch(talk, "search_history", {"query": "spring", "context": 1, "limit": 1})
        )
        (item,) = answer["results"]
        assert item["context"][0]["content"] == "How long have you had the dog?"


class TestFusion:
    @staticmethod
    def hits(pairs: list[tuple[int, float]]) -> list[Any]:
        from engram.models import Message, SearchHit

        return [
            SearchHit(Message(mid, "p", "s", "user", f"m{mid}", T0, 1), score, f"m{mid}")
            for mid, score in pairs
        ]

    def test_weights_choose_the_side_and_both_sides_count(self) -> None:
        from engram.search.vectors import fuse

        keyword = self.hits([(1, 9.0), (2, 5.0), (3, 1.0)])
        dense = self.hits([(3, 0.9), (4, 0.8), (2, 0.1)])
        assert [h.message.id for h in fuse(keyword, dense, 4, weight=0.0)][:2] == [1, 2]
        assert [h.message.id for h in fuse(keyword, dense, 4, weight=1.0)][:2] == [3, 4]
        mixed = fuse(keyword, dense, 4, weight=0.5)
        assert {h.message.id for h in mixed} == {1, 2, 3, 4}
        assert all(0.0 <= h.score <= 1.0 for h in mixed)
        assert all(a.score >= b.score for a, b in itertools.pairwise(mixed))

    def test_unknown_mode_is_refused(self, mem: engram.Engram) -> None:
        with pytest.raises(engram.errors.ConfigError, match="keyword, semantic, hybrid"):
            mem.session("s", scope="p").search("x", mode="fuzzy")


class TestDeletes:
    def test_a_deleted_message_leaves_no_trace_in_its_neighbours(self, mem: engram.Engram) -> None:
        chat = mem.session("d", scope="p")
        chat.add_many([{"role": "user", "content": text} for text in FILLER])
        secret = chat.add("user", "my passport number is zq81177")
        chat.add("assistant", "Noted.")
        assert [h.message.content for h in chat.search("zq81177")] == [
            "my passport number is zq81177",
            "Noted.",
        ]
        mem.store.delete_messages("p", "d", [secret.id])  # type: ignore[attr-defined]
        assert chat.search("zq81177") == []
