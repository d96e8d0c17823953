"""The retrieval benchmark's report: its JSON results as markdown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Name of the step that is exactly the default keyword search.
DEFAULT_STEP = "+ exclusions, answers above questions (default)"


def markdown(report: dict[str, Any]) -> str:
    quality_part = report["quality"]
    lines = [
        "# Retrieval benchmark",
        "",
        f"Run {report['when']} on {report['machine']}. Command: `{report['command']}`.",
        "",
        f"{quality_part['conversations']} generated conversations (two named people, ten sessions"
        f" each, over about two months), {quality_part['messages']} messages with the asked"
        f" questions and earlier tool results, {quality_part['questions']} labelled questions,"
        " searched over their conversation's scope (all sessions). Recall@k: an evidence turn in"
        " the top k. Each keyword step adds to the one above it; the last keyword step is the"
        " default search. As in a real turn, the question being asked, the earlier questions and"
        " earlier search_history results are stored in the scope: the plain baseline returns"
        " them first. The dense rows add the MiniLM model to the default search.",
        "",
    ]
    steps = quality_part["steps"]
    kinds = [k for k in next(iter(steps.values())) if k != "all"]
    lines += [
        "## All questions",
        "",
        "| step | R@5 | R@10 | R@20 | MRR |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, by_kind in steps.items():
        a = by_kind["all"]
        lines.append(
            f"| {name} | {a['recall@5']} | {a['recall@10']} | {a['recall@20']} | {a['mrr']} |"
        )
    lines += ["", "## Recall@10 (MRR) per question type", ""]
    lines.append(
        "| step | "
        + " | ".join(f"{k} (n={next(iter(steps.values()))[k]['n']})" for k in kinds)
        + " |"
    )
    lines.append("| --- |" + " --- |" * len(kinds))
    for name, by_kind in steps.items():
        cells = [f"{by_kind[k]['recall@10']} ({by_kind[k]['mrr']})" for k in kinds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    first = next(iter(steps.values()))["all"]
    last = steps[DEFAULT_STEP]["all"]
    gain = round(last["recall@10"] - first["recall@10"], 3)
    verdict = "met" if gain >= 0.2 else "MISSED"
    lines += [
        "",
        f"Recall@10 gain of the default keyword search over the baseline: {gain}"
        f" (target 0.2: {verdict}).",
        "",
    ]
    for backend, lat in report.get("latency", {}).items():
        lines += [
            f"## Latency and size, {backend}, {lat['messages']:,} messages",
            "",
            "| where | p50 ms | p95 ms | max ms | queries |",
            "| --- | --- | --- | --- | --- |",
        ]
        wheres = ["baseline_one_session", "one_session", "scope_100_sessions"]
        wheres += ["one_session_untiered", "scope_100_sessions_untiered", "hybrid_one_session"]
        wheres.append("hybrid_scope_100_sessions")
        for where in (w for w in wheres if w in lat):
            t = lat[where]
            ok = "" if t["p95_ms"] <= 50 else " (over the 50 ms target)"
            most = t.get("max_ms", "")
            lines.append(
                f"| {where} | {t['p50_ms']} | {t['p95_ms']}{ok} | {most} | {t['queries']} |"
            )
        if "quality_at_scale" in lat:
            from benchmarks.retrieval.scale import quality_lines

            lines += quality_lines(lat["quality_at_scale"])
        lines += [
            "",
            "Sizes (bytes, both stores of 100K messages in one database): "
            + ", ".join(f"{k} {v:,}" for k, v in lat["sizes"].items()),
            "",
        ]
    return "\n".join(lines) + "\n"


def rewrite(path: Path) -> None:
    """Write the markdown of a saved JSON report again (after a change of wording)."""
    report = json.loads(path.read_text())
    path.with_suffix(".md").write_text(markdown(report))
