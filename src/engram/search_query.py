r"""Turn plain user text into safe search terms, the same way for every backend.

A search query is what a person (or a model calling a tool) typed: it is never
query syntax. ``"price*"``, ``NEAR(a b)``, ``-x``, ``col:word``, ``%``, ``_``
and unbalanced quotes or parentheses are just characters. This module reduces
the text to a list of words, then each backend builds its own query from those
words with values it quotes itself (``fts5_match`` for SQLite FTS5; PostgreSQL
passes the words as bind parameters; the JSON backend compares stems).

Semantics every backend shares:

* a *term* is a run of Unicode letters and digits, after NFKC normalisation,
  lower-cased (``[^\W_]+``, so ``foo_bar`` is two terms, like the FTS5
  ``unicode61`` tokenizer sees it); duplicates are dropped, order kept;
* at most :data:`MAX_TERMS` terms are kept, and a term longer than
  :data:`MAX_TERM_CHARS` characters is dropped (no one searches for it, and it
  would only slow the query down);
* a message matches when it contains **any** of the terms (on their stems);
  messages that contain **all** of them rank before those that contain only
  some (backends run the AND query first, then fill up with the OR query);
* a query with no term returns no hit (never "everything").
"""

from __future__ import annotations

import re
import unicodedata

#: Most terms taken from one query; the rest of the text is ignored.
MAX_TERMS = 32

#: Longest term kept, in characters; longer runs are dropped.
MAX_TERM_CHARS = 64

#: Most characters of a query that are even looked at (bounds the regex work).
MAX_QUERY_CHARS = 4096

# Letters and digits only: "\w" minus "_". Mirrors the unicode61 tokenizer's idea of a word.
_WORD = re.compile(r"[^\W_]+")


def terms(text: str) -> list[str]:
    """The searchable words of ``text``: lower-cased, de-duplicated, in order.

    Args:
        text: plain user text, any characters at all.

    Returns:
        At most :data:`MAX_TERMS` words, each at most :data:`MAX_TERM_CHARS`
        characters long; an empty list when there is nothing to search for.
    """
    normalized = unicodedata.normalize("NFKC", text[:MAX_QUERY_CHARS]).lower()
    out: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(normalized):
        if len(word) > MAX_TERM_CHARS or word in seen:
            continue
        seen.add(word)
        out.append(word)
        if len(out) == MAX_TERMS:
            break
    return out


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


__all__ = ["MAX_QUERY_CHARS", "MAX_TERMS", "MAX_TERM_CHARS", "fts5_match", "quote_fts5", "terms"]
