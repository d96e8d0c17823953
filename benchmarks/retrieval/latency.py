"""Latency and size at 100K messages: the default search beside plain FTS5, per backend.

Two stores of :data:`LATENCY_SIZE` messages each (the first corpus's turns,
from successive seeds): one session of them, and a scope of 100 sessions.
Each of :data:`LATENCY_QUERIES` questions is searched there (p50/p95 after a
warm-up), tiered and untiered (:mod:`benchmarks.retrieval.scale`), and, on
SQLite, as plain FTS5 over the same index; the labelled questions are scored
inside the big store; index sizes.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.retrieval import scale
from benchmarks.retrieval.corpus import Question, build
from benchmarks.retrieval.metrics import repeat
from benchmarks.retrieval.quality import postgres_store_url
from benchmarks.retrieval.steps import UTC_ZONE
from engram import searching
from engram.models import NewMessage
from engram.search.query import fts5_match, terms
from engram.store import open_store

LATENCY_SIZE = 100_000
LATENCY_QUERIES = 200


def texts(count: int) -> list[tuple[str, str, datetime]]:
    """``count`` turns ``(speaker, text, at)`` from corpora of successive seeds."""
    out: list[tuple[str, str, datetime]] = []
    seed = 100
    while len(out) < count:
        for conv in build(seed=seed):
            out += [(t.speaker, t.text, t.at) for t in conv.turns]
        seed += 1
    return out[:count]


def fill(store: Any, scope: str, sessions: int, turns: list[tuple[str, str, datetime]]) -> None:
    """Append ``turns`` to ``sessions`` sessions of ``scope``, 1,000 a batch."""
    per = len(turns) // sessions
    for number in range(sessions):
        chunk = turns[number * per : (number + 1) * per]
        for start in range(0, len(chunk), 1000):
            batch = [
                NewMessage("user" if i % 2 else "assistant", text, at, name=speaker)
                for i, (speaker, text, at) in enumerate(chunk[start : start + 1000])
            ]
            store.append(scope, f"s{number}", batch, [10] * len(batch))


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
    questions: list[Question],
    *,
    hybrid: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Every latency and size of one backend (see the module docstring)."""
    turns = texts(LATENCY_SIZE)
    if backend == "sqlite":
        db = workdir / "latency.db"
        url = f"sqlite:///{db}"
    else:
        url = postgres_store_url(workdir, "retrieval_latency")
    store = open_store(url)
    began = time.perf_counter()
    fill(store, "one", 1, turns)
    fill(store, "many", 100, turns)
    log(f"{backend}: stored 2 x {LATENCY_SIZE} messages in {time.perf_counter() - began:.0f}s")
    if backend == "postgres":
        store._read(lambda conn: conn.execute("ANALYZE messages"))  # as autovacuum would
    out: dict[str, Any] = {
        "messages": LATENCY_SIZE,
        "one_session": timed(store, "one", "s0", questions),
        "scope_100_sessions": timed(store, "many", None, questions),
        "one_session_untiered": scale.timed_untiered(store, "one", "s0", questions),
        "scope_100_sessions_untiered": scale.timed_untiered(store, "many", None, questions),
    }
    if backend == "sqlite":
        out["sizes"] = sqlite_sizes(db)
        out["baseline_one_session"] = baseline_latency(db, questions)
        if hybrid:
            out.update(hybrid_latency(store, db, questions))
    else:
        out["sizes"] = postgres_sizes(store)
    out["quality_at_scale"] = scale.quality_at_scale(store)
    store.close()
    return out


def baseline_latency(db: Path, questions: list[Question]) -> dict[str, Any]:
    """The baseline's cost on the same index and machine: FTS5 BM25 OR over the raw words."""
    conn = sqlite3.connect(db)
    session_pk = conn.execute(
        "SELECT s.id FROM sessions s JOIN scopes c ON c.id = s.scope_id"
        " WHERE c.name = 'one' AND s.external_id = 's0'"
    ).fetchone()[0]

    def once(q: Question) -> float:
        began = time.perf_counter()
        conn.execute(
            "SELECT m.id FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ? AND m.session_id = ?"
            " ORDER BY bm25(messages_fts) LIMIT 10",
            ("{content} : (" + fts5_match(terms(q.text)) + ")", session_pk),
        ).fetchall()
        return (time.perf_counter() - began) * 1000

    found = repeat(once, questions)
    conn.close()
    return found


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
