"""Size limits of the exchanges preset: long answers shown as views, long summaries compressed.

* An answer over ``ANSWER_OVER_BYTES`` (750) UTF-8 bytes is shown in the
  prompt as a view of at most ``ANSWER_VIEW_BYTES`` (500) bytes: its start, cut
  at a character (and, when close, a word) boundary, and a marker naming the
  message id so the model can fetch the whole text with a retrieval tool. The
  stored message stays whole.
* A summary over ``SUMMARY_MAX_BYTES`` (4 KB) is compressed to at most
  ``SUMMARY_TARGET_BYTES`` (3 KB) by the model; when the model fails, or
  answers too long, by truncation that keeps whole sentences. Truncation keeps
  the *newest* sentences: the summary grows by appending the oldest
  exchange at the end, so the end holds the most recent context.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engram.compaction.transcript import split_sentences
from engram.errors import ConfigError, LLMError
from engram.llm.client import LLMClient, LLMResult

log = logging.getLogger(__name__)

#: Answers longer than this many UTF-8 bytes are shown as views.
ANSWER_OVER_BYTES = 750
#: Largest size of such a view, marker included.
ANSWER_VIEW_BYTES = 500
#: Summaries longer than this are compressed.
SUMMARY_MAX_BYTES = 4096
#: ... to at most this.
SUMMARY_TARGET_BYTES = 3072
#: Cutting at a space is preferred when it loses at most this share of the view.
_WORD_CUT_SLACK = 0.2
#: Marker placed before a truncated summary's kept sentences.
TRUNCATED_SUMMARY_MARKER = "[earlier summary truncated] "

COMPRESS_PROMPT = """Compress this conversation summary to at most {target_bytes} bytes \
(about {target_words} words). Keep every user request, decision, preference, name, number, \
URL and open task; drop repetition and small talk. Answer with the compressed summary only.

Summary:
{summary}"""


def utf8_len(text: str) -> int:
    """Size of ``text`` in UTF-8 bytes."""
    return len(text.encode("utf-8"))


def cut_utf8(text: str, max_bytes: int) -> str:
    """Return the longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes (whole chars)."""
    if max_bytes <= 0:
        return ""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


def answer_marker(message_id: int | None, total_bytes: int) -> str:
    """Return the marker that closes an answer view."""
    where = f"message {message_id}" if message_id is not None else "the stored message"
    return f" […] [answer shortened from {total_bytes} bytes; full text: {where}]"


def needs_view(content: str, over_bytes: int = ANSWER_OVER_BYTES) -> bool:
    """Tell whether an answer is long enough to be shown as a view."""
    return utf8_len(content) > over_bytes


def answer_view(
    content: str,
    message_id: int | None = None,
    *,
    over_bytes: int = ANSWER_OVER_BYTES,
    view_bytes: int = ANSWER_VIEW_BYTES,
) -> str:
    """``content`` unchanged when at most ``over_bytes``, else a view of at most ``view_bytes``.

    Raises:
        ConfigError: ``view_bytes`` is too small to hold the marker.

    """
    total = utf8_len(content)
    if total <= over_bytes:
        return content
    marker = answer_marker(message_id, total)
    room = view_bytes - utf8_len(marker)
    if room <= 0:
        raise ConfigError(f"answer_view_bytes={view_bytes} cannot hold the marker {marker!r}")
    head = cut_utf8(content, room)
    space = head.rfind(" ")
    if space >= len(head) * (1 - _WORD_CUT_SLACK):
        head = head[:space]
    return head.rstrip() + marker


@dataclass(frozen=True, slots=True)
class CompressedSummary:
    """A summary after :func:`compress_summary`.

    ``method`` is "none" (it was small enough), "llm" or "truncate".
    """

    text: str
    method: str
    usage: tuple[LLMResult, ...] = ()
    fallback_reason: str | None = None


def compress_summary(
    summary: str,
    *,
    max_bytes: int = SUMMARY_MAX_BYTES,
    target_bytes: int = SUMMARY_TARGET_BYTES,
    client: LLMClient | None = None,
) -> CompressedSummary:
    """Bring a summary over ``max_bytes`` down to at most ``target_bytes``.

    Uses the model when a client is given, and truncation keeping whole
    sentences when there is none or it fails. Never raises for a model failure.
    """
    if target_bytes <= 0 or target_bytes > max_bytes:
        raise ConfigError(
            f"summary target_bytes ({target_bytes}) must be positive and at most "
            f"max_bytes ({max_bytes})"
        )
    if utf8_len(summary) <= max_bytes:
        return CompressedSummary(summary, "none")
    reason: str | None = None
    usage: tuple[LLMResult, ...] = ()
    if client is not None:
        prompt = COMPRESS_PROMPT.format(
            target_bytes=target_bytes, target_words=target_bytes // 6, summary=summary
        )
        try:
            result = client.chat(
                [{"role": "user", "content": prompt}],
                purpose="summary_compression",
                max_tokens=target_bytes // 2,
            )
            usage = (result,)
            text = result.text.strip()
            if text and utf8_len(text) <= target_bytes:
                return CompressedSummary(text, "llm", usage)
            if text and utf8_len(text) < utf8_len(summary):
                # Shorter but not short enough: truncate the model's version.
                return CompressedSummary(
                    truncate_sentences(text, target_bytes), "llm+truncate", usage
                )
            reason = f"{client.model} answered {utf8_len(text)} bytes"
        except LLMError as exc:
            reason = str(exc)
        log.warning("summary compression by model failed, truncating: %s", reason)
    return CompressedSummary(truncate_sentences(summary, target_bytes), "truncate", usage, reason)


def truncate_sentences(text: str, max_bytes: int) -> str:
    """Keep the newest whole sentences of ``text`` that fit ``max_bytes`` with the marker.

    If even the last sentence does not fit, its end is kept, cut at a character boundary.
    """
    if utf8_len(text) <= max_bytes:
        return text
    room = max_bytes - utf8_len(TRUNCATED_SUMMARY_MARKER)
    kept: list[str] = []
    size = 0
    for sentence in reversed(split_sentences(text)):
        extra = utf8_len(sentence) + (1 if kept else 0)
        if size + extra > room:
            break
        kept.append(sentence)
        size += extra
    if kept:
        return TRUNCATED_SUMMARY_MARKER + " ".join(reversed(kept))
    tail = text.encode("utf-8")[-room:].decode("utf-8", errors="ignore")
    return TRUNCATED_SUMMARY_MARKER + tail.lstrip()
