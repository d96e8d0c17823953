"""Writing one memory from an ended conversation.

With a model, the creation prompt (:data:`CREATION_PROMPT`, verbatim)
is sent with the conversation's transcript: the newest messages of the
session up to :data:`MAX_TRANSCRIPT_TOKENS` (stored exact counts), so a long
conversation cannot overflow the model. Without a model,
:func:`extractive_memory` writes, deterministically, one or two sentences of
what was decided or learned (the conversation's statements,
:mod:`engram.compaction.statements`: decisions first, then preferences and the
user's facts, in the third person), about 200 characters. Either way the text
is cleaned and bounded by :data:`~engram.memories.records.MAX_CONTENT_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from engram.compaction.statements import DECISION, FACT, PREFERENCE, Statement, statements
from engram.compaction.transcript import format_transcript, split_sentences
from engram.errors import LLMBadResponse
from engram.flags import flags
from engram.llm import LLMClient, LLMResult
from engram.memories.budget import PURPOSE_CREATE
from engram.memories.records import MAX_CONTENT_CHARS, TARGET_CHARS
from engram.models import Message

CREATION_PROMPT = """You are a memory creation assistant. Analyze this conversation and create a concise memory record.

Focus on:
- Key facts and information
- User preferences or patterns
- Important decisions or outcomes
- Lessons learned or insights

Format: Single paragraph, 2-4 sentences, factual and concise.

Conversation:
{conversation}

Create memory:"""  # noqa: E501 (the prompt, verbatim)

#: Newest tokens of the conversation (stored counts) shown to the model.
MAX_TRANSCRIPT_TOKENS = 6000
#: Newest messages of the conversation read at most, whatever their size.
MAX_TRANSCRIPT_MESSAGES = 400
#: Answer cap of the creation call, in tokens (2-4 sentences fit easily).
MAX_ANSWER_TOKENS = 300
#: Sentences the extractive memory keeps at most: one or two of what was decided or learned.
MAX_SENTENCES = 2
#: Characters one extracted sentence may have; longer ones are left out whole
#: rather than cut (a decision cut in half says the wrong thing).
MAX_SENTENCE_CHARS = 300
#: Rank of each kind of statement in a memory.
KIND_SCORES = {DECISION: 4.0, PREFERENCE: 3.0, FACT: 1.0}
#: Share of content words a second sentence may share with the first (more says it twice).
MAX_OVERLAP = 0.5
#: Rows read per store call while collecting the transcript.
_CHUNK = 50

#: Reads one session: the newest ``limit`` messages with ``id < before_id``, oldest first.
TailReader = Callable[[int, "int | None"], list[Message]]

_CUES = {
    # preferences and patterns
    "prefer": 3,
    "prefers": 3,
    "preference": 3,
    "like": 2,
    "love": 2,
    "hate": 2,
    "favorite": 3,
    "favourite": 3,
    "always": 2,
    "never": 2,
    "usually": 2,
    "want": 1,
    "need": 1,
    "dislike": 2,
    "avoid": 2,
    # decisions and outcomes
    "decided": 3,
    "decide": 2,
    "decision": 3,
    "agreed": 3,
    "chose": 3,
    "choose": 2,
    "will": 1,
    "plan": 2,
    "going": 1,
    "resolved": 3,
    "fixed": 2,
    "switched": 2,
    # facts about the user and their work
    "my": 2,
    "our": 2,
    "i'm": 1,
    "im": 1,
    "we're": 1,
    "working": 2,
    "project": 2,
    "deadline": 3,
    "called": 2,
    "named": 2,
    "name": 2,
    "budget": 2,
    "team": 1,
    "due": 2,
    "use": 1,
    "using": 1,
}
_TOKEN = re.compile(r"[a-z0-9']+")
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:memory(?: record)?|created memory)(?:\*\*)?\s*:\s*", re.I)


def read_transcript(
    read: TailReader,
    *,
    max_tokens: int = MAX_TRANSCRIPT_TOKENS,
    max_messages: int = MAX_TRANSCRIPT_MESSAGES,
) -> list[Message]:
    """The newest messages of a session within ``max_tokens`` (at least one), oldest first.

    System messages are left out: they are the application's instructions,
    not the conversation.
    """
    chosen: list[Message] = []
    used = 0
    before: int | None = None
    while len(chosen) < max_messages:
        rows = read(_CHUNK, before)
        if not rows:
            break
        for message in reversed(rows):
            if message.role == "system":
                continue
            if chosen and used + message.tokens > max_tokens:
                return list(reversed(chosen))
            chosen.append(message)
            used += message.tokens
            if len(chosen) >= max_messages:
                break
        before = rows[0].id
        if len(rows) < _CHUNK:
            break
    return list(reversed(chosen))


def without_flagged(transcript: Sequence[Message]) -> tuple[list[Message], int]:
    """The transcript without messages that read like instructions to a model; how many went."""
    kept = [m for m in transcript if not flags(m.content)]
    return kept, len(transcript) - len(kept)


def creation_messages(transcript: Sequence[Message]) -> list[dict[str, str]]:
    """The chat request of the creation call: the prompt with the conversation."""
    return [
        {
            "role": "user",
            "content": CREATION_PROMPT.format(conversation=format_transcript(transcript)),
        }
    ]


def llm_memory(llm: LLMClient, transcript: Sequence[Message]) -> tuple[str, LLMResult]:
    """Ask the model for the memory of ``transcript``; returns the cleaned text and the call.

    Raises:
        LLMBadResponse: the answer is empty once cleaned (its usage is on ``.result``).
        LLMError, LLMTimeout: as :meth:`LLMClient.chat`.

    """
    result = llm.chat(
        creation_messages(transcript), purpose=PURPOSE_CREATE, max_tokens=MAX_ANSWER_TOKENS
    )
    text = clean_memory_text(result.text)
    if not text:
        error = LLMBadResponse(f"{result.model} answered the memory prompt with no text")
        error.result = result  # type: ignore[attr-defined]
        raise error
    return text, result


def clean_memory_text(text: str) -> str:
    """The model's answer as one bounded paragraph: labels, quotes and spacing removed."""
    body = " ".join(text.split())
    body = _LABEL.sub("", body).strip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'`":
        body = body[1:-1].strip()
    return _bound(body, MAX_CONTENT_CHARS)


def extractive_memory(transcript: Sequence[Message]) -> str | None:
    """One or two sentences of what was decided or learned, or None (see :func:`written_from`)."""
    found = written_from(transcript)
    return found[0] if found is not None else None


def written_from(transcript: Sequence[Message]) -> tuple[str, list[int]] | None:
    """One or two sentences of what was decided or learned, and the ids they came from.

    None if nothing was. The conversation's statements are ranked: decisions (the user's, and the
    assistant's records of them) first, then the user's preferences, then the
    user's facts, each weighed by cue words (preferences, decisions, facts about
    the user and their work), numbers and length (what says more); among equals
    the later wins (it is the newer fact). The best one is kept, and a second
    when both fit in about 1.5 × :data:`~engram.memories.records.TARGET_CHARS`
    characters and do not say the same thing. Questions, pleasantries and the
    assistant's explanations never make a memory; the result is not a quote.
    """
    said = statements([message.to_openai() for message in transcript])
    candidates = [
        s
        for s in said
        if (s.kind in (DECISION, PREFERENCE) or (s.kind == FACT and s.role == "user"))
        and len(s.text) <= MAX_SENTENCE_CHARS
        and len(split_sentences(s.text)) == 1
    ]
    if not candidates:
        return None
    ranked = sorted(candidates, key=lambda s: (-_memory_score(s), -s.order))
    kept = [ranked[0]]
    for other in ranked[1 : MAX_SENTENCES * 8]:
        if len(kept[0].text) + len(other.text) + 1 > TARGET_CHARS * 1.5:
            continue
        if _overlap(kept[0].text, other.text) > MAX_OVERLAP:
            continue
        kept.append(other)
        break
    sentences = [_end_sentence(s.text) for s in sorted(kept, key=lambda s: s.order)]
    ids = sorted({transcript[s.message].id for s in kept})
    return _bound(" ".join(sentences), MAX_CONTENT_CHARS), ids


def _memory_score(statement: Statement) -> float:
    words = _TOKEN.findall(statement.source.lower() or statement.text.lower())
    score = KIND_SCORES[statement.kind] + (1.0 if statement.explicit else 0.0)
    score += min(sum(_CUES.get(word, 0) for word in words), 4) * 0.5
    score += 1.0 if any(ch.isdigit() for ch in statement.text) else 0.0
    # What says more is worth more, up to a point; a pronoun with nothing to refer to less.
    score += min(len(statement.text.split()), 24) / 12
    if re.search(r"\b(?:it|that|this|them)\b", statement.text, re.IGNORECASE):
        score -= 0.5
    return score


def _overlap(first: str, second: str) -> float:
    a = {w for w in _TOKEN.findall(first.lower()) if len(w) > 3}
    b = {w for w in _TOKEN.findall(second.lower()) if len(w) > 3}
    return len(a & b) / max(1, min(len(a), len(b)))


def _end_sentence(text: str) -> str:
    return text if text[-1] in ".!…" else text + "."


def _bound(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a sentence end or word when possible."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    end = max(head.rfind(". "), head.rfind("! "), head.rfind("? "))
    if end >= limit // 2:
        return head[: end + 1]
    space = head.rfind(" ")
    return (head[:space] if space >= limit // 2 else head).rstrip(" ,;:") + "…"
