"""The turn that holds the words ranks first: a fact stated inside a request is not demoted,
and a reply lifted by the turn it follows never outranks that turn, on every backend."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engram
from engram.search.index import only_asks

T0 = datetime(2024, 3, 4, 10, 0, tzinfo=UTC)

FILLER = [
    "The weather was lovely on the coast.",
    "Traffic on the bridge was slow again.",
    "I finished the crossword before lunch.",
    "The library closes early on Sundays.",
]


def contents(hits: list[Any]) -> list[str]:
    return [h.message.content for h in hits]


def add(chat: engram.Session, *turns: tuple[str, str]) -> None:
    chat.add_many(
        [
            {"role": role, "content": text, "created_at": T0 + timedelta(minutes=i)}
            for i, (role, text) in enumerate(turns)
        ]
    )


class TestOnlyAsks:
    @pytest.mark.parametrize(
        "text",
        [
            "How long have you been painting?",
            "Oh nice, how is that going?",
            "Any tips for crate training?",
            "What's the name of your new dog? Is it a puppy?",
        ],
    )
    def test_a_bare_question(self, text: str) -> None:
        assert only_asks(text)

    @pytest.mark.parametrize(
        "text",
        [
            "I adopted a beagle last month, any tips for crate training?",
            "I'm allergic to peanuts, so I read every label. What snacks keep me full?",
            "If I only have a small budget, what should I buy?",
            "Did you see the game last night? Crazy ending.",
            "Version 3.14 is out.",
            "You went to Lisbon?",
            "",
        ],
    )
    def test_a_statement_in_it_or_no_question_at_all(self, text: str) -> None:
        assert not only_asks(text)


class TestTheStatementRanksFirst:
    def test_a_fact_stated_inside_a_request_is_not_demoted(self, mem: engram.Engram) -> None:
        chat = mem.session("pup", scope="p")
        add(
            chat,
            *(("user", text) for text in FILLER),
            ("user", "I adopted a beagle named Toby last month, any tips for crate training?"),
            ("assistant", "Keep sessions short and reward calm behaviour."),
            ("user", "My neighbour adopted a beagle too."),
        )
        hits = chat.search("What is the name of the beagle I adopted?")
        assert contents(hits)[0].startswith("I adopted a beagle named Toby")

    def test_a_reply_does_not_outrank_the_statement_it_follows(self, mem: engram.Engram) -> None:
        chat = mem.session("run", scope="p")
        statement = "I'm running 20 kilometres a week now, what should I eat before a run?"
        reply = (
            "Congratulations on running that much every week! Before a long run, eat a light"
            " meal with carbohydrates two hours ahead, and keep your weekly running steady."
        )
        add(chat, *(("user", text) for text in FILLER), ("user", statement), ("assistant", reply))
        hits = chat.search("How many kilometres a week am I running?")
        assert contents(hits)[:2] == [statement, reply]

    def test_the_answer_still_outranks_a_bare_question(self, mem: engram.Engram) -> None:
        chat = mem.session("ask", scope="p")
        add(
            chat,
            *(("user", text) for text in FILLER),
            ("user", "How long have you been painting?"),
            ("assistant", "Six years now, I started back in college."),
        )
        hits = chat.search("How long has she been painting?")
        assert contents(hits)[0] == "Six years now, I started back in college."


WORDS = ["beagle", "crate", "kiln", "pottery", "violin", "lisbon", "tart", "marathon"]
FILL = ["the", "and", "was", "nice", "today", "really"]


@st.composite
def turns(draw: st.DrawFn) -> list[str]:
    """A session of statements, statements with a request, bare questions and replies."""
    out = []
    for _ in range(draw(st.integers(2, 12))):
        words = draw(st.lists(st.sampled_from(WORDS + FILL), min_size=1, max_size=8))
        shape = draw(st.sampled_from(["statement", "request", "question"]))
        text = " ".join(words)
        if shape == "statement":
            out.append(f"I {text}.")
        elif shape == "request":
            out.append(f"I {text}, any tips?")
        else:
            out.append(f"What about {text}?")
    return out


class TestLiftProperty:
    @settings(
        max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(session=turns(), query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def test_a_reply_matched_only_by_its_context_ranks_below_the_turn_it_follows(
        self, mem: engram.Engram, session: list[str], query: list[str]
    ) -> None:
        chat = mem.session(f"h{abs(hash((tuple(session), tuple(query))))}", scope="prop")
        add(chat, *(("user" if i % 2 else "assistant", t) for i, t in enumerate(session)))
        hits = chat.search(" ".join(query), limit=50)
        rank = {h.message.id: i for i, h in enumerate(hits)}
        ordered = chat.messages()
        for before, after in itertools.pairwise(ordered):
            own_words = set(re.findall(r"\w+", after.content.lower()))
            if (
                after.id in rank
                and before.id in rank
                and not only_asks(before.content)
                and not own_words & set(query)
            ):
                assert rank[before.id] < rank[after.id], (before.content, after.content)
