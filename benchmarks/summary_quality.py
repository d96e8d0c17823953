"""What a user without a model gets: the offline summary, important data and memory, measured.

``python -m benchmarks.summary_quality [--label NAME]`` folds each conversation of
:mod:`benchmarks.conversations` with the offline summarizer, two ways:

* **one cycle**: every message folded at once into summary version 1 (100-150 words);
* **two cycles**: the first half into version 1, then the second half with that
  summary into version 2 (200-250 words), as a growing session is compacted;

and reports, per conversation and in all:

* **fact recall**: the share of the facts a reader needs whose terms all appear
  in what compaction keeps (summary + important data);
* **repeated entities**: entities that repeat a word run ("Bob Chen Bob Chen")
  or that another kept entity already says;
* **mid-sentence fragments**: summary pieces that do not start a sentence or
  that end cut off;
* **whole decisions**: the share of the user's decisions kept whole in
  ``key_decisions``, and decisions a summary keeps only the start of;
* **filler**: pleasantries ("Thanks, that's all") kept in the summary or in
  the end-of-conversation memory.

The output is deterministic (no timing): results go to
``benchmarks/results/summary-quality[-LABEL].json`` and ``.md``; the
Markdown shows the ``before`` run beside this one when it exists.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.conversations import CONVERSATIONS, FILLER, Conversation
from engram.compaction.summarizer import OfflineSummarizer
from engram.memories.creation import extractive_memory
from engram.models import Message

RESULTS = Path(__file__).resolve().parent / "results"
_REPEATED_RUN = re.compile(r"\b(\w+(?:\s+\w+)*)\s+\1\b", re.IGNORECASE)
_LABEL = re.compile(r"^(?:User|Assistant|Tool result|System|Message):\s*")
_PIECE = re.compile(r"(?<=[.!?…])\s+(?=(?:User|Assistant|Tool result|System):)")


def _messages(conversation: Conversation) -> list[Message]:
    when = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    return [
        Message(i + 1, "bench", conversation.name, role, text, when, len(text) // 4)
        for i, (role, text) in enumerate(conversation.turns)
    ]


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _kept_text(summary: str, important: dict[str, Any]) -> str:
    return _norm(summary + " " + json.dumps(important, ensure_ascii=False))


def _sentences(text: str) -> list[str]:
    return [_LABEL.sub("", p.strip()) for p in _PIECE.split(text) if _LABEL.sub("", p.strip())]


def _fragments(summary: str) -> list[str]:
    """Pieces that start mid-sentence (a lower-case plain word) or end cut off."""
    bad = []
    for body in _sentences(summary):
        first = body.split()[0]
        mid_sentence = first.isalpha() and first.islower()
        if mid_sentence or body.endswith("…"):
            bad.append(body)
    return bad


def _repeated_entities(entities: list[str]) -> list[str]:
    repeats = [e for e in entities if _REPEATED_RUN.search(e)]
    folded = [_norm(e) for e in entities]
    for entity, key in zip(entities, folded, strict=True):
        if any(key != other and re.search(rf"\b{re.escape(key)}\b", other) for other in folded):
            repeats.append(entity)  # "Bob" when "Bob Chen" is kept too
    return repeats


def _fillers(text: str) -> list[str]:
    """Sentences that are pleasantries: nearly nothing is left once the pleasantry is removed."""
    found = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        body = _norm(_LABEL.sub("", sentence))
        rest = body
        for phrase in FILLER:
            rest = rest.replace(phrase, " ")
        if rest != body and len(re.findall(r"\w+", rest)) < 2:
            found.append(sentence)
    return found


def measure(conversation: Conversation) -> dict[str, Any]:
    """Every metric of one conversation."""
    summarizer = OfflineSummarizer()
    messages = _messages(conversation)
    one = summarizer.summarize(messages, previous_summary=None, version=1).text
    half = len(messages) // 2
    first = summarizer.summarize(messages[:half], previous_summary=None, version=1).text
    two = summarizer.summarize(messages[half:], previous_summary=first, version=2).text
    important = summarizer.extract_important(messages).data
    memory = extractive_memory(messages) or ""
    kept_one = _kept_text(one, important)
    kept_two = _kept_text(two, important)
    decisions = important.get("key_decisions", [])
    whole = [d for d in conversation.decisions if _norm(d) in {_norm(x) for x in decisions}]
    return {
        "facts": len(conversation.facts),
        "recall_one_cycle": sum(
            all(_norm(t) in kept_one for t in f.terms) for f in conversation.facts
        ),
        "recall_two_cycles": sum(
            all(_norm(t) in kept_two for t in f.terms) for f in conversation.facts
        ),
        "lost_one_cycle": [
            f.what for f in conversation.facts if not all(_norm(t) in kept_one for t in f.terms)
        ],
        "repeated_entities": _repeated_entities(list(important.get("entities", []))),
        "fragments": _fragments(one) + _fragments(two),
        "decisions": len(conversation.decisions),
        "decisions_whole": len(whole),
        "decisions_cut_in_summary": [
            d[:60]
            for d in conversation.decisions
            for summary in (one, two)
            if _norm(" ".join(d.split()[:8])) in _norm(summary) and _norm(d) not in _norm(summary)
        ],
        "summary_filler": _fillers(one) + _fillers(two),
        "memory_filler": _fillers(memory.removeprefix("User said: ")),
        "summary_one_cycle": one,
        "summary_two_cycles": two,
        "important_data": important,
        "memory": memory,
    }


def totals(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The headline numbers over every conversation."""
    facts = sum(r["facts"] for r in rows.values())
    decisions = sum(r["decisions"] for r in rows.values())

    def total(key: str) -> int:
        return sum(len(r[key]) if isinstance(r[key], list) else r[key] for r in rows.values())

    return {
        "conversations": len(rows),
        "facts": facts,
        "fact_recall_one_cycle": round(total("recall_one_cycle") / facts, 3),
        "fact_recall_two_cycles": round(total("recall_two_cycles") / facts, 3),
        "repeated_entities": total("repeated_entities"),
        "mid_sentence_fragments": total("fragments"),
        "decisions_whole_in_important_data": f"{total('decisions_whole')}/{decisions}",
        "decisions_cut_in_summaries": total("decisions_cut_in_summary"),
        "filler_in_summaries": total("summary_filler"),
        "filler_in_memories": total("memory_filler"),
    }


def _markdown(result: dict[str, Any], before: dict[str, Any] | None) -> str:
    now = result["totals"]
    lines = [
        "# Offline summary quality",
        "",
        "`python -m benchmarks.summary_quality`: the offline summarizer, important data and",
        f"end-of-conversation memory on {now['conversations']} fixed conversations",
        f"({now['facts']} facts a reader needs; `benchmarks/conversations.py`). Deterministic.",
        "",
        "| metric | " + ("before | " if before else "") + "now |",
        "| --- | " + ("--- | " if before else "") + "--- |",
    ]
    for key, value in now.items():
        if key in ("conversations", "facts"):
            continue
        old = f"{before['totals'].get(key, '')} | " if before else ""
        lines.append(f"| {key.replace('_', ' ')} | {old}{value} |")
    lines += ["", "Facts lost (one cycle), per conversation:", ""]
    for name, row in result["conversations"].items():
        lost = ", ".join(row["lost_one_cycle"]) or "none"
        lines.append(f"- {name}: {row['recall_one_cycle']}/{row['facts']} kept; lost: {lost}")
    lines += ["", "Example (first conversation, one cycle):", ""]
    first = next(iter(result["conversations"].values()))
    lines += ["> " + first["summary_one_cycle"], "", "Memory: " + (first["memory"] or "(none)")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and write its results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summary_quality")
    parser.add_argument("--label", default="", help="suffix of the results files (e.g. before)")
    args = parser.parse_args(argv)
    rows = {c.name: measure(c) for c in CONVERSATIONS}
    result = {"totals": totals(rows), "conversations": rows}
    stem = "summary-quality" + (f"-{args.label}" if args.label else "")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    before_path = RESULTS / "summary-quality-before.json"
    before = None
    if before_path.exists() and not args.label:
        before = json.loads(before_path.read_text())
    (RESULTS / f"{stem}.md").write_text(_markdown(result, before))
    print(json.dumps(result["totals"], indent=2))
    return result


if __name__ == "__main__":
    main()
