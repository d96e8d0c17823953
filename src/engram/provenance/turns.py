"""The recorded turns of a session as a list: tokens, cacheable share, provider cache.

A turn's *cacheable share* is the share of its prompt's bytes in the leading
messages identical to the previous turn's (:func:`~.digest.shared_share`):
what a provider's prefix cache could serve. It is measured against the
previous recorded turn, so the first turn (or one whose predecessor was
pruned) has none. ``cached_tokens`` is what the provider reported it served
from its cache, when the caller passed the answer's usage on.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.models import JSON, PromptRecord
from engram.provenance.digest import shared_share
from engram.provenance.recipe import window_ids
from engram.store.base import PromptArchive


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """One recorded turn, in a list of turns."""

    turn: int
    record: PromptRecord
    cacheable: float | None

    @property
    def tokens(self) -> int:
        """The prompt's tokens as counted."""
        return int(self.record.data.get("tokens") or 0)

    @property
    def cached_tokens(self) -> int | None:
        """Tokens the provider served from its prompt cache, when reported."""
        usage = self.record.usage or {}
        value = usage.get("cached_tokens")
        return value if isinstance(value, int) else None

    def to_dict(self) -> JSON:
        """Plain JSON-ready data."""
        recipe = self.record.data
        return {
            "turn": self.turn,
            "at": self.record.at.isoformat(),
            "via": recipe.get("via"),
            "policy": recipe.get("policy"),
            "budget": recipe.get("budget"),
            "tokens": self.tokens,
            "messages": len(window_ids(recipe)),
            "cacheable_share": None if self.cacheable is None else round(self.cacheable, 4),
            "cacheable_tokens": (
                None if self.cacheable is None else int(self.cacheable * self.tokens)
            ),
            "cached_tokens": self.cached_tokens,
            "provider_prompt_tokens": (self.record.usage or {}).get("prompt_tokens"),
            "sha256": recipe.get("sha256"),
        }


def cacheable(record: PromptRecord, before: PromptRecord | None) -> float | None:
    """Share of ``record``'s prompt repeating ``before``'s start (None without ``before``)."""
    if before is None or before.turn != record.turn - 1:
        return None
    recipe = record.data
    return shared_share(
        recipe.get("keys") or [], recipe.get("sizes") or [], before.data.get("keys") or []
    )


def summarize(records: list[PromptRecord], before: PromptRecord | None) -> list[TurnSummary]:
    """``records`` (consecutive, oldest first) as summaries; ``before`` precedes the first."""
    out: list[TurnSummary] = []
    previous = before
    for record in records:
        out.append(TurnSummary(record.turn, record, cacheable(record, previous)))
        previous = record
    return out


def list_turns(
    archive: PromptArchive,
    scope: str,
    session: str,
    *,
    after: int = 0,
    limit: int = 100,
    newest: bool = False,
) -> list[TurnSummary]:
    """A page of the session's recorded turns (the newest ``limit`` with ``newest``)."""
    records = archive.list_prompts(scope, session, after=after, limit=limit, newest=newest)
    if not records:
        return []
    first = records[0].turn
    before = None
    if first > 1:
        found = archive.list_prompts(scope, session, after=first - 2, limit=1)
        before = found[0] if found and found[0].turn == first - 1 else None
    return summarize(records, before)
