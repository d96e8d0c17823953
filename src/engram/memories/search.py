"""Ranked term match over a scope's memories. Pure code.

A scope holds at most a few dozen short memories, so a scan beats an index.
The score of a memory is the share of the query's words it contains (words
compared after case, accent and simple suffix folding, so "meetings" matches
"meeting"), plus a bonus when it contains the whole query as a phrase. Ties:
newest first. A query with no searchable word matches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.memories.records import STOPWORDS, normalize
from engram.models import MemoryRecord

#: Score bonus of a memory containing the whole query as a phrase.
PHRASE_BONUS = 0.5
_SUFFIXES = ("ing", "ed")


def stem(word: str) -> str:
    """A crude suffix-folded form of one normalized word."""
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def terms(text: str) -> frozenset[str]:
    """The searchable, folded words of ``text`` (stop words left out)."""
    return frozenset(stem(w) for w in normalize(text).split() if w not in STOPWORDS)


def rank(
    query: str, memories: Sequence[MemoryRecord], *, limit: int
) -> list[tuple[float, MemoryRecord]]:
    """Memories matching ``query``, best first, with their scores (0 < score <= 1.5)."""
    wanted = terms(query)
    if not wanted:
        return []
    phrase = normalize(query)
    scored = []
    for memory in memories:
        found = terms(memory.content)
        share = len(wanted & found) / len(wanted)
        if share == 0:
            continue
        if phrase and f" {phrase} " in f" {normalize(memory.content)} ":
            share += PHRASE_BONUS
        scored.append((share, memory))
    scored.sort(key=lambda item: (-item[0], -item[1].created_at.timestamp(), -item[1].id))
    return scored[:limit]
