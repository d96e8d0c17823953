"""The retrieval benchmark's report: its JSON results as markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.retrieval.quality import DEFAULT, FLOOR
from benchmarks.retrieval.steps import DEFAULT_STEP
from benchmarks.retrieval.tiers import quality_lines

CHATS = (
    "{conversations} generated conversations between two named friends (ten sessions each over"
    " about two months, short turns full of chit-chat), {messages} messages with the asked"
    " questions and earlier tool results stored in the scope as in a real turn (the floor"
    " returns them first), {questions} labelled questions. Each keyword step adds to the one"
    " above it; the last keyword step is the default search."
)
ASSISTANT = (
    "{conversations} generated histories of one person talking with an assistant"
    " ({sessions_per_history} sessions each, about ten turns a session: the person states facts"
    " in passing inside requests, the assistant answers at length and repeats their words),"
    " {messages} messages, {questions} labelled questions, each searched with its own question"
    " date as the moment it is asked."
)
METRICS = (
    "Every question is searched over its conversation's scope (all sessions). all@5: every"
    " evidence turn in the top 5 (turn-level recall of all evidence); sessions all@5: every"
    " evidence session among the first 5 distinct sessions of the ranking; NDCG@10 over the"
    " evidence turns; R@k: an evidence turn in the top k; MRR of the first evidence turn. The"
    " floor is plain FTS5 BM25 (`bm25()`, Porter) over the bare turn texts in the same run,"
    " queried with the question's words OR-ed."
)


def _cells(a: dict[str, float], keys: tuple[str, ...]) -> str:
    return " | ".join(str(a[k]) for k in keys)


def corpus_lines(title: str, about: str, part: dict[str, Any], default: str) -> list[str]:
    """One corpus: every run's headline metrics, per question type, and the verdicts."""
    runs = part["runs"]
    keys = ("all@5", "sessions_all@5", "ndcg@10", "recall@1", "recall@5", "recall@10", "mrr")
    lines = [f"## {title}", "", about.format(**part), ""]
    lines += [
        "| run | all@5 | sessions all@5 | NDCG@10 | R@1 | R@5 | R@10 | MRR |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {name} | {_cells(found['all'], keys)} |" for name, found in runs.items()]
    kinds = [k for k in runs[FLOOR] if k != "all"]
    lines += ["", "all@5 / sessions all@5 / NDCG@10 / R@10 per question type:", ""]
    lines.append("| run | " + " | ".join(f"{k} (n={runs[FLOOR][k]['n']})" for k in kinds) + " |")
    lines.append("| --- |" + " --- |" * len(kinds))
    for name, found in runs.items():
        cells = [
            " / ".join(
                str(found[k][m]) for m in ("all@5", "sessions_all@5", "ndcg@10", "recall@10")
            )
            for k in kinds
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    floor, shipped = runs[FLOOR]["all"], runs[default]["all"]
    turns = "beats" if shipped["all@5"] > floor["all@5"] else "does NOT beat"
    sessions = "at least level" if shipped["sessions_all@5"] >= floor["sessions_all@5"] else "BELOW"
    lines += [
        "",
        f"Default search against the floor: all@5 {shipped['all@5']} against {floor['all@5']}"
        f" ({turns} it); sessions all@5 {shipped['sessions_all@5']} against"
        f" {floor['sessions_all@5']} ({sessions}).",
    ]
    if "embedding" in part:
        e = part["embedding"]
        lines.append(
            f"Embedding every message: {e['messages']} in {e['seconds']} s wall"
            f" ({e['per_second']} messages/s at that load), {e.get('cpu_seconds')} s of CPU"
            f" ({e.get('per_cpu_second')} messages per CPU-second, {e.get('threads')} threads)."
        )
    return [*lines, ""]


def indexing_lines(found: dict[str, Any]) -> list[str]:
    """Engram's append against plain FTS5 inserts of the same turns."""
    lines = [
        "## Indexing against plain FTS5, SQLite",
        "",
        f"{found['messages']} turns of the second corpus in {found['sessions']} sessions, stored"
        " by Engram (`store.append`: each message also gets its neighbour context, date words,"
        " flags, participants) and inserted into a plain FTS5 table of the bare texts, each in a"
        " fresh database, alternating rounds; ratio: median of the per-round ratios (target:"
        " within 3x).",
        "",
        "| batches | Engram s | plain FTS5 s | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for mode in ("per_session", "per_message"):
        m = found[mode]
        verdict = "" if m["ratio"] is not None and m["ratio"] <= 3 else " (over 3x)"
        lines.append(
            f"| {mode.replace('_', ' ')} | {m['engram_s']} | {m['plain_fts5_s']} |"
            f" {m['ratio']}{verdict} |"
        )
    return [*lines, ""]


def latency_lines(backend: str, lat: dict[str, Any]) -> list[str]:
    """One backend's latency on one corpus's turns: against plain FTS5, tiers, sizes."""
    corpus = lat.get("corpus", "chats")
    lines = [
        f"## Latency and size, {backend}, {lat['messages']:,} messages of the {corpus} corpus",
        "",
    ]
    speed = lat.get("against_plain_fts5")
    if speed:
        e, p = speed["engram"], speed["plain_fts5"]
        ok = "met" if e["p95_ms"] < 50 and speed["ratio_median"] <= 5 else "MISSED at this load"
        lines += [
            "A scope of 100 sessions; each question searched by the default search and by plain"
            " FTS5 over the same texts one right after the other (targets: within 5x of plain"
            f" FTS5 and p95 under 50 ms: {ok}):",
            "",
            "| search | p50 ms | p95 ms | max ms | queries |",
            "| --- | --- | --- | --- | --- |",
            f"| default search | {e['p50_ms']} | {e['p95_ms']} | {e['max_ms']} | {e['queries']} |",
            f"| plain FTS5 | {p['p50_ms']} | {p['p95_ms']} | {p['max_ms']} | {p['queries']} |",
        ]
        if backend == "sqlite" and "engram_cpu" in speed:
            ec, pc = speed["engram_cpu"], speed["plain_fts5_cpu"]
            lines += [
                f"| default search, CPU time | {ec['p50_ms']} | {ec['p95_ms']} | {ec['max_ms']}"
                f" | {ec['queries']} |",
                f"| plain FTS5, CPU time | {pc['p50_ms']} | {pc['p95_ms']} | {pc['max_ms']}"
                f" | {pc['queries']} |",
            ]
        lines += [
            "",
            f"Median per-question ratio (default / plain): {speed['ratio_median']};"
            f" ratio of the p50s: {speed['ratio_p50']}.",
            "",
        ]
    lines += [
        "| where | p50 ms | p95 ms | max ms | queries |",
        "| --- | --- | --- | --- | --- |",
    ]
    wheres = ["one_session", "scope_100_sessions", "one_session_untiered"]
    wheres += ["scope_100_sessions_untiered", "hybrid_one_session", "hybrid_scope_100_sessions"]
    for where in (w for w in wheres if w in lat):
        t = lat[where]
        ok = "" if t["p95_ms"] <= 50 else " (over the 50 ms target)"
        lines.append(
            f"| {where} | {t['p50_ms']} | {t['p95_ms']}{ok} | {t['max_ms']} | {t['queries']} |"
        )
    if "quality_at_scale" in lat:
        lines += quality_lines(lat["quality_at_scale"])
    lines += [
        "",
        "Sizes (bytes, both stores of 100K messages in one database): "
        + ", ".join(f"{k} {v:,}" for k, v in lat["sizes"].items()),
        "",
    ]
    return lines


def before_lines(report: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """The default search of ``report`` beside that of an earlier run (``before``)."""
    lines = [
        "## Before and after",
        "",
        f"Before: `{before['command']}` on the sources before this work, {before['when']},"
        f" load {before.get('load', {}).get('start')} -> {before.get('load', {}).get('end')}."
        " Same corpora, same floor.",
        "",
        "| corpus | run | all@5 | sessions all@5 | NDCG@10 | R@10 | MRR |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    keys = ("all@5", "sessions_all@5", "ndcg@10", "recall@10", "mrr")
    for corpus, default in (("chats", DEFAULT_STEP), ("assistant", DEFAULT)):
        now, then = report["corpora"].get(corpus), before.get("corpora", {}).get(corpus)
        if not now or not then:
            continue
        for label, runs in (("floor", now["runs"][FLOOR]), ("before", then["runs"][default])):
            lines.append(f"| {corpus} | {label} | {_cells(runs['all'], keys)} |")
        lines.append(f"| {corpus} | after | {_cells(now['runs'][default]['all'], keys)} |")
    timings = []
    for backend, by_corpus in report.get("latency", {}).items():
        for corpus, lat in by_corpus.items():
            old = before.get("latency", {}).get(backend, {}).get(corpus)
            if old and "against_plain_fts5" in lat and "against_plain_fts5" in old:
                a, b = lat["against_plain_fts5"], old["against_plain_fts5"]
                timings.append(
                    f"| {backend} | {corpus} | {b['engram']['p50_ms']} / {b['engram']['p95_ms']}"
                    f" | {a['engram']['p50_ms']} / {a['engram']['p95_ms']}"
                    f" | {b['ratio_median']} | {a['ratio_median']} |"
                )
    if timings:
        lines += [
            "",
            "Search at 100K messages in a scope (p50 / p95 ms; ratio: median per question of"
            " the default search over plain FTS5, same run):",
            "",
            "| backend | turns | before | after | ratio before | ratio after |",
            "| --- | --- | --- | --- | --- | --- |",
            *timings,
        ]
    if "indexing" in report and "indexing" in before:
        a, b = report["indexing"], before["indexing"]
        lines += [
            "",
            "Indexing against plain FTS5 (ratio, median of rounds): per session"
            f" {b['per_session']['ratio']} -> {a['per_session']['ratio']}, per message"
            f" {b['per_message']['ratio']} -> {a['per_message']['ratio']}.",
        ]
    return [*lines, ""]


def markdown(report: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """The whole report (beside an earlier run's default search when ``before`` is given)."""
    load = report.get("load", {})
    lines = [
        "# Retrieval benchmark",
        "",
        f"Run {report['when']} on {report['machine']}. Command: `{report['command']}`."
        f" Load average (1, 5, 15 min) at the start {load.get('start')}, at the end"
        f" {load.get('end')}.",
        "",
        METRICS,
        "",
    ]
    if before is not None:
        lines += before_lines(report, before)
    corpora = report["corpora"]
    if "chats" in corpora:
        chats = corpora["chats"]
        lines += corpus_lines("First corpus: two friends chatting", CHATS, chats, DEFAULT_STEP)
        r10 = chats["runs"][DEFAULT_STEP]["all"]["recall@10"]
        verdict = "met" if r10 >= 0.8 else "MISSED"
        lines[-1:] = [f"Recall@10 of the default search: {r10} (target 0.80: {verdict}).", ""]
    if "assistant" in corpora:
        lines += corpus_lines(
            "Second corpus: a person and an assistant", ASSISTANT, corpora["assistant"], DEFAULT
        )
    if "indexing" in report:
        lines += indexing_lines(report["indexing"])
    for backend, by_corpus in report.get("latency", {}).items():
        for lat in by_corpus.values():
            lines += latency_lines(backend, lat)
    return "\n".join(lines) + "\n"


def rewrite(path: Path, before: Path | None = None) -> None:
    """Write the markdown of a saved JSON report again (after a change of wording)."""
    report = json.loads(path.read_text())
    earlier = json.loads(before.read_text()) if before is not None else None
    path.with_suffix(".md").write_text(markdown(report, earlier))


__all__ = ["markdown", "rewrite"]
