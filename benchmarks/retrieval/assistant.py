"""A second retrieval corpus, unlike the first: a person talking with an assistant.

:mod:`benchmarks.retrieval.corpus` is two named friends chatting in short
turns. Here each history is one person and an assistant (no names) across
about fifty sessions on everyday subjects, about ten turns each: the person
makes requests and states facts about themselves in passing inside them ("I
adopted a beagle puppy named Toby last month... any tips for crate
training?"), the assistant answers at length and often repeats the person's
words. Facts are planted from :mod:`~benchmarks.retrieval.assistant_facts` and
:mod:`~benchmarks.retrieval.assistant_events`; the other sessions are requests
on the same subjects with no fact in them (near misses). Each question has a
date of its own, after the sessions it is about, and its evidence turns are
labelled (the sessions follow from them). The same seed gives the same corpus.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, time, timedelta

from benchmarks.retrieval.assistant_events import FRAMES_B
from benchmarks.retrieval.assistant_facts import FRAMES_A, Fact, Frame, Planted, Said
from benchmarks.retrieval.assistant_topics import CLOSERS, FOLLOW_UPS, OPENERS, TOPICS
from benchmarks.retrieval.corpus import Conversation, Question, Turn

#: Histories (one person each) in the default corpus.
HISTORIES = 20
#: Sessions of one history (about ten turns each).
SESSIONS = 50
#: Questions of each type asked of one history.
PER_KIND = 2
KINDS = ("user_fact", "assistant_fact", "preference", "aggregation", "temporal", "update")
FRAMES: dict[str, list[Frame]] = {**FRAMES_A, **FRAMES_B}
START = date(2024, 1, 8)


def answer(r: random.Random, topic: str, said: Said | None) -> str:
    """A long answer of the assistant: an opener (or an echo), advice, maybe a closer."""
    parts = [said.echo if said and said.echo and r.random() < 0.6 else r.choice(OPENERS)]
    body = r.sample(TOPICS[topic].advice, r.randint(5, 8))
    if said and said.answer:
        body.insert(r.randint(0, 2), said.answer)
    parts += body
    if r.random() < 0.5:
        parts.append(r.choice(CLOSERS))
    return " ".join(parts)


def exchanges(r: random.Random, topic: str, said: Said | None) -> list[tuple[str, str, str | None]]:
    """The turns ``(speaker, text, evidence role or None)`` of one session about ``topic``."""
    count = r.randint(3, 7)
    at = -1 if said is None else (0 if r.random() < 0.5 else r.randrange(count))
    requests = iter(r.sample(TOPICS[topic].requests, len(TOPICS[topic].requests)))
    out: list[tuple[str, str, str | None]] = []
    for i in range(count):
        if i == at and said is not None:
            mark = said.evidence
            out.append(("user", said.user, "user" if mark == "user" else None))
            out.append(
                ("assistant", answer(r, topic, said), "assistant" if mark == "assistant" else None)
            )
            continue
        text = next(requests, None) if i == 0 or r.random() < 0.4 else None
        out.append(("user", text or r.choice(FOLLOW_UPS), None))
        out.append(("assistant", answer(r, topic, None), None))
    return out


def _facts(
    r: random.Random, first_day: date, asked_from: date, per_kind: int
) -> list[tuple[Fact, date]]:
    """The facts of one history with their question days; pinned days are all distinct."""
    chosen: list[tuple[Fact, date]] = []
    used: set[date] = set()
    for kind in KINDS:
        frames = FRAMES[kind]
        taken = 0
        # A frame whose pinned days are all taken gives way to the next one of its kind.
        for frame in r.sample(frames, len(frames)):
            if taken == per_kind:
                break
            for _ in range(50):
                asked = asked_from + timedelta(days=r.randint(0, 6))
                fact = frame(r, asked)
                days = [p.day for p in fact.planted if p.day is not None]
                if all(first_day <= d < asked_from and d not in used for d in days):
                    used.update(days)
                    chosen.append((fact, asked))
                    taken += 1
                    break
    return chosen


def _days(
    r: random.Random, facts: list[tuple[Fact, date]], first_day: date, last: date, sessions: int
) -> list[tuple[date, Planted | None]]:
    """Every session's day and what is planted in it (None: a session with no fact)."""
    pinned = {p.day for f, _ in facts for p in f.planted if p.day is not None}
    free = [first_day + timedelta(days=i) for i in range((last - first_day).days)]
    free = [d for d in free if d not in pinned]
    loose = [p for f, _ in facts for p in f.planted if p.day is None]
    fillers = max(0, sessions - sum(len(f.planted) for f, _ in facts))
    picked = r.sample(free, len(loose) + fillers)
    out: list[tuple[date, Planted | None]] = [
        (p.day, p) for f, _ in facts for p in f.planted if p.day is not None
    ]
    days = iter(picked)
    for fact, _ in facts:
        group = [p for p in fact.planted if p.day is None]
        # A fact's loose sessions take their days in the fact's order (old before new).
        ordered = sorted(next(days) for _ in group)
        for planted, day in zip(sorted(group, key=lambda p: p.order), ordered, strict=True):
            out.append((day, planted))
    out += [(next(days), None) for _ in range(fillers)]
    return sorted(out, key=lambda item: item[0])


def history(r: random.Random, index: int, sessions: int, per_kind: int) -> Conversation:
    """One person's sessions with the assistant, and the questions about them."""
    span = max(60, 3 * sessions)
    asked_from = START + timedelta(days=span + 5 * index)
    first_day = asked_from - timedelta(days=span)
    facts = _facts(r, first_day, asked_from, per_kind)
    conv = Conversation(f"assistant{index}", ("user", "assistant"), named=False)
    keys: dict[int, list[str]] = {}
    topics = sorted(TOPICS)
    for number, (day, planted) in enumerate(_days(r, facts, first_day, asked_from, sessions)):
        name = f"s{number + 1:03d}"
        topic = planted.topic if planted else r.choice(topics)
        at = datetime.combine(day, time(r.randint(7, 21), r.randrange(60)), tzinfo=UTC)
        for speaker, text, mark in exchanges(r, topic, planted.said if planted else None):
            at += timedelta(seconds=r.randint(20, 90 if speaker == "assistant" else 240))
            key = None
            if mark is not None and planted is not None:
                key = f"{conv.scope}#{len(conv.turns)}"
                keys.setdefault(id(planted), []).append(key)
            conv.turns.append(Turn(name, speaker, text, at, key))
    for fact, asked in facts:
        evidence = [k for p in fact.planted for k in keys.get(id(p), [])]
        moment = datetime.combine(asked, time(r.randint(8, 21), r.randrange(60)), tzinfo=UTC)
        conv.questions.append(Question(fact.question, fact.kind, evidence, moment))
    return conv


def build(
    seed: int = 11,
    histories: int = HISTORIES,
    sessions: int = SESSIONS,
    per_kind: int = PER_KIND,
) -> list[Conversation]:
    """Every history with its questions; the same arguments give the same corpus."""
    r = random.Random(seed)
    return [history(r, index, sessions, per_kind) for index in range(histories)]


__all__ = ["HISTORIES", "KINDS", "PER_KIND", "SESSIONS", "answer", "build", "exchanges"]
