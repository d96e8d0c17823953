"""Names of people, products, places and organisations in a conversation, by rules.

:func:`find_entities` reads every message of a fold together, so what one
message says about a word tells how to read it in another:

* a run of capitalized words ("Daniel Okafor", "Azure AD", "Lisboa Carmo
  Hotel") is a name once its edges are trimmed: a word that opens a sentence
  is dropped when it is a common opener ("Ask", "Has", "Does", "Send"), ends
  in -ed or -ing, or is used in lower case elsewhere; weekdays, months and
  generic acronyms ("SSO", "FAQ") never start or end a name;
* a single capitalized word ("Slack", "Okta", "Priya") is a name when it is
  capitalized inside sentences at least :data:`MIN_SINGLE_MENTIONS` times and
  never written in lower case;
* @handles are names.

Names inside a longer kept name ("Daniel" beside "Daniel Okafor") and repeated
runs ("Bob Chen Bob Chen") are kept once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

#: Times a single word must be capitalized inside sentences to be taken for a name.
MIN_SINGLE_MENTIONS = 2

_URL = re.compile(r"\bhttps?://\S+", re.IGNORECASE)
_HANDLE = re.compile(r"(?<![\w@.])@[A-Za-z0-9_][A-Za-z0-9_.-]{1,38}[A-Za-z0-9_]")
_UPPER = "A-ZÀ-ÖØ-Þ"
# Words of a name stay on one line: a list of names, one per line, is several names.
_NAME = re.compile(
    rf"(?<![\w'-])[{_UPPER}][\w&'-]+(?:[ \t]+(?:of[ \t]+|de[ \t]+|van[ \t]+)?[{_UPPER}][\w&'-]+)+"
)
_WORD = re.compile(rf"(?<![\w'-])[{_UPPER}][\w&'-]+|(?<![\w'-])[a-z][\w'-]+")
# What may stand between the start of a sentence (or a list item) and its first word.
_STARTS = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)(?:[-*•]\s+|\d+[.)]\s+)?[\"“'(\[]?$")
_STARTS_INSIDE = re.compile(r"(?:[.!?:;]\s+|\n\s*)(?:[-*•]\s+|\d+[.)]\s+)?[\"“'(\[]?$")
#: Characters looked back at to tell whether a word opens a sentence.
_LOOK_BACK = 16
_CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may"
    " june july august september october november december mondays tuesdays wednesdays"
    " thursdays fridays saturdays sundays".split()
)
#: Never the first word of a name, wherever it stands.
_NOT_NAME_START = frozenset(
    "the a an i i'm i'll i've i'd my our we you your this that these those it its it's "
    "that's there's here's what's who's he's she's we're they're you're we'll we've "
    "please let's let and but or so if when then also noted sure yes no ok okay "
    "important key hello hi hey thanks thank dear for due after before with in on at from to by"
    " since until about as per via".split()
)
#: Words that open sentences and are no names ("Ask Daniel", "Has Slack", "Send Jonas").
_OPENERS = frozenset(
    """ask asked has have had having is are was were be been do does did doing can could will
    would should shall may might must need needs let lets make makes made take takes took get
    gets got give gives gave tell tells told check checks write writes wrote send sends sent
    put puts add adds keep keeps move moves set sets use uses see sees show shows try tries
    find finds call calls draft drafts plan plans matches match looks look sounds seems feel
    feels go goes going come comes run runs start starts book books fix fixes change changes
    remind remember note record recorded updated update done enjoy welcome congratulations
    sorry thanks what who why how when where which whose whom yes not none good great perfect
    fine nice cool wow hmm right wait well oh okay back morning evening afternoon quick last
    next first second third final then now today tomorrow yesterday tonight here there maybe
    only just even both each every some any most many much more less since because while
    although though unless once actually currently still already also however anyway instead
    otherwise meanwhile besides option options understood booked approved agreed decided
    confirmed corrected drop cut ship launch recap worth somewhere someone something everyone
    everything nothing nobody anything all another other such same own whatever hi hello hey
    dear love like want prefer""".split()
)
#: Acronyms of things, not of names: never at the edge of a name, never a name alone.
_GENERIC_ACRONYMS = frozenset(
    """sso api apis url urls faq crm mrr arr qa ui ux pr ceo cto cfo coo vp hr http https sql
    id ids ok todo eta fyi asap am pm utc gmt pst pdt cet est pdf csv json html css dns vpn ssh
    ci cd orm crud sdk cli gpu cpu ram ssd kpi okr roi saas b2b b2c tv usb""".split()
)
#: Capitalized words that are no names: units, titles of list items.
_NOT_NAMES = frozenset("celsius fahrenheit kelvin i".split())


class _Vocabulary:
    """How a conversation writes its words: in lower case, capitalized inside sentences."""

    def __init__(self, texts: Sequence[str]):
        self.lower: set[str] = set()
        self.inside: Counter[str] = Counter()
        for text in texts:
            for match in _WORD.finditer(text):
                word = _bare(match.group(0))
                if word[:1].islower():
                    self.lower.add(word)
                elif not _opens(text, match.start()):
                    self.inside[word] += 1

    def is_single_name(self, word: str) -> bool:
        """A capitalized word written as a name: often inside sentences, never in lower case."""
        key = word.lower()
        return (
            self.inside[word] >= MIN_SINGLE_MENTIONS
            and key not in self.lower
            and not word.isupper()
            and key not in _CALENDAR
            and key not in _OPENERS
            and key not in _NOT_NAME_START
            and key not in _NOT_NAMES
        )


def find_entities(texts: Sequence[str], *, exclude: Iterable[str] = ()) -> list[str]:
    """Names in ``texts`` (the messages of one fold), in order of appearance, each once.

    Args:
        texts: The messages' text.
        exclude: Words that are known to be something else (document section titles).

    """
    plain = [_URL.sub(" ", text) for text in texts]
    vocabulary = _Vocabulary(plain)
    excluded = {word.casefold() for phrase in exclude for word in phrase.split()}
    found: list[str] = []
    for text in plain:
        spotted: list[tuple[int, str]] = [(m.start(), m.group(0)) for m in _HANDLE.finditer(text)]
        for match in _NAME.finditer(text):
            words = _trimmed(match.group(0).split(), _opens(text, match.start()), vocabulary)
            if len(words) >= 2:
                spotted.append((match.start(), " ".join(words)))
        for match in _WORD.finditer(text):
            word = _bare(match.group(0))
            if vocabulary.is_single_name(word):
                spotted.append((match.start(), word))
        found.extend(name for _, name in sorted(spotted, key=lambda item: item[0]))
    kept = [n for n in found if not all(w.casefold() in excluded for w in n.split())]
    return keep_longest(kept)


def _bare(word: str) -> str:
    """A word without a possessive ending ("Slack's" -> "Slack", "Loops'" -> "Loops")."""
    if word.endswith(("'s", "’s")):
        return word[:-2]
    return word.rstrip("'-")


def _opens(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence or a list item (a short look back)."""
    if start <= _LOOK_BACK:
        return bool(_STARTS.search(text[:start]))
    return bool(_STARTS_INSIDE.search(text, start - _LOOK_BACK, start))


def _trimmed(words: list[str], opens: bool, vocabulary: _Vocabulary) -> list[str]:
    """The words of a capitalized run without what is no part of a name at either edge."""
    words = [_bare(w) if i == len(words) - 1 else w for i, w in enumerate(words)]
    while words and _not_first(words[0], opens, vocabulary):
        words, opens = words[1:], False
    while words and (words[-1].lower() in _CALENDAR or words[-1].lower() in _GENERIC_ACRONYMS):
        words = words[:-1]
    return _without_repeats(words)


def _not_first(word: str, opens: bool, vocabulary: _Vocabulary) -> bool:
    key = word.lower()
    if key in _NOT_NAME_START or key in _CALENDAR or key in _GENERIC_ACRONYMS:
        return True
    if not opens:
        return False
    seen_inside = vocabulary.inside[word] > 0
    verb_like = key.endswith(("ed", "ing")) and not seen_inside
    return key in vocabulary.lower or key in _OPENERS or verb_like


def _without_repeats(words: list[str]) -> list[str]:
    """``words`` with a run that repeats right after itself kept once ("Bob Chen Bob Chen")."""
    size = 1
    while size <= len(words) // 2:
        for start in range(len(words) - 2 * size + 1):
            if words[start : start + size] == words[start + size : start + 2 * size]:
                words = words[: start + size] + words[start + 2 * size :]
                break
        else:
            size += 1
    return words


def keep_longest(names: list[str]) -> list[str]:
    """Names in order, once, leaving out one that a longer kept name already says.

    "Daniel" goes when "Daniel Okafor" is kept; names compare case- and
    whitespace-insensitively.
    """
    unique: list[str] = []
    seen: set[str] = set()
    for name in names:
        key = " ".join(name.split()).casefold()
        if key not in seen:
            seen.add(key)
            unique.append(name)
    keys = [f" {' '.join(n.split()).casefold()} " for n in unique]
    return [
        name
        for name, key in zip(unique, keys, strict=True)
        if not any(key != other and key in other for other in keys)
    ]
