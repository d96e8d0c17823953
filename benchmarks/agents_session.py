"""``make bench``: the Agents SDK's ``SQLiteSession`` beside Engram's ``EngramSession``.

Both hold the same session of ``--items`` items (100K by default, ~200 tokens
each). Measured, interleaved round by round: ``get_items()`` as the Runner
calls it before each turn. The SDK's session returns the whole history;
Engram's returns the prompt of the next turn, fitted to ``--budget``. Reported:
median latency of each, their ratio (target: Engram at least 10x faster), and
the tokens each returns (counted alike: o200k_base text plus 4 per item).

Usage::

    python -m benchmarks.agents_session                 # 100K items
    python -m benchmarks.agents_session --items 2000 --rounds 2 --name smoke

Results: ``benchmarks/results/agents-session.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.dataset import TextSource
from benchmarks.peers import available
from benchmarks.timing import Budget, Samples, ratio, run_slot, warm_up

ROOT = Path(__file__).resolve().parent
TARGET_SPEEDUP = 10.0
BATCH = 1_000
PER_ITEM = 4  # the same per-item overhead for both sides


def build(workdir: Path, items: int, seed: int, budget: int) -> tuple[Any, Any, dict[str, float]]:
    """Fill an SDK SQLiteSession and an EngramSession with the same items."""
    from agents import SQLiteSession

    import engram
    from engram.integrations.openai_agents import EngramSession

    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    source = TextSource(seed)
    sdk = SQLiteSession("bench", db_path=str(workdir / "agents.db"))
    mem = engram.open(f"sqlite:///{workdir / 'engram.db'}", llm=None)
    ours = EngramSession("bench", scope="bench", engram=mem, budget=budget)
    seconds = {"sdk": 0.0, "engram": 0.0}
    loop = asyncio.new_event_loop()
    try:
        for start in range(0, items, BATCH):
            batch = list(source.fresh(min(BATCH, items - start), base=start))
            for name, session in (("sdk", sdk), ("engram", ours)):
                began = time.perf_counter()
                loop.run_until_complete(session.add_items(batch))
                seconds[name] += time.perf_counter() - began
    finally:
        loop.close()
    return sdk, ours, seconds


def tokens_of(items: list[Any]) -> int:
    """Tokens of the items' text, counted the same way for both sides."""
    from engram.tokens import storage_counter

    counter = storage_counter()
    total = 0
    for item in items:
        content = item.get("content") or item.get("output") or item.get("arguments") or ""
        total += counter.count_text(content if isinstance(content, str) else json.dumps(content))
        total += PER_ITEM
    return total


def measure(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(args.work) / f"agents-session-{args.items}"
    sdk, ours, build_seconds = build(workdir, args.items, args.seed, args.budget)
    loop = asyncio.new_event_loop()
    targets: dict[str, Callable[[], object]] = {
        "sdk_get_items": lambda: loop.run_until_complete(sdk.get_items()),
        "engram_get_items": lambda: loop.run_until_complete(ours.get_items()),
    }
    budget = Budget(min_iters=3, max_iters=200, min_time=args.min_time, warmup_iters=1)
    samples = {name: Samples() for name in targets}
    try:
        for fn in targets.values():
            warm_up(fn, budget)
        names = list(targets)
        for round_no in range(args.rounds):
            order = names[round_no % 2 :] + names[: round_no % 2]
            for name in order:
                samples[name].add(run_slot(targets[name], budget))
        sdk_items = loop.run_until_complete(sdk.get_items())
        our_items = loop.run_until_complete(ours.get_items())
    finally:
        loop.close()
        sdk.close()
        ours.engram.close()
    speedup = ratio(samples["sdk_get_items"], samples["engram_get_items"])
    our_tokens = tokens_of(our_items)
    return {
        "items": args.items,
        "budget": args.budget,
        "build_seconds": {k: round(v, 2) for k, v in build_seconds.items()},
        "sdk_get_items": samples["sdk_get_items"].summary(),
        "engram_get_items": samples["engram_get_items"].summary(),
        "speedup": speedup,
        "target_speedup": TARGET_SPEEDUP,
        "met": speedup["median"] is not None and speedup["median"] >= TARGET_SPEEDUP,
        "sdk_items_returned": len(sdk_items),
        "sdk_tokens_returned": tokens_of(sdk_items),
        "engram_items_returned": len(our_items),
        "engram_tokens_returned": our_tokens,
        "engram_fits_budget": our_tokens <= args.budget,
    }


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    def ms(summary: dict[str, Any]) -> str:
        return f"{summary['median_us'] / 1000:,.2f} ms (p95 {summary['p95_us'] / 1000:,.2f} ms)"

    speed = result["speedup"]["median"]
    verdict = "met" if result["met"] else "MISSED"
    return "\n".join(
        [
            "# Agents SDK session vs EngramSession",
            "",
            f"{meta['when']}, Python {meta['python']}, {meta['machine']}. Command: "
            f"`{meta['command']}`.",
            "",
            f"One session of {result['items']:,} items (~200 tokens each), the same in both. "
            "`get_items()` is what the Runner calls before every turn: the SDK's "
            "`SQLiteSession` returns the whole history, `EngramSession` the prompt of the "
            f"next turn within a {result['budget']:,}-token budget (policy `default`: the newest "
            "messages that fit).",
            "",
            "| | get_items() median | items returned | tokens returned |",
            "| --- | --- | --- | --- |",
            f"| SDK `SQLiteSession` | {ms(result['sdk_get_items'])} | "
            f"{result['sdk_items_returned']:,} | {result['sdk_tokens_returned']:,} |",
            f"| `EngramSession` | {ms(result['engram_get_items'])} | "
            f"{result['engram_items_returned']:,} | {result['engram_tokens_returned']:,} |",
            "",
            f"Engram is **{speed}x** faster (median of per-round ratios, rounds: "
            f"{result['speedup']['rounds']}); target {TARGET_SPEEDUP:g}x: **{verdict}**. "
            f"Engram's prompt fits the budget: {result['engram_fits_budget']}.",
            "",
            f"Filling both (add_items in batches of {BATCH:,}): SDK "
            f"{result['build_seconds']['sdk']} s, Engram {result['build_seconds']['engram']} s "
            "(Engram counts every item's tokens once, at insert, and indexes it for search).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--budget", type=int, default=8_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--name", default="agents-session")
    parser.add_argument("--out", default=str(ROOT / "results"), help="where results go")
    parser.add_argument("--work", default=str(ROOT / "work"), help="where databases go")
    args = parser.parse_args(argv)
    missing = available()
    if missing:
        print(f"skipped: {missing}")
        return 0
    result = measure(args)
    meta = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {platform.system()}",
        "command": " ".join(["python -m benchmarks.agents_session", *(argv or sys.argv[1:])]),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps({**meta, **result}, indent=2) + "\n")
    (out / f"{args.name}.md").write_text(markdown(result, meta))
    print(markdown(result, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
