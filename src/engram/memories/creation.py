"""Writing one memory from an ended conversation.

With a model, the creation prompt (:data:`CREATION_PROMPT`, verbatim)
is sent with the conversation's transcript: the newest messages of the
session up to :data:`MAX_TRANSCRIPT_TOKENS` (stored exact counts), so a long
conversation cannot overflow the model. Without a model,
:func:`extractive_memory` picks the user's own statements of facts,
preferences and decisions, deterministically, into a 2-4 sentence memory of
about 200 characters. Either way the text is cleaned and bounded by
:data:`~engram.memories.records.MAX_CONTENT_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from engram.compaction.transcript import format_transcript, split_sentences
from engram.compaction.words import is_filler
from engram.errors import LLMBadResponse
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
#: Sentences the extractive memory keeps at most (2-4 sentences).
MAX_SENTENCES = 4
#: Characters one extracted sentence may have; longer ones are left out whole
#: rather than cut (a decision cut in half says the wrong thing).
MAX_SENTENCE_CHARS = 300
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
    """A deterministic memory built from the user's own statements, or None if there are none.

    Sentences of user messages are scored by cue words (preferences,
    decisions, facts about the user and their work); the best 2-4 are kept in
    conversation order, about :data:`~engram.memories.records.TARGET_CHARS`
    characters in all. Questions and pleasantries are skipped.
    """
    candidates: list[tuple[int, int, str]] = []
    position = 0
    for message in transcript:
        if message.role != "user":
            continue
        for sentence in split_sentences(message.content):
            position += 1
            text = " ".join(sentence.split())
            words = _TOKEN.findall(text.lower())
            if (
                len(words) < 3
                or text.endswith("?")
                or is_filler(text)
                or len(text) > MAX_SENTENCE_CHARS
            ):
                continue
            score = sum(_CUES.get(word, 0) for word in words)
            score += 1 if any(ch.isdigit() for ch in text) else 0
            candidates.append((score, position, text))
    if not candidates:
        return None
    # Best score first; among equals the later statement wins (it is the newer fact).
    ranked = sorted(candidates, key=lambda c: (-c[0], -c[1]))
    kept: list[tuple[int, str]] = []
    length = 0
    for _, position, text in ranked:
        if len(kept) >= MAX_SENTENCES:
            break
        if kept and length + len(text) > TARGET_CHARS * 1.5 and len(kept) >= 2:
            break
        kept.append((position, text))
        length += len(text) + 1
    sentences = [_end_sentence(text) for _, text in sorted(kept)]
    return _bound("User said: " + " ".join(sentences), MAX_CONTENT_CHARS)


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
