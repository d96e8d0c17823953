"""Evidence a question needs, and whether a prompt kept it in view. Pure code.

A simple, documented measure of what a policy loses. A word is *rare* in a
conversation when it has at least :data:`MIN_LETTERS` letters, is no stop
word, and appears in at most :data:`MAX_SHARE` of the conversation's messages
(and at least in two: a word said once is evidence of nothing). A question's
*evidence* is the set of its rare words that an earlier message of the
conversation also holds: the question refers back to that message. The
prompt built to answer the question *keeps an evidence word in view* when the
word appears anywhere in the prompt besides the question itself: in a message
of the window, or in the summary, important data or another section. A policy
that drops the message but keeps the fact in its summary keeps it in view.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from engram.intake.parts import content_text
from engram.search.query import STOP_WORDS

#: Letters a word needs to count (short words are rarely topics).
MIN_LETTERS = 4
#: Most messages (as a share of the conversation) a rare word appears in.
MAX_SHARE = 0.05

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> set[str]:
    """The distinct candidate words of ``text``: lower case, long enough, no stop word."""
    return {
        w
        for w in (m.group().lower() for m in _WORD.finditer(text))
        if len(w) >= MIN_LETTERS and w not in STOP_WORDS and not w.isdigit()
    }


def rare_words(texts: Sequence[str]) -> set[str]:
    """Words of ``texts`` (one per message) rare enough to be evidence."""
    seen: Counter[str] = Counter()
    for text in texts:
        seen.update(words(text))
    cap = max(2, int(len(texts) * MAX_SHARE))
    return {w for w, n in seen.items() if 2 <= n <= cap}


class Evidence:
    """Walks a conversation in order: the evidence of each question, and what a prompt kept.

    Feed every message to :meth:`saw` in order; before feeding a question,
    :meth:`of` gives its evidence (the rare words an earlier message holds).
    """

    def __init__(self, rare: set[str]) -> None:
        """Measure with the conversation's ``rare`` words (:func:`rare_words`)."""
        self._rare = rare
        self._seen: set[str] = set()

    def of(self, question: str) -> set[str]:
        """The evidence of ``question``: its rare words an earlier message holds."""
        return words(question) & self._rare & self._seen

    def saw(self, text: str) -> None:
        """Take one more message of the conversation."""
        self._seen |= words(text) & self._rare


def in_view(wanted: set[str], prompt: Sequence[Mapping[str, Any]], question: str) -> set[str]:
    """The words of ``wanted`` the prompt shows outside the question itself."""
    if not wanted:
        return set()
    texts = [content_text(m.get("content")) for m in prompt]
    asked = next(
        (i for i in range(len(prompt) - 1, -1, -1)
         if prompt[i].get("role") == "user" and texts[i] == question),
        None,
    )  # fmt: skip
    shown: set[str] = set()
    for index, text in enumerate(texts):
        if index != asked:  # the question's own words are no evidence
            shown |= wanted & words(text)
    return shown
