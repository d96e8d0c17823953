"""Stems and ``[match]`` snippets computed in Python.

The in-memory and jsondir indexes stem with these
(:mod:`engram.search.bm25`); the PostgreSQL backend marks the snippet with
them when ``ts_headline`` (which parses the raw text with its own tokenizer)
finds nothing to mark, e.g. ``3`` inside ``3.14``, or the hit matched by its
neighbour context only. Words are runs
of letters and digits, as in :mod:`engram.search.query`, stemmed with the
Snowball English stemmer (the algorithm PostgreSQL's ``english`` uses too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Words kept before the first match in a snippet (twice that after: about 64 in all).
SNIPPET_WORDS = 21
#: Messages up to this many characters are shown whole in a snippet, matches marked.
WHOLE_CHARS = 400

_WORD = re.compile(r"[^\W_]+")

Word = tuple[int, int, str]  # start, end, stem


#: Stems a :class:`Stemmer` remembers before it starts afresh.
MAX_KNOWN_STEMS = 50_000


class Stemmer:
    """Snowball English stems of words (one instance per thread: the stemmer keeps state)."""

    def __init__(self) -> None:
        # Imported here: the package loads every language's stemmer (about 15 ms),
        # which only the scanning indexes and PostgreSQL's snippets need.
        import snowballstemmer

        self._stemmer = snowballstemmer.stemmer("english")
        # Words repeat: a conversation uses a few thousand, and the pure-Python
        # stemmer costs about 10 us a word. Bounded: cleared when full.
        self._known: dict[str, str] = {}

    def stem(self, word: str) -> str:
        """The stem of one lower-cased word."""
        found = self._known.get(word)
        if found is None:
            if len(self._known) >= MAX_KNOWN_STEMS:
                self._known.clear()
            found = self._known[word] = str(self._stemmer.stemWord(word.casefold()))
        return found

    def stems(self, terms: Iterable[str]) -> set[str]:
        """Stems of every word in ``terms``."""
        return {self.stem(w) for term in terms for w in _WORD.findall(term)}

    def words(self, text: str) -> list[Word]:
        """Every word of ``text`` with its position and stem."""
        return [(m.start(), m.end(), self.stem(m.group(0))) for m in _WORD.finditer(text)]


def highlight(text: str, words: list[Word], wanted: set[str], *, name: str | None = None) -> str:
    """A window of words around the first match, every match wrapped in ``[`` and ``]``.

    A text of at most :data:`WHOLE_CHARS` characters is shown whole.

    When only the speaker's name matched, the snippet is ``name: <start of text>``.
    """
    first = next((i for i, w in enumerate(words) if w[2] in wanted), None)
    lo = 0 if first is None else max(0, first - SNIPPET_WORDS)
    hi = min(len(words), (first or 0) + 2 * SNIPPET_WORDS + 1)
    if len(text) <= WHOLE_CHARS:
        lo, hi = 0, len(words)
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
