"""What the word tiers cost and save at 100K messages, measured in the latency store.

The default search scores only the messages that rare words, phrases and rare
pairs of common words find (:func:`engram.search.query.tiers`); ``tiered=False``
scores every message holding any word, as the search did before. Both are
timed on the same store in the same run (so under the same machine load), and
the labelled questions are searched in a store that also holds the 200K
latency messages, where words are common enough for the tiers to act (in the
2,778-message quality corpus most are not).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from benchmarks.retrieval.corpus import Question, build
from benchmarks.retrieval.run import UTC_ZONE, load, score, stats, summarize
from engram import searching


def timed_untiered(
    store: Any, scope: str, session: str | None, questions: list[Question]
) -> dict[str, float]:
    """p50/p95 of the default search with every message holding any word scored."""

    def once(q: Question) -> float:
        began = time.perf_counter()
        plan = searching.plan(store, scope, session, q.text, now=q.asked_at, tz=UTC_ZONE)
        store.search(scope, replace(plan, tiered=False), session=session, limit=10)
        return (time.perf_counter() - began) * 1000

    for q in questions[:20]:
        once(q)
    samples = [once(q) for q in questions]
    return stats(samples)


def quality_at_scale(store: Any) -> dict[str, dict[str, float]]:
    """Recall@k and MRR of the default search, tiered and not, beside 200K other messages."""
    loaded = [(conv, *load(store, conv)) for conv in build()]
    out = {}
    for name, tiered in (("default (tiered)", True), ("every word scored", False)):
        rows = []
        for conv, keys, qids in loaded:
            for question, qid in zip(conv.questions, qids, strict=True):
                plan = searching.plan(
                    store, conv.scope, None, question.text, now=question.asked_at,
                    tz=UTC_ZONE, exclude={qid},
                )  # fmt: skip
                hits = store.search(conv.scope, replace(plan, tiered=tiered), limit=20)
                evidence = {keys[k] for k in question.evidence}
                rows.append((question.kind, score([h.message.id for h in hits], evidence)))
        out[name] = summarize(rows)["all"]
    return out


def quality_lines(found: dict[str, dict[str, float]]) -> list[str]:
    """The markdown table of :func:`quality_at_scale`."""
    lines = [
        "",
        "The labelled questions in this store (beside the 200K messages, where words are"
        " common enough for the word tiers to act); `every word scored` is the search"
        " before the tiers:",
        "",
        "| search | R@5 | R@10 | R@20 | MRR |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, a in found.items():
        lines.append(
            f"| {name} | {a['recall@5']} | {a['recall@10']} | {a['recall@20']} | {a['mrr']} |"
        )
    return lines
