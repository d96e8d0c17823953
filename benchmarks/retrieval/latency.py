"""Latency and size at 100K messages: the default search beside plain FTS5, per backend.

Two stores of :data:`LATENCY_SIZE` messages each (turns of one corpus, from
successive seeds): one session of them, and a scope of 100 sessions. Each of
:data:`LATENCY_QUERIES` questions of that corpus is searched there (p50/p95
after a warm-up), against plain FTS5 over the same texts
(:mod:`benchmarks.retrieval.scale`) and, for the first corpus, tiered and
untiered (:mod:`benchmarks.retrieval.tiers`) with the labelled questions
scored inside the big store; index sizes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.retrieval import assistant, scale, tiers
from benchmarks.retrieval.corpus import Question, build
from benchmarks.retrieval.metrics import repeat
from benchmarks.retrieval.quality import postgres_store_url
from benchmarks.retrieval.steps import UTC_ZONE
from engram import searching
from engram.models import NewMessage
from engram.store import open_store

Turn = tuple[str, str, datetime]  # (speaker, text, at)

LATENCY_SIZE = 100_000
LATENCY_QUERIES = 200


def texts(count: int, corpus: str = "chats") -> tuple[list[Turn], list[Question]]:
    """``count`` turns ``(speaker, text, at)`` of ``corpus`` from successive seeds, and its
    questions.
    """
    turns: list[Turn] = []
    questions: list[Question] = []
    seed = 100
    while len(turns) < count:
        built = build(seed=seed) if corpus == "chats" else assistant.build(seed=seed)
        for conv in built:
            turns += [(t.speaker, t.text, t.at) for t in conv.turns]
            questions += conv.questions
        seed += 1
    return turns[:count], questions


def fill(store: Any, scope: str, sessions: int, turns: list[Turn]) -> dict[int, str]:
    """Append ``turns`` to ``sessions`` sessions of ``scope``, 1,000 a batch; id -> text.

    Speakers "user" and "assistant" are roles; other speakers are named people,
    who alternate as user and assistant.
    """
    per = len(turns) // sessions
    out: dict[int, str] = {}
    for number in range(sessions):
        chunk = turns[number * per : (number + 1) * per]
        for start in range(0, len(chunk), 1000):
            batch = [
                NewMessage(speaker, text, at)
                if speaker in ("user", "assistant")
                else NewMessage("user" if i % 2 else "assistant", text, at, name=speaker)
                for i, (speaker, text, at) in enumerate(chunk[start : start + 1000])
            ]
            stored = store.append(scope, f"s{number}", batch, [10] * len(batch))
            out.update((m.id, m.content) for m in stored)
    return out


def timed(
    store: Any, scope: str, session: str | None, questions: list[Question]
) -> dict[str, float]:
    """The default search (plan and store search), in ms."""

    def once(q: Question) -> float:
        began = time.perf_counter()
        searching.search(store, scope, session, q.text, now=q.asked_at, tz=UTC_ZONE, limit=10)
        return (time.perf_counter() - began) * 1000

    return repeat(once, questions)


def sqlite_sizes(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    sizes = dict(rows)
    fts = sum(v for k, v in sizes.items() if k.startswith("messages_fts"))
    return {
        "file_bytes": db.stat().st_size,
        "messages_table_bytes": int(sizes.get("messages", 0)),
        "fts_index_bytes": int(fts),
        "participants_bytes": int(sizes.get("participants", 0)),
    }


def latency(
    backend: str,
    workdir: Path,
    corpus: str,
    *,
    hybrid: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Every latency and size of one backend on ``corpus``'s turns (see the module docstring)."""
    turns, asked = texts(LATENCY_SIZE, corpus)
    questions = asked[:LATENCY_QUERIES]
    name = f"latency_{corpus}"
    if backend == "sqlite":
        db = workdir / f"{name}.db"
        url = f"sqlite:///{db}"
    else:
        url = postgres_store_url(workdir, f"retrieval_{name}")
    store = open_store(url)
    began = time.perf_counter()
    fill(store, "one", 1, turns)
    stored = fill(store, "many", 100, turns)
    log(f"{backend} {corpus}: stored 2 x {LATENCY_SIZE} in {time.perf_counter() - began:.0f}s")
    if backend == "postgres":
        store._read(lambda conn: conn.execute("ANALYZE messages"))  # as autovacuum would
    out: dict[str, Any] = {
        "messages": LATENCY_SIZE,
        "corpus": corpus,
        "against_plain_fts5": scale.search_speed(store, "many", stored, questions),
        "one_session": timed(store, "one", "s0", questions),
        "scope_100_sessions": timed(store, "many", None, questions),
    }
    log(f"{backend} {corpus}: {out['against_plain_fts5']}")
    if corpus == "chats":
        out["one_session_untiered"] = tiers.timed_untiered(store, "one", "s0", questions)
        out["scope_100_sessions_untiered"] = tiers.timed_untiered(store, "many", None, questions)
        out["quality_at_scale"] = tiers.quality_at_scale(store)
    if backend == "sqlite":
        out["sizes"] = sqlite_sizes(db)
        if hybrid and corpus == "chats":
            out.update(hybrid_latency(store, db, questions))
    else:
        out["sizes"] = postgres_sizes(store)
    store.close()
    return out


def hybrid_latency(store: Any, db: Path, questions: list[Question]) -> dict[str, Any]:
    """Hybrid search latency at 100K, with stored vectors.

    Embedding 200K messages with the model would take hours on this machine, and
    the search cost does not depend on the vectors' values (an exact scan), so
    the stored vectors are random unit vectors; the query is embedded by the
    real model, inside the timing.
    """
    import numpy as np

    from engram import Engram
    from engram.config import Config

    rng = np.random.default_rng(7)
    with sqlite3.connect(db) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM messages ORDER BY id")]
    for start in range(0, len(ids), 10_000):
        chunk = ids[start : start + 10_000]
        vectors = rng.standard_normal((len(chunk), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.save_vectors([(mid, vectors[i].tobytes()) for i, mid in enumerate(chunk)])
    engine = Engram(store, llm=None, config=Config(embeddings=True))

    def timed_hybrid(scope: str, session: str | None) -> dict[str, float]:
        def once(q: Question) -> float:
            request = searching.Request(scope, session, q.text, q.asked_at, UTC_ZONE, limit=10)
            began = time.perf_counter()
            searching.run(engine.runtime, request, "hybrid")
            return (time.perf_counter() - began) * 1000

        return repeat(once, questions)

    return {
        "hybrid_one_session": timed_hybrid("one", "s0"),
        "hybrid_scope_100_sessions": timed_hybrid("many", None),
    }


def postgres_sizes(store: Any) -> dict[str, int]:
    def work(conn: Any) -> dict[str, int]:
        row = conn.execute(
            "SELECT pg_total_relation_size('messages'), pg_relation_size('messages_search'),"
            " pg_total_relation_size('participants')"
        ).fetchone()
        return {
            "messages_total_bytes": row[0],
            "gin_index_bytes": row[1],
            "participants_bytes": row[2],
        }

    result: dict[str, int] = store._read(work)
    return result


__all__ = ["LATENCY_QUERIES", "LATENCY_SIZE", "fill", "latency", "texts", "timed"]
