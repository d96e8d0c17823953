"""Recorded prompts: many histories, budgets, policies and counters, and the digest of each.

The digests in ``tests/data/context_golden.json`` were written by the context
builder as it was before it read raw rows (the code that built ``Message``
objects for every row it looked at). ``test_golden.py`` rebuilds every case
and compares: the same ``Context`` field for field, the prompt byte for byte.

Two kinds of case, both from a seeded generator (no Hypothesis, so the cases
are the same on every run):

* ``library``: :func:`engram.context.build_context` over a reader of
  ``Message`` lists (tool groups, orphans, names, images, views, floors,
  sections, every preset and custom policies, three counters);
* ``store``: sessions written to a real store (SQLite, and the in-memory
  store), then :meth:`Session.context` with several budgets, policies,
  models and system prompts (``compact=False``: nothing is written).

Regenerate (only from the code that defines "before"):
``python -m tests.context.golden --write``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.images import image_part, png_header_url

from engram import tokens
from engram.context import HistoryTotals, Section, build_context
from engram.errors import EngramError
from engram.intake.parts import content_text
from engram.models import Message, NewMessage
from engram.policy import PRESETS, Policy

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "context_golden.json"
STORAGE = tokens.storage_counter()
WHEN = datetime(2024, 5, 1, tzinfo=UTC)
WORDS = ["alpha", "beta", "gamma", "42", "élan", "中文", "\n", "  ", "{}", "tool", "the", "x"]
LIBRARY_CASES = 1200
STORE_SESSIONS = 24


def _text(rng: random.Random) -> str:
    kind = rng.choice(["tiny", "small", "small", "small", "medium", "huge"])
    size = {"tiny": rng.randint(0, 3), "small": rng.randint(1, 60), "medium": rng.randint(60, 400)}
    n = size.get(kind, rng.randint(400, 3_000))
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _image_parts(rng: random.Random, text: str) -> list[dict[str, Any]]:
    detail = rng.choice([None, "low", "high", "auto"])
    image = image_part(png_header_url(rng.randint(50, 3000), rng.randint(50, 3000)), detail)
    return [{"type": "text", "text": text}, image] if text else [image]


def history_events(rng: random.Random, size: int) -> list[dict[str, Any]]:
    """OpenAI-shaped messages (tool groups, orphans, names, images), oldest first."""
    out: list[dict[str, Any]] = []
    weights = {
        "user": 6,
        "assistant": 6,
        "group": 2,
        "orphan": 1,
        "system": 1,
        "named": 1,
        "image": 1,
    }
    kinds = list(weights)
    for k in range(size):
        kind = rng.choices(kinds, [weights[x] for x in kinds])[0]
        if kind in ("user", "assistant", "system"):
            out.append({"role": kind, "content": _text(rng)})
        elif kind == "named":
            out.append(
                {
                    "role": rng.choice(["user", "assistant"]),
                    "content": _text(rng),
                    "name": rng.choice(["alice", "bob"]),
                }
            )
        elif kind == "image":
            text = _text(rng) if rng.random() < 0.7 else ""
            out.append({"role": "user", "content": _image_parts(rng, text)})
        elif kind == "orphan":
            out.append({"role": "tool", "content": _text(rng), "tool_call_id": f"lost{k}"})
        else:
            calls = rng.randint(1, 3)
            ids = [f"c{k}_{j}" for j in range(calls)]
            out.append(
                {
                    "role": "assistant",
                    "content": rng.choice(["", "let me check"]),
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                        }
                        for cid in ids
                    ],
                }
            )
            for cid in ids[: rng.randint(0, calls)]:  # sometimes results are missing
                out.append({"role": "tool", "content": _text(rng), "tool_call_id": cid})
    return out


def _stored(events: list[dict[str, Any]], rng: random.Random) -> list[Message]:
    """The events as stored messages (increasing ids with gaps, exact stored counts)."""
    out: list[Message] = []
    mid = rng.randint(1, 1000)
    for i, event in enumerate(events):
        mid += rng.randint(1, 3)
        content = event["content"]
        parts = None
        if isinstance(content, list):
            parts, content = content, content_text(content)
        extra = {k: event[k] for k in ("name", "tool_calls", "tool_call_id") if k in event}
        out.append(
            Message(
                id=mid,
                scope="s",
                session="chat",
                role=event["role"],
                content=content,
                created_at=WHEN + timedelta(seconds=i),
                tokens=tokens.count_message(STORAGE, event["role"], content, parts=parts, **extra),
                parts=parts,
                **extra,
            )
        )
    return out


def _policy(rng: random.Random) -> Policy:
    if rng.random() < 0.5:
        return rng.choice(list(PRESETS.values()))
    return Policy(
        name="custom",
        max_messages=rng.choice([None, None, rng.randint(1, 20)]),
        max_window_tokens=rng.choice([None, None, rng.randint(1, 8_000)]),
        max_exchanges=rng.choice([None, None, None, rng.randint(1, 5)]),
        cache_window=rng.random() < 0.6,
        cache_chunk=rng.choice([0.05, 0.1, 0.3, 0.5]),
        cache_chunk_messages=rng.choice([None, None, rng.randint(1, 30)]),
    )


def _counter(rng: random.Random) -> tokens.TokenCounter | None:
    return rng.choice(
        [
            None,
            STORAGE,
            STORAGE,
            tokens.ApproximateCounter(margin=0.2),
            tokens.counter_for_model("gpt-4"),
            tokens.counter_for_model("gpt-4.1-mini"),
        ]
    )


def library_case(seed: int) -> dict[str, Any]:
    """One build_context call: its arguments, from ``seed``."""
    rng = random.Random(seed)
    history = _stored(history_events(rng, rng.choice([0, 3, 10, 30, 60, 120])), rng)
    total = sum(m.tokens for m in history) + tokens.REPLY_PRIMING
    if rng.random() < 0.5:
        budget = max(16, int(total * rng.uniform(0.0, 1.2)))
    else:
        budget = rng.choice([16, 40, 200, 1_000, 3_000, 8_000, 50_000])
    reserve = rng.choice([0, 0, 0, min(500, budget - 16), budget - 16])
    floor_id = rng.choice([m.id for m in history]) if history and rng.random() < 0.25 else None
    views = None
    if history and rng.random() < 0.2:
        picked = rng.sample(history, min(len(history), rng.randint(1, 4)))
        views = {m.id: m.content[: rng.randint(0, 80)] for m in picked}
    sections = [
        Section(rng.choice(["MEMORIES", "SUMMARY", "DATA"]), _text(rng))
        for _ in range(rng.choice([0, 0, 1, 2]))
    ]
    return {
        "history": history,
        "budget": budget,
        "reserve": reserve,
        "system": rng.choice([None, None, _text(rng)]),
        "counter": _counter(rng),
        "policy": _policy(rng),
        "sections": sections,
        "floor_id": floor_id,
        "views": views,
        "totals": rng.choice([None, HistoryTotals(len(history), sum(m.tokens for m in history))]),
        "merge_system": rng.random() < 0.3,
    }


def message_reader(history: list[Message]) -> Callable[[int, int | None], list[Message]]:
    """A history reader over ``history`` (oldest first), as ``Store.tail`` reads a session."""

    def read(limit: int, before_id: int | None) -> list[Message]:
        rows = [m for m in history if before_id is None or m.id < before_id]
        return rows[-limit:] if limit else []

    return read


def digest(build: Callable[[], Any]) -> str:
    """SHA-256 of what ``build`` returns (a Context, as JSON) or of the error it raises."""
    try:
        out: Any = build().to_dict()
    except EngramError as exc:
        out = {"error": type(exc).__name__, "text": str(exc)}
    text = json.dumps(out, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def library_digests() -> Iterator[tuple[str, str]]:
    """``(case name, digest)`` of every library case."""
    for seed in range(LIBRARY_CASES):
        case = library_case(seed)
        read = message_reader(case.pop("history"))
        yield f"library-{seed}", digest(lambda read=read, case=case: build_context(read, **case))


STORE_CALLS: list[dict[str, Any]] = [
    {"budget": 3_000},
    {"budget": 50_000},
    {"budget": 400},
    {"budget": 8_000, "system": "You are careful.", "model": "gpt-4o"},
    {"budget": 8_000, "model": "gpt-4"},
    {"budget": 8_000, "model": "claude-3-5-sonnet"},
    {"budget": 6_000, "reserve": 1_000, "policy": "lean"},
    {"budget": 60_000, "policy": "full_recall"},
    {"budget": 4_000, "policy": "summary_buffer"},
    {"budget": 20_000, "policy": "agent_state"},
    {"budget": 16_000, "policy": "exchanges"},
    {"budget": 5_000, "policy": {"name": "default", "cache_window": False}},
    {"budget": 5_000, "policy": {"name": "custom", "max_messages": 7, "cache_chunk_messages": 3}},
    {"budget": 2_000, "merge_system": True, "system": "Be brief."},
]


def _store_events(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(10_000 + seed)
    return history_events(rng, rng.choice([1, 5, 20, 80, 300]))


def store_digests(url: Callable[[str], str]) -> Iterator[tuple[str, str]]:
    """``(case name, digest)`` of Session.context over sessions written to a real store."""
    import engram

    with tempfile.TemporaryDirectory() as tmp:
        with engram.open(url(tmp), llm=None) as mem:
            for seed in range(STORE_SESSIONS):
                events = _store_events(seed)
                session = mem.session(f"golden-{seed}", scope="golden")
                batch = [
                    NewMessage(
                        role=e["role"],
                        content=content_text(e["content"])
                        if isinstance(e["content"], list)
                        else e["content"],
                        created_at=WHEN + timedelta(seconds=i),
                        name=e.get("name"),
                        tool_calls=e.get("tool_calls"),
                        tool_call_id=e.get("tool_call_id"),
                        parts=e["content"] if isinstance(e["content"], list) else None,
                    )
                    for i, e in enumerate(events)
                ]
                # Straight to the store: orphan tool results are history too.
                mem.store.append("golden", session.id, batch, mem.runtime.count_many(batch))
                for k, call in enumerate(STORE_CALLS):
                    args = {"compact": False, **call}
                    yield (
                        f"store-{seed}-{k}",
                        digest(lambda s=session, a=args: s.context(**a)),
                    )


STORES: dict[str, Callable[[str], str]] = {
    "sqlite": lambda tmp: f"sqlite:///{tmp}/golden.db",
    "memory": lambda tmp: "memory://golden",
}


def all_digests() -> dict[str, str]:
    """Every case's digest, by name."""
    out = dict(library_digests())
    for name, url in STORES.items():
        out.update({f"{name}:{k}": v for k, v in store_digests(url)})
    return out


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__)
        return 2
    GOLDEN.write_text(json.dumps(all_digests(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
