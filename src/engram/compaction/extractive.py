"""The offline summary: the conversation's statements, the best of them, in order.

:func:`extractive_summary` writes what a person taking notes would: the
statements of :func:`engram.compaction.statements.statements` (decisions first
in rank, then preferences, the user's facts, the assistant's records, its
explanations last), never a question, a pleasantry or a quoted turn. Pieces
are scored by what they say (kind, numbers, names, keywords shared with the
rest, position) and picked until the word range of the summary's version is
met; pieces that repeat a chosen one are used only when nothing else fills
it. The previous summary is the distilled past: its sentences rank first.

A sentence is only cut when no whole one can fill the range (text without
punctuation). A conversation that states nothing at all (only greetings or
questions) is summarized by its own labelled turns ("User: Hello."), so the
summary is never empty. Deterministic: the same input gives the same output.

Messages with ids make a cited summary (:mod:`engram.compaction.citations`):
paragraphs of at most :data:`PARAGRAPH_SENTENCES` sentences, each ending with
the ids of the messages its sentences came from. The previous summary is read
with its markers: its sentences keep their paragraph and its citation.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from engram.compaction.citations import Cites, from_ids, parse_cited, union
from engram.compaction.citations import marker as _marker
from engram.compaction.statements import DECISION, FACT, NOTE, PREFERENCE, Statement, statements
from engram.compaction.transcript import (
    MessageLike,
    as_openai,
    message_id,
    split_sentences,
    text_of,
)
from engram.compaction.words import count_words, target_words

#: Score taken off a piece of fewer words than this with no number: a heading
#: ("Attendees") or a fragment says little on its own.
MIN_PIECE_WORDS = 3
#: Pieces sharing this share of their content words with a chosen piece are
#: only used when nothing else fills the target (repetitive chats stay varied).
REDUNDANT_OVERLAP = 0.6
#: Rank of each kind of statement.
KIND_SCORES = {DECISION: 3.0, PREFERENCE: 2.0, FACT: 1.0, NOTE: 0.0}
#: Rank of a sentence of the previous summary (kept first: it is the distilled past).
PREVIOUS_SCORE = 3.0
#: Most new sentences in one cited paragraph.
PARAGRAPH_SENTENCES = 3

_STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into about as is are
    was were be been being it its this that these those i you he she we they me my your our
    their them his her not no yes do does did done have has had can could would should will
    shall may might must just so very too also than there here what which who whom whose when
    where why how all any some each more most other such only own same few both again once
    user assistant tool said says ok okay please thanks thank decided suggested""".split()
)
_IMPORTANT = re.compile(
    r"\b(?:important|critical|key|must|deadline|remember|note that|finding)\b", re.IGNORECASE
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]+")
_PROPER = re.compile(r"(?<=[a-z0-9,;] )[A-Z][\w&'-]+")
_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "system": "System"}


@dataclass(frozen=True, slots=True)
class _Raw:
    text: str
    score: float
    ids: frozenset[int] = frozenset()  # the messages it came from
    cites: Cites = ()  # its previous paragraph's citation
    paragraph: int | None = None  # its paragraph in the previous summary


@dataclass(frozen=True, slots=True)
class _Piece:
    order: int  # position in the output order
    text: str
    words: int
    score: float
    terms: frozenset[str]
    raw: _Raw


def extractive_summary(
    messages: Sequence[MessageLike], *, previous_summary: str | None, version: int
) -> str:
    """Summary ``version`` of ``previous_summary`` plus ``messages``, without a model.

    It has between ``target_words(version)`` low and high words whenever what
    the conversation states has at least ``low`` words; less is returned whole
    (a summary cannot say more than was said). Messages with ids give cited
    text (see the module docstring); the word range counts the sentences only.
    """
    low, high = target_words(version)
    converted = [as_openai(m) for m in messages]
    ids = [message_id(m) for m in messages]
    raw: list[_Raw] = []
    for number, (text, cites) in enumerate(parse_cited(previous_summary or "")):
        raw.extend(
            _Raw(s, PREVIOUS_SCORE, cites=cites, paragraph=number) for s in split_sentences(text)
        )
    said = statements(converted)
    last = len(converted) - 1
    for statement in said:
        position = 1.0 if statement.message == 0 else 0.5 if statement.message >= last - 1 else 0.0
        raw.append(_Raw(statement.text, position + _score(statement), _ids(ids, statement.message)))
    if not said and converted:
        raw.extend(_labelled_turns(converted, ids))
    chosen = _select(_pieces(raw), low, high)
    order = [i for i in ids if i is not None]
    if not any(piece.ids or piece.cites for _, piece in chosen):
        return " ".join(text for text, _ in chosen)
    return _paragraphs(chosen, order)


def _ids(ids: list[int | None], index: int) -> frozenset[int]:
    found = ids[index] if 0 <= index < len(ids) else None
    return frozenset() if found is None else frozenset({found})


def _paragraphs(chosen: list[tuple[str, _Raw]], order: list[int]) -> str:
    """Chosen sentences as cited paragraphs: the previous summary's kept together, then threes."""
    groups: list[tuple[object, list[tuple[str, _Raw]]]] = []
    for text, piece in chosen:
        key: object = ("previous", piece.paragraph) if piece.paragraph is not None else "new"
        if (
            groups
            and groups[-1][0] == key
            and (key != "new" or len(groups[-1][1]) < PARAGRAPH_SENTENCES)
        ):
            groups[-1][1].append((text, piece))
        else:
            groups.append((key, [(text, piece)]))
    paragraphs = []
    for _, members in groups:
        ids = [i for _, piece in members for i in piece.ids]
        cites = union(from_ids(ids, order), *(piece.cites for _, piece in members))
        body = " ".join(text for text, _ in members)
        paragraphs.append(f"{body} {_marker(cites)}" if cites else body)
    return "\n\n".join(paragraphs)


def _score(statement: Statement) -> float:
    """What a statement is worth by what it says (its position is scored by the caller)."""
    text = statement.text
    score = KIND_SCORES[statement.kind] + (0.5 if statement.explicit else 0.0)
    if statement.role == "tool":
        score -= 1.0
    if _IMPORTANT.search(text):
        score += 1.0
    if "http://" in text or "https://" in text:
        score += 1.0
    digits = any(ch.isdigit() for ch in text)
    score += (0.5 if digits else 0.0) + min(len(_PROPER.findall(text)), 2) * 0.25
    if len(text.split()) < MIN_PIECE_WORDS and not digits:
        score -= 1.5
    return score


def _labelled_turns(messages: list[dict[str, object]], ids: list[int | None]) -> list[_Raw]:
    """The turns as said ("User: Hello."), for a conversation that states nothing."""
    out = []
    for index, message in enumerate(messages):
        role = str(message.get("role", ""))
        label = _LABELS.get(role, role.capitalize() or "Message")
        for sentence in split_sentences(text_of(message)):
            out.append(_Raw(f"{label}: {sentence}", 1.0 if index == 0 else 0.0, _ids(ids, index)))
    return out


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def _pieces(raw: list[_Raw]) -> list[_Piece]:
    frequency = Counter(w for item in raw for w in set(_content_words(item.text)))
    pieces: list[_Piece] = []
    seen: set[str] = set()
    for order, item in enumerate(raw):
        text, base = item.text, item.score
        identity = " ".join(text.split()).casefold()
        if identity in seen:
            continue
        seen.add(identity)
        words = _content_words(text)
        keyword = (
            sum(math.log1p(frequency[w]) for w in set(words)) / max(8, len(words)) if words else 0.0
        )
        pieces.append(
            _Piece(order, text, count_words(text), base + min(keyword, 1.0), frozenset(words), item)
        )
    return pieces


def _select(pieces: list[_Piece], low: int, high: int) -> list[tuple[str, _Raw]]:
    """The sentences that fill the range, in output order, each with where it came from."""
    ranked = sorted(pieces, key=lambda p: (-p.score, p.order))
    by_order = {piece.order: piece.raw for piece in pieces}
    chosen: dict[int, str] = {}
    chosen_terms: list[frozenset[str]] = []
    total = 0
    # Whole sentences only. Pass 1 skips pieces that repeat a chosen one; pass 2 accepts them.
    for allow_redundant in (False, True):
        for piece in ranked:
            if total >= low:
                break
            if piece.order in chosen or total + piece.words > high:
                continue
            if not allow_redundant and _redundant(piece.terms, chosen_terms):
                continue
            chosen[piece.order] = _finish(piece.text)
            chosen_terms.append(piece.terms)
            total += piece.words
    # Still short of the range (sentences longer than the room left, as in text
    # without punctuation): fill with the start of the best piece that did not fit.
    for piece in ranked:
        if total >= low or high - total <= 0:
            break
        if piece.order in chosen:
            continue
        words = piece.text.split()[: high - total]
        chosen[piece.order] = " ".join(words).rstrip(".,;:") + "…"
        total += len(words)
    return [(chosen[order], by_order[order]) for order in sorted(chosen)]


def _redundant(terms: frozenset[str], chosen: list[frozenset[str]]) -> bool:
    if not terms:
        return False
    for other in chosen:
        if len(terms & other) >= REDUNDANT_OVERLAP * min(len(terms), len(other) or 1):
            return True
    return False


def _finish(text: str) -> str:
    return text if re.search(r"[.!?…][\"”]?$", text) else text + "."
