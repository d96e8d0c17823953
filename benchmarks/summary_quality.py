"""What a user without a model gets: the offline summary, important data and memory, measured.

``python -m benchmarks.summary_quality [--label NAME]`` folds each conversation of
:mod:`benchmarks.conversations` and :mod:`benchmarks.written_conversations`
(three written chats and the bundled sample) with the offline summarizer, two
ways:

* **one cycle**: every message folded at once into summary version 1 (100-150 words);
* **two cycles**: the first half into version 1, then the second half with that
  summary into version 2 (200-250 words), as a growing session is compacted;

and replays the sample as ``make run`` does (``summary_buffer``, one prompt per
turn, then the end of the conversation), and reports, per conversation and in all:

* **fact recall**: the share of the facts a reader needs whose terms all appear
  in what compaction keeps (summary + important data);
* **what a person would not write**: questions, pleasantries ("Thanks, that's
  all") and first-person quotes ("User: I'm ...", "I prefer ...") in the
  summaries; preferences that say nothing ("I like that framing");
* **decisions**: labelled decisions found in ``key_decisions`` (each as terms
  that must all appear in one item), items that are no labelled decision, the
  user's decision sentences kept whole, decisions a summary keeps only the
  start of;
* **entities**: the share of extracted entities that are names of people,
  products, places or organisations (labelled), repeated ones ("Bob Chen Bob
  Chen");
* **memory**: the end-of-conversation memory's sentences, length, quoted turns,
  questions and pleasantries.

The output is deterministic (no timing): results go to
``benchmarks/results/summary-quality[-LABEL].json`` and ``.md``; the
Markdown shows the ``before`` run beside this one when it exists. To measure
another library (the main branch, say) with these measures, put its ``src``
first: ``PYTHONPATH=/path/to/main/src:. python -m benchmarks.summary_quality
--label before``.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.conversations import CONVERSATIONS, FILLER, Conversation, Fact
from benchmarks.written_conversations import SAMPLE, WRITTEN
from engram.compaction.summarizer import OfflineSummarizer
from engram.memories.creation import extractive_memory
from engram.models import Message

RESULTS = Path(__file__).resolve().parent / "results"
ALL: tuple[Conversation, ...] = (*CONVERSATIONS, *WRITTEN, SAMPLE)
_REPEATED_RUN = re.compile(r"\b(\w+(?:\s+\w+)*)\s+\1\b", re.IGNORECASE)
_LABEL = re.compile(r"^(?:User|Assistant|Tool result|System|Message):\s*")
_ROLE_LABEL = re.compile(r"(?:^|\s)(?:User|Assistant|Tool result|System|User said):\s")
_SENTENCE = re.compile(r"(?<=[.!?…])[\"”]?\s+(?=[\"“(]?[A-Z0-9$@])|\n+")
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I'd|I'll|I've)\b|\b(?:me|my|mine|myself)\b")
_VACUOUS = re.compile(
    r"^\W*(?:i\s+(?:really\s+)?(?:like|love|prefer|want|need)\s+(?:that|this|it|those|these)"
    r"(?:\s+\w+)?[.!]?$|.*\b(?:want|need|like)\s+to\s+know\b)",
    re.IGNORECASE,
)
#: Common words that cannot start a sentence in lower case: a piece opening with one
#: was cut out of a longer sentence.
_CONTINUATIONS = frozenset(
    "and but or so which that because then the a an to of with for in on at by from as if "
    "when while although though".split()
)


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
    """Sentences of a summary or memory, role labels ("User: ") taken off."""
    pieces = _SENTENCE.split(re.sub(r"\s(?=(?:User|Assistant|Tool result|System): )", "\n", text))
    return [body for p in pieces if (body := _LABEL.sub("", p.strip()))]


def _fragments(summary: str) -> list[str]:
    """Pieces that start mid-sentence (a lower-case common word) or end cut off."""
    bad = []
    for body in _sentences(summary):
        first = body.split()[0]
        if first in _CONTINUATIONS or body.endswith("…"):
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
            rest = re.sub(rf"\b{re.escape(phrase)}\b", " ", rest)
        if rest != body and len(re.findall(r"\w+", rest)) < 2:
            found.append(sentence)
    return found


def _questions(text: str) -> list[str]:
    return [s for s in _sentences(text) if s.rstrip("\"'”)").endswith("?")]


def _first_person(text: str) -> list[str]:
    """Quoted turns: sentences under a role label, or in the first person singular."""
    labelled = [m.group(0).strip() for m in _ROLE_LABEL.finditer(" " + text)]
    return labelled + [s for s in _sentences(text) if _FIRST_PERSON.search(s)]


def _has_all(text: str, fact: Fact) -> bool:
    return all(_norm(term) in _norm(text) for term in fact.terms)


def _is_name(entity: str, names: tuple[str, ...]) -> bool:
    """Right when ``entity`` is a labelled name or a run of its words ("Daniel" of "Daniel X")."""
    key = f" {_norm(entity).lstrip('@')} "
    return any(key in f" {_norm(name)} " for name in names)


def _preferences(important: dict[str, Any]) -> list[str]:
    stated = important.get("user_preferences", {}).get("stated", [])
    return [str(s) for s in stated] if isinstance(stated, list) else []


def _decisions(conversation: Conversation, decisions: list[str]) -> dict[str, Any]:
    found = [d for d in conversation.decided if any(_has_all(x, d) for x in decisions)]
    extra = [x for x in decisions if not any(_has_all(x, d) for d in conversation.decided)]
    whole = [d for d in conversation.decisions if _norm(d) in {_norm(x) for x in decisions}]
    return {
        "decided": len(conversation.decided),
        "decided_found": len(found),
        "decided_missed": [d.what for d in conversation.decided if d not in found],
        "decisions_unlabelled": extra if conversation.decided else [],
        "decisions": len(conversation.decisions),
        "decisions_whole": len(whole),
    }


def _entities(conversation: Conversation, entities: list[str]) -> dict[str, Any]:
    labelled = bool(conversation.names)
    return {
        "entities": len(entities) if labelled else 0,
        "entities_right": sum(_is_name(e, conversation.names) for e in entities) if labelled else 0,
        "entities_wrong": [e for e in entities if labelled and not _is_name(e, conversation.names)],
        "repeated_entities": _repeated_entities(entities),
    }


def _memory(memory: str) -> dict[str, Any]:
    return {
        "memory": memory,
        "memory_sentences": len(_sentences(memory)),
        "memory_chars": len(memory),
        "memory_quoted": _first_person(memory),
        "memory_questions": _questions(memory),
        "memory_filler": _fillers(memory.removeprefix("User said: ")),
    }


def _summary_faults(*summaries: str) -> dict[str, Any]:
    return {
        "questions": [q for s in summaries for q in _questions(s)],
        "summary_filler": [f for s in summaries for f in _fillers(s)],
        "first_person": [q for s in summaries for q in _first_person(s)],
        "fragments": [f for s in summaries for f in _fragments(s)],
    }


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
    decisions = [str(d) for d in important.get("key_decisions", [])]
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
        **_summary_faults(one, two),
        "vacuous_preferences": [p for p in _preferences(important) if _VACUOUS.match(p)],
        **_decisions(conversation, decisions),
        "decisions_cut_in_summary": [
            d[:60]
            for d in conversation.decisions
            for summary in (one, two)
            if _norm(" ".join(d.split()[:8])) in _norm(summary) and _norm(d) not in _norm(summary)
        ],
        **_entities(conversation, [str(e) for e in important.get("entities", [])]),
        **_memory(memory),
        "summary_one_cycle": one,
        "summary_two_cycles": two,
        "important_data": important,
    }


def measure_served_sample() -> dict[str, Any]:
    """The sample as ``make run`` serves it: replayed turn by turn, then ended; its state read."""
    import engram
    from engram.cli.demo import store_sample

    with tempfile.TemporaryDirectory(prefix="summary-quality-") as directory:
        with engram.open(f"sqlite:///{Path(directory) / 'sample.db'}", llm=None) as mem:
            chat = store_sample(mem, replay_turns=True)
            state = chat.compaction_state()
            outcome = chat.end("benchmark", wait=True).result()
            memory = outcome.memory.content if outcome.memory else ""
    important = dict(state.important_data)
    decisions = [str(d) for d in important.get("key_decisions", [])]
    return {
        "summary_version": state.summary_version,
        "summary_words": len(state.summary.split()),
        **_summary_faults(state.summary),
        "vacuous_preferences": [p for p in _preferences(important) if _VACUOUS.match(p)],
        **_decisions(SAMPLE, decisions),
        **_entities(SAMPLE, [str(e) for e in important.get("entities", [])]),
        **_memory(memory),
        "summary": state.summary,
        "important_data": important,
    }


def totals(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The headline numbers over every conversation."""
    facts = sum(r["facts"] for r in rows.values())

    def total(key: str) -> int:
        return sum(len(r[key]) if isinstance(r[key], list) else r[key] for r in rows.values())

    entities = total("entities")
    return {
        "conversations": len(rows),
        "facts": facts,
        "fact_recall_one_cycle": round(total("recall_one_cycle") / facts, 3),
        "fact_recall_two_cycles": round(total("recall_two_cycles") / facts, 3),
        "questions_in_summaries": total("questions"),
        "filler_in_summaries": total("summary_filler"),
        "first_person_quotes_in_summaries": total("first_person"),
        "mid_sentence_fragments": total("fragments"),
        "preferences_that_say_nothing": total("vacuous_preferences"),
        "labelled_decisions_found": f"{total('decided_found')}/{total('decided')}",
        "decisions_not_labelled": total("decisions_unlabelled"),
        "decisions_whole_in_important_data": f"{total('decisions_whole')}/{total('decisions')}",
        "decisions_cut_in_summaries": total("decisions_cut_in_summary"),
        "entity_precision": round(total("entities_right") / entities, 3) if entities else None,
        "entities_not_names": total("entities_wrong"),
        "repeated_entities": total("repeated_entities"),
        "memories_over_two_sentences": sum(r["memory_sentences"] > 2 for r in rows.values()),
        "memory_sentences_max": max(r["memory_sentences"] for r in rows.values()),
        "memory_chars_max": max(r["memory_chars"] for r in rows.values()),
        "quoted_turns_in_memories": total("memory_quoted"),
        "questions_in_memories": total("memory_questions"),
        "filler_in_memories": total("memory_filler"),
    }


#: What the served sample's table shows, in order.
SERVED_KEYS = (
    "summary_version",
    "summary_words",
    "questions",
    "summary_filler",
    "first_person",
    "vacuous_preferences",
    "decided_found",
    "decisions_unlabelled",
    "entities",
    "entities_right",
    "entities_wrong",
    "memory_sentences",
    "memory_chars",
    "memory_quoted",
)


def _cell(value: Any) -> str:
    return str(len(value)) if isinstance(value, list) else str(value)


def _served_cell(row: dict[str, Any], key: str) -> str:
    if key == "decided_found":
        return f"{row.get(key, '')}/{row.get('decided', '')}"
    return _cell(row.get(key, ""))


def _markdown(result: dict[str, Any], before: dict[str, Any] | None) -> str:
    now = result["totals"]
    head = "| metric | " + ("before | " if before else "") + "now |"
    rule = "| --- | " + ("--- | " if before else "") + "--- |"
    lines = [
        "# Offline summary quality",
        "",
        "`python -m benchmarks.summary_quality`: the offline summarizer, important data and",
        f"end-of-conversation memory on {now['conversations']} fixed conversations",
        f"({now['facts']} facts a reader needs; `benchmarks/conversations.py`,",
        "`benchmarks/written_conversations.py`: three written chats and the bundled sample).",
        "Deterministic. The before column is the same measures run on the library before the",
        "change: `PYTHONPATH=<main>/src:. python -m benchmarks.summary_quality --label before`.",
        "",
        head,
        rule,
    ]
    for key, value in now.items():
        if key in ("conversations", "facts"):
            continue
        old = f"{_cell(before['totals'].get(key, ''))} | " if before else ""
        lines.append(f"| {key.replace('_', ' ')} | {old}{value} |")
    served = result["served_sample"]
    old_served = before.get("served_sample") if before else None
    lines += [
        "",
        "## The sample as `make run` serves it",
        "",
        "Replayed turn by turn under `summary_buffer` (compacted as it grows), then ended.",
        "Decisions found are those in the state's `key_decisions` out of every labelled one:",
        "the decisions of the turns still in the recent window are not folded yet.",
        "",
        head,
        rule,
    ]
    for key in SERVED_KEYS:
        old = f"{_served_cell(old_served, key)} | " if old_served else ""
        lines.append(f"| {key.replace('_', ' ')} | {old}{_served_cell(served, key)} |")
    lines += ["", "Summary now:", "", _quoted(served["summary"]), ""]
    if old_served:
        lines += ["Summary before:", "", _quoted(old_served["summary"]), ""]
    lines += ["Memory now: " + (served["memory"] or "(none)")]
    if old_served:
        lines += ["", "Memory before: " + (old_served["memory"] or "(none)")]
    data = served["important_data"]
    lines += [
        "",
        "Entities now: " + "; ".join(map(str, data.get("entities", []))),
        "",
        "Decisions now:",
        "",
        *[f"- {d}" for d in data.get("key_decisions", [])],
        "",
        "## Per conversation (now)",
        "",
    ]
    for name, row in result["conversations"].items():
        lost = ", ".join(row["lost_one_cycle"]) or "none"
        missed = ", ".join(row["decided_missed"]) or "none"
        wrong = ", ".join(row["entities_wrong"]) or "none"
        lines.append(
            f"- {name}: facts {row['recall_one_cycle']}/{row['facts']} (lost: {lost}); "
            f"decisions {row['decided_found']}/{row['decided']} (missed: {missed}); "
            f"entities not names: {wrong}"
        )
    for name in ("coding-help", "project-kickoff"):
        row = result["conversations"][name]
        lines += [
            "",
            f"Example ({name}, one cycle):",
            "",
            _quoted(row["summary_one_cycle"]),
            "",
            "Memory: " + (row["memory"] or "(none)"),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark and write its results."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.summary_quality")
    parser.add_argument("--label", default="", help="suffix of the results files (e.g. before)")
    args = parser.parse_args(argv)
    rows = {c.name: measure(c) for c in ALL}
    result = {
        "totals": totals(rows),
        "served_sample": measure_served_sample(),
        "conversations": rows,
    }
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


def _quoted(text: str) -> str:
    """A Markdown block quote of every paragraph (summaries are cited paragraphs)."""
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


if __name__ == "__main__":
    main()
