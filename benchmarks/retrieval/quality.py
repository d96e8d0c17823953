"""Quality on both corpora: every search scored against the plain FTS5 floor in the same run.

* The first corpus (:mod:`benchmarks.retrieval.corpus`, two friends chatting):
  the floor, then each step of the pipeline (:mod:`benchmarks.retrieval.steps`)
  up to the default search. The asked questions and earlier tool results are
  stored in the scope, as in a real turn.
* The second corpus (:mod:`benchmarks.retrieval.assistant`, a person and an
  assistant): the floor and the default search, each question searched with
  its own date as the moment it is asked.

Both: every question searched over its conversation's scope (all sessions),
:data:`LIMIT` hits, scored by :mod:`benchmarks.retrieval.metrics`; with
embeddings, the semantic and hybrid runs too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.retrieval import assistant, corpus
from benchmarks.retrieval.corpus import Conversation
from benchmarks.retrieval.dense import Run, dense_runs, embed_all
from benchmarks.retrieval.loading import Loaded, load
from benchmarks.retrieval.metrics import score, summarize
from benchmarks.retrieval.plain import plain_fts5
from benchmarks.retrieval.steps import STEPS, Step, default
from engram.store import open_store

#: Hits asked of every search (enough for five distinct sessions).
LIMIT = 50
#: Name of the floor's run in both corpora.
FLOOR = "plain FTS5 BM25 over the bare turns (floor)"
#: Name of the default search's run in the second corpus.
DEFAULT = "default search"


def evaluate(loaded: list[Loaded], run: Run) -> dict[str, dict[str, float]]:
    """Every metric of ``run`` per question type."""
    rows = []
    for item in loaded:
        for number, question in enumerate(item.conv.questions):
            ranked = run(item, number)
            rows.append((question.kind, score(ranked, item.evidence(number), item.session_of)))
    return summarize(rows)


def _planned(store: Any, step: Step) -> Run:
    def run(item: Loaded, number: int) -> list[int]:
        q, scope = item.conv.questions[number], item.conv.scope
        plan = step(store, scope, q.text, q.asked_at, item.question_ids[number])
        return [h.message.id for h in store.search(scope, plan, limit=LIMIT)]

    return run


def _measure(
    workdir: Path,
    name: str,
    conversations: list[Conversation],
    steps: list[tuple[str, Step]],
    *,
    ask: bool,
    embeddings: bool,
    backend: str,
    log: Callable[[str], None],
) -> dict[str, Any]:
    store = open_store(store_url(backend, workdir, name))
    loaded = [load(store, conv, ask=ask) for conv in conversations]
    if backend == "postgres":
        store._read(lambda conn: conn.execute("ANALYZE messages"))  # as autovacuum would
    texts = {mid: text for item in loaded for mid, text in item.texts.items()}
    scope_ids = {i.conv.scope: sorted(i.session_of) for i in loaded}
    floor = plain_fts5(workdir / f"{name}-floor.db", texts, scope_ids)
    runs: list[tuple[str, Run]] = [
        (FLOOR, lambda i, n: floor(i.conv.scope, i.conv.questions[n].text, LIMIT))
    ]
    runs += [(label, _planned(store, step)) for label, step in steps]
    out: dict[str, Any] = {
        "conversations": len(conversations),
        "messages": sum(len(i.session_of) for i in loaded),
        "questions": sum(len(c.questions) for c in conversations),
        "backend": backend,
    }
    if embeddings:
        out["embedding"] = embed_all(store, loaded)
        log(f"{name}: embedded {out['embedding']}")

        def keyword(item: Loaded, number: int, wide: int) -> list[Any]:
            q, scope = item.conv.questions[number], item.conv.scope
            plan = default(store, scope, q.text, q.asked_at, item.question_ids[number])
            return list(store.search(scope, plan, limit=wide))

        runs += dense_runs(store, keyword, LIMIT)
    out["runs"] = {}
    for label, run in runs:
        out["runs"][label] = found = evaluate(loaded, run)
        log(f"{name}: {label}: all@5 {found['all']['all@5']} R@10 {found['all']['recall@10']}")
    store.close()
    return out


def postgres_store_url(workdir: Path, schema: str) -> str:
    """A new schema on the benchmark's PostgreSQL, with ``public`` (and pgvector) after it.

    pgvector lives in ``public`` so that every schema of the run sees its type (an
    extension is installed once per database, in one schema).
    """
    from urllib.parse import quote

    import psycopg

    from benchmarks.engram_bench import postgres_admin_url, postgres_url

    with psycopg.connect(postgres_admin_url(workdir), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    url = postgres_url(workdir, schema, create=True)
    return url.replace(quote(f"-csearch_path={schema}"), quote(f"-csearch_path={schema},public"))


def store_url(backend: str, workdir: Path, name: str) -> str:
    """A new, empty store on ``backend`` (sqlite, postgres, memory or jsondir)."""
    if backend == "sqlite":
        return f"sqlite:///{workdir / name}.db"
    if backend == "postgres":
        return postgres_store_url(workdir, f"retrieval_{name}")
    if backend == "jsondir":
        return f"jsondir:///{workdir / name}"
    return f"memory://retrieval-{name}"


def first_corpus(
    workdir: Path,
    facts_per_session: int,
    *,
    embeddings: bool,
    backend: str = "sqlite",
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The floor, each step and (with embeddings) the dense runs on the first corpus."""
    conversations = corpus.build(facts_per_session=facts_per_session)
    return _measure(
        workdir, "chats", conversations, STEPS, ask=True, embeddings=embeddings,
        backend=backend, log=log,
    )  # fmt: skip


def second_corpus(
    workdir: Path,
    *,
    histories: int,
    sessions: int,
    embeddings: bool,
    backend: str = "sqlite",
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The floor, the default search and (with embeddings) the dense runs on the second corpus."""
    conversations = assistant.build(histories=histories, sessions=sessions)
    found = _measure(
        workdir, "assistant", conversations, [(DEFAULT, default)], ask=False,
        embeddings=embeddings, backend=backend, log=log,
    )  # fmt: skip
    found["sessions_per_history"] = sessions
    return found


__all__ = ["DEFAULT", "FLOOR", "LIMIT", "evaluate", "first_corpus", "second_corpus"]
