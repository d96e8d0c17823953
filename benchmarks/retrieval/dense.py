"""Semantic and hybrid runs of the quality benchmark (the ``embeddings`` extra)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.retrieval.loading import Loaded

#: Name of the run of the default mode of an engine with embeddings.
AUTO = "auto: the default with embeddings (hybrid where no participant is named)"

#: ``(loaded conversation, question number, limit) -> hits``
Hits = Callable[[Loaded, int, int], list[Any]]
#: ``(loaded conversation, question number) -> ranked ids``
Run = Callable[[Loaded, int], list[int]]


def embed_all(store: Any, loaded: list[Loaded]) -> dict[str, float]:
    """Embed every stored message as the background task does; messages, seconds, rate."""
    from engram.search.embeddings import THREADS, shared_embedder
    from engram.search.vectors import embed_pending

    embedder = shared_embedder()
    embedder.embed(["warm up"])  # the model loads on first use: not part of the rate
    began, cpu = time.perf_counter(), time.process_time()
    done = 0
    for item in loaded:
        for session in sorted(set(item.session_of.values())):
            done += embed_pending(store, embedder, item.conv.scope, session)
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - cpu
    return {
        "messages": done,
        "seconds": round(seconds, 2),
        "per_second": round(done / seconds, 1) if seconds else 0.0,
        "cpu_seconds": round(cpu_seconds, 2),
        "per_cpu_second": round(done / cpu_seconds, 1) if cpu_seconds else 0.0,
        "threads": THREADS,
    }


def dense_runs(store: Any, keyword: Hits, limit: int) -> list[tuple[str, Run]]:
    """Semantic alone, and fused with ``keyword`` three ways (vectors must be stored)."""
    from engram.search.embeddings import shared_embedder
    from engram.search.vectors import DENSE_WEIGHT, dense_hits, fuse

    embedder = shared_embedder()

    def dense(item: Loaded, number: int, wide: int) -> list[Any]:
        qid = item.question_ids[number]
        scope = item.conv.scope
        return dense_hits(
            store, embedder, lambda mid: store.get_message(scope, mid), scope=scope,
            session=None, text=item.conv.questions[number].text,
            exclude=set() if qid is None else {qid}, keep=lambda m: True, limit=wide,
        )  # fmt: skip

    def semantic(item: Loaded, number: int) -> list[int]:
        return [h.message.id for h in dense(item, number, limit)]

    def linear(weight: float) -> Run:
        def run(item: Loaded, number: int) -> list[int]:
            wide = 3 * limit
            fused = fuse(keyword(item, number, wide), dense(item, number, wide), limit, weight)
            return [h.message.id for h in fused]

        return run

    def rank_fusion(item: Loaded, number: int) -> list[int]:
        scores: dict[int, float] = {}
        for hits in (keyword(item, number, 3 * limit), dense(item, number, 3 * limit)):
            for rank, hit in enumerate(hits):
                scores[hit.message.id] = scores.get(hit.message.id, 0.0) + 1 / (60 + rank)
        return sorted(scores, key=lambda mid: -scores[mid])[:limit]

    shipped = linear(DENSE_WEIGHT)

    def auto(item: Loaded, number: int) -> list[int]:
        # As searching.resolve_mode: keyword where the participants are named, else hybrid.
        if store.speakers(item.conv.scope):
            return [h.message.id for h in keyword(item, number, limit)]
        return shipped(item, number)

    return [
        ("semantic only (MiniLM int8)", semantic),
        ("hybrid: default + semantic, equal-weight rank fusion (RRF)", rank_fusion),
        ("hybrid: default + semantic, normalised linear fusion, dense 0.25 (shipped)", shipped),
        ("hybrid: default + semantic, normalised linear fusion, dense 0.5", linear(0.5)),
        (AUTO, auto),
    ]


__all__ = ["AUTO", "Hits", "Run", "dense_runs", "embed_all"]
