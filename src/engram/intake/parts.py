"""The text of list content: one rule for everything that stores, counts, shows or folds it.

A message's content may be a list of parts (OpenAI chat and Responses parts,
Anthropic blocks). Engram stores the text of its text parts (and refusals)
joined with :data:`PARTS_JOINER`; images and other parts carry no text. The
intake checks (:func:`engram.intake.checks.content_parts`) apply the rule with
their errors; every other reader (token counts, the proxy, prompt shapes,
summaries, adapters) takes the text with :func:`content_text`, so a message
reads the same wherever it goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PARTS_JOINER", "TEXT_PARTS", "content_text", "join_texts", "part_text"]

#: Between the texts of consecutive parts.
PARTS_JOINER = "\n"
#: Content-part types whose text is the message's text (OpenAI chat and Responses, Anthropic).
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def join_texts(texts: Iterable[str]) -> str:
    """The texts of consecutive parts as one text, as Engram stores list content."""
    return PARTS_JOINER.join(texts)


def part_text(part: object) -> str | None:
    """The text of one content part (a bare string, a text part, a refusal), or None."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return None
    kind: Any = part.get("type")
    if kind in TEXT_PARTS:
        return str(part.get("text", ""))
    if kind == "refusal":
        return str(part.get("refusal", ""))
    return None


def content_text(content: object) -> str:
    """The text of message content: a string as it is, list content's text parts joined.

    None is the empty string; any other value its ``str``.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return join_texts(text for text in map(part_text, content) if text is not None)
    return str(content)
