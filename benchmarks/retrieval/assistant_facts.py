"""The facts planted in the assistant-style corpus, one question each.

A frame draws its details from a seeded ``random.Random`` and returns a
:class:`Fact`: the question, its type, and the exchanges to plant, each in a
session of its own and marked with which turn is the evidence (or none: a near
miss). Question types:

* ``user_fact``: the person states a fact in passing inside a request
  ("I adopted a beagle puppy named Toby last month... any tips for crate training?");
* ``assistant_fact``: something the assistant said (a book it recommended);
* ``preference``: a liking stated once; the question asks for a suggestion;
* ``aggregation``: a count or sum over facts stated in several sessions;
* ``temporal``: relative to the question date ("how many days ago", "last
  Saturday", "three weeks ago", "which first");
* ``update``: a fact that changed (the old and the new statement are both evidence).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date

from benchmarks.retrieval.assistant_topics import TOPICS


@dataclass
class Said:
    """One planted exchange: what the person says, and what the assistant's answer holds."""

    user: str
    echo: str = ""  # a sentence the answer may open with, repeating the person's words
    answer: str = ""  # a sentence the answer must hold (the evidence of assistant facts)
    evidence: str | None = "user"  # "user", "assistant", or None for a near miss


@dataclass
class Planted:
    """Where an exchange goes: its topic, and a fixed day or an order among the fact's."""

    topic: str
    said: Said
    day: date | None = None
    order: int = 0


@dataclass
class Fact:
    """A labelled question and what must be planted for it."""

    kind: str
    question: str
    planted: list[Planted] = field(default_factory=list)


Frame = Callable[[random.Random, date], Fact]


def _ask(r: random.Random, topic: str) -> str:
    return r.choice(TOPICS[topic].requests)


def _ago(r: random.Random) -> str:
    return r.choice(["last month", "a few weeks ago", "two weeks ago", "in the spring"])


# -- user facts ----------------------------------------------------------------------------

BREEDS = ["beagle", "corgi", "labrador", "border collie", "dachshund", "whippet", "shiba inu"]
PET_NAMES = ["Toby", "Maple", "Biscuit", "Juniper", "Otis", "Pepper", "Waffles", "Nova"]


def puppy(r: random.Random, asked: date) -> Fact:
    breed, name = r.choice(BREEDS), r.choice(PET_NAMES)
    said = Said(
        f"I adopted a {breed} puppy named {name} {_ago(r)}, and he cries in his crate at night."
        " Any tips for crate training?",
        echo=f"Congratulations on adopting {name}! A {breed} is smart and curious.",
    )
    question = r.choice(
        ["What's the name of the puppy I adopted?", "What breed is the puppy I adopted?"]
    )
    return Fact("user_fact", question, [Planted("dogs", said)])


def sister_wedding(r: random.Random, asked: date) -> Fact:
    sister = r.choice(["Clara", "Hannah", "Priya", "Sofia", "Grace", "Leila"])
    place = r.choice(["Santorini", "the Lake District", "Napa Valley", "Lisbon", "Kyoto"])
    said = Said(
        f"My sister {sister} is getting married in {place} this summer and I'm giving the"
        " toast. How do I write a wedding toast that isn't cheesy?",
        echo=f"What an honour to speak at {sister}'s wedding!",
    )
    return Fact("user_fact", "Where is my sister getting married?", [Planted("writing", said)])


def car(r: random.Random, asked: date) -> Fact:
    model = r.choice(["Toyota Corolla", "Honda Civic", "Subaru Outback", "Mazda 3", "Kia Soul"])
    miles = r.choice(["40,000", "65,000", "82,000", "110,000"])
    said = Said(
        f"I just bought a used {model} with about {miles} miles on it. {_ask(r, 'cars')}",
        echo=f"Congratulations on the {model}, that is a dependable choice.",
    )
    return Fact("user_fact", "What car did I buy?", [Planted("cars", said)])


def allergy(r: random.Random, asked: date) -> Fact:
    allergen = r.choice(["peanuts", "shellfish", "sesame", "kiwi", "soy"])
    said = Said(
        f"I'm allergic to {allergen}, so I have to read every label. What are good snacks"
        " that keep me full?",
        echo=f"Good call reading labels with a {allergen} allergy.",
    )
    return Fact("user_fact", "What am I allergic to?", [Planted("health", said)])


def hometown(r: random.Random, asked: date) -> Fact:
    city = r.choice(["Minneapolis", "Winnipeg", "Oslo", "Helsinki", "Quebec City", "Anchorage"])
    said = Said(
        f"I grew up in {city}, so cold weather doesn't scare me, but I always overpack."
        " What are some tips for travelling with just a carry-on bag?"
    )
    return Fact("user_fact", "Where did I grow up?", [Planted("travel", said)])


def daughter(r: random.Random, asked: date) -> Fact:
    kid = r.choice(["Mia", "Ava", "Zoe", "Lily", "Nora", "Isla"])
    age = r.randint(6, 12)
    instrument = r.choice(["piano", "violin", "cello", "flute", "drums"])
    said = Said(
        f"My daughter {kid} just turned {age} and wants to learn the {instrument}."
        " Should she take lessons or learn from videos?",
        echo=f"How exciting that {kid} wants to learn the {instrument}!",
    )
    return Fact("user_fact", "How old is my daughter?", [Planted("music", said)])


def degree(r: random.Random, asked: date) -> Fact:
    subject = r.choice(["marine biology", "art history", "philosophy", "chemistry", "economics"])
    school = r.choice(["the University of Leeds", "McGill University", "Trinity College Dublin"])
    said = Said(
        f"I have a degree in {subject} from {school}, but I want to move into data analysis."
        " How do I update my resume for a career change?"
    )
    return Fact("user_fact", "What did I study at university?", [Planted("career", said)])


def race(r: random.Random, asked: date) -> Fact:
    event = r.choice(["Chicago Marathon", "Berlin Half Marathon", "Brooklyn Half", "Dublin 10K"])
    said = Said(
        f"I'm training for the {event} in the autumn, my first race ever."
        " What should I eat before a long run?",
        echo=f"Exciting that the {event} is your first race!",
    )
    return Fact("user_fact", "Which race am I training for?", [Planted("running", said)])


# -- assistant facts -----------------------------------------------------------------------

READING = {
    "the history of Rome": [
        ("SPQR", "Mary Beard"), ("Rubicon", "Tom Holland"), ("Dynasty", "Tom Holland"),
    ],
    "building habits": [
        ("Atomic Habits", "James Clear"), ("Tiny Habits", "BJ Fogg"),
        ("The Power of Habit", "Charles Duhigg"),
    ],
    "the ocean": [
        ("The Soul of an Octopus", "Sy Montgomery"), ("Spineless", "Juli Berwald"),
        ("The Outlaw Ocean", "Ian Urbina"),
    ],
    "space exploration": [
        ("Packing for Mars", "Mary Roach"), ("The Right Stuff", "Tom Wolfe"),
        ("Endurance", "Scott Kelly"),
    ],
    "fungi": [
        ("Entangled Life", "Merlin Sheldrake"), ("The Mushroom at the End of the World",
        "Anna Tsing"), ("Mycelium Running", "Paul Stamets"),
    ],
}  # fmt: skip


def book_list(r: random.Random, asked: date) -> Fact:
    subject = r.choice(sorted(READING))
    books = READING[subject]
    listed = ", ".join(f"'{t}' by {a}" for t, a in books)
    said = Said(
        f"Can you recommend a few books about {subject}?",
        answer=f"Here are three I would suggest: {listed}.",
        evidence="assistant",
    )
    question = r.choice(
        [
            f"Which books did you recommend to me about {subject}?",
            f"What was the first book you suggested when I asked about {subject}?",
        ]
    )
    return Fact("assistant_fact", question, [Planted("books", said)])


def bake_temperature(r: random.Random, asked: date) -> Fact:
    dish = r.choice(["banana bread", "focaccia", "apple galette", "cornbread", "scones"])
    heat, minutes = r.choice([175, 180, 190, 200, 220]), r.choice([20, 25, 35, 45, 55])
    said = Said(
        f"Can you give me a simple recipe for {dish}?",
        answer=f"Bake it at {heat} degrees Celsius for about {minutes} minutes, until golden.",
        evidence="assistant",
    )
    question = f"What temperature did you tell me to bake the {dish} at?"
    return Fact("assistant_fact", question, [Planted("baking", said)])


CITY_DAYS = {
    "Lisbon": ("the Gulbenkian Museum", "Time Out Market"),
    "Amsterdam": ("the Rijksmuseum", "Foodhallen"),
    "Vienna": ("the Belvedere", "the Naschmarkt"),
    "Madrid": ("the Prado", "Mercado de San Miguel"),
    "Copenhagen": ("the Louisiana Museum", "Torvehallerne"),
}


def itinerary(r: random.Random, asked: date) -> Fact:
    city = r.choice(sorted(CITY_DAYS))
    museum, food = CITY_DAYS[city]
    said = Said(
        f"I have two days in {city} next month. Can you plan an itinerary for me?",
        answer=f"On the second day, start at {museum} in the morning, then have lunch at {food}.",
        evidence="assistant",
    )
    question = r.choice(
        [
            f"Which museum did you suggest for my second day in {city}?",
            f"Where did you say I should have lunch on day two in {city}?",
        ]
    )
    return Fact("assistant_fact", question, [Planted("travel", said)])


COMMANDS = [
    (
        "How do I undo my last git commit but keep the changes?",
        "Run git reset --soft HEAD~1: it removes the last commit and keeps your changes staged.",
        "What was the git command you gave me to undo a commit?",
    ),
    (
        "How do I reverse a list in Python without changing the original?",
        "Use the slice items[::-1], which returns a reversed copy and leaves the original alone.",
        "How did you tell me to reverse a Python list without changing it?",
    ),
    (
        "How do I remove duplicates from a list in Python and keep the order?",
        "Use list(dict.fromkeys(items)): a dict keeps insertion order, so first occurrences stay.",
        "What was your trick for removing duplicates from a list while keeping the order?",
    ),
    (
        "How can I find which process is using a port on Linux?",
        "Run sudo lsof -i :8080 with your port number to see the process and its PID.",
        "Which command did you suggest to find what is using a port?",
    ),
]


def command(r: random.Random, asked: date) -> Fact:
    request, answer, question = r.choice(COMMANDS)
    said = Said(request, answer=answer, evidence="assistant")
    return Fact("assistant_fact", question, [Planted("coding", said)])


def workout_plan(r: random.Random, asked: date) -> Fact:
    exercise = r.choice(["goblet squats", "bent-over rows", "Romanian deadlifts", "lunges"])
    sets = r.randint(3, 5)
    said = Said(
        "Can you make me a beginner strength training plan for three days a week?",
        answer=f"On day two, do {sets} sets of {exercise}, resting ninety seconds between sets.",
        evidence="assistant",
    )
    question = f"How many sets of {exercise} did you put in my training plan?"
    return Fact("assistant_fact", question, [Planted("fitness", said)])


def business_names(r: random.Random, asked: date) -> Fact:
    business, names = r.choice(
        [
            ("bakery", "Rise and Shine, The Flour Pot and Crumb Theory"),
            ("coffee cart", "Bean There, Daily Grind and Brew Crew"),
            ("dog-walking business", "Pawsitive Strides, Leash Lane and The Happy Tail"),
            ("podcast about gardening", "Dirt Talk, Rooted and The Weekly Weed"),
        ]
    )
    said = Said(
        f"I'm starting a small {business}. Can you suggest some names?",
        answer=f"A few ideas: {names}.",
        evidence="assistant",
    )
    question = f"What names did you suggest for my {business}?"
    return Fact("assistant_fact", question, [Planted("career", said)])


# -- preferences -----------------------------------------------------------------------


def diet(r: random.Random, asked: date) -> Fact:
    kind = r.choice(["vegetarian", "vegan", "pescatarian"])
    dislike = r.choice(["mushrooms", "olives", "coriander", "aubergine"])
    said = Said(
        f"I'm {kind} and I really can't stand {dislike}. What can I cook for a dinner party"
        " of six people?"
    )
    question = r.choice(
        [
            "Can you suggest something I could cook for dinner this weekend?",
            "What should I make for a dinner with friends? Any ideas?",
        ]
    )
    return Fact("preference", question, [Planted("cooking", said)])


def music_taste(r: random.Random, asked: date) -> Fact:
    genre, artist = r.choice(
        [("jazz", "Bill Evans"), ("lo-fi hip hop", "Nujabes"), ("classical piano", "Chopin"),
         ("bossa nova", "João Gilberto"), ("80s synth-pop", "Depeche Mode")]
    )  # fmt: skip
    said = Said(
        f"I mostly listen to {genre}, especially {artist}. How long should I practise an"
        " instrument each day to actually get better?"
    )
    question = "Can you recommend some music I could listen to while I work?"
    return Fact("preference", question, [Planted("music", said)])


def trip_style(r: random.Random, asked: date) -> Fact:
    style = r.choice(
        [
            "I prefer quiet nature spots over big cities, and I hate long drives.",
            "I love food markets and walkable old towns, but I can't stand crowded beaches.",
            "I like active trips with hiking, and I'd rather camp than stay in hotels.",
        ]
    )
    said = Said(f"{style} How do I plan a week-long trip on a budget?")
    question = "Where should I go for my next trip? Any suggestions?"
    return Fact("preference", question, [Planted("travel", said)])


def workout_taste(r: random.Random, asked: date) -> Fact:
    taste = r.choice(
        [
            "I hate running but I love swimming and cycling.",
            "I get bored in the gym but I love dancing and hiking.",
            "I have bad knees, so I prefer yoga and rowing.",
        ]
    )
    said = Said(f"{taste} How do I stay motivated to work out regularly?")
    question = "Can you suggest a workout routine I would enjoy?"
    return Fact("preference", question, [Planted("fitness", said)])


def novel_taste(r: random.Random, asked: date) -> Fact:
    kind = r.choice(["historical fiction", "epic fantasy", "Scandinavian crime", "literary sci-fi"])
    said = Said(
        f"I love {kind} novels, the longer the better. Can you recommend a good novel for a"
        " long flight?"
    )
    question = "Can you recommend a novel I might like for my holiday?"
    return Fact("preference", question, [Planted("books", said)])


def film_taste(r: random.Random, asked: date) -> Fact:
    kind, film = r.choice(
        [("science fiction", "Arrival"), ("psychological thriller", "Prisoners"),
         ("period drama", "Atonement"), ("heist", "Inside Man")]
    )  # fmt: skip
    said = Said(
        f"I'm really into slow-burn {kind} films like {film}. Can you recommend a good movie"
        " for a cosy night in?"
    )
    question = "Any movie recommendations for this weekend?"
    return Fact("preference", question, [Planted("movies", said)])


FRAMES_A: dict[str, list[Frame]] = {
    "user_fact": [puppy, sister_wedding, car, allergy, hometown, daughter, degree, race],
    "assistant_fact": [book_list, bake_temperature, itinerary, command, workout_plan,
                       business_names],
    "preference": [diet, music_taste, trip_style, workout_taste, novel_taste, film_taste],
}  # fmt: skip

__all__ = ["FRAMES_A", "Fact", "Frame", "Planted", "Said"]
