"""The dashboard's charts, as inline SVG polylines (no script, no library).

* the tokens chart of a conversation: per recorded turn, the tokens sent,
  the whole history's size, and, from the turns' recipes, the tokens that
  repeated the previous prompt's start (cacheable) and those the provider
  reported serving from its cache;
* the what-if chart: tokens per turn of the session's history under its own
  policy and under a chosen one, side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engram.prompt_log import Turn
from engram.provenance.turns import TurnSummary
from engram.provenance.whatif import WhatIf

__all__ = ["Chart", "ChartRow", "Comparison", "compare_chart", "recorded_chart", "tokens_chart"]

#: Recorded turns a chart shows (the newest).
CHART_TURNS = 240


@dataclass(frozen=True, slots=True)
class ChartRow:
    """One turn of the tokens chart."""

    turn: int
    at: datetime
    sent: int
    history: int
    messages: int
    cacheable: int | None = None
    cached: int | None = None


@dataclass(frozen=True, slots=True)
class Chart:
    """The tokens chart: SVG points per series, and the rows they come from."""

    width: int
    height: int
    sent_points: str
    history_points: str
    cacheable_points: str
    cached_points: str
    top: int
    turns: int
    first_turn: int
    rows: tuple[ChartRow, ...]

    @property
    def has_cache(self) -> bool:
        """Whether the rows say anything about the prompt cache."""
        return any(r.cacheable is not None or r.cached is not None for r in self.rows)


def _points(values: Sequence[int | None], top: int, width: int, height: int) -> str:
    """SVG points of ``values`` (a missing value is skipped) scaled into the box."""
    span = max(len(values) - 1, 1)
    return " ".join(
        f"{round(i * width / span, 1)},{round(height - v * height / top, 1)}"
        for i, v in enumerate(values)
        if v is not None
    )


def _chart(rows: Sequence[ChartRow], total: int, width: int, height: int) -> Chart:
    top = max([1, *(r.history for r in rows), *(r.sent for r in rows)])
    return Chart(
        width=width,
        height=height,
        sent_points=_points([r.sent for r in rows], top, width, height),
        history_points=_points([r.history for r in rows], top, width, height),
        cacheable_points=_points([r.cacheable for r in rows], top, width, height),
        cached_points=_points([r.cached for r in rows], top, width, height),
        top=top,
        turns=total,
        first_turn=rows[0].turn if rows else total + 1,
        rows=tuple(rows),
    )


def tokens_chart(
    turns: Sequence[Turn], total_turns: int, *, width: int = 600, height: int = 180
) -> Chart:
    """The tokens chart from the prompt log's newest ``turns`` (no cache series).

    ``total_turns`` is how many turns were recorded in all (the first shown
    is turn ``total_turns - len(turns) + 1``).
    """
    first = total_turns - len(turns) + 1
    rows = [
        ChartRow(first + i, t.at, t.sent_tokens, t.history_tokens, t.history_messages)
        for i, t in enumerate(turns)
    ]
    return _chart(rows, total_turns, width, height)


def recorded_chart(turns: Sequence[TurnSummary], *, width: int = 600, height: int = 180) -> Chart:
    """The tokens chart from recorded turns' recipes, with the cache series."""
    rows = []
    for t in turns:
        history = t.record.data.get("history") or [0, 0]
        cacheable = None if t.cacheable is None else int(t.cacheable * t.tokens)
        rows.append(
            ChartRow(
                t.turn,
                t.record.at,
                t.tokens,
                int(history[1]),
                int(history[0]),
                cacheable,
                t.cached_tokens,
            )
        )
    return _chart(rows, turns[-1].turn if turns else 0, width, height)


@dataclass(frozen=True, slots=True)
class Comparison:
    """The what-if chart: tokens (solid) and cached tokens (dashed) per turn, two policies."""

    width: int
    height: int
    top: int
    turns: int
    series: tuple[tuple[str, str, str], ...]  # (label, tokens points, cached points)
    results: tuple[WhatIf, ...]


def compare_chart(
    results: Sequence[WhatIf], labels: Sequence[str], *, width: int = 600, height: int = 180
) -> Comparison:
    """Tokens and cached tokens per turn of each result, on one scale."""
    top = max([1, *(t.tokens for r in results for t in r.turns)])
    series = tuple(
        (
            label,
            _points([t.tokens for t in r.turns], top, width, height),
            _points([t.cached_tokens for t in r.turns], top, width, height),
        )
        for label, r in zip(labels, results, strict=True)
    )
    turns = max((len(r.turns) for r in results), default=0)
    return Comparison(width, height, top, turns, series, tuple(results))
