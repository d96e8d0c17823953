"""The dashboard's server time on a 100K-message session (target: every page under 200 ms).

Usage::

    python -m benchmarks.dashboard                 # 100K messages in the main session
    python -m benchmarks.dashboard --size 5000     # a quick run

Builds the core benchmark's dataset (the main session of ``--size`` messages,
and at 100K ten other projects of 1,000 each) in ``benchmarks/work/``, puts the main
session under ``lean`` (a chat bot's preset) and records 240 turns, then asks for every
page of the dashboard through the app of ``engram serve`` in process (no network:
the time is the server's), after a warm-up. Results: ``benchmarks/results/
dashboard.json`` and ``dashboard.md`` (median, p95 and max per page; a page misses
when its p95 is over the target).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.dataset import (
    MAIN_SCOPE,
    MAIN_SESSION,
    MAIN_SESSION_MAX,
    OTHER_SCOPES,
    OTHER_SESSION_SIZE,
    POOL_WORDS,
    Spec,
    TextSource,
    layout,
)
from benchmarks.engram_bench import build_engram, remove_sqlite, sqlite_url
from benchmarks.timing import percentile

ROOT = Path(__file__).resolve().parent
WORK = ROOT / "work"
RESULTS = ROOT / "results"
#: Most server time a page may take (the issue's target), in seconds.
TARGET = 0.200
TURNS = 240
REQUESTS = 30
QUERY = "piston"


def _pages(middle_id: int) -> dict[str, str]:
    base = f"/p/{MAIN_SCOPE}"
    conv = f"{base}/s/{MAIN_SESSION}"
    return {
        "projects": "/",
        "project": base,
        "conversation": conv,
        "conversation at a message": f"{conv}?at={middle_id}",
        "history page (infinite scroll)": f"{conv}/history?after={middle_id}",
        "earlier page": f"{conv}/history?before={middle_id}",
        "prompt": f"{conv}/prompt",
        "prompt, 50K-token budget": f"{conv}/prompt?budget=50000",
        "search project": f"{base}/search?q={QUERY}",
        "search conversation": f"{base}/search?q={QUERY}&session={MAIN_SESSION}",
        "memories": f"{base}/memories",
    }


def _prepare(size: int, pool_words: int = POOL_WORDS) -> tuple[str, dict[str, float]]:
    """The dataset at ``size`` with recorded turns; and how long each step took."""
    import engram

    WORK.mkdir(parents=True, exist_ok=True)
    path = str(WORK / f"dashboard-{size}.db")
    remove_sqlite(path)
    url = sqlite_url(path)
    others = OTHER_SCOPES * OTHER_SESSION_SIZE if size >= MAIN_SESSION_MAX else 0
    spec = Spec(size + others, pool_words=pool_words)
    timings = {"import": build_engram(url, layout(spec), TextSource(spec.seed, spec.pool_words))}
    with engram.open(url, llm=None) as mem:
        chat = mem.session(MAIN_SESSION, scope=MAIN_SCOPE, policy="lean")
        started = time.perf_counter()
        for _ in range(TURNS):
            chat.context(8000, system="You are a helpful assistant.")
        timings["record turns"] = time.perf_counter() - started
        memories = mem.memories(MAIN_SCOPE)
        for i in range(5):
            memories.create(f"Benchmark memory number {i}: the piston order ships in week {i}.")
    return url, timings


def _measure(url: str, requests: int = REQUESTS) -> dict[str, dict[str, float]]:
    from fastapi.testclient import TestClient

    import engram
    from engram.server import create_app

    with engram.open(url, llm=None) as mem:
        ids = [m.id for m in mem.session(MAIN_SESSION, scope=MAIN_SCOPE).messages(limit=1)]
        info = mem.session_info(MAIN_SESSION, MAIN_SCOPE)
        assert info is not None and ids
        middle = ids[0] + info.message_count // 2
        out: dict[str, dict[str, float]] = {}
        with TestClient(create_app(mem)) as client:
            for name, path in _pages(middle).items():
                for _ in range(2):
                    assert client.get(path).status_code == 200, path
                seconds = []
                for _ in range(requests):
                    started = time.perf_counter()
                    response = client.get(path)
                    seconds.append(time.perf_counter() - started)
                    assert response.status_code == 200, path
                out[name] = {
                    "median_ms": statistics.median(seconds) * 1000,
                    "p95_ms": percentile(sorted(seconds), 0.95) * 1000,
                    "max_ms": max(seconds) * 1000,
                }
    return out


def _report(size: int, timings: dict[str, float], pages: dict[str, dict[str, float]]) -> str:
    lines = [
        "# Dashboard: server time per page",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}; SQLite; main session of {size:,} messages "
        f"(lean, {TURNS} turns recorded); "
        f"{REQUESTS} requests per page after a warm-up, in process (`python -m "
        f"benchmarks.dashboard --size {size}`). Target: under {TARGET * 1000:.0f} ms.",
        "",
        "| page | median ms | p95 ms | max ms | target |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, row in pages.items():
        verdict = "met" if row["p95_ms"] <= TARGET * 1000 else "MISSED"
        lines.append(
            f"| {name} | {row['median_ms']:.1f} | {row['p95_ms']:.1f} | {row['max_ms']:.1f} "
            f"| {verdict} |"
        )
    lines += ["", "Preparation: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--name", default="dashboard")
    args = parser.parse_args(argv)
    url, timings = _prepare(args.size)
    pages = _measure(url)
    RESULTS.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"size": args.size, "preparation_s": timings, "pages": pages}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(data, indent=2) + "\n")
    text = _report(args.size, timings, pages)
    (RESULTS / f"{args.name}.md").write_text(text)
    print(text)
    return 0 if all(p["p95_ms"] <= TARGET * 1000 for p in pages.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
