"""Words said in the first and second person, in the third person, as a summary states them.

"I'm the rollback decision maker" becomes "Maya is the rollback decision
maker" when the user said their name ("I'm Maya", "my name is Aiko Tanaka"),
"The user is the rollback decision maker" otherwise; the assistant's "your
next bill" becomes "the user's next bill". Only simple, safe rules: the
pronouns I, me, my, mine (and you, your, yours for the one spoken to) and the
verb right after the subject (conjugated: "I prefer" -> "prefers", "you
don't" -> "doesn't"; past forms are left as they are). A sentence these rules
cannot rewrite (an "I" is left over) gives None, and the caller leaves it out
rather than quote anyone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: How the user is named when they never said their name.
THE_USER = "the user"

_INTRO = re.compile(
    r"\b(?:I'm|I am|[Mm]y name is|[Cc]all me)\s+"
    r"(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)(?=\s*(?:[,.!;]|$)|\s+and\s+I\b)"
)
#: Capitalized words after "I'm" that are not names.
_NOT_NAMES = frozenset(
    "english french german spanish italian dutch irish british american canadian australian "
    "indian chinese japanese korean swiss swedish danish norwegian finnish polish portuguese "
    "sorry back here there ok okay fine new".split()
)
_MODALS = frozenset(
    "can can't cannot could couldn't will won't would wouldn't should shouldn't must mustn't "
    "may might did didn't had hadn't was wasn't".split()
)
_ADVERBS = frozenset(
    "really also always never usually just still already only mostly often actually "
    "definitely probably sometimes rarely personally generally honestly".split()
)
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is"}
#: Past forms that do not end in -ed; a past verb keeps its form.
_PAST = frozenset(
    "said told made went took got thought saw met sent wrote ran found left knew came gave "
    "bought paid spent felt kept put set read heard built chose forgot lost won began brought "
    "caught drove fell flew grew hung held led lent meant rode rang rose sold shot shut sang "
    "sat slept spoke stood stole swam taught tore threw understood woke wore".split()
)
_CONTRACTIONS = (
    (re.compile(r"\bI'm\b|\bI am\b"), "{s} is"),
    (re.compile(r"\bI've\b|\bI have\b"), "{s} has"),
    (re.compile(r"\bI'll\b"), "{s} will"),
    (re.compile(r"\bI'd\b"), "{s} would"),
    (re.compile(r"\bI don't\b"), "{s} doesn't"),
    (re.compile(r"\bI do not\b"), "{s} does not"),
)
_I_VERB = re.compile(r"\bI\s+(?:(?P<adverb>[a-z]+)\s+)?(?P<verb>[a-z][a-z']*)\b")
_YOU_CONTRACTIONS = (
    (re.compile(r"\byou're\b|\byou are\b", re.IGNORECASE), "{s} is"),
    (re.compile(r"\byou've\b|\byou have\b", re.IGNORECASE), "{s} has"),
    (re.compile(r"\byou'll\b", re.IGNORECASE), "{s} will"),
    (re.compile(r"\byou'd\b", re.IGNORECASE), "{s} would"),
    (re.compile(r"\byou don't\b", re.IGNORECASE), "{s} doesn't"),
    (re.compile(r"\byou do not\b", re.IGNORECASE), "{s} does not"),
)
# "you" as a subject: at the start of a clause, before its verb ("If you want ...").
_YOU_VERB = re.compile(
    r"(?P<lead>^|[,;:] |\b(?i:if|when|since|because|so|that|and|but|then|as|once|before|after|"
    r"until|unless|whether|while) )[Yy]ou\s+(?:(?P<adverb>[a-z]+)\s+)?(?P<verb>[a-z][a-z']*)\b"
)
_YOURSELF = re.compile(r",?\s*\byourself\b", re.IGNORECASE)
_YOUR = re.compile(r"\b(?:your|yours)\b", re.IGNORECASE)
_YOU = re.compile(r"\byou\b", re.IGNORECASE)
_MYSELF = re.compile(r",?\s*\bmyself\b")
_ME = re.compile(r"\bme\b")
_MY = re.compile(r"\b(?:[Mm]y|mine)\b")


def speaker_name(user_texts: Iterable[str]) -> str | None:
    """The name the user gave ("I'm Maya", "My name is Aiko Tanaka"), if they gave one."""
    for text in user_texts:
        for match in _INTRO.finditer(text):
            name = match.group("name")
            if name.split()[0].lower() not in _NOT_NAMES:
                return name
    return None


def third_person(sentence: str, name: str | None, *, listener: str | None = None) -> str | None:
    """``sentence`` in the third person, or None when no rule rewrites it safely.

    Args:
        sentence: One sentence.
        name: Who said it: the user's name (:func:`speaker_name`), None for
            "the user", or another subject ("the assistant").
        listener: Who "you" is, when the speaker addresses someone ("Maya", "the
            user"); None leaves "you" as it is.

    """
    subject = name or THE_USER
    text = _without_intro(sentence, name)
    if text is None:
        return f"{_upper_first(THE_USER)} is {name}." if name else None
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement.format(s=subject), text)
    text = _I_VERB.sub(lambda m: _conjugated(m, subject), text)
    text = _MYSELF.sub("", text)
    text = _ME.sub(subject, text)
    text = _MY.sub(f"{subject}'s", text)
    if re.search(r"\bI\b", text):
        return None
    if listener is not None:
        text = _addressed(text, listener)
    return _upper_first(text)


def _addressed(text: str, listener: str) -> str:
    """``text`` with "you" and "your" said of ``listener``."""
    for pattern, replacement in _YOU_CONTRACTIONS:
        text = pattern.sub(replacement.format(s=listener), text)
    text = _YOU_VERB.sub(lambda m: m.group("lead") + _conjugated(m, listener), text)
    text = _YOURSELF.sub("", text)
    text = _YOUR.sub(f"{listener}'s", text)
    return _YOU.sub(listener, text)


def _without_intro(sentence: str, name: str | None) -> str | None:
    """The sentence with "I'm Maya," turned into "Maya is" (None when that is all it says)."""
    if name is None:
        return sentence
    match = _INTRO.search(sentence)
    if match is None or match.group("name") != name:
        return sentence
    rest = sentence[match.end() :].lstrip(" ,;")
    if not rest.strip(" .!"):
        return None
    if re.match(r"(?:and\s+)?I\b", rest):
        # "I'm Maya, I own the launch": the name is the subject of what follows.
        return sentence[: match.start()] + re.sub(r"^and\s+", "", rest)
    # "I'm Ravi, the only backend dev": an apposition says who the user is.
    return sentence[: match.start()] + f"{name} is {rest}"


def _conjugated(match: re.Match[str], subject: str) -> str:
    adverb, verb = match.group("adverb"), match.group("verb")
    if adverb is not None and adverb not in _ADVERBS:
        # "I" followed by a word that is no adverb: that word is the verb.
        verb, rest = adverb, f" {verb}"
        adverb = None
    else:
        rest = ""
    lead = f"{subject} {adverb} " if adverb else f"{subject} "
    return lead + _third(verb) + rest


def _third(verb: str) -> str:
    past = verb.endswith("ed") and not verb.endswith("eed")  # "asked", not "need"
    if verb in _MODALS or verb in _PAST or past or "'" in verb:
        return verb
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(verb) > 1 and verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]
