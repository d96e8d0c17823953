"""Plain user text -> safe search terms (shared by every backend)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.search.query import MAX_TERM_CHARS, MAX_TERMS, fts5_match, quote_fts5, terms


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute("INSERT INTO t(body) VALUES ('near and or not the decided prices café')")
    yield conn
    conn.close()


class TestTerms:
    def test_words_lowercased_deduplicated_in_order(self) -> None:
        assert terms("Pricing, PRICING and the Budget!") == ["pricing", "and", "the", "budget"]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ('"quoted" star* NEAR(a b)', ["quoted", "star", "near", "a", "b"]),
            ("50% snake_case", ["50", "snake", "case"]),
            ("key:value -minus (open", ["key", "value", "minus", "open"]),
            ("%_*\"'()-:^{}[]", []),
            ("", []),
            ("🎉🎉", []),
        ],
    )
    def test_syntax_is_only_punctuation(self, text: str, expected: list[str]) -> None:
        assert terms(text) == expected

    def test_unicode_normalised(self) -> None:
        decomposed = "cafe\u0301"  # e + combining acute
        assert terms(f"{decomposed} ÉTÉ 日本語") == ["café", "été", "日本語"]
        assert terms("ｆｕｌｌｗｉｄｔｈ") == ["fullwidth"]

    def test_limits(self) -> None:
        many = " ".join(f"w{i}" for i in range(100))
        assert terms(many) == [f"w{i}" for i in range(MAX_TERMS)]
        assert terms("x" * (MAX_TERM_CHARS + 1) + " short") == ["short"]
        assert terms("y" * MAX_TERM_CHARS) == ["y" * MAX_TERM_CHARS]


class TestFts5Match:
    def test_quoting(self) -> None:
        assert quote_fts5('a"b') == '"a""b"'
        assert fts5_match(["a", "b"]) == '"a" OR "b"'
        assert fts5_match(["a", "b"], all_terms=True) == '"a" AND "b"'
        assert fts5_match([]) == ""

    @settings(
        max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(text=st.text(max_size=200))
    def test_any_text_is_a_valid_match(self, fts: sqlite3.Connection, text: str) -> None:
        words = terms(text)
        if words:
            for all_terms in (False, True):
                fts.execute(
                    "SELECT count(*) FROM t WHERE t MATCH ?",
                    (fts5_match(words, all_terms=all_terms),),
                ).fetchone()

    @given(word=st.text(min_size=1, max_size=30))
    def test_any_quoted_string_is_valid(self, fts: sqlite3.Connection, word: str) -> None:
        if "\x00" in word:
            return
        try:
            fts.execute("SELECT count(*) FROM t WHERE t MATCH ?", (quote_fts5(word),)).fetchone()
        except sqlite3.OperationalError as exc:
            # Unicode that is not valid UTF-8 (lone surrogates) cannot even be bound.
            pytest.fail(f"{word!r}: {exc}")
        except UnicodeEncodeError:
            pass

    def test_stems_and_diacritics(self, fts: sqlite3.Connection) -> None:
        for query in ("decide", "price", "cafe", "NOT", "near"):
            (count,) = fts.execute(
                "SELECT count(*) FROM t WHERE t MATCH ?", (fts5_match(terms(query)),)
            ).fetchone()
            assert count == 1, query
