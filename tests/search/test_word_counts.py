"""How common a word is counts the messages that say it, not the replies that follow them
(their neighbour context holds it too), on the backends that search in tiers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from engram.models import NewMessage
from engram.search.query import SearchQuery
from engram.store import Store, open_store

T0 = datetime(2023, 5, 8, 15, 0, tzinfo=UTC)


def query(*terms: str) -> SearchQuery:
    return SearchQuery(text=" ".join(terms), terms=terms)


def _postgres_url(request: pytest.FixtureRequest) -> str:
    try:
        from tests.pg import fresh_postgres_url
    except ImportError:  # tests/ itself is on sys.path (rootdir-relative imports)
        from pg import fresh_postgres_url  # type: ignore[import-not-found,no-redef]
    return fresh_postgres_url(request)


def _said_four_times() -> list[NewMessage]:
    """100 messages: "kiln" said once, "pottery" said in 4, each said line followed by a reply."""
    out = [NewMessage("user", "The kiln at the studio broke again.", T0)]
    out.append(NewMessage("assistant", "Oh no, what happens now?", T0))
    for i in range(4):
        out.append(NewMessage("user", f"Pottery night {i}: pottery, more pottery.", T0))
        out.append(NewMessage("assistant", f"Filler reply {i} about the weather.", T0))
    out += [NewMessage("user", f"Filler line {i} about the bridge.", T0) for i in range(90)]
    return out


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def said_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('said')}/engram.db"
    else:
        url = _postgres_url(request)
    opened = open_store(url)
    opened.append("p", "s", _said_four_times(), [10] * 100)  # type: ignore[attr-defined]
    if request.param == "postgres":
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE messages")
    try:
        yield opened
    finally:
        opened.close()


class TestWordsCountedInTheirOwnText:
    """How common a word is counts the messages that say it, not the replies after them."""

    def test_a_word_said_in_few_messages_finds_them_in_the_first_pass(
        self, said_store: Store
    ) -> None:
        # "pottery" is in 4% of the messages' own text (rare), in 8% with the replies'
        # neighbour context (common): counted that way, only "kiln" found in the first
        # pass, and the reply after it (a context match) outranked every pottery night.
        hits = said_store.search("p", query("kiln", "pottery"), limit=3)
        contents = [h.message.content for h in hits]
        assert "Oh no, what happens now?" not in contents
        assert sum(c.startswith("Pottery night") for c in contents) >= 2
