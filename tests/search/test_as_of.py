"""A question is read against the moment it is asked (``as_of``), not against today, through
the library, the tools, REST and MCP (each test failed before ``as_of`` existed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import engram
from engram import tools
from engram.search.when import elapsed_words

SAT_1 = datetime(2024, 6, 1, 15, 0, tzinfo=UTC)  # a Saturday
SAT_2 = SAT_1 + timedelta(days=14)
FILLER = [
    "The weather was lovely on the coast.",
    "Traffic on the bridge was slow again.",
    "I finished the crossword before lunch.",
    "The library closes early on Sundays.",
]


def contents(hits: list[Any]) -> list[str]:
    return [h.message.content for h in hits]


@pytest.fixture
def bakes(mem: engram.Engram) -> engram.Session:
    chat = mem.session("bakes", scope="p")
    rows = [(SAT_1 - timedelta(days=9 - i), text) for i, text in enumerate(FILLER)]
    rows += [
        (SAT_1, "I baked a lemon tart this afternoon."),
        (SAT_1 + timedelta(days=5), "The neighbours came over for coffee."),
        (SAT_2, "I baked banana bread this afternoon."),
        (SAT_2 + timedelta(days=6), "I went hiking up Box Hill today."),
    ]
    chat.add_many([{"role": "user", "content": t, "created_at": at} for at, t in rows])
    return chat


class TestLibrary:
    def test_last_saturday_counts_from_the_question_date(self, bakes: engram.Session) -> None:
        early = bakes.search("What did I bake last Saturday?", as_of=SAT_1 + timedelta(days=3))
        late = bakes.search("What did I bake last Saturday?", as_of=SAT_2 + timedelta(days=3))
        assert contents(early)[0] == "I baked a lemon tart this afternoon."
        assert contents(late)[0] == "I baked banana bread this afternoon."

    def test_weeks_ago_counts_from_the_question_date(self, bakes: engram.Session) -> None:
        asked = SAT_1 + timedelta(days=10)  # two weeks before: the Monday-Sunday week of SAT_1
        hits = bakes.search("What did I bake two weeks ago?", as_of=asked)
        assert contents(hits)[0] == "I baked a lemon tart this afternoon."

    def test_the_scope_search_takes_it_too(self, mem: engram.Engram, bakes: engram.Session) -> None:
        hits = mem.search("What did I bake last Saturday?", "p", as_of=SAT_1 + timedelta(days=2))
        assert contents(hits)[0] == "I baked a lemon tart this afternoon."

    def test_a_date_range_and_by_date_count_from_it(self, bakes: engram.Session) -> None:
        asked = SAT_2 + timedelta(days=1)
        start, end = bakes.date_range("yesterday", as_of=asked)
        assert (start, end) == (
            datetime(2024, 6, 15, tzinfo=UTC),
            datetime(2024, 6, 16, tzinfo=UTC),
        )
        assert [m.content for m in bakes.by_date("yesterday", as_of=asked)] == [
            "I baked banana bread this afternoon."
        ]

    def test_default_is_now(self, mem: engram.Engram) -> None:
        chat = mem.session("now", scope="p")
        now = datetime.now(UTC)
        chat.add("user", "I baked scones today.", created_at=now - timedelta(days=1))
        chat.add("user", "I baked a pie today.", created_at=now - timedelta(days=8))
        assert contents(chat.search("what did I bake yesterday"))[0] == "I baked scones today."

    def test_a_bad_moment_is_refused(self, bakes: engram.Session) -> None:
        with pytest.raises(engram.errors.InvalidQuery, match="as_of"):
            bakes.search("bake", as_of="not a date")  # type: ignore[arg-type]

    def test_how_many_days_ago_leaves_the_match(self, mem: engram.Engram) -> None:
        chat = mem.session("ago", scope="p")
        chat.add_many(
            [
                {"role": "user", "content": "Those were the days, so many days ago.",
                 "created_at": SAT_1},
                {"role": "user", "content": "I ran the half marathon this morning!",
                 "created_at": SAT_1 + timedelta(days=1)},
            ]
        )  # fmt: skip
        assert elapsed_words("How many days ago did I run the half marathon?") >= {"days", "ago"}
        hits = chat.search("How many days ago did I run the half marathon?", as_of=SAT_2)
        assert contents(hits)[0] == "I ran the half marathon this morning!"


class TestToolsRestMcp:
    def test_search_history_takes_as_of_for_the_query_and_the_date(
        self, bakes: engram.Session
    ) -> None:
        asked = (SAT_1 + timedelta(days=3)).isoformat()
        found = json.loads(
            tools.dispatch(bakes, "search_history", {"query": "bake last Saturday", "as_of": asked})
        )
        assert found["results"][0]["snippet"].startswith("I [baked] a lemon tart")
        dated = json.loads(
            tools.dispatch(
                bakes, "search_history", {"query": "baked", "date": "last saturday", "as_of": asked}
            )
        )
        assert [r["snippet"] for r in dated["results"]] == [
            "I [baked] a lemon tart this afternoon."
        ]
        assert dated["from"].startswith("2024-06-01")

    def test_a_bad_as_of_is_an_error_the_model_reads(self, bakes: engram.Session) -> None:
        found = json.loads(
            tools.dispatch(bakes, "search_history", {"query": "bake", "as_of": "tuesday-ish"})
        )
        assert (
            found["error"]["type"] == "invalid_arguments" and "as_of" in found["error"]["message"]
        )
