"""Stem matching, scoring and ``[match]`` snippets computed in Python.

The jsondir backend searches with these; the PostgreSQL backend uses them for
the snippet when ``ts_headline`` (which parses the raw text with its own
tokenizer) finds nothing to mark, e.g. ``3`` inside ``3.14``. Words are runs
of letters and digits, as in :mod:`engram.search_query`, stemmed with the
Snowball English stemmer (the algorithm PostgreSQL's ``english`` uses too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import snowballstemmer

from engram.models import Message

#: Words of context kept before the first match in a snippet (twice that after).
SNIPPET_WORDS = 12
#: Weight of a match in the speaker's name relative to one in the content.
NAME_WEIGHT = 0.4
#: Bonus that puts messages holding every query word before the others.
ALL_TERMS_BONUS = 1000.0

_WORD = re.compile(r"[^\W_]+")

Word = tuple[int, int, str]  # start, end, stem


class Stemmer:
    """Snowball English stems of words (one instance per thread: the stemmer keeps state)."""

    def __init__(self) -> None:
        self._stemmer = snowballstemmer.stemmer("english")

    def stem(self, word: str) -> str:
        """The stem of one lower-cased word."""
        return str(self._stemmer.stemWord(word.casefold()))

    def stems(self, terms: Iterable[str]) -> set[str]:
        """Stems of every word in ``terms``."""
        return {self.stem(w) for term in terms for w in _WORD.findall(term)}

    def words(self, text: str) -> list[Word]:
        """Every word of ``text`` with its position and stem."""
        return [(m.start(), m.end(), self.stem(m.group(0))) for m in _WORD.finditer(text)]


def score_message(stemmer: Stemmer, wanted: set[str], message: Message) -> tuple[float, str] | None:
    """``(score, snippet)`` when ``message`` has any wanted stem in content or name, else None."""
    words = stemmer.words(message.content)
    content_hits = [w for w in words if w[2] in wanted]
    name_hits = [w for w in stemmer.words(message.name or "") if w[2] in wanted]
    if not content_hits and not name_hits:
        return None
    distinct = {w[2] for w in content_hits} | {w[2] for w in name_hits}
    score = len(distinct) + 0.1 * len(content_hits) + NAME_WEIGHT * len(name_hits)
    if distinct >= wanted:
        score += ALL_TERMS_BONUS
    return score, highlight(message.content, words, wanted, name=message.name)


def highlight(text: str, words: list[Word], wanted: set[str], *, name: str | None = None) -> str:
    """A window of words around the first match, every match wrapped in ``[`` and ``]``.

    When only the speaker's name matched, the snippet is ``name: <start of text>``.
    """
    first = next((i for i, w in enumerate(words) if w[2] in wanted), None)
    lo = 0 if first is None else max(0, first - SNIPPET_WORDS)
    hi = min(len(words), (first or 0) + 2 * SNIPPET_WORDS + 1)
    if not words:
        return f"{name}: {text}" if name else text
    cut_start = words[lo][0] if lo > 0 else 0
    cut_end = words[hi - 1][1] if hi < len(words) else len(text)
    out = []
    pos = cut_start
    for start, end, stem in words[lo:hi]:
        if stem in wanted:
            out.append(text[pos:start])
            out.append(f"[{text[start:end]}]")
            pos = end
    out.append(text[pos:cut_end])
    body = ("..." if cut_start > 0 else "") + "".join(out) + ("..." if cut_end < len(text) else "")
    return f"{name}: {body}" if first is None and name else body
