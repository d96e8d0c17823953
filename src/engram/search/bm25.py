"""An inverted index kept at write time, with BM25 ranking: search for the Python backends.

The in-memory backend keeps one :class:`TextIndex` per session, updated by
every append; the jsondir backend keeps one per session document, built when
the document is first searched and extended by its own appends (rebuilt only
when another process rewrote the document). A search reads the postings of
the query's stems instead of re-stemming the whole scope. The four fields are
those every backend indexes (content, name, neighbour context, date words; see
:mod:`engram.search.index`), weighted as the SQLite backend weights its
``bm25()`` columns, and the plan's rank factors apply as they do there. A
scope-wide search merges the sessions' postings and counts document
frequencies over all of them, so its scores are those of one index over the
scope.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from engram.models import Message, SearchHit
from engram.search.index import (
    FLAG_ANSWER,
    FLAG_OWN_RESULT,
    FLAG_QUESTION,
    LOOKBACK,
    Recent,
    entries,
)
from engram.search.lift import Scored, missing_sources, pool_size, settle
from engram.search.query import (
    ANSWER_FACTOR,
    DATE_BOOST,
    NAME_WEIGHT,
    SPEAKER_BOOST,
    SearchQuery,
)
from engram.search.stems import Stemmer, highlight

#: BM25 parameters (those of SQLite FTS5).
K1 = 1.2
B = 0.75

_WORD = re.compile(r"[^\W_]+")

# field order in a posting: content, name, context, dates
Posting = tuple[int, int, int, int]


@dataclass(slots=True)
class Doc:
    """What the index keeps of one message beside its postings."""

    length: int
    created_at: datetime
    flags: int
    speakers: frozenset[str]
    stems: tuple[str, ...]  # the content's stems, in order (phrases are checked on them)


@dataclass
class TextIndex:
    """The postings of one session: stem -> message id -> counts per field."""

    postings: dict[str, dict[int, Posting]] = field(default_factory=dict)
    docs: dict[int, Doc] = field(default_factory=dict)
    total_length: int = 0

    def add(
        self,
        stemmer: Stemmer,
        message_id: int,
        texts: Sequence[str],
        *,
        created_at: datetime,
        flags: int,
        speakers: Iterable[str],
    ) -> None:
        """Index one message: ``texts`` are its content, name, context and date words."""
        counts: dict[str, list[int]] = {}
        length = 0
        content_stems: tuple[str, ...] = ()
        for position, text in enumerate(texts):
            stems = [stemmer.stem(w) for w in _WORD.findall(text.casefold())]
            if position == 0:
                content_stems = tuple(stems)
            length += len(stems)
            for stem in stems:
                counts.setdefault(stem, [0, 0, 0, 0])[position] += 1
        for stem, tf in counts.items():
            self.postings.setdefault(stem, {})[message_id] = (tf[0], tf[1], tf[2], tf[3])
        self.docs[message_id] = Doc(
            length, created_at, flags, frozenset(s.casefold() for s in speakers), content_stems
        )
        self.total_length += length


def add_messages(
    index: TextIndex,
    speakers: set[str],
    previous: Sequence[Message],
    batch: Sequence[Message],
    zone: ZoneInfo,
) -> None:
    """Index stored ``batch`` (after ``previous``, the session's messages before it)."""
    recent = [Recent(m.role, m.content, m.tool_calls) for m in previous[-LOOKBACK:]]
    stemmer = Stemmer()
    for entry, message in zip(entries(recent, batch, zone), batch, strict=True):
        speaker = message.metadata.get("speaker") if message.metadata else None
        names = [n for n in (message.name, speaker) if isinstance(n, str) and n]
        speakers.update(names)
        texts = (message.content, message.name or "", entry.context, entry.dates)
        index.add(
            stemmer,
            message.id,
            texts,
            created_at=message.created_at,
            flags=entry.flags,
            speakers=names,
        )


def search(
    sessions: Sequence[tuple[TextIndex, Sequence[Message]]],
    plan: SearchQuery,
    *,
    roles: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
    limit: int,
) -> list[SearchHit]:
    """Best hits of ``plan`` over sessions given as (index, messages in id order).

    A message lifted by its neighbour context never ranks above the turn the
    context is (:func:`engram.search.lift.settle`).
    """
    stemmer = Stemmer()
    wanted = stemmer.stems(plan.words())

    def kept(message: Message | None) -> bool:
        return not (
            message is None
            or message.id in plan.exclude_ids
            or (roles is not None and message.role not in roles)
            or (start is not None and message.created_at < start)
            or (end is not None and message.created_at >= end)
        )

    ranked = rank([ix for ix, _ in sessions], plan, stemmer)
    every = {item.id: (item, position) for item, position in ranked}
    pool: list[Scored] = []
    found: dict[int, Message] = {}
    for item, position in ranked:
        message = _by_id(sessions[position][1], item.id)
        if message is not None and kept(message):
            pool.append(item)
            found[item.id] = message
            if len(pool) == pool_size(limit):
                break
    sources: dict[int, int] = {}
    for item in pool:
        source = _turn_before(sessions[every[item.id][1]][1], item.id) if item.capped else None
        if source is not None:
            sources[item.id] = source
    outside = {}
    for source in missing_sources(pool, sources):
        scored, position = every.get(source, (None, 0))
        if scored is not None and kept(_by_id(sessions[position][1], source)):
            outside[source] = scored
    hits: list[SearchHit] = []
    for message_id, score in settle(pool, sources, outside)[:limit]:
        message = found[message_id]
        words = stemmer.words(message.content)
        snippet = highlight(message.content, words, wanted, name=message.name)
        hits.append(SearchHit(message=message, score=score, snippet=snippet))
    return hits


def _by_id(rows: Sequence[Message], message_id: int) -> Message | None:
    i = bisect.bisect_left(rows, message_id, key=lambda m: m.id)
    return rows[i] if i < len(rows) and rows[i].id == message_id else None


def _turn_before(rows: Sequence[Message], message_id: int) -> int | None:
    """The id of the user or assistant message with text before ``message_id``."""
    i = bisect.bisect_left(rows, message_id, key=lambda m: m.id)
    for message in reversed(rows[:i]):
        if message.role in ("user", "assistant") and message.content.strip():
            return message.id
    return None


def rank(
    indexes: Sequence[TextIndex], plan: SearchQuery, stemmer: Stemmer
) -> list[tuple[Scored, int]]:
    """Every match with its index position, best first by its score before :func:`settle`."""
    n_docs = sum(len(ix.docs) for ix in indexes)
    if n_docs == 0:
        return []
    avg = max(1.0, sum(ix.total_length for ix in indexes) / n_docs)
    # The message's own fields, then its neighbour context scored apart (as the SQL
    # backends do): the context lifts a message, never outweighs its own words.
    passes = [(False, (1.0, NAME_WEIGHT, 0.0, plan.date_weight))]
    if plan.context_weight > 0:
        passes.append((True, (0.0, 0.0, 1.0, 0.0)))
    groups = [[stemmer.stem(t)] for t in plan.terms]
    groups += [[stemmer.stem(w) for w in phrase] for phrase in plan.phrases]
    scores: dict[tuple[int, int], list[float]] = {}
    for context, weights in passes:
        for group in groups:
            found = _group_postings(indexes, group, weights)
            if not found:
                continue
            idf = math.log(1 + (n_docs - len(found) + 0.5) / (len(found) + 0.5))
            for key, tf in found.items():
                doc = indexes[key[1]].docs[key[0]]
                norm = K1 * (1 - B + B * doc.length / avg)
                part = idf * tf * (K1 + 1) / (tf + norm)
                if context:
                    answer = ANSWER_FACTOR if doc.flags & FLAG_ANSWER else 1.0
                    part *= plan.context_weight * answer
                scores.setdefault(key, [0.0, 0.0])[context] += part
    out = []
    for (message_id, position), (own, lift) in scores.items():
        doc = indexes[position].docs[message_id]
        factor = _factor(plan, doc)
        if factor:
            out.append((Scored(message_id, own * factor, lift * factor, doc.flags), position))
    out.sort(key=lambda item: (item[0].total, item[0].id), reverse=True)
    return out


def _group_postings(
    indexes: Sequence[TextIndex], group: list[str], weights: tuple[float, ...]
) -> dict[tuple[int, int], float]:
    """Weighted term frequency of a word (or phrase) in every message that holds it."""
    found: dict[tuple[int, int], float] = {}
    for position, ix in enumerate(indexes):
        lists = [ix.postings.get(stem) for stem in group]
        if any(p is None for p in lists):
            continue
        first = lists[0]
        assert first is not None
        for message_id, tf in first.items():
            if len(group) > 1 and not _has_phrase(ix.docs[message_id].stems, group):
                continue
            weighted = sum(w * c for w, c in zip(weights, tf, strict=True) if w > 0)
            if weighted > 0:
                found[(message_id, position)] = weighted
    return found


def _has_phrase(stems: tuple[str, ...], phrase: list[str]) -> bool:
    size = len(phrase)
    return any(list(stems[i : i + size]) == phrase for i in range(len(stems) - size + 1))


def _factor(plan: SearchQuery, doc: Doc) -> float:
    """The plan's rank factor for a message; 0 when it must not be returned."""
    if doc.flags & FLAG_OWN_RESULT and not plan.include_own_results:
        return 0.0
    factor = 1.0
    if plan.speakers and doc.speakers.intersection(plan.speakers):
        factor *= SPEAKER_BOOST
    if plan.boost_start is not None and plan.boost_end is not None:
        if plan.boost_start <= doc.created_at < plan.boost_end:
            factor *= DATE_BOOST
    if doc.flags & FLAG_QUESTION:
        factor *= plan.question_factor
    return factor


__all__ = ["K1", "B", "Doc", "TextIndex", "rank"]
