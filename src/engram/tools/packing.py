"""Search results packed into a token budget: hits first, then partners, then neighbours.

``search_history(max_tokens=N)`` returns as much as fits in N tokens of the JSON
the model reads (counted exactly, as :mod:`engram.tools.results` counts): each
hit in rank order with its exchange partner (the pair is what answers; when the
pair does not fit, the hit alone), then the neighbouring turns of the hits
already in, and says how many tokens it used and how many hits it left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engram.models import JSON
from engram.tokens import TokenCounter, storage_counter
from engram.tools.results import to_json

#: Tokens kept free for the ``count``, ``tokens`` and ``omitted`` fields.
_RESERVE = 24


@dataclass
class Entry:
    """One hit's parts: the hit itself, its partner's view, its neighbours' views."""

    item: JSON
    partner: JSON | None = None
    context: list[JSON] = field(default_factory=list)

    def whole(self) -> JSON:
        """The hit with everything it has."""
        out = dict(self.item)
        if self.partner is not None:
            out["partner"] = self.partner
        if self.context:
            out["context"] = self.context
        return out


def pack(
    head: JSON,
    entries: Sequence[Entry],
    max_tokens: int,
    counter: TokenCounter | None = None,
) -> JSON:
    """``head`` with ``count``, ``results`` (what fits in ``max_tokens``) and ``tokens``.

    A result that had to leave hits out says ``"truncated": true, "omitted": N``.
    """
    count = (counter or storage_counter()).count_text
    budget = max_tokens - _RESERVE
    results: list[JSON] = []

    def size() -> int:
        return count(to_json({**head, "count": len(results), "results": results}))

    for entry in entries:
        item = dict(entry.item)
        if entry.partner is not None:
            item["partner"] = entry.partner
        results.append(item)
        if size() > budget:
            item.pop("partner", None)
            if size() > budget:
                results.pop()
                break
    for item, entry in zip(results, entries, strict=False):
        if entry.context:
            item["context"] = entry.context
            if size() > budget:
                del item["context"]
    out: JSON = {**head, "count": len(results), "results": results}
    if len(results) < len(entries):
        out["truncated"], out["omitted"] = True, len(entries) - len(results)
    out["tokens"] = 0
    for _ in range(3):  # the field's own digits count too
        out["tokens"] = count(to_json(out))
    return out


__all__ = ["Entry", "pack"]
