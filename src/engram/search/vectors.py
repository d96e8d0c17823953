"""Semantic and hybrid search: vectors computed in the background, fused with BM25.

When an engine is opened with ``embeddings=True``, every append schedules
:func:`embed_pending` for its session on the runtime's background pool: the
session's new user and assistant messages are embedded
(:mod:`engram.search.embeddings`) and their vectors stored per message, off the write
path. ``Session.search(query, mode=...)`` then offers:

* ``"keyword"``: BM25 only (:mod:`engram.searching`);
* ``"semantic"``: the messages nearest to the query's vector;
* ``"hybrid"``: both lists, each min-max normalised over its candidates, then
  combined linearly with :data:`DENSE_WEIGHT` on the dense side (measured
  better than equal-weight rank fusion and than 0.5 on the retrieval benchmark);
  a message only as near as unrelated text (similarity under
  :data:`MIN_HYBRID_SIMILARITY`) is no candidate, so words no message holds
  find nothing, as in keyword search;
* ``"auto"`` (default): hybrid where it measurably helps, keyword elsewhere
  (:func:`engram.searching.resolve_mode`).

A store that keeps vectors offers :class:`VectorStore` (SQLite, PostgreSQL with pgvector).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

from engram.errors import ConfigError
from engram.models import Message, SearchHit
from engram.search.index import only_asks
from engram.search.query import QUESTION_FACTOR, parse
from engram.search.stems import Stemmer, highlight

#: Weight of the dense (semantic) side in hybrid search; BM25 gets the rest. On the
#: retrieval benchmark 0.25 gains on a person's sessions with an assistant and loses little
#: on friends chatting by name; 0.5 loses much more there.
DENSE_WEIGHT = 0.25
#: Least cosine similarity of a dense candidate in hybrid search. MiniLM puts unrelated
#: short texts at 0.0-0.16 from a query and related ones from about 0.3: without a floor
#: the nearest of unrelated messages scores as the best match once normalised.
MIN_HYBRID_SIMILARITY = 0.2
#: Candidates taken from each side before fusion, per hit asked for.
CANDIDATES_PER_HIT = 3
#: Messages embedded in one background step (then the step schedules itself again).
EMBED_STEP = 256

MODES = ("auto", "keyword", "semantic", "hybrid")


@runtime_checkable
class VectorStore(Protocol):
    """A store that keeps one vector per message and finds the nearest ones."""

    def save_vectors(self, items: Sequence[tuple[int, bytes]]) -> None:
        """Store ``(message_id, float32 bytes)`` pairs."""
        ...

    def pending_vectors(self, scope: str, session: str, limit: int) -> list[tuple[int, str]]:
        """``(id, text)`` of the session's messages without a vector, oldest first."""
        ...

    def vector_ids(self, scope: str, session: str, ids: Collection[int]) -> set[int]:
        """Which of the session's messages ``ids`` have a vector."""
        ...

    def nearest(
        self,
        scope: str,
        session: str | None,
        vector: Any,
        limit: int,
        exclude: Collection[int] = (),
    ) -> list[tuple[int, float]]:
        """``(message id, cosine similarity)`` of the nearest messages, best first."""
        ...


def keeps_vectors(store: object) -> TypeGuard[VectorStore]:
    """True when ``store`` keeps message vectors (see :class:`VectorStore`)."""
    return isinstance(store, VectorStore)


class Embedder(Protocol):
    """Texts to normalised vectors (see :class:`engram.search.embeddings.MiniLMEmbedder`)."""

    def embed(self, texts: Sequence[str]) -> Any:
        """A float32 array of shape ``(len(texts), dim)``."""
        ...


def embed_pending(store: VectorStore, embedder: Embedder, scope: str, session: str) -> int:
    """Embed the session's messages that have no vector yet; returns how many were done."""
    done = 0
    while True:
        pending = store.pending_vectors(scope, session, EMBED_STEP)
        if not pending:
            return done
        vectors = embedder.embed([text for _, text in pending])
        store.save_vectors([(mid, vectors[i].tobytes()) for i, (mid, _) in enumerate(pending)])
        done += len(pending)


def check_mode(mode: str) -> str:
    """``mode`` if it is a search mode, else ConfigError naming the choices."""
    if mode not in MODES:
        raise ConfigError(f"search mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def dense_hits(
    store: VectorStore,
    embedder: Embedder,
    fetch: Callable[[int], Message | None],
    *,
    scope: str,
    session: str | None,
    text: str,
    exclude: Collection[int],
    keep: Callable[[Message], bool],
    limit: int,
) -> list[SearchHit]:
    """The messages nearest to ``text``, best first, as hits with marked snippets."""
    vector = embedder.embed([text])[0]
    found = store.nearest(scope, session, vector, limit * CANDIDATES_PER_HIT, exclude)
    stemmer = Stemmer()
    wanted = stemmer.stems(parse(text).words())
    hits = []
    for mid, similarity in found:
        message = fetch(mid)
        if message is None or not keep(message):
            continue
        if only_asks(message.content):
            # As in keyword search, a message that asks ranks below one that answers:
            # earlier questions are the nearest neighbours of a question.
            similarity *= QUESTION_FACTOR
        snippet = highlight(message.content, stemmer.words(message.content), wanted)
        hits.append(SearchHit(message=message, score=similarity, snippet=snippet))
    hits.sort(key=lambda hit: (-hit.score, -hit.message.id))
    return hits[:limit]


def fuse(
    keyword: Sequence[SearchHit],
    dense: Sequence[SearchHit],
    limit: int,
    weight: float = DENSE_WEIGHT,
) -> list[SearchHit]:
    """Hybrid ranking: min-max normalised scores, ``weight`` on the dense side."""

    def normalised(hits: Sequence[SearchHit]) -> dict[int, float]:
        if not hits:
            return {}
        scores = [h.score for h in hits]
        low, high = min(scores), max(scores)
        span = high - low
        return {h.message.id: (h.score - low) / span if span > 0 else 1.0 for h in hits}

    dense = [hit for hit in dense if hit.score >= MIN_HYBRID_SIMILARITY]
    sparse_scores, dense_scores = normalised(keyword), normalised(dense)
    by_id = {h.message.id: h for h in dense}
    by_id.update({h.message.id: h for h in keyword})  # keyword snippets mark the matches
    combined = {
        mid: (1 - weight) * sparse_scores.get(mid, 0.0) + weight * dense_scores.get(mid, 0.0)
        for mid in by_id
    }
    order = sorted(combined, key=lambda mid: (-combined[mid], -mid))[:limit]
    return [
        SearchHit(message=by_id[mid].message, score=combined[mid], snippet=by_id[mid].snippet)
        for mid in order
    ]


__all__ = [
    "CANDIDATES_PER_HIT",
    "DENSE_WEIGHT",
    "EMBED_STEP",
    "MIN_HYBRID_SIMILARITY",
    "MODES",
    "Embedder",
    "VectorStore",
    "check_mode",
    "dense_hits",
    "embed_pending",
    "fuse",
    "keeps_vectors",
]
