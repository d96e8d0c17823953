"""Speed against plain FTS5 on the same rows: indexing, and a search at 100K messages.

* **Indexing**: the same turns stored by Engram (``store.append``: one
  session's turns a call, then one message a call) and inserted into a plain
  FTS5 table of the bare texts (Porter, WAL, ``synchronous=NORMAL`` like
  Engram's SQLite), each in a fresh database, in alternating rounds; the ratio
  is the median of the per-round ratios (:mod:`benchmarks.timing`), so a drift
  in machine load hits both sides.
* **Search**: each question searched by the default search over a scope of 100
  sessions holding the latency store's messages, and by plain FTS5 over a table
  of the same texts (the question's words OR-ed, ``bm25()``, 10 hits), one
  right after the other; p50/p95 of each (wall clock, and this process's CPU
  time, which the machine's load barely moves) and the median per-question ratio.
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.retrieval.corpus import Question
from benchmarks.retrieval.metrics import stats
from benchmarks.retrieval.steps import UTC_ZONE
from benchmarks.timing import Samples, ratio
from engram import searching
from engram.models import NewMessage
from engram.search.query import fts5_match, terms
from engram.store import open_store

Turn = tuple[str, str, datetime]  # (speaker, text, at)

_PLAIN = "CREATE VIRTUAL TABLE plain USING fts5(content, tokenize='porter unicode61')"


def _plain_db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(_PLAIN)
    return conn


def _messages(turns: Sequence[Turn]) -> list[NewMessage]:
    return [
        NewMessage("user" if speaker == "user" else "assistant", text, at)
        for speaker, text, at in turns
    ]


def _store_rows(workdir: Path, sessions: Sequence[Sequence[Turn]], single: bool) -> float:
    store = open_store(f"sqlite:///{workdir / f'e{time.monotonic_ns()}.db'}")
    store.append("warm", "w", _messages(sessions[0][:1]), [1])  # schema and caches
    began = time.perf_counter()
    for number, turns in enumerate(sessions):
        batches = [[m] for m in _messages(turns)] if single else [_messages(turns)]
        for batch in batches:
            store.append("p", f"s{number}", batch, [10] * len(batch))
    took = time.perf_counter() - began
    store.close()
    return took


def _insert_rows(workdir: Path, sessions: Sequence[Sequence[Turn]], single: bool) -> float:
    conn = _plain_db(workdir / f"p{time.monotonic_ns()}.db")
    began = time.perf_counter()
    for turns in sessions:
        batches = [[t] for t in turns] if single else [list(turns)]
        for batch in batches:
            with conn:
                conn.executemany(
                    "INSERT INTO plain(content) VALUES (?)", [(t,) for _, t, _ in batch]
                )
    took = time.perf_counter() - began
    conn.close()
    return took


def indexing(sessions: Sequence[Sequence[Turn]], rounds: int = 5) -> dict[str, Any]:
    """Engram's append against plain FTS5 inserts of the same turns, per session and per message."""
    out: dict[str, Any] = {"messages": sum(len(s) for s in sessions), "sessions": len(sessions)}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for mode, single in (("per_session", False), ("per_message", True)):
            engram, plain = Samples(), Samples()
            for number in range(rounds):
                pair: list[tuple[Samples, Callable[..., float]]] = [
                    (engram, _store_rows), (plain, _insert_rows)
                ]  # fmt: skip
                for samples, run in pair if number % 2 == 0 else pair[::-1]:
                    samples.rounds.append([run(workdir, sessions, single)])
            out[mode] = {
                "engram_s": round(statistics.median(engram.all()), 3),
                "plain_fts5_s": round(statistics.median(plain.all()), 3),
                "ratio": ratio(engram, plain)["median"],
            }
    return out


def search_speed(
    store: Any, scope: str, texts: dict[int, str], questions: Sequence[Question]
) -> dict[str, Any]:
    """The default search over ``scope`` against plain FTS5 over the same ``texts``."""
    with tempfile.TemporaryDirectory() as tmp:
        conn = _plain_db(Path(tmp) / "plain.db")
        with conn:
            conn.executemany(
                "INSERT INTO plain(rowid, content) VALUES (?, ?)", sorted(texts.items())
            )

        cpu: dict[str, list[float]] = {"engram": [], "plain": []}

        def engram(q: Question) -> float:
            began, spent = time.perf_counter(), time.thread_time()
            searching.search(store, scope, None, q.text, now=q.asked_at, tz=UTC_ZONE, limit=10)
            cpu["engram"].append((time.thread_time() - spent) * 1000)
            return (time.perf_counter() - began) * 1000

        def plain(q: Question) -> float:
            began, spent = time.perf_counter(), time.thread_time()
            conn.execute(
                "SELECT rowid FROM plain WHERE plain MATCH ? ORDER BY bm25(plain) LIMIT 10",
                (fts5_match(terms(q.text)),),
            ).fetchall()
            cpu["plain"].append((time.thread_time() - spent) * 1000)
            return (time.perf_counter() - began) * 1000

        for q in questions[:20]:  # warm both
            engram(q), plain(q)
        cpu = {"engram": [], "plain": []}
        ours, theirs = [], []
        for number, q in enumerate(questions):
            pair = (engram, plain) if number % 2 == 0 else (plain, engram)
            first, second = pair[0](q), pair[1](q)
            ours.append(first if pair[0] is engram else second)
            theirs.append(second if pair[0] is engram else first)
        conn.close()
    per_question = sorted(a / b for a, b in zip(ours, theirs, strict=True) if b > 0)
    return {
        "messages": len(texts),
        "engram": stats(ours),
        "plain_fts5": stats(theirs),
        # This process's CPU time: the work itself, whatever the load (the SQLite backend
        # runs in-process; PostgreSQL's work is in its server, not counted here).
        "engram_cpu": stats(cpu["engram"]),
        "plain_fts5_cpu": stats(cpu["plain"]),
        "ratio_median": round(statistics.median(per_question), 3),
        "ratio_p50": round(stats(ours)["p50_ms"] / max(stats(theirs)["p50_ms"], 1e-9), 3),
    }


__all__ = ["indexing", "search_speed"]
