"""What Engram keeps verbatim: items a provider gave that are not conversation text.

A Responses ``reasoning`` item (with its ``encrypted_content``), a provider's
``compaction`` item, an Anthropic ``thinking`` or ``redacted_thinking`` block:
Engram cannot show them as text and must not summarise them, but the provider
may need them back exactly as they came (Anthropic refuses a tool loop with
thinking on when the assistant turn lost its thinking block). They are kept
in the metadata of the stored message they belong to, under
:data:`VERBATIM_KEY`::

    {"format": "anthropic", "items": [{"at": 0, "item": {"type": "thinking", ...}}]}

``format`` names the API they came from (:data:`ANTHROPIC`, :data:`RESPONSES`);
only an upstream speaking that API gets them back. ``at`` is the item's place
among the message's blocks (Anthropic) or output items (Responses), so they
go back where they were. They are never part of the message's text: search,
summaries, token counts and the other formats do not see them.

While a turn runs, a chat-format message carries the same record in its
:data:`VERBATIM_KEY` field (from an upstream's answer, or a client's message
before it is stored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engram.context.shapes import put_back
from engram.models import JSON

#: Metadata key (and chat message field, during a turn) of the verbatim items.
VERBATIM_KEY = "verbatim"
#: ``format`` of Anthropic Messages blocks.
ANTHROPIC = "anthropic"
#: ``format`` of OpenAI Responses items.
RESPONSES = "openai-responses"


def record(format: str, items: Sequence[tuple[int, JSON]]) -> JSON | None:
    """The record of ``items`` (``(place, item)`` pairs) in ``format``; None when there are none."""
    if not items:
        return None
    return {"format": format, "items": [{"at": at, "item": dict(item)} for at, item in items]}


def items_of(holder: Mapping[str, Any] | None, format: str) -> list[tuple[int, JSON]]:
    """The ``(place, item)`` pairs kept in ``holder`` (metadata or a message) for ``format``."""
    return record_items(holder.get(VERBATIM_KEY) if isinstance(holder, Mapping) else None, format)


def record_items(kept: object, format: str) -> list[tuple[int, JSON]]:
    """The ``(place, item)`` pairs of a record, if it is one of ``format``."""
    if not isinstance(kept, Mapping) or kept.get("format") != format:
        return []
    out = []
    for entry in kept.get("items") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("item"), Mapping):
            at = entry.get("at")
            place = at if isinstance(at, int) and not isinstance(at, bool) else 0
            out.append((place, entry["item"]))
    return out


def restore(blocks: Sequence[JSON], kept: Sequence[tuple[int, JSON]]) -> list[JSON]:
    """``blocks`` with the kept items put back at their places (past the end: at the end)."""
    return put_back(blocks, kept)
