"""Retrieval benchmark: does search put the evidence turn in the top k?

Usage::

    python -m benchmarks.retrieval.run                 # quality + latency at 100K (SQLite)
    python -m benchmarks.retrieval.run --backends sqlite,postgres
    python -m benchmarks.retrieval.run --quick         # quality only, small corpus

Quality: the conversations of :mod:`benchmarks.retrieval.corpus` are stored in
an SQLite store, and every labelled question is searched over its
conversation's scope (all sessions), 20 hits. Each step of the pipeline is
added in turn, from a plain FTS5 porter BM25 OR query over the raw question's
words (the baseline) to the default search; Recall@5/10/20 (an evidence turn
in the top k) and MRR are reported per question type. Latency: the default
search path (plan + store search) over 100K messages in one session and over
100K spread across 100 sessions of a scope; p50/p95 of the benchmark's
questions; index sizes. Results: ``benchmarks/results/retrieval.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from benchmarks.retrieval.corpus import Conversation, Question, build
from benchmarks.retrieval.report import DEFAULT_STEP, markdown
from engram import searching
from engram.models import NewMessage
from engram.search.query import (
    CONTEXT_WEIGHT,
    DATE_WEIGHT,
    QUESTION_FACTOR,
    SearchQuery,
    fts5_match,
    parse,
    terms,
    with_dates,
    with_speakers,
)
from engram.store import open_store
from engram.store.base import PlannedSearch

RESULTS = Path(__file__).resolve().parents[1] / "results"
KS = (5, 10, 20)
UTC_ZONE = ZoneInfo("UTC")
LATENCY_SIZE = 100_000
LATENCY_QUERIES = 200


def log(message: str) -> None:
    print(f"[retrieval {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- loading ---------------------------------------------------------------------------


def load(store: PlannedSearch, conv: Conversation) -> tuple[dict[str, int], list[int]]:
    """Store a conversation, then its questions; evidence key -> id, and each question's id."""
    keys: dict[str, int] = {}
    by_session: dict[str, list[Any]] = {}
    for turn in conv.turns:
        by_session.setdefault(turn.session, []).append(turn)
    first, _ = conv.people
    for session, turns in by_session.items():
        batch = [
            NewMessage(
                role="user" if t.speaker == first else "assistant",
                content=t.text,
                created_at=t.at,
                name=t.speaker,
            )
            for t in turns
        ]
        stored = store.append(conv.scope, session, batch, [10] * len(batch))  # type: ignore[attr-defined]
        for turn, message in zip(turns, stored, strict=True):
            if turn.key:
                keys[turn.key] = message.id
    question_ids = []
    for number, question in enumerate(conv.questions):
        call_id = f"call{number}"
        result = json.dumps({"query": question.text, "results": [{"snippet": question.text}]})
        batch = [
            NewMessage("user", question.text, question.asked_at),
            NewMessage(
                "assistant",
                "",
                question.asked_at,
                tool_calls=[
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "search_history", "arguments": "{}"},
                    }
                ],
            ),
            NewMessage("tool", result, question.asked_at, tool_call_id=call_id),
        ]
        stored = store.append(conv.scope, "asking", batch, [10, 10, 10])  # type: ignore[attr-defined]
        question_ids.append(stored[0].id)
    return keys, question_ids


# -- the steps ---------------------------------------------------------------------------

Step = Callable[[PlannedSearch, str, Question, int], SearchQuery]


def _composed(
    store: PlannedSearch, scope: str, q: Question, *, speakers: bool, dates: bool, context: bool
) -> SearchQuery:
    """The plan with some steps on, composed in the order searching.plan uses."""
    query = replace(
        parse(q.text),
        context_weight=CONTEXT_WEIGHT if context else 0.0,
        date_weight=DATE_WEIGHT if dates else 0.0,
        question_factor=1.0,
        include_own_results=True,
    )
    found = searching.date_phrase(q.text, q.asked_at, UTC_ZONE) if dates else None
    if found:
        query = with_dates(query, *found)
    return with_speakers(query, store.speakers(scope)) if speakers else query


def _plain(store: PlannedSearch, scope: str, q: Question, qid: int) -> SearchQuery:
    return _composed(store, scope, q, speakers=False, dates=False, context=False)


def _participants(store: PlannedSearch, scope: str, q: Question, qid: int) -> SearchQuery:
    return _composed(store, scope, q, speakers=True, dates=False, context=False)


def _dates(store: PlannedSearch, scope: str, q: Question, qid: int) -> SearchQuery:
    return _composed(store, scope, q, speakers=True, dates=True, context=False)


def _context(store: PlannedSearch, scope: str, q: Question, qid: int) -> SearchQuery:
    return _composed(store, scope, q, speakers=True, dates=True, context=True)


def _default(store: PlannedSearch, scope: str, q: Question, qid: int) -> SearchQuery:
    shipped = searching.plan(store, scope, None, q.text, now=q.asked_at, tz=UTC_ZONE, exclude={qid})
    built = replace(
        _context(store, scope, q, qid), exclude_ids=frozenset({qid}), include_own_results=False,
        question_factor=QUESTION_FACTOR,
    )  # fmt: skip
    assert built == shipped, (built, shipped)  # the last step is exactly the default search
    return shipped


STEPS: list[tuple[str, Step]] = [
    ("+ query cleanup (stop words, one OR query)", _plain),
    ("+ participants as a boost", _participants),
    ("+ dates as words, date phrases", _dates),
    ("+ neighbour context column", _context),
    (DEFAULT_STEP, _default),
]


def baseline(db: Path, scope_ids: dict[str, list[int]]) -> Callable[[str, str], list[int]]:
    """Plain FTS5 porter BM25, OR over the raw question's words, over every message."""
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS plain USING fts5(content, tokenize='porter unicode61')"
    )
    conn.execute("DELETE FROM plain")
    conn.execute("INSERT INTO plain(rowid, content) SELECT id, content FROM messages")
    conn.commit()

    def search(scope: str, text: str) -> list[int]:
        words = terms(text)
        ids = scope_ids[scope]
        rows = conn.execute(
            "SELECT rowid FROM plain WHERE plain MATCH ? AND rowid BETWEEN ? AND ?"
            " ORDER BY bm25(plain) LIMIT 20",
            (fts5_match(words), min(ids), max(ids)),
        )
        return [row[0] for row in rows]

    return search


# -- scoring ------------------------------------------------------------------------------


def score(ranked: list[int], evidence: set[int]) -> dict[str, float]:
    out = {f"recall@{k}": float(bool(evidence & set(ranked[:k]))) for k in KS}
    first = next((i for i, mid in enumerate(ranked) if mid in evidence), None)
    out["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    return out


def summarize(rows: list[tuple[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
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


def dense_runs(
    store: Any, conversations: list[Conversation]
) -> list[tuple[str, Callable[[Conversation, Question, int], list[int]]]]:
    """Semantic, hybrid (normalised linear) and rank fusion, once every message is embedded."""
    from engram.search.embeddings import shared_embedder
    from engram.search.vectors import dense_hits, embed_pending, fuse

    embedder = shared_embedder()
    began = time.perf_counter()
    done = 0
    for conv in conversations:
        for session in sorted({t.session for t in conv.turns} | {"asking"}):
            done += embed_pending(store, embedder, conv.scope, session)
    log(f"embedded {done} messages in {time.perf_counter() - began:.0f}s")

    def dense(c: Conversation, q: Question, qid: int, limit: int) -> list[Any]:
        return dense_hits(
            store, embedder, lambda mid: store.get_message(c.scope, mid), scope=c.scope,
            session=None, text=q.text, exclude={qid}, keep=lambda m: True, limit=limit,
        )  # fmt: skip

    def keyword(c: Conversation, q: Question, qid: int, limit: int) -> list[Any]:
        return list(store.search(c.scope, _default(store, c.scope, q, qid), limit=limit))

    def semantic(c: Conversation, q: Question, qid: int) -> list[int]:
        return [h.message.id for h in dense(c, q, qid, 20)]

    def hybrid(c: Conversation, q: Question, qid: int, weight: float = 0.5) -> list[int]:
        fused = fuse(keyword(c, q, qid, 60), dense(c, q, qid, 60), 20, weight)
        return [h.message.id for h in fused]

    def hybrid_light(c: Conversation, q: Question, qid: int) -> list[int]:
        return hybrid(c, q, qid, 0.25)

    def rank_fusion(c: Conversation, q: Question, qid: int) -> list[int]:
        scores: dict[int, float] = {}
        for hits in (keyword(c, q, qid, 60), dense(c, q, qid, 60)):
            for rank, hit in enumerate(hits):
                scores[hit.message.id] = scores.get(hit.message.id, 0.0) + 1 / (60 + rank)
        return sorted(scores, key=lambda mid: -scores[mid])[:20]

    return [
        ("semantic only (MiniLM int8)", semantic),
        ("hybrid: default + semantic, equal-weight rank fusion (RRF)", rank_fusion),
        ("hybrid: default + semantic, normalised linear fusion, dense 0.25", hybrid_light),
        ("hybrid: default + semantic, normalised linear fusion, dense 0.5 (shipped)", hybrid),
    ]


def quality(workdir: Path, facts_per_session: int, *, embeddings: bool) -> dict[str, Any]:
    """Every step's Recall@k and MRR per question type, on SQLite."""
    db = workdir / "quality.db"
    store = open_store(f"sqlite:///{db}")
    assert isinstance(store, PlannedSearch)
    conversations = build(facts_per_session=facts_per_session)
    loaded = []
    for conv in conversations:
        keys, qids = load(store, conv)
        loaded.append((conv, keys, qids))
    scope_ids: dict[str, list[int]] = {}
    with sqlite3.connect(db) as conn:
        for conv in conversations:
            rows = conn.execute(
                "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_id"
                " JOIN scopes c ON c.id = s.scope_id WHERE c.name = ?",
                (conv.scope,),
            )
            scope_ids[conv.scope] = [r[0] for r in rows]
    plain = baseline(db, scope_ids)
    results: dict[str, Any] = {}
    runs: list[tuple[str, Callable[[Conversation, Question, int], list[int]]]] = [
        ("baseline: FTS5 BM25 OR over the raw question", lambda c, q, i: plain(c.scope, q.text))
    ]
    for name, step in STEPS:

        def ranked(c: Conversation, q: Question, qid: int, step: Step = step) -> list[int]:
            hits = store.search(c.scope, step(store, c.scope, q, qid), limit=20)
            return [h.message.id for h in hits]

        runs.append((name, ranked))
    if embeddings:
        runs += dense_runs(store, conversations)
    for name, run in runs:
        rows = []
        for conv, keys, qids in loaded:
            for question, qid in zip(conv.questions, qids, strict=True):
                evidence = {keys[k] for k in question.evidence}
                rows.append((question.kind, score(run(conv, question, qid), evidence)))
        results[name] = summarize(rows)
        log(f"{name}: recall@10 {results[name]['all']['recall@10']}")
    store.close()  # type: ignore[attr-defined]
    return {
        "conversations": len(conversations),
        "messages": sum(len(ids) for ids in scope_ids.values()),
        "questions": sum(len(c.questions) for c in conversations),
        "steps": results,
    }


# -- latency and size ---------------------------------------------------------------------


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
    per = len(turns) // sessions
    for number in range(sessions):
        chunk = turns[number * per : (number + 1) * per]
        for start in range(0, len(chunk), 1000):
            batch = [
                NewMessage("user" if i % 2 else "assistant", text, at, name=speaker)
                for i, (speaker, text, at) in enumerate(chunk[start : start + 1000])
            ]
            store.append(scope, f"s{number}", batch, [10] * len(batch))


def stats(samples: list[float]) -> dict[str, float]:
    """p50, p95 and max of latency samples in ms, and their number."""
    return {
        "p50_ms": round(percentile(samples, 0.5), 2),
        "p95_ms": round(percentile(samples, 0.95), 2),
        "max_ms": round(max(samples), 2),
        "queries": len(samples),
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(
    store: Any, scope: str, session: str | None, questions: list[Question]
) -> dict[str, float]:
    def once(q: Question) -> float:
        began = time.perf_counter()
        searching.search(store, scope, session, q.text, now=q.asked_at, tz=UTC_ZONE, limit=10)
        return (time.perf_counter() - began) * 1000

    for q in questions[:20]:
        once(q)  # warm the caches
    samples = [once(q) for q in questions]
    return stats(samples)


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
    backend: str, workdir: Path, questions: list[Question], *, hybrid: bool
) -> dict[str, Any]:
    turns = texts(LATENCY_SIZE)
    if backend == "sqlite":
        db = workdir / "latency.db"
        url = f"sqlite:///{db}"
    else:
        from benchmarks.engram_bench import postgres_url

        url = postgres_url(workdir, "retrieval_latency", create=True)
    store = open_store(url)
    began = time.perf_counter()
    fill(store, "one", 1, turns)
    fill(store, "many", 100, turns)
    log(f"{backend}: stored 2 x {LATENCY_SIZE} messages in {time.perf_counter() - began:.0f}s")
    from benchmarks.retrieval import scale

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

    for q in questions[:20]:
        once(q)
    samples = [once(q) for q in questions]
    conn.close()
    return stats(samples)


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

        for q in questions[:20]:
            once(q)
        samples = [once(q) for q in questions]
        return stats(samples)

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


# -- report ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="quality only, a small corpus")
    parser.add_argument("--backends", default="sqlite", help="latency on: sqlite,postgres")
    parser.add_argument("--out", default=str(RESULTS), help="directory of the results")
    parser.add_argument("--no-embeddings", action="store_true", help="keyword steps only")
    parser.add_argument("--no-latency", action="store_true", help="quality only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        facts = 2 if args.quick else 5
        report: dict[str, Any] = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
            "command": "python -m benchmarks.retrieval.run " + " ".join(argv or sys.argv[1:]),
            "quality": quality(
                workdir, facts, embeddings=not args.quick and not args.no_embeddings
            ),
        }
        if not args.quick and not args.no_latency:
            questions = [q for c in build() for q in c.questions][:LATENCY_QUERIES]
            report["latency"] = {}
            for backend in args.backends.split(","):
                report["latency"][backend] = latency(
                    backend, workdir, questions, hybrid=not args.no_embeddings
                )
            if "postgres" in args.backends:
                from benchmarks.engram_bench import stop_postgres

                stop_postgres()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "retrieval-quick" if args.quick else "retrieval"
    (out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / f"{name}.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
