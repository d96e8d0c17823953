"""How a ranked list of message ids scores against a question's evidence.

* ``recall@k``: an evidence turn in the top k (k = 1, 5, 10, 20);
* ``all@5``: every evidence turn in the top 5 (turn-level recall of all evidence);
* ``sessions_all@5``: every evidence session among the first 5 distinct sessions
  of the ranking (session-level recall of all evidence);
* ``ndcg@10``: NDCG of the top 10 turns, each evidence turn relevant (1), the rest 0;
* ``mrr``: reciprocal rank of the first evidence turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from benchmarks.timing import percentile

KS = (1, 5, 10, 20)
#: Metrics shown first in the reports, in this order.
HEADLINE = ("all@5", "sessions_all@5", "ndcg@10", "recall@10", "mrr")


def score(
    ranked: Sequence[int], evidence: set[int], session_of: Mapping[int, str]
) -> dict[str, float]:
    """Every metric of one question (see the module docstring)."""
    out = {f"recall@{k}": float(bool(evidence & set(ranked[:k]))) for k in KS}
    out["all@5"] = float(evidence <= set(ranked[:5]))
    sessions: list[str] = []
    for mid in ranked:
        name = session_of.get(mid)
        if name is not None and name not in sessions:
            sessions.append(name)
    wanted = {session_of[mid] for mid in evidence}
    out["sessions_all@5"] = float(wanted <= set(sessions[:5]))
    gain = sum(1 / math.log2(i + 2) for i, mid in enumerate(ranked[:10]) if mid in evidence)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(evidence), 10)))
    out["ndcg@10"] = gain / ideal if ideal else 0.0
    first = next((i for i, mid in enumerate(ranked) if mid in evidence), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    return out


def summarize(rows: Sequence[tuple[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Mean of every metric per question type and over ``all``, with ``n``."""
    by_kind: dict[str, list[dict[str, float]]] = {}
    for kind, values in rows:
        by_kind.setdefault(kind, []).append(values)
        by_kind.setdefault("all", []).append(values)
    return {
        kind: {
            **{m: round(sum(v[m] for v in vals) / len(vals), 3) for m in vals[0]},
            "n": len(vals),
        }
        for kind, vals in sorted(by_kind.items())
    }


def stats(samples: Sequence[float]) -> dict[str, float]:
    """p50, p95 and max of latency samples in ms, and their number."""
    ordered = sorted(samples)
    return {
        "p50_ms": round(percentile(ordered, 0.5), 2),
        "p95_ms": round(percentile(ordered, 0.95), 2),
        "max_ms": round(ordered[-1], 2),
        "queries": len(ordered),
    }


T = TypeVar("T")


def repeat(once: Callable[[T], float], items: Sequence[T]) -> dict[str, float]:
    """:func:`stats` of ``once`` (a call timing itself, in ms) over ``items``, after a warm-up.

    The warm-up runs the first 20 items once, untimed (caches, prepared statements).
    """
    for item in items[:20]:
        once(item)
    return stats([once(item) for item in items])


__all__ = ["HEADLINE", "KS", "repeat", "score", "stats", "summarize"]
