r"""Turn plain user text into a search plan, the same way for every backend.

A search query is what a person (or a model calling a tool) typed: it is never
query syntax. ``"price*"``, ``NEAR(a b)``, ``-x``, ``col:word``, ``%``, ``_``
and unbalanced parentheses are just characters. This module reduces the text to
words and quoted phrases, then each backend builds its own query from them with
values it quotes itself (``fts5_match`` for SQLite FTS5; PostgreSQL passes the
words as bind parameters; the in-memory and JSON backends compare stems).

Semantics every backend shares:

* a *term* is a run of Unicode letters and digits, after NFKC normalisation,
  lower-cased (``[^\W_]+``, so ``foo_bar`` is two terms, like the FTS5
  ``unicode61`` tokenizer sees it); duplicates are dropped, order kept;
* stop words, question words and generic verbs ("what", "did", "has",
  "made", "say"...) are left out (:data:`STOP_WORDS`); a month name next to a
  number stays ("may 2023"). When nothing is left, every term is kept;
* text between double quotes is a *phrase*: its words must appear together,
  in order;
* a message matches when it contains **any** term or phrase (on their stems):
  one OR query ranked by BM25 (the score of a message grows with the rare
  words it holds), never an AND pass first: ranking the messages that hold
  every word above the rest puts earlier questions, which repeat the words,
  above the answers, which hold one of them and borrow the rest from the turn
  they follow (measured on both retrieval corpora);
* words that name a participant of the conversation (see
  :func:`with_speakers`) leave the match and become a rank boost for that
  participant's own messages;
* at most :data:`MAX_TERMS` terms are kept, and a term longer than
  :data:`MAX_TERM_CHARS` characters is dropped;
* a query with no term returns no hit (never "everything");
* a backend that knows how many messages hold each word may sort the terms
  into tiers (:func:`tiers`): a *common* word (in more than
  :data:`COMMON_SHARE` of the messages) still scores the messages the rarer
  words find, but finds none on its own while the rarer words find enough,
  and a BM25 backend leaves out a word in at least half of the messages
  (BM25 gives it no weight). This bounds the messages a search must score;
  the tiers never change which words are matched when the rarer words find
  fewer messages than asked for.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import combinations

#: Most terms taken from one query; the rest of the text is ignored.
MAX_TERMS = 32

#: Longest term kept, in characters; longer runs are dropped.
MAX_TERM_CHARS = 64

#: Most characters of a query that are even looked at (bounds the regex work).
MAX_QUERY_CHARS = 4096

#: Rank factor of a message written by a participant the query names.
SPEAKER_BOOST = 2.0
#: Rank factor of a message inside a date range the query names ("last week").
DATE_BOOST = 1.5
#: Rank factor of a message that only asks (no statement in it): answers rank first.
QUESTION_FACTOR = 0.5
#: BM25 weight of the neighbour-context column (the previous turn) against the message's own.
CONTEXT_WEIGHT = 0.3
#: The context weighs this much more when the previous turn only asks: it is the question
#: the message answers. A reply to a statement is only lifted by it.
ANSWER_FACTOR = 2.0
#: BM25 weight of the date-words column ("8 may 2023 monday").
DATE_WEIGHT = 0.5
#: BM25 weight of the speaker's name.
NAME_WEIGHT = 0.2
#: Share of the indexed messages above which a word is common (see :func:`tiers`).
COMMON_SHARE = 0.05

# Letters and digits only: "\w" minus "_". Mirrors the unicode61 tokenizer's idea of a word.
_WORD = re.compile(r"[^\W_]+")
_PHRASE = re.compile(r'"([^"]*)"')

_MONTHS = frozenset(
    "january february march april may june july august september october november december"
    " jan feb mar apr jun jul aug sep sept oct nov dec".split()
)

#: Words that carry no topic: English stop words, question words, generic verbs.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having he
    her here hers herself him himself his i if in into is isn it its itself just let me
    more most my myself no nor not now of off on once only or other ought our ours
    ourselves out over own same shan she should shouldn so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was wasn we were weren what when where which while who whom whose why will with
    won would wouldn you your yours yourself yourselves s t ll re ve d m o y
    how may might must shall also ever yet many much
    say says said tell tells told mention mentioned mentions talk talked talks speak spoke
    discuss discussed make makes made making get gets got getting go goes went gone going
    know knew known think thought remember recall recalled ask asked asks give gave given
    thing things something anything someone anyone somebody kind sort lot lots way
    happen happened happens time times
    """.split()
)


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """What a backend searches for: words, phrases and how to rank, all plain data.

    Built by :func:`parse`; :func:`with_speakers` and :func:`with_dates` refine
    it. Backends read the fields and never parse text themselves.

    Attributes:
        text: The query as typed.
        terms: Words to match (any of them), lower-cased.
        phrases: Quoted phrases, each a tuple of words that must appear in order.
        speakers: Lower-cased participant names: their messages rank higher.
        boost_start: Start of a date range whose messages rank higher (UTC).
        boost_end: End (excluded) of that range.
        exclude_ids: Message ids never returned (the visible prompt, the question).
        include_own_results: Also return results of Engram's own retrieval tools.
        context_weight: BM25 weight of the neighbour-context column (0 turns it off).
        date_weight: BM25 weight of the date-words column (0 turns it off).
        question_factor: Rank factor of messages that ask (1 turns it off).
        tiered: Let a backend that counts its words search in tiers (see
            :func:`tiers`); False scores every message holding any word.
    """

    text: str
    terms: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...] = ()
    speakers: tuple[str, ...] = ()
    boost_start: datetime | None = None
    boost_end: datetime | None = None
    exclude_ids: frozenset[int] = field(default_factory=frozenset)
    include_own_results: bool = False
    context_weight: float = CONTEXT_WEIGHT
    date_weight: float = DATE_WEIGHT
    question_factor: float = QUESTION_FACTOR
    tiered: bool = True

    @property
    def empty(self) -> bool:
        """True when there is nothing to match (such a query returns no hit)."""
        return not self.terms and not self.phrases

    def words(self) -> list[str]:
        """Every word the query matches on: terms, then the words of phrases."""
        out = list(self.terms)
        for phrase in self.phrases:
            out.extend(w for w in phrase if w not in out)
        return out


def terms(text: str) -> list[str]:
    """The searchable words of ``text``: lower-cased, de-duplicated, in order.

    Args:
        text: plain user text, any characters at all.

    Returns:
        At most :data:`MAX_TERMS` words, each at most :data:`MAX_TERM_CHARS`
        characters long; an empty list when there is nothing to search for.
    """
    out: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(_normalize(text)):
        if len(word) > MAX_TERM_CHARS or word in seen:
            continue
        seen.add(word)
        out.append(word)
        if len(out) == MAX_TERMS:
            break
    return out


def content_terms(words: list[str]) -> list[str]:
    """``words`` without stop words (a month next to a number stays); all if none is left."""
    kept = [
        word
        for i, word in enumerate(words)
        if word not in STOP_WORDS or (word in _MONTHS and _next_to_number(words, i))
    ]
    return kept or words


def parse(text: str, *, stop_words: bool = True) -> SearchQuery:
    """The search plan of plain ``text``: content words and quoted phrases.

    Args:
        text: What the user or the model typed.
        stop_words: Leave out stop words, question words and generic verbs.

    Returns:
        A :class:`SearchQuery`; :attr:`SearchQuery.empty` when nothing is searchable.
    """
    head = text[:MAX_QUERY_CHARS]
    phrases: list[tuple[str, ...]] = []
    singles: list[str] = []
    for quoted in _PHRASE.findall(head):
        found = tuple(terms(quoted))
        if len(found) > 1 and found not in phrases:
            phrases.append(found)
        elif len(found) == 1:
            singles.append(found[0])  # a one-word phrase is just a word
    words = terms(_PHRASE.sub(" ", head) + " " + " ".join(singles))
    if stop_words:
        words = content_terms(words)
    return SearchQuery(text=text, terms=tuple(words), phrases=tuple(phrases[:MAX_TERMS]))


def with_speakers(query: SearchQuery, participants: Iterable[str]) -> SearchQuery:
    """Move the terms that name a participant from the match to the speaker boost.

    When every term names a participant, they stay in the match too (a search
    for "Caroline" alone still finds what mentions her), but not in the
    neighbour context, where every turn after one that calls her by name
    would match.
    """
    names = {_normalize(p) for p in participants if p}
    named = tuple(t for t in query.terms if t in names)
    if not named:
        return query
    rest = tuple(t for t in query.terms if t not in names)
    if not rest and not query.phrases:
        return replace(query, speakers=named, context_weight=0.0)
    return replace(query, terms=rest, speakers=named)


def with_dates(
    query: SearchQuery, start: datetime, end: datetime, words: Collection[str]
) -> SearchQuery:
    """Boost messages in ``[start, end)`` and drop the date phrase's ``words`` from the match."""
    rest = tuple(t for t in query.terms if t not in words)
    return replace(query, terms=rest or query.terms, boost_start=start, boost_end=end)


@dataclass(frozen=True, slots=True)
class Tiers:
    """A query's terms sorted by how many messages hold them (see :func:`tiers`).

    Attributes:
        rare: Terms that find messages on their own.
        common: Terms that score every message found but find one only with
            another common term (see :attr:`pairs`).
        pairs: The pairs of common terms a message must hold both of to be found
            by common terms alone.
        weightless: Terms BM25 gives no weight to: left out of the match.
    """

    rare: tuple[str, ...]
    common: tuple[str, ...] = ()
    pairs: tuple[tuple[str, str], ...] = ()
    weightless: tuple[str, ...] = ()


#: Most common terms paired up (the rarest ones): 8 make 28 pairs.
MAX_PAIRED = 8


def tiers(query: SearchQuery, counts: Mapping[str, int], rows: int, *, bm25: bool = True) -> Tiers:
    """Sort ``query``'s terms by how many of the ``rows`` indexed messages hold them.

    A term in more than :data:`COMMON_SHARE` of the messages is *common*: a
    message holding one common term and nothing rarer is rarely among the
    best, and there are many such messages to score. So the rare terms, the
    phrases and the pairs of common terms find the candidates, and every term
    scores them; a backend searches again with every term when that finds
    fewer messages than asked for. A pair finds only if it is rare itself as
    far as the counts tell (the product of its words' shares is at most
    :data:`COMMON_SHARE`: "april" and "2023" together are as common as "april").
    With ``bm25``, a term in at least half of the messages is *weightless*:
    its BM25 inverse document frequency, ``log((N - n + 0.5) / (n + 0.5))``,
    is not positive (FTS5 then counts it as 1e-6). A query whose every term
    is weightless, or with no rare term, phrase or rare pair, searches with
    all of its terms.

    Args:
        query: The plan whose terms to sort.
        counts: Messages holding each term (a term not in it counts as rare).
        rows: Messages in the index.
        bm25: Leave out weightless terms (only a BM25 ranking ignores them).
    """
    weightless = tuple(t for t in query.terms if bm25 and rows > 0 and 2 * counts.get(t, 0) >= rows)
    scored = tuple(t for t in query.terms if t not in weightless)
    if not scored and not query.phrases:
        return Tiers(rare=query.terms)
    common = tuple(t for t in scored if counts.get(t, 0) > COMMON_SHARE * rows)
    rare = tuple(t for t in scored if t not in common)
    paired = sorted(common, key=lambda t: counts.get(t, 0))[:MAX_PAIRED]
    pairs = tuple(
        (a, b)
        for a, b in combinations(paired, 2)
        if counts.get(a, 0) * counts.get(b, 0) <= COMMON_SHARE * rows * rows
    )
    if not rare and not query.phrases and not pairs:
        return Tiers(rare=scored, weightless=weightless)
    return Tiers(rare=rare, common=common, pairs=pairs, weightless=weightless)


def quote_fts5(term: str) -> str:
    """``term`` as an FTS5 string literal: wrapped in ``"`` with inner ``"`` doubled."""
    return '"' + term.replace('"', '""') + '"'


def fts5_match(words: list[str], *, all_terms: bool = False) -> str:
    """An FTS5 MATCH expression for ``words``, every one quoted as a literal.

    Args:
        words: terms from :func:`terms` (any strings are safe: each is quoted).
        all_terms: join with ``AND`` (every word required) instead of ``OR``.

    Returns:
        The expression, or ``""`` when ``words`` is empty (callers must not
        run an empty MATCH: it is a syntax error in FTS5).
    """
    joiner = " AND " if all_terms else " OR "
    return joiner.join(quote_fts5(word) for word in words)


def fts5_query(query: SearchQuery, columns: Collection[str] | None = None) -> str:
    """The FTS5 MATCH expression of ``query``: terms and phrases OR-ed, each quoted.

    A phrase becomes one FTS5 string of its words (FTS5 reads a quoted string of
    several words as a phrase). ``columns`` limits the match to those columns.
    """
    parts = [quote_fts5(t) for t in query.terms]
    parts += [quote_fts5(" ".join(p)) for p in query.phrases]
    expr = " OR ".join(parts)
    if not expr or not columns:
        return expr
    return "{" + " ".join(columns) + "} : (" + expr + ")"


def fts5_candidates(query: SearchQuery, split: Tiers, columns: Collection[str] | None) -> str:
    """The FTS5 MATCH expression finding the candidates of ``split``.

    Rare terms, phrases and pairs of common terms, OR-ed, each quoted (see
    :func:`fts5_query`).
    """
    parts = [quote_fts5(t) for t in split.rare]
    parts += [quote_fts5(" ".join(p)) for p in query.phrases]
    parts += [f"({quote_fts5(a)} AND {quote_fts5(b)})" for a, b in split.pairs]
    expr = " OR ".join(parts)
    if not expr or not columns:
        return expr
    return "{" + " ".join(columns) + "} : (" + expr + ")"


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _next_to_number(words: list[str], i: int) -> bool:
    return any(0 <= j < len(words) and words[j].isdigit() for j in (i - 1, i + 1))


__all__ = [
    "ANSWER_FACTOR",
    "COMMON_SHARE",
    "CONTEXT_WEIGHT",
    "DATE_BOOST",
    "DATE_WEIGHT",
    "MAX_PAIRED",
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "NAME_WEIGHT",
    "QUESTION_FACTOR",
    "SPEAKER_BOOST",
    "STOP_WORDS",
    "SearchQuery",
    "Tiers",
    "content_terms",
    "fts5_candidates",
    "fts5_match",
    "fts5_query",
    "parse",
    "quote_fts5",
    "terms",
    "tiers",
    "with_dates",
    "with_speakers",
]
