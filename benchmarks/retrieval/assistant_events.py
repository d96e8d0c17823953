"""Facts of the assistant-style corpus spread over several sessions or pinned to a day.

Aggregation (a count or sum over two to four sessions), temporal questions
(relative to the question date, with near misses of the same kind on other
days) and facts that changed (an old and a new statement, in that order). See
:mod:`benchmarks.retrieval.assistant_facts` for the shapes.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from benchmarks.retrieval.assistant_facts import Fact, Frame, Planted, Said
from benchmarks.retrieval.assistant_topics import TOPICS

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _ask(r: random.Random, topic: str) -> str:
    return r.choice(TOPICS[topic].requests)


def _spread(r: random.Random, topic: str, lines: list[str], question: str) -> Fact:
    """An aggregation: each statement in a session of its own, then a request of the topic."""
    planted = [Planted(topic, Said(f"{line} {_ask(r, topic)}")) for line in lines]
    return Fact("aggregation", question, planted)


# -- aggregation ---------------------------------------------------------------------------


def weddings(r: random.Random, asked: date) -> Fact:
    who = r.sample(["cousin Ben", "college roommate Dana", "coworker Raj", "best friend Tessa",
                    "neighbour Omar"], r.randint(2, 4))  # fmt: skip
    where = ["in Napa", "by the lake", "in a barn outside town", "at the botanical garden"]
    lines = [f"I was at my {w}'s wedding {r.choice(where)} last weekend." for w in who]
    return _spread(r, "events", lines, "How many weddings have I attended this year?")


def concerts(r: random.Random, asked: date) -> Fact:
    bands = r.sample(["Coldplay", "Phoebe Bridgers", "Arctic Monkeys", "Khruangbin",
                      "Billie Eilish"], r.randint(2, 3))  # fmt: skip
    lines = [f"I paid ${r.randint(45, 180)} for the {b} tickets, fingers crossed." for b in bands]
    return _spread(r, "events", lines, "How much have I spent on concert tickets in total?")


def books_finished(r: random.Random, asked: date) -> Fact:
    books = r.sample(["The Midnight Library", "Project Hail Mary", "Klara and the Sun",
                      "Educated", "The Overstory", "Circe"], r.randint(2, 4))  # fmt: skip
    lines = [f"I just finished reading {b} and couldn't put it down." for b in books]
    return _spread(r, "books", lines, "How many books have I finished reading lately?")


def instruments(r: random.Random, asked: date) -> Fact:
    played = r.sample(["ukulele", "piano", "cello", "harmonica", "bass guitar"], r.randint(2, 3))
    lines = [f"I play the {p} a little, mostly in the evenings." for p in played]
    return _spread(r, "music", lines, "How many musical instruments do I play?")


def volunteering(r: random.Random, asked: date) -> Fact:
    places = r.sample(["the food bank", "the animal shelter", "the community garden",
                       "the library book sale"], r.randint(2, 3))  # fmt: skip
    lines = [f"I volunteered for {r.randint(2, 6)} hours at {p} on Saturday." for p in places]
    return _spread(r, "health", lines, "How many hours have I volunteered in total?")


def rides(r: random.Random, asked: date) -> Fact:
    places = r.sample(["the coast", "the reservoir", "Millbrook", "the old lighthouse"], 2)
    lines = [f"I rode {r.randint(20, 80)} kilometres to {p} on my bike on Sunday." for p in places]
    return _spread(
        r, "fitness", lines, "How many kilometres did I cycle in total on my weekend rides?"
    )


# -- temporal ------------------------------------------------------------------------------

MILESTONES = [
    ("I ran my first half marathon this morning!", "run my first half marathon", "running"),
    ("I just got home from the Coldplay concert and my ears are still ringing.",
     "go to the Coldplay concert", "events"),
    ("I had my wisdom teeth removed this morning, so I'm stuck on the sofa.",
     "have my wisdom teeth removed", "health"),
    ("I signed the lease on my new flat today!", "sign the lease on my new flat", "home"),
    ("I passed my driving test this morning!", "pass my driving test", "cars"),
    ("I gave my first conference talk today and it went well.", "give my first conference talk",
     "career"),
]  # fmt: skip


def days_ago(r: random.Random, asked: date) -> Fact:
    said, did, topic = r.choice(MILESTONES)
    day = asked - timedelta(days=r.randint(3, 40))
    planted = [Planted(topic, Said(f"{said} {_ask(r, topic)}"), day=day)]
    return Fact("temporal", f"How many days ago did I {did}?", planted)


def _weekday_before(asked: date, weekday: int) -> date:
    """The most recent ``weekday`` strictly before ``asked`` (what "last Saturday" means)."""
    return asked - timedelta(days=(asked.weekday() - weekday) % 7 or 7)


def _near_misses(
    r: random.Random, topic: str, lines: list[str], avoid: date, evidence: Planted
) -> list[Planted]:
    """``evidence`` and near misses of the same kind on other days (none in ``avoid``'s week)."""
    out = [evidence]
    for line in lines:
        day = avoid - timedelta(days=r.randint(8, 40))  # never in the same week
        out.append(Planted(topic, Said(f"{line} {_ask(r, topic)}", evidence=None), day=day))
    return out


def baked_on(r: random.Random, asked: date) -> Fact:
    items = r.sample(["a lemon tart", "banana bread", "cinnamon rolls", "a carrot cake",
                      "focaccia", "a batch of scones"], 3)  # fmt: skip
    weekday = r.randrange(7)
    day = _weekday_before(asked, weekday)
    said = Said(
        f"I baked {items[0]} this afternoon for my neighbour. {_ask(r, 'baking')}",
        echo=f"How kind to bake {items[0]} for your neighbour!",
    )
    lines = [f"I baked {item} today and it turned out well." for item in items[1:]]
    phrase = r.choice([f"last {WEEKDAYS[weekday]}", f"on {WEEKDAYS[weekday]}"])
    planted = _near_misses(r, "baking", lines, day, Planted("baking", said, day=day))
    return Fact("temporal", f"What did I bake {phrase}?", planted)


def hiked(r: random.Random, asked: date) -> Fact:
    trails = r.sample(["the Skyline Trail", "Mount Tam", "the Seven Sisters cliffs",
                       "the Old Man of Coniston", "Box Hill"], 3)  # fmt: skip
    weeks = r.randint(2, 4)
    monday = asked - timedelta(weeks=weeks, days=asked.weekday())
    day = monday + timedelta(days=r.randrange(7))
    said = Said(f"I went hiking up {trails[0]} today and my legs are sore. {_ask(r, 'fitness')}")
    lines = [f"I went hiking up {trail} today, what a view." for trail in trails[1:]]
    planted = _near_misses(r, "fitness", lines, day, Planted("fitness", said, day=day))
    number = ["two", "three", "four"][weeks - 2]
    return Fact("temporal", f"Where did I go hiking {number} weeks ago?", planted)


def bought_yesterday(r: random.Random, asked: date) -> Fact:
    items = r.sample(["a standing desk", "a new rain jacket", "a used bike", "a stand mixer",
                      "noise-cancelling headphones"], 3)  # fmt: skip
    day = asked - timedelta(days=1)
    said = Said(f"I bought {items[0]} today, so I'm in a good mood. {_ask(r, 'money')}")
    lines = [f"I bought {item} today, hopefully worth it." for item in items[1:]]
    planted = _near_misses(r, "money", lines, day, Planted("money", said, day=day))
    return Fact("temporal", "What did I buy yesterday?", planted)


FIRSTS = [
    ("took my first pottery class", "the pottery class", "events"),
    ("went to a Thai cooking workshop", "the cooking workshop", "cooking"),
    ("had my first guitar lesson", "the guitar lesson", "music"),
    ("joined the climbing gym", "joining the climbing gym", "fitness"),
    ("went to a wine tasting with friends", "the wine tasting", "events"),
]


def which_first(r: random.Random, asked: date) -> Fact:
    (did_a, name_a, topic_a), (did_b, name_b, topic_b) = r.sample(FIRSTS, 2)
    planted = [
        Planted(topic_a, Said(f"I {did_a} today and loved it. {_ask(r, topic_a)}"), order=0),
        Planted(topic_b, Said(f"I {did_b} today, it was fun. {_ask(r, topic_b)}"), order=1),
    ]
    first, second = (name_a, name_b) if r.random() < 0.5 else (name_b, name_a)
    return Fact("temporal", f"Which did I do first, {first} or {second}?", planted)


# -- facts that changed --------------------------------------------------------------------


def _changed(topic_old: str, old: str, topic_new: str, new: str, question: str) -> Fact:
    planted = [Planted(topic_old, Said(old), order=0), Planted(topic_new, Said(new), order=1)]
    return Fact("update", question, planted)


def commute(r: random.Random, asked: date) -> Fact:
    old, new = r.choice([45, 50, 60]), r.choice([10, 15, 20])
    return _changed(
        "books", f"My commute is about {old} minutes each way by bus. {_ask(r, 'books')}",
        "health", f"Since we moved closer to the office my commute is only {new} minutes by"
        f" bike. {_ask(r, 'health')}",
        "How long is my commute now?",
    )  # fmt: skip


def mileage(r: random.Random, asked: date) -> Fact:
    old, new = r.choice([15, 20, 25]), r.choice([35, 40, 50])
    return _changed(
        "running", f"I'm running about {old} kilometres a week at the moment. {_ask(r, 'running')}",
        "running", f"I've built up to {new} kilometres a week now! {_ask(r, 'running')}",
        "How many kilometres a week am I running these days?",
    )  # fmt: skip


def job(r: random.Random, asked: date) -> Fact:
    (j1, c1), (j2, c2) = r.sample(
        [("data analyst", "Northwind"), ("product designer", "Acme Health"),
         ("teacher", "Hillside School"), ("project manager", "Bluebird Logistics")], 2
    )  # fmt: skip
    return _changed(
        "career", f"I work as a {j1} at {c1}. {_ask(r, 'career')}",
        "career", f"I just started a new job as a {j2} at {c2}! {_ask(r, 'career')}",
        "Where do I work now?",
    )  # fmt: skip


def houseplants(r: random.Random, asked: date) -> Fact:
    old, new = r.randint(4, 9), r.randint(12, 20)
    return _changed(
        "plants", f"I have {old} houseplants in my flat right now. {_ask(r, 'plants')}",
        "plants", f"I'm up to {new} houseplants after a trip to the garden centre."
        f" {_ask(r, 'plants')}",
        "How many houseplants do I have now?",
    )  # fmt: skip


def phone(r: random.Random, asked: date) -> Fact:
    old, new = sorted(r.sample(["an iPhone 11", "a Pixel 6", "a Galaxy S21", "a Pixel 8"], 2))
    return _changed(
        "photography", f"My phone is {old} and the camera is getting worse."
        f" {_ask(r, 'photography')}",
        "photography", f"I finally replaced my phone with {new}. {_ask(r, 'photography')}",
        "What phone do I have now?",
    )  # fmt: skip


def personal_best(r: random.Random, asked: date) -> Fact:
    old, new = r.choice(["27:40", "29:05", "31:10"]), r.choice(["24:30", "25:15", "26:02"])
    return _changed(
        "running", f"My 5K personal best is {old}. {_ask(r, 'running')}",
        "running", f"I set a new 5K personal best at parkrun this weekend: {new}!"
        f" {_ask(r, 'running')}",
        "What is my current 5K personal best?",
    )  # fmt: skip


def moved(r: random.Random, asked: date) -> Fact:
    old, new = r.sample(["Leeds", "Bristol", "Glasgow", "Manchester", "Cardiff"], 2)
    return _changed(
        "home", f"I live in a small flat in {old}. {_ask(r, 'home')}",
        "home", f"We just moved to {new}, the new place is bigger. {_ask(r, 'home')}",
        "Which city do I live in now?",
    )  # fmt: skip


FRAMES_B: dict[str, list[Frame]] = {
    "aggregation": [weddings, concerts, books_finished, instruments, volunteering, rides],
    "temporal": [days_ago, baked_on, hiked, bought_yesterday, which_first],
    "update": [commute, mileage, job, houseplants, phone, personal_best, moved],
}

__all__ = ["FRAMES_B", "WEEKDAYS"]
