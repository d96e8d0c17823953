"""Common words find no message on their own: the SQL backends score the messages that
rarer words find, and search with every word when those find fewer than asked for."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.models import NewMessage
from engram.search.query import COMMON_SHARE, MAX_PAIRED, SearchQuery, Tiers, tiers
from engram.store import Store, open_store
from engram.store.sqlite.backend import SQLiteStore
from engram.store.sqlite.terms import TermCounts, indexed_rows

T0 = datetime(2023, 5, 8, 15, 0, tzinfo=UTC)


def query(*terms: str, phrases: tuple[tuple[str, ...], ...] = ()) -> SearchQuery:
    return SearchQuery(text=" ".join(terms), terms=terms, phrases=phrases)


class TestTiers:
    def test_words_sorted_by_how_many_messages_hold_them(self) -> None:
        split = tiers(
            query("year", "coffee", "pottery"), {"year": 50, "coffee": 6, "pottery": 1}, 100
        )
        assert split == Tiers(rare=("pottery",), common=("coffee",), weightless=("year",))

    def test_the_shares_are_the_bounds(self) -> None:
        rows = 1000
        at_share = int(COMMON_SHARE * rows)
        split = tiers(query("a", "b", "c"), {"a": at_share, "b": at_share + 1, "c": 499}, rows)
        assert split.rare == ("a",) and split.common == ("b", "c") and split.weightless == ()

    def test_a_word_missing_from_the_counts_is_rare(self) -> None:
        assert tiers(query("new", "old"), {"old": 90}, 100).rare == ("new",)

    def test_common_words_alone_find_by_pairs(self) -> None:
        split = tiers(query("name", "dog", "cat"), {"name": 20, "dog": 10, "cat": 15}, 100)
        assert split.rare == () and split.common == ("name", "dog", "cat")
        assert split.pairs == (("dog", "cat"), ("dog", "name"), ("cat", "name"))

    def test_only_the_rarest_common_words_pair_up(self) -> None:
        words = tuple(f"w{i}" for i in range(MAX_PAIRED + 3))
        split = tiers(query(*words), {w: 10 + i for i, w in enumerate(words)}, 100)
        paired = {w for pair in split.pairs for w in pair}
        assert paired == set(words[:MAX_PAIRED]) and len(split.pairs) == 28

    def test_one_common_word_and_nothing_rarer_finds_alone(self) -> None:
        split = tiers(query("coffee", "year"), {"coffee": 10, "year": 80}, 100)
        assert split == Tiers(rare=("coffee",), weightless=("year",))

    def test_a_phrase_finds_so_a_common_word_beside_it_only_scores(self) -> None:
        split = tiers(query("coffee", phrases=(("blue", "door"),)), {"coffee": 10}, 100)
        assert split == Tiers(rare=(), common=("coffee",))

    def test_every_word_weightless_keeps_them_all(self) -> None:
        assert tiers(query("the", "year"), {"the": 90, "year": 100}, 100) == Tiers(
            rare=("the", "year")
        )

    def test_without_bm25_no_word_is_weightless(self) -> None:
        split = tiers(query("year", "pottery"), {"year": 100, "pottery": 1}, 100, bm25=False)
        assert split == Tiers(rare=("pottery",), common=("year",))

    @settings(max_examples=200, deadline=None)
    @given(
        st.lists(st.sampled_from("abcdefghijklmn"), min_size=1, max_size=12, unique=True),
        st.lists(st.integers(0, 120), min_size=12, max_size=12),
        st.integers(0, 100),
        st.booleans(),
    )
    def test_every_word_lands_in_one_tier_in_order(
        self, words: list[str], sizes: list[int], rows: int, bm25: bool
    ) -> None:
        counts = {w: min(n, rows) for w, n in zip(words, sizes, strict=False)}
        split = tiers(query(*words), counts, rows, bm25=bm25)
        for tier in (split.rare, split.common, split.weightless):
            assert list(tier) == [w for w in words if w in tier]
        assert sorted(split.rare + split.common + split.weightless) == sorted(words)
        assert split.rare or len(split.common) >= 2  # something always finds messages
        assert {w for pair in split.pairs for w in pair} <= set(split.common)


# -- on the stores that tier: SQLite (BM25) and PostgreSQL ------------------------------------


def _messages() -> list[NewMessage]:
    """100 messages: "coffee" in 20 (common), "pottery" in one, the rest filler."""
    out = [NewMessage("user", "I signed up for a pottery class.", T0, name="Joanna")]
    out += [
        NewMessage("user", f"Filler line {i} about the weather and the bridge.", T0)
        for i in range(79)
    ]
    out += [NewMessage("user", f"Morning coffee number {i} at the station.", T0) for i in range(19)]
    # The named speaker repeats the common word: a plain OR ranking puts this first.
    out.append(NewMessage("assistant", "Coffee, coffee, coffee!", T0, name="Nate"))
    return out


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def tiered_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('tiers')}/engram.db"
    else:
        url = _postgres_url(request)
    opened = open_store(url)
    opened.append("p", "s", _messages(), [10] * 100)  # type: ignore[attr-defined]
    if request.param == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE messages")  # the word shares come from the statistics
    try:
        yield opened
    finally:
        opened.close()


def _postgres_url(request: pytest.FixtureRequest) -> str:
    try:
        from tests.pg import fresh_postgres_url
    except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
        from pg import fresh_postgres_url  # type: ignore[import-not-found,no-redef]
    return fresh_postgres_url(request)


NATE_ASKS = SearchQuery(
    text="What did Nate say about coffee and pottery?",
    terms=("coffee", "pottery"),
    speakers=("nate",),
)


class TestTieredSearch:
    def test_a_common_word_alone_no_longer_decides_the_ranking(self, tiered_store: Store) -> None:
        if isinstance(tiered_store, SQLiteStore):  # PostgreSQL weighs words by IDF either way
            (plain,) = tiered_store.search("p", replace(NATE_ASKS, tiered=False), limit=1)
            assert plain.message.content == "Coffee, coffee, coffee!"  # what the tiers change
        (hit,) = tiered_store.search("p", NATE_ASKS, limit=1)
        assert hit.message.content == "I signed up for a pottery class."

    def test_too_few_rare_matches_search_with_every_word(self, tiered_store: Store) -> None:
        hits = tiered_store.search("p", NATE_ASKS, limit=10)
        assert len(hits) == 10
        contents = [h.message.content for h in hits]
        # First the messages "pottery" finds (itself, and the next one by its context),
        # then the best of those only "coffee" finds, in the same order at any limit.
        assert contents[0] == "I signed up for a pottery class."
        assert contents[1].startswith("Filler line 0 ")
        assert "Coffee, coffee, coffee!" == contents[2]
        assert [h.message.id for h in tiered_store.search("p", NATE_ASKS, limit=4)] == [
            h.message.id for h in hits[:4]
        ]

    def test_a_weightless_word_still_finds_when_nothing_else_does(
        self, tiered_store: Store
    ) -> None:  # on PostgreSQL (no BM25) a word in every message is common
        # Every message's date words hold "2023": BM25 gives the word no weight.
        hits = tiered_store.search("p", query("pottery", "2023"), limit=5)
        assert hits[0].message.content == "I signed up for a pottery class."
        assert len(hits) == 5

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        st.lists(
            st.sampled_from(["coffee", "pottery", "weather", "nothing", "2023", "may", "station"]),
            min_size=1,
            max_size=4,
            unique=True,
        ),
        st.integers(1, 30),
    )
    def test_tiers_find_as_many_hits_as_every_word_does(
        self, tiered_store: Store, words: list[str], limit: int
    ) -> None:
        plan = query(*words)
        every = tiered_store.search("p", replace(plan, tiered=False), limit=200)
        hits = tiered_store.search("p", plan, limit=limit)
        assert len(hits) == min(limit, len(every))
        assert {h.message.id for h in hits} <= {h.message.id for h in every}


class TestSQLiteCounts:
    def test_rows_and_counts_follow_the_index(self, tmp_path: Path) -> None:
        store = open_store(f"sqlite:///{tmp_path}/engram.db")
        try:
            assert isinstance(store, SQLiteStore)
            conn = store._conn()
            assert indexed_rows(conn) == 0
            stored = store.append("p", "s", _messages(), [10] * 100)
            assert indexed_rows(conn) == 100
            counts = TermCounts()
            assert counts.counts(conn, ["coffee", "pottery", "absent"], None) == (
                100,
                {"coffee": 20, "pottery": 2, "absent": 0},  # pottery: itself + 1 by context
            )
            own = ["content", "name", "search_dates"]
            assert counts.counts(conn, ["pottery"], own) == (100, {"pottery": 1})
            store.delete_messages("p", "s", [m.id for m in stored[-30:]])
            assert indexed_rows(conn) == 70
            # More than DRIFT of the rows went: the counts are read again.
            assert counts.counts(conn, ["coffee"], None) == (70, {"coffee": 0})
        finally:
            store.close()
