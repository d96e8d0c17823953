"""The shape of ``Store.usage_totals``, shared by the PostgreSQL and jsondir backends."""

from __future__ import annotations

from collections.abc import Iterable

from engram.models import JSON


def usage_summary(rows: Iterable[tuple[str, int, int, int, float]]) -> JSON:
    """Totals and a ``by_purpose`` breakdown from ``(purpose, calls, in, out, cost)`` rows."""
    totals: JSON = {
        "calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "by_purpose": {},
    }
    for purpose, calls, input_tokens, output_tokens, cost in rows:
        totals["calls"] += calls
        totals["input_tokens"] += input_tokens
        totals["output_tokens"] += output_tokens
        totals["cost_usd"] += cost
        totals["by_purpose"][purpose] = {
            "calls": calls,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_usd": cost,
        }
    return totals
