"""Summarizers: turn folded messages (and the previous summary) into a new summary.

Two implementations of one :class:`Summarizer` protocol:

* :class:`LLMSummarizer` asks the model with the prompt
  (:data:`SUMMARY_PROMPT`) and the progressive word target; it extracts
  important data with the JSON prompt. When the model fails (after the
  client's single retry) it falls back to the offline summarizer and says so
  in ``fallback_reason`` (DESIGN invariant 6).
* :class:`OfflineSummarizer` needs no model: a deterministic extractive
  summary (whole sentences scored by position, keywords, user requests,
  decisions, preferences, numbers and names, picked until the word range is
  met; pleasantries left out) and rule-based important data. A sentence is
  only ever cut when no whole sentence can fill the range (text without
  punctuation). The same input always gives the same output.

Both report their name (``"offline"`` or ``"llm:<model>"``) so the
compaction state records which one wrote it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from engram.compaction.important import (
    EXTRACTION_PROMPT,
    extract_offline,
    validate_important_data,
)
from engram.compaction.transcript import (
    MessageLike,
    as_openai,
    format_transcript,
    split_sentences,
    text_of,
    tool_call_names,
)
from engram.compaction.words import count_words, is_filler, target_words
from engram.errors import LLMBadResponse, LLMError
from engram.llm.client import LLMClient, LLMResult
from engram.models import JSON

log = logging.getLogger(__name__)

#: The summary prompt, verbatim; filled with :meth:`str.format`.
SUMMARY_PROMPT = """\
Summarize this conversation history into a coherent narrative summary.
Focus on:
- Main topics discussed
- Key user requests and AI responses
- Important context and flow
- Any critical information for future reference

Keep it concise but comprehensive. Word count target: {target_words} words.

Previous summary (if exists): {previous_summary}
New messages to incorporate: {new_messages}

Create an updated summary that incorporates new messages while preserving important context from previous summary."""  # noqa: E501

#: Name recorded for summaries written without a model.
OFFLINE_NAME = "offline"
#: Score taken off a piece of fewer words than this with no number: a heading
#: ("Attendees") or a fragment says little on its own.
MIN_PIECE_WORDS = 3
#: Transcript characters sent to the model per call; longer folds are
#: summarized in chunks, each chunk folding into the running summary.
MAX_TRANSCRIPT_CHARS = 120_000


@dataclass(frozen=True, slots=True)
class SummaryOutput:
    """A new summary, who wrote it, what it cost, and why the fallback was used (if it was)."""

    text: str
    summarizer: str
    usage: tuple[LLMResult, ...] = ()
    fallback_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ImportantOutput:
    """Important data extracted from folded messages (validated)."""

    data: JSON
    summarizer: str
    usage: tuple[LLMResult, ...] = ()
    fallback_reason: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Writes summaries and extracts important data. Must not raise on model failure."""

    #: Recorded in the compaction state: "offline" or "llm:<model>".
    name: str

    def summarize(
        self, messages: Sequence[MessageLike], *, previous_summary: str | None, version: int
    ) -> SummaryOutput:
        """Summary ``version`` covering ``previous_summary`` plus ``messages``."""
        ...

    def extract_important(self, messages: Sequence[MessageLike]) -> ImportantOutput:
        """Extract the important data of ``messages`` (not yet merged with older data)."""
        ...


# -- offline ----------------------------------------------------------------------

_STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from into about as is are
    was were be been being it its this that these those i you he she we they me my your our
    their them his her not no yes do does did done have has had can could would should will
    shall may might must just so very too also than there here what which who whom whose when
    where why how all any some each more most other such only own same few both again once
    user assistant tool said says ok okay please thanks thank""".split()
)
_REQUEST = re.compile(
    r"^(?:please|can you|could you|would you|will you|i want|i need|i'd like|i would like|"
    r"help|write|create|make|add|fix|show|explain|find|draft|update|change|remove|build|"
    r"let's|lets)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decision|agreed|let's go with|go with|chose|choose|will use|settled on)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(r"\b(?:prefer|i like|i want|always|never|favorite)\b", re.IGNORECASE)
_IMPORTANT = re.compile(
    r"\b(?:important|critical|key|must|deadline|remember|note that|finding)\b", re.IGNORECASE
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]+")
_PROPER = re.compile(r"(?<=[a-z0-9,;] )[A-Z][\w&'-]+")
_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "system": "System"}


#: Pieces sharing this share of their content words with a chosen piece are
#: only used when nothing else fills the target (repetitive chats stay varied).
REDUNDANT_OVERLAP = 0.6


@dataclass(frozen=True, slots=True)
class _Piece:
    order: int  # position in the output order
    text: str
    words: int
    score: float
    terms: frozenset[str]
    filler: bool = False  # a pleasantry: used only when there is nothing else


class OfflineSummarizer:
    """Deterministic extractive summaries and rule-based important data; no model needed."""

    name = OFFLINE_NAME

    def summarize(
        self, messages: Sequence[MessageLike], *, previous_summary: str | None, version: int
    ) -> SummaryOutput:
        """Pick the best sentences of the previous summary and the messages.

        The result has between ``target_words(version)`` low and high words
        whenever the input has at least ``low`` words; a shorter input is
        returned whole (a summary cannot be longer than what it summarizes).
        """
        low, high = target_words(version)
        pieces = _pieces(messages, previous_summary)
        return SummaryOutput(text=_select(pieces, low, high), summarizer=self.name)

    def extract_important(self, messages: Sequence[MessageLike]) -> ImportantOutput:
        """Rule-based important data (see :func:`engram.compaction.important.extract_offline`)."""
        data = extract_offline([as_openai(m) for m in messages])
        return ImportantOutput(data=data, summarizer=self.name)


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def _sentence_score(role: str, sentence: str, first: bool) -> float:
    """What a sentence is worth by what it says (its position is scored by the caller)."""
    score = 0.5 if first else 0.0
    if role == "user":
        score += 0.5
        if _REQUEST.search(sentence):
            score += 1.5
        elif "?" in sentence:
            score += 0.75
    elif role == "tool":
        score -= 1.0
    if _DECISION.search(sentence):
        score += 2.0
    if _PREFERENCE.search(sentence):
        score += 1.5
    if _IMPORTANT.search(sentence):
        score += 1.0
    if "http://" in sentence or "https://" in sentence:
        score += 1.0
    digits = any(ch.isdigit() for ch in sentence)
    score += (0.5 if digits else 0.0) + min(len(_PROPER.findall(sentence)), 2) * 0.25
    if len(sentence.split()) < MIN_PIECE_WORDS and not digits:
        score -= 1.5
    return score


def _pieces(messages: Sequence[MessageLike], previous_summary: str | None) -> list[_Piece]:
    raw: list[tuple[str, float]] = []  # (text, base score) in output order
    for sentence in split_sentences(previous_summary or ""):
        # The previous summary already is the distilled past: keep it first.
        raw.append((sentence, 3.0))
    converted = [as_openai(m) for m in messages]
    last = len(converted) - 1
    for index, message in enumerate(converted):
        role = str(message.get("role", ""))
        label = _LABELS.get(role, role.capitalize() or "Message")
        position = 1.0 if index == 0 else 0.5 if index >= last - 1 else 0.0
        names = tool_call_names(message)
        if names:
            raw.append((f"Assistant called {', '.join(names)}.", 0.3 + position))
        for number, sentence in enumerate(split_sentences(text_of(message))):
            raw.append(
                (f"{label}: {sentence}", position + _sentence_score(role, sentence, number == 0))
            )
    frequency = Counter(w for text, _ in raw for w in set(_content_words(text)))
    pieces: list[_Piece] = []
    seen: set[str] = set()
    for order, (text, base) in enumerate(raw):
        identity = " ".join(text.split()).casefold()
        if identity in seen:
            continue
        seen.add(identity)
        words = _content_words(text)
        keyword = (
            sum(math.log1p(frequency[w]) for w in set(words)) / max(8, len(words)) if words else 0.0
        )
        score = base + min(keyword, 1.0)
        body = text.split(": ", 1)[-1]
        pieces.append(
            _Piece(order, text, count_words(text), score, frozenset(words), is_filler(body))
        )
    if all(p.filler for p in pieces):
        # Nothing but pleasantries: they are the conversation, keep them.
        pieces = [dataclasses.replace(p, filler=False) for p in pieces]
    return pieces


def _select(pieces: list[_Piece], low: int, high: int) -> str:
    ranked = sorted(pieces, key=lambda p: (-p.score, p.order))
    chosen: dict[int, str] = {}
    chosen_terms: list[frozenset[str]] = []
    total = 0
    ranked = [p for p in ranked if not p.filler]
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
    return " ".join(chosen[order] for order in sorted(chosen))


def _redundant(terms: frozenset[str], chosen: list[frozenset[str]]) -> bool:
    if not terms:
        return False
    for other in chosen:
        if len(terms & other) >= REDUNDANT_OVERLAP * min(len(terms), len(other) or 1):
            return True
    return False


def _finish(text: str) -> str:
    return text if text[-1:] in ".!?…" else text + "."


# -- LLM --------------------------------------------------------------------------


class LLMSummarizer:
    """Summaries and important data written by a model, with the offline fallback."""

    def __init__(self, client: LLMClient, *, fallback: bool = True):
        """Summarize with ``client``; on model failure use the offline summarizer.

        Args:
            client: The model to call.
            fallback: When False, model errors propagate instead (for callers
                that handle them, such as tests of the error path).

        """
        self.client = client
        self.name = client.name
        self._fallback = OfflineSummarizer() if fallback else None

    def summarize(
        self, messages: Sequence[MessageLike], *, previous_summary: str | None, version: int
    ) -> SummaryOutput:
        """The prompt with the version's word target; long folds go in chunks."""
        low, high = target_words(version)
        usage: list[LLMResult] = []
        summary = previous_summary or None
        try:
            for chunk in _transcript_chunks(messages):
                prompt = SUMMARY_PROMPT.format(
                    target_words=f"{low}-{high}",
                    previous_summary=summary or "None",
                    new_messages=chunk,
                )
                result = self.client.chat(
                    [{"role": "user", "content": prompt}],
                    purpose="summary",
                    max_tokens=high * 3,
                )
                usage.append(result)
                text = result.text.strip()
                if not text:
                    raise LLMBadResponse(f"{self.client.model} returned an empty summary")
                summary = _trim_to_words(text, high)
        except LLMError as exc:
            return self._summary_fallback(messages, previous_summary, version, exc, usage)
        return SummaryOutput(text=summary or "", summarizer=self.name, usage=tuple(usage))

    def extract_important(self, messages: Sequence[MessageLike]) -> ImportantOutput:
        """The extraction prompt, JSON mode, validated; offline rules on failure."""
        if not messages:
            return ImportantOutput(data=validate_important_data({}), summarizer=self.name)
        transcript = format_transcript(messages)[:MAX_TRANSCRIPT_CHARS]
        try:
            data, result = self.client.chat_json(
                [
                    {"role": "system", "content": EXTRACTION_PROMPT},
                    {"role": "user", "content": transcript},
                ],
                purpose="important_data",
            )
            return ImportantOutput(
                data=validate_important_data(data), summarizer=self.name, usage=(result,)
            )
        except LLMError as exc:
            spent = getattr(exc, "result", None)
            if self._fallback is None:
                raise
            log.warning("important-data extraction failed, using offline rules: %s", exc)
            offline = self._fallback.extract_important(messages)
            return ImportantOutput(
                data=offline.data,
                summarizer=offline.summarizer,
                usage=(spent,) if isinstance(spent, LLMResult) else (),
                fallback_reason=str(exc),
            )

    def _summary_fallback(
        self,
        messages: Sequence[MessageLike],
        previous_summary: str | None,
        version: int,
        exc: LLMError,
        usage: list[LLMResult],
    ) -> SummaryOutput:
        if self._fallback is None:
            raise exc
        log.warning("summary by %s failed, using the offline summarizer: %s", self.name, exc)
        offline = self._fallback.summarize(
            messages, previous_summary=previous_summary, version=version
        )
        return SummaryOutput(
            text=offline.text,
            summarizer=offline.summarizer,
            usage=tuple(usage),
            fallback_reason=str(exc),
        )


def _transcript_chunks(messages: Sequence[MessageLike]) -> list[str]:
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in format_transcript(messages).split("\n"):
        if current and size + len(line) > MAX_TRANSCRIPT_CHARS:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        chunks.append("\n".join(current))
    return chunks or [""]


def _trim_to_words(text: str, high: int) -> str:
    """Cut a model's over-long summary to at most ``high`` words, at a sentence end if possible."""
    if count_words(text) <= high:
        return text
    kept: list[str] = []
    total = 0
    for sentence in split_sentences(text):
        words = count_words(sentence)
        if total + words > high:
            break
        kept.append(sentence)
        total += words
    if kept:
        return " ".join(kept)
    return " ".join(text.split()[:high]) + "…"
