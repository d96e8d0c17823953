"""What every backend indexes for search beside a message's own text, computed at append.

Three things, computed once when a message is stored (nothing is re-indexed later):

* **neighbour context**: the text of the turn the message follows (the
  previous user or assistant message of the session, cut to
  :data:`CONTEXT_CHARS` characters), indexed in a second column scored apart
  with a lower weight. The answer "3 years" then matches a search for the
  question it answers ("how long have you had the dog?");
* **date words**: the message's day in the store's time zone as words
  ("8 may 2023 monday"), so "in May 2023" can match a message that never says it;
* **flags**: :data:`FLAG_OWN_RESULT` for the result of one of Engram's own
  retrieval tools (search never feeds the model its own earlier results),
  :data:`FLAG_QUESTION` for a message that only asks (:func:`only_asks`: it
  ranks below statements; a fact stated inside a request is a statement), and
  :data:`FLAG_ANSWER` for a message that follows one that only asks (its
  context is the question it answers and weighs more).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engram.errors import ConfigError
from engram.models import JSON, Message, NewMessage

#: Characters of each previous turn kept in the context column.
CONTEXT_CHARS = 200
#: Result of one of Engram's own retrieval tools (excluded from search by default).
FLAG_OWN_RESULT = 1
#: A message that only asks a question (see :func:`only_asks`).
FLAG_QUESTION = 2
#: A message that follows one that only asks: its context is the question it answers.
FLAG_ANSWER = 4

#: Engram's own tools whose results are recall, never new facts.
RETRIEVAL_TOOLS = frozenset(
    {
        "search_history",
        "get_messages_by_date",
        "get_extended_context",
        "get_message_by_id",
        "get_memory_stats",
        "search_memories",
    }
)

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = (
    "january february march april may june july august september october november december"
).split()


@dataclass(frozen=True, slots=True)
class Recent:
    """A stored message as the indexer needs it: role, text, tool calls, the call it answers."""

    role: str
    content: str
    tool_calls: list[JSON] | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """The extra indexed values of one message."""

    context: str
    dates: str
    flags: int


def index_zone(tz: str | ZoneInfo | None) -> ZoneInfo:
    """The zone of a store's date words: ``tz`` (a name or a zone), else UTC.

    Raises:
        ConfigError: an unknown zone name.
    """
    if tz is None:
        return ZoneInfo("UTC")
    if isinstance(tz, ZoneInfo):
        return tz
    try:
        return ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown time zone {tz!r} for the search index") from exc


def date_words(moment: datetime, zone: ZoneInfo) -> str:
    """The day of ``moment`` in ``zone`` as words: ``"8 may 2023 monday"``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(zone)
    return f"{local.day} {_MONTHS[local.month - 1]} {local.year} {_DAYS[local.weekday()]}"


def entries(
    previous: Sequence[Recent], batch: Sequence[NewMessage | Message], zone: ZoneInfo
) -> list[IndexEntry]:
    """The index entries of ``batch``, given the session's messages before it.

    Args:
        previous: The newest stored messages of the session, oldest first
            (:data:`LOOKBACK` are enough).
        batch: The messages being appended, in order.
        zone: The time zone of the date words.
    """
    items = [Recent(m.role, m.content, m.tool_calls, m.tool_call_id) for m in batch]
    return [
        IndexEntry(context, date_words(message.created_at, zone), flags)
        for message, (context, flags) in zip(batch, contexts(previous, items), strict=True)
    ]


def contexts(previous: Sequence[Recent], batch: Sequence[Recent]) -> list[tuple[str, int]]:
    """The neighbour context and flags of each message of ``batch`` (after ``previous``).

    What :func:`entries` indexes beside the date words; backends also use it to
    bring rows indexed under earlier rules up to date.
    """
    window: list[Recent] = list(previous)[-LOOKBACK:]
    out = []
    for message in batch:
        flags = 0
        if message.role == "tool" and _answers_own_tool(window, message.tool_call_id):
            flags |= FLAG_OWN_RESULT
        if only_asks(message.content):
            flags |= FLAG_QUESTION
        previous_turn = _previous_turn(window)
        context = ""
        # A message with no text (a tool-call carrier) gets no context: it holds no answer.
        if previous_turn is not None and message.content.strip():
            context = previous_turn.content[:CONTEXT_CHARS]
            if only_asks(previous_turn.content):
                flags |= FLAG_ANSWER
        out.append((context, flags))
        window.append(message)
        del window[:-LOOKBACK]
    return out


#: Words a question opens with (after any of :data:`_LEAD_INS`).
_OPENERS = frozenset(
    """
    what whats how hows why who whos whom whose where wheres when which do does did dont doesnt
    didnt is isnt are arent was wasnt were werent can cant could couldnt would wouldnt will wont
    should shouldnt shall may might must have havent has hasnt had am any anyone anybody
    anything ever got
    """.split()
)
#: Words that may come before a question's opener ("so, what...", "and how...").
_LEAD_INS = frozenset("and but so or then also well oh ok okay hey hi yes yeah no sure".split())
#: Most words of a clause before the question that still count as a lead-in ("Oh nice, how...").
_SHORT_CLAUSE = 3
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CLAUSE = re.compile(r"\s*[,;:\u2013\u2014]\s*|\s+-\s+")
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)?")


def only_asks(text: str) -> bool:
    """True when ``text`` is a question and nothing else: no statement, no fact in it.

    Every sentence ends with ``?``, and each opens with a question word or an
    auxiliary verb ("what", "how", "did", "can", "any"...), after at most a
    short lead-in clause ("Oh nice, how is it going?"). "I adopted a beagle
    last month, any tips for crate training?" states a fact in its first
    clause: it is not only a question.
    """
    if not text.rstrip().endswith("?"):
        return False  # the common case, decided without splitting anything
    questions, said = _parts(text)
    if not questions or said:
        return False
    for clauses in questions:
        words = [w.replace("'", "") for w in _TOKEN.findall(clauses[-1].lower())]
        while words and words[0] in _LEAD_INS:
            words.pop(0)
        if not words or words[0] not in _OPENERS:
            return False
    return True


def _parts(text: str) -> tuple[list[list[str]], list[str]]:
    """The questions of ``text`` (each a list of clauses) and what it states.

    A sentence ending with ``?`` is a question, but for the clauses before its
    last one that are longer than a lead-in: those are stated. Every other
    sentence is stated.
    """
    questions: list[list[str]] = []
    said: list[str] = []
    for sentence in _SENTENCE.split(text.strip()):
        if not sentence:
            continue
        if not sentence.endswith("?"):
            said.append(sentence)
            continue
        clauses = [c for c in _CLAUSE.split(sentence) if c.strip()]
        cut = max((i + 1 for i, c in enumerate(clauses[:-1]) if _long(c)), default=0)
        said += clauses[:cut]
        questions.append(clauses[cut:])
    return questions, said


def _long(clause: str) -> bool:
    return len(_TOKEN.findall(clause)) > _SHORT_CLAUSE


#: Stored messages a backend reads before an append (enough to find the turns and calls).
LOOKBACK = 8


def _previous_turn(window: Sequence[Recent]) -> Recent | None:
    """The last user or assistant message with text (the turn a new message follows)."""
    for item in reversed(window):
        if item.role in ("user", "assistant") and item.content.strip():
            return item
    return None


def _answers_own_tool(window: Sequence[Recent], call_id: str | None) -> bool:
    if not call_id:
        return False
    for item in reversed(window):
        for call in item.tool_calls or ():
            if call.get("id") == call_id:
                function = call.get("function")
                name = function.get("name") if isinstance(function, dict) else call.get("name")
                return name in RETRIEVAL_TOOLS
    return False


__all__ = [
    "CONTEXT_CHARS",
    "FLAG_ANSWER",
    "FLAG_OWN_RESULT",
    "FLAG_QUESTION",
    "LOOKBACK",
    "RETRIEVAL_TOOLS",
    "IndexEntry",
    "Recent",
    "contexts",
    "date_words",
    "entries",
    "index_zone",
    "only_asks",
]
