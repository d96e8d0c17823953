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
from benchmarks.retrieval.loading import load
from benchmarks.retrieval.metrics import repeat, score, summarize
from benchmarks.retrieval.steps import UTC_ZONE
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

    return repeat(once, questions)


def quality_at_scale(store: Any) -> dict[str, dict[str, float]]:
    """Recall@k and MRR of the default search, tiered and not, beside 200K other messages."""
    loaded = [load(store, conv, ask=True) for conv in build()]
    out = {}
    for name, tiered in (("default (tiered)", True), ("every word scored", False)):
        rows = []
        for item in loaded:
            for number, question in enumerate(item.conv.questions):
                qid = item.question_ids[number]
                plan = searching.plan(
                    store, item.conv.scope, None, question.text, now=question.asked_at,
                    tz=UTC_ZONE, exclude=set() if qid is None else {qid},
                )  # fmt: skip
                hits = store.search(item.conv.scope, replace(plan, tiered=tiered), limit=20)
                ranked = [h.message.id for h in hits]
                rows.append((question.kind, score(ranked, item.evidence(number), item.session_of)))
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
