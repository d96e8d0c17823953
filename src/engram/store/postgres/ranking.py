"""How the PostgreSQL backend scores a match: BM25-like, from the word statistics.

``ts_rank_cd`` has no inverse document frequency (a common word counts as much
as a rare one) and no length normalisation (a long answer repeating a word
beats the short message that states it). So each query word counts for its
IDF, computed from the share of messages that hold it in their own text (the
statistics the word tiers read, see ``search.py``), times where a message holds
it: content 1, date words :data:`~engram.search.query.DATE_WEIGHT`, name
:data:`~engram.search.query.NAME_WEIGHT`. Each test is ``search @@`` a
tsquery whose lexemes carry that weight label (a lookup in the sorted lexemes,
far cheaper than ranking), and the sum is normalised by the message's length
as BM25 (k1 1.2, b 0.75) does for one occurrence. The neighbour context (weight
``B``) is scored apart in the same way and scaled by the plan's context weight
(twice that when it is the question the message answers), so the scores are on
the scale of the SQLite backend's. A quoted phrase counts with the IDF of its
rarest word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from engram.search.index import FLAG_ANSWER, FLAG_QUESTION
from engram.search.query import (
    ANSWER_FACTOR,
    DATE_BOOST,
    NAME_WEIGHT,
    SPEAKER_BOOST,
    SearchQuery,
)
from engram.search.stems import Stemmer
from engram.store.common import utc

#: BM25 parameters (those of SQLite FTS5).
K1 = 1.2
B = 0.75

TS_CONFIG = "engram_english"


def labelled(tsquery: str, label: str) -> str:
    """SQL of ``tsquery`` (an expression) with every lexeme restricted to weight ``label``."""
    return f"regexp_replace(({tsquery})::text, '''( |$)', ''':{label}\\1', 'g')::tsquery"


def idf(share: float) -> float:
    """BM25's inverse document frequency of a word held by ``share`` of the messages."""
    share = min(max(share, 0.0), 1.0)
    return math.log(1 + (1 - share + 1e-6) / (share + 1e-6))


def weights(plan: SearchQuery, shares: Mapping[str, float]) -> list[float]:
    """The IDF of each term, then of each phrase (its rarest word), from ``shares``.

    With no statistics (a store never analysed) every word weighs the same; a
    word the statistics do not list is rarer than half the rarest listed one.
    """
    stemmer = Stemmer()
    unlisted = min(shares.values()) / 2 if shares else 0.0

    def weight(word: str) -> float:
        return idf(shares.get(stemmer.stem(word), unlisted)) if shares else 1.0

    out = [weight(t) for t in plan.terms]
    out += [max(weight(w) for w in phrase) for phrase in plan.phrases]
    return out


def queries(plan: SearchQuery, params: dict[str, Any]) -> str:
    """The select list of the ``q`` CTE: every word and phrase as a labelled tsquery.

    Words are ``t0``, ``t1``... and phrases ``p0``...; each gives ``a``/``c``/``d``
    (content, date words, name) and ``b`` (neighbour context) columns.
    """
    parts = []
    for key, source in _sources(plan, params):
        for label in "ABCD":
            parts.append(f"{labelled(source, label)} AS {label.lower()}_{key}")
    return ", ".join(parts)


def _sources(plan: SearchQuery, params: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for i, term in enumerate(plan.terms):
        params[f"t{i}"] = term
        out.append((f"t{i}", f"plainto_tsquery('{TS_CONFIG}', %(t{i})s)"))
    for i, phrase in enumerate(plan.phrases):
        params[f"p{i}"] = " ".join(phrase)
        out.append((f"p{i}", f"phraseto_tsquery('{TS_CONFIG}', %(p{i})s)"))
    return out


def score(plan: SearchQuery, params: dict[str, Any], idfs: list[float]) -> tuple[str, str]:
    """SQL of a match's own score and its context's, rank factors applied (higher is better).

    ``params`` gains ``avg_length`` unless it is set (the caller sets it to the
    mean lexeme count of the messages).
    """
    keys = [f"t{i}" for i in range(len(plan.terms))]
    keys += [f"p{i}" for i in range(len(plan.phrases))]
    params.setdefault("avg_length", 30.0)
    norm = (
        f"({K1 + 1!r}::float8 / (1 + {K1!r}::float8 * ({1 - B!r}::float8"
        f" + {B!r}::float8 * length(m.search) / greatest(%(avg_length)s::float8, 1))))"
    )
    # Every number is float8: numeric arithmetic costs several times more per row.
    own_parts, lift_parts = [], []
    for key, weight in zip(keys, idfs, strict=True):
        held = (
            f"(m.search @@ q.a_{key})::int::float8"
            f" + {float(plan.date_weight)!r}::float8 * (m.search @@ q.c_{key})::int::float8"
            f" + {NAME_WEIGHT!r}::float8 * (m.search @@ q.d_{key})::int::float8"
        )
        own_parts.append(f"{weight!r}::float8 * ({held})")
        lift_parts.append(f"{weight!r}::float8 * (m.search @@ q.b_{key})::int::float8")
    factor = factors(plan, params)
    own = f"((({' + '.join(own_parts)}) * {norm}){factor})::float8"
    if plan.context_weight <= 0:
        return own, "0.0::float8"
    weight, answer = float(plan.context_weight), float(plan.context_weight * ANSWER_FACTOR)
    lift = (
        f"((CASE WHEN (m.search_flags & {FLAG_ANSWER}) <> 0 THEN {answer!r}::float8"
        f" ELSE {weight!r}::float8 END)"
        f" * ({' + '.join(lift_parts)}) * {norm}){factor}"
    )
    lift = f"({lift})::float8"
    return own, lift


def factors(plan: SearchQuery, params: dict[str, Any]) -> str:
    """The plan's rank factors as a product (`` * (...)`` each)."""
    out = ""
    if plan.speakers:
        params["speakers"] = list(plan.speakers)
        out += (
            " * (CASE WHEN lower(m.name) = ANY(%(speakers)s)"
            " OR lower(m.metadata->>'speaker') = ANY(%(speakers)s)"
            f" THEN {SPEAKER_BOOST}::float8 ELSE 1.0::float8 END)"
        )
    if plan.boost_start is not None and plan.boost_end is not None:
        params["boost_start"], params["boost_end"] = utc(plan.boost_start), utc(plan.boost_end)
        out += (
            " * (CASE WHEN m.created_at >= %(boost_start)s AND m.created_at < %(boost_end)s"
            f" THEN {DATE_BOOST}::float8 ELSE 1.0::float8 END)"
        )
    if plan.question_factor != 1.0:
        out += (
            f" * (CASE WHEN (m.search_flags & {FLAG_QUESTION}) <> 0"
            f" THEN {float(plan.question_factor)!r}::float8 ELSE 1.0::float8 END)"
        )
    return out


__all__ = ["K1", "B", "factors", "idf", "labelled", "queries", "score", "weights"]
