"""Deterministic multi-session conversations with labelled questions, for the retrieval benchmark.

Each conversation is between two named people (stored as ``user`` and
``assistant`` messages with ``name``), over ten sessions a few days apart.
Facts are planted in it from templates and each fact gives one question whose
evidence turns are known:

* ``next_turn``: one person asks, the other answers; the question is about the
  answer, which shares almost no word with it ("How long has Nate been
  painting?" -> "Six years now, I started back in college.");
* ``fact``: a statement sharing its main words with the question;
* ``paraphrase``: a statement in other words than the question's;
* ``date``: what someone did on a given day ("on 14 May 2023") or some days
  before the question ("5 days ago");
* ``name``: what one person said about a topic both talk about, with the other
  calling them by name ("Joanna, your recipes!");
* ``multi``: a fact spread over two turns of the same speaker.

Chit-chat fills the sessions, full of vocatives and common words. At the end of
each conversation the questions themselves are asked (user messages in a last
session), each followed by the result of an earlier ``search_history`` call:
the traps a real question meets (its own text, earlier questions, earlier
tool results).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

PAIRS = [
    ("Caroline", "Melanie"),
    ("Joanna", "Nate"),
    ("Andrew", "Audrey"),
    ("John", "Maria"),
    ("Tim", "Priya"),
    ("Deborah", "Jolene"),
]
SESSIONS = 10
START = datetime(2023, 3, 6, 9, 0, tzinfo=UTC)

ACTIVITIES = [
    "painting",
    "running",
    "knitting",
    "rock climbing",
    "playing violin",
    "gardening",
    "baking sourdough",
    "learning Spanish",
    "surfing",
    "woodworking",
]
YEARS = [
    "Two years",
    "Three years",
    "Six years",
    "About ten years",
    "Eight months",
    "Almost four years",
    "Five years",
    "Since I was twelve",
]
PLACES = [
    "Lake Tahoe",
    "Big Sur",
    "Yosemite",
    "the Outer Banks",
    "Banff",
    "Zion",
    "Cape Cod",
    "the Smoky Mountains",
    "Lisbon",
    "Kyoto",
]
EVENTS = ["anniversary", "birthday weekend", "spring break", "honeymoon", "long weekend"]
PETS = [
    ("dog", "Luna"),
    ("cat", "Oliver"),
    ("puppy", "Biscuit"),
    ("kitten", "Mochi"),
    ("parrot", "Kiwi"),
    ("rabbit", "Clover"),
    ("dog", "Pepper"),
    ("cat", "Shadow"),
]
THINGS = [
    ("car", "Subaru"),
    ("bike", "Trek"),
    ("camera", "Fujifilm"),
    ("laptop", "ThinkPad"),
    ("couch", "velvet"),
    ("guitar", "Fender"),
    ("tent", "REI"),
    ("blender", "Vitamix"),
]
SKILLS = [
    ("swim", "Grandma Rosa"),
    ("cook", "my uncle Sal"),
    ("drive", "my older sister"),
    ("sew", "Aunt Lucy"),
    ("fish", "my grandfather"),
    ("ski", "a coach named Hans"),
]
RACES = ["5K fun run", "half marathon", "charity bike ride", "obstacle race", "triathlon"]
DEEDS = [
    "planted tomatoes in the backyard",
    "painted the nursery yellow",
    "volunteered at the animal shelter",
    "hosted a board game night",
    "fixed the leaking kitchen sink",
    "baked three dozen cookies for the bake sale",
    "repainted the old fence",
    "took the kids to the aquarium",
]
TOPICS = [
    ("recipes", "my mom's secret spice mix"),
    ("garden", "mostly roses and basil"),
    ("photos", "shot on an old film camera"),
    ("songs", "written on a cheap keyboard"),
    ("paintings", "all watercolors of the coast"),
    ("stories", "about my grandfather"),
]
SIBLINGS = [
    ("brother", "Marcus", "Denver", "nurse"),
    ("sister", "Elena", "Austin", "architect"),
    ("cousin", "Jamal", "Seattle", "firefighter"),
    ("brother", "Theo", "Boston", "chef"),
    ("sister", "Nadia", "Chicago", "pilot"),
]
PARAPHRASES = [
    (
        "My doctor said I have to cut back on sugar, so no more desserts for me.",
        "What dietary change did {b}'s physician recommend?",
    ),
    ("I finally handed in my resignation letter on Friday.", "When did {b} quit the job?"),
    ("We are expecting twins in the fall!", "Is {b}'s family going to grow?"),
    (
        "I sold my apartment downtown and moved to a farmhouse.",
        "Where does {b} live now after relocating?",
    ),
    (
        "The promotion came through, I am now leading the design team.",
        "What new role did {b} get at work?",
    ),
    (
        "I have been sleeping badly since the construction started next door.",
        "Why is {b} having trouble resting?",
    ),
    (
        "My book club picked a thriller for next month.",
        "What genre will {b}'s reading group discuss?",
    ),
    ("I adopted a vegan diet after watching that documentary.", "Why did {b} stop eating meat?"),
]
FILLER = [
    "Wow, {o}! That sounds amazing.",
    "Haha, {o}, you always make me laugh.",
    "Thanks so much, {o}!",
    "I know, right? What a week it has been.",
    "Did you see the game last night? Crazy ending.",
    "How are you doing today, {o}?",
    "I'm doing well, just a bit tired from work.",
    "That's so great to hear, {o}!",
    "The weather has been so nice lately, I want to be outside all day.",
    "I made coffee and read for a while this morning.",
    "What have you been up to?",
    "Not much, mostly work and errands.",
    "We should catch up over lunch soon, {o}.",
    "Absolutely, let me know what day works for you.",
    "I love that for you, {o}!",
    "Work has been hectic but I am hanging in there.",
    "What did you have for dinner?",
    "Just pasta, nothing fancy.",
    "Have you tried that new place downtown?",
    "Not yet, is it any good?",
    "It's pretty good, the desserts are the best part.",
    "Time flies, doesn't it, {o}?",
    "I can't believe it is already this month.",
    "Do you have any plans for the weekend?",
    "Probably just relaxing at home.",
    "That's a good idea, you deserve some rest.",
    "How is your family doing?",
    "Everyone is good, thanks for asking, {o}.",
    "Tell me more about it!",
    "I think you made the right call.",
    "Oh no, I hope everything is okay.",
    "It was fine in the end, just stressful.",
    "You are so talented, {o}!",
    "I have been thinking about getting a pet, maybe a dog.",
    "Running errands all day again, the car needs new tires.",
    "My neighbor's cat keeps visiting our garden.",
    "I watched a documentary about lakes.",
    "The mountains must be beautiful this time of year.",
    "Where did you get that idea?",
    "How long did it take you?",
    "What do you think about it?",
    "I bought new running shoes but haven't used them yet.",
    "My friend's birthday party was so fun.",
    "I should really start learning a language.",
]


@dataclass
class Turn:
    """One message of a conversation."""

    session: str
    speaker: str
    text: str
    at: datetime
    key: str | None = None  # labels a planted turn


@dataclass
class Question:
    """A labelled question: its text, kind, evidence turn keys and when it is asked."""

    text: str
    kind: str
    evidence: list[str]
    asked_at: datetime


@dataclass
class Conversation:
    """Two people, their turns in order, and the questions about them.

    ``people[0]`` speaks as the ``user``, ``people[1]`` as the ``assistant``;
    ``named`` stores their names with their messages.
    """

    scope: str
    people: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    named: bool = True


def _ago(days: int) -> str:
    return {1: "yesterday"}.get(days, f"{days} days ago")


class _Builder:
    def __init__(self, rng: random.Random, scope: str, people: tuple[str, str]) -> None:
        self.rng = rng
        self.conv = Conversation(scope, people)
        self.count = 0

    def key(self) -> str:
        self.count += 1
        return f"{self.conv.scope}#{self.count}"

    def fact(self, kind: str, a: str, b: str) -> list[tuple[str, str, str | None]]:
        """Turns ``(speaker, text, key)`` of one planted fact; records its question."""
        r = self.rng
        evidence: list[str] = []

        def mark() -> str:
            k = self.key()
            evidence.append(k)
            return k

        turns: list[tuple[str, str, str | None]]
        question: str
        if kind == "next_turn":
            choice = r.randrange(5)
            if choice == 0:
                act = r.choice(ACTIVITIES)
                turns = [
                    (a, f"How long have you been {act}?", None),
                    (b, f"{r.choice(YEARS)} now, I started back in college.", mark()),
                ]
                question = f"How long has {b} been {act}?"
            elif choice == 1:
                event, place = r.choice(EVENTS), r.choice(PLACES)
                turns = [
                    (a, f"Where did you go for your {event}?", None),
                    (b, f"We drove up to {place} and stayed by the water.", mark()),
                ]
                question = f"Where did {b} go for the {event}?"
            elif choice == 2:
                pet, pname = r.choice(PETS)
                turns = [
                    (a, f"What's the name of your new {pet}?", None),
                    (b, f"{pname}! A little troublemaker, honestly.", mark()),
                ]
                question = f"What is the name of {b}'s {pet}?"
            elif choice == 3:
                thing, brand = r.choice(THINGS)
                turns = [
                    (a, f"Which {thing} did you end up buying?", None),
                    (b, f"The {brand} one, it was on sale.", mark()),
                ]
                question = f"Which {thing} did {b} buy?"
            else:
                skill, who = r.choice(SKILLS)
                turns = [
                    (a, f"Who taught you to {skill}?", None),
                    (b, f"{who}, every summer when I was little.", mark()),
                ]
                question = f"Who taught {b} to {skill}?"
        elif kind == "fact":
            pet, pname = r.choice(PETS)
            turns = [(b, f"I just adopted a {pet} from the shelter, we named it {pname}.", mark())]
            question = f"What did {b} name the adopted {pet}?"
        elif kind == "paraphrase":
            said, asked = r.choice(PARAPHRASES)
            turns = [(b, said, mark())]
            question = asked.format(b=b)
        elif kind == "name":
            topic, detail = r.choice(TOPICS)
            turns = [
                (b, f"My {topic} are special to me, {detail}.", mark()),
                (a, f"{b}, your {topic} are the best! I love your {topic}.", None),
            ]
            question = f"What did {b} say about her {topic}?"
        elif kind == "multi":
            rel, sname, city, job = r.choice(SIBLINGS)
            turns = [
                (b, f"My {rel} {sname} moved to {city} last year.", mark()),
                (a, "Oh nice, how is that going?", None),
                (b, f"Great, {sname} works as a {job} at the hospital there.", mark()),
            ]
            question = f"What does {b}'s {rel} {sname} do in {city}?"
        else:  # date
            deed = r.choice(DEEDS + [f"ran the {race}" for race in RACES])
            turns = [(b, f"Big day: we {deed}!", mark())]
            question = ""  # filled in by the caller, who knows the date
        self.pending = (question, kind, evidence)
        return turns


KINDS = ["next_turn", "next_turn", "fact", "paraphrase", "date", "name", "multi", "next_turn"]


def build(seed: int = 7, facts_per_session: int = 5) -> list[Conversation]:
    """Every conversation with its questions; the same seed gives the same corpus."""
    rng = random.Random(seed)
    out = []
    for index, people in enumerate(PAIRS):
        builder = _Builder(rng, f"conv{index}", people)
        conv = builder.conv
        day = START + timedelta(days=index)
        kinds = iter(KINDS * 100)
        for number in range(SESSIONS):
            day += timedelta(days=rng.randint(3, 8), hours=rng.randint(0, 9))
            name = f"session{number + 1}"
            plan: list[tuple[str, str, str | None]] = []
            pending = []
            for _ in range(facts_per_session):
                kind = next(kinds)
                b, a = people if rng.random() < 0.5 else people[::-1]
                turns = builder.fact(kind, a, b)
                pending.append((len(plan), builder.pending))
                plan += turns
                for _ in range(rng.randint(3, 6)):
                    speaker = people[rng.randrange(2)]
                    other = people[1] if speaker == people[0] else people[0]
                    plan.append((speaker, rng.choice(FILLER).format(o=other), None))
            at = day
            stamps = []
            for speaker, text, key in plan:
                at += timedelta(seconds=rng.randint(20, 240))
                stamps.append(at)
                conv.turns.append(Turn(name, speaker, text, at, key))
            for position, (question, kind, evidence) in pending:
                when = stamps[position]
                if kind == "date":
                    who = plan[position][0]
                    if rng.random() < 0.5:
                        question = f"What did {who} do on {when.day} {when:%B %Y}?"
                        asked = when + timedelta(days=30)
                    else:
                        days = rng.randint(1, 6)
                        question = f"What did {who} do {_ago(days)}?"
                        asked = when + timedelta(days=days)
                    conv.questions.append(Question(question, kind, evidence, asked))
                else:
                    conv.questions.append(
                        Question(question, kind, evidence, day + timedelta(days=60))
                    )
        out.append(conv)
    return out


__all__ = ["KINDS", "PAIRS", "Conversation", "Question", "Turn", "build"]
