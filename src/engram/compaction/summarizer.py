"""Summarizers: turn folded messages (and the previous summary) into a new summary.

Two implementations of one :class:`Summarizer` protocol:

* :class:`LLMSummarizer` asks the model with the prompt
  (:data:`SUMMARY_PROMPT`) and the progressive word target; it extracts
  important data with the JSON prompt. When the model fails (after the
  client's single retry) it falls back to the offline summarizer and says so
  in ``fallback_reason``: a failing model never fails the turn.
* :class:`OfflineSummarizer` needs no model: a deterministic extractive
  summary of what the conversation states (:mod:`engram.compaction.extractive`:
  decisions, preferences and facts in declarative form, the user in the third
  person, no questions, pleasantries or quoted turns, picked until the word
  range is met) and rule-based important data. A sentence is only ever cut
  when no whole sentence can fill the range (text without punctuation). The
  same input always gives the same output.

Both report their name (``"offline"`` or ``"llm:<model>"``) so the
compaction state records which one wrote it.

Both cite (:mod:`engram.compaction.citations`): a summary is *cited text*
(paragraphs ending with the ids of the messages they came from, ``[#112-#140]``),
the previous summary comes in the same form, and important data comes with
its citations in ``ImportantOutput.cites``. The model sees each message's id
in its transcript and is asked to cite; what it cites is checked by the fold.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from engram.compaction.citations import CITE_INSTRUCTIONS
from engram.compaction.data_cites import DATA_CITE_INSTRUCTIONS, from_sources, split_markers
from engram.compaction.extractive import extractive_summary
from engram.compaction.important import (
    EXTRACTION_PROMPT,
    extract_with_sources,
    validate_important_data,
)
from engram.compaction.transcript import (
    MessageLike,
    as_openai,
    format_transcript,
    message_id,
    split_sentences,
)
from engram.compaction.words import count_words, target_words
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
    """Important data extracted from folded messages (validated), with its citations.

    ``cites`` is the citation document of :mod:`engram.compaction.data_cites`
    (``{field: {item key: [[low, high], ...]}}``; empty: none).
    """

    data: JSON
    summarizer: str
    usage: tuple[LLMResult, ...] = ()
    fallback_reason: str | None = None
    cites: JSON = field(default_factory=dict)


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


class OfflineSummarizer:
    """Deterministic extractive summaries and rule-based important data; no model needed."""

    name = OFFLINE_NAME

    def summarize(
        self, messages: Sequence[MessageLike], *, previous_summary: str | None, version: int
    ) -> SummaryOutput:
        """What the previous summary and the messages state, in the version's word range.

        See :mod:`engram.compaction.extractive`: decisions, preferences and facts
        in declarative form, no questions, pleasantries or quoted turns; between
        ``target_words(version)`` low and high words whenever that much was said.
        """
        text = extractive_summary(messages, previous_summary=previous_summary, version=version)
        return SummaryOutput(text=text, summarizer=self.name)

    def extract_important(self, messages: Sequence[MessageLike]) -> ImportantOutput:
        """Rule-based important data (see :func:`engram.compaction.important.extract_offline`).

        Each item cites the messages it was found in.
        """
        data, sources = extract_with_sources([as_openai(m) for m in messages])
        cites = from_sources(sources, [message_id(m) for m in messages])
        return ImportantOutput(data=data, summarizer=self.name, cites=cites)


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
                if "[#" in chunk:
                    prompt += "\n\n" + CITE_INSTRUCTIONS
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
        transcript = format_transcript(messages, ids=True)[:MAX_TRANSCRIPT_CHARS]
        instructions = EXTRACTION_PROMPT
        if transcript.startswith("[#"):
            instructions += "\n\n" + DATA_CITE_INSTRUCTIONS
        try:
            data, result = self.client.chat_json(
                [
                    {"role": "system", "content": instructions},
                    {"role": "user", "content": transcript},
                ],
                purpose="important_data",
            )
            if not isinstance(data, dict):
                validate_important_data(data)  # raises, naming the type
            clean, cites = split_markers(data)
            return ImportantOutput(
                data=validate_important_data(clean),
                summarizer=self.name,
                usage=(result,),
                cites=cites,
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
                cites=offline.cites,
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
    for line in format_transcript(messages, ids=True).split("\n"):
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
