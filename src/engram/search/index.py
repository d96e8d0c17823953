"""What every backend indexes for search beside a message's own text, computed at append.

Three things, computed once when a message is stored (nothing is re-indexed later):

* **neighbour context**: the text of the previous turns of the same session
  (:data:`CONTEXT_TURNS` user or assistant messages, each cut to
  :data:`CONTEXT_CHARS` characters), indexed in a second column with about half
  the weight of the message's own text. The answer "3 years" then matches a
  search for the question it answers ("how long have you had the dog?");
* **date words**: the message's day in the store's time zone as words
  ("8 may 2023 monday"), so "in May 2023" can match a message that never says it;
* **flags**: :data:`FLAG_OWN_RESULT` for the result of one of Engram's own
  retrieval tools (search never feeds the model its own earlier results),
  :data:`FLAG_QUESTION` for a message that asks (it ranks below statements).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engram.errors import ConfigError
from engram.models import JSON, Message, NewMessage

#: Previous turns (user or assistant messages with text) indexed as a message's context.
CONTEXT_TURNS = 2
#: Characters of each previous turn kept in the context column.
CONTEXT_CHARS = 300
#: Result of one of Engram's own retrieval tools (excluded from search by default).
FLAG_OWN_RESULT = 1
#: A message that asks a question (its text ends with "?").
FLAG_QUESTION = 2

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
    """A stored message as the indexer needs it: role, text and any tool calls."""

    role: str
    content: str
    tool_calls: list[JSON] | None = None


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
    window: list[Recent] = list(previous)[-LOOKBACK:]
    out = []
    for message in batch:
        flags = 0
        if message.role == "tool" and _answers_own_tool(window, message.tool_call_id):
            flags |= FLAG_OWN_RESULT
        if message.content.rstrip().endswith("?"):
            flags |= FLAG_QUESTION
        # A message with no text (a tool-call carrier) gets no context: it holds no answer.
        context = _context(window) if message.content.strip() else ""
        out.append(IndexEntry(context, date_words(message.created_at, zone), flags))
        window.append(Recent(message.role, message.content, message.tool_calls))
        del window[:-LOOKBACK]
    return out


#: Stored messages a backend reads before an append (enough to find the turns and calls).
LOOKBACK = 8


def _context(window: Sequence[Recent]) -> str:
    turns: list[str] = []
    for item in reversed(window):
        if item.role in ("user", "assistant") and item.content.strip():
            turns.append(item.content[:CONTEXT_CHARS])
            if len(turns) == CONTEXT_TURNS:
                break
    return "\n".join(reversed(turns))


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
    "CONTEXT_TURNS",
    "FLAG_OWN_RESULT",
    "FLAG_QUESTION",
    "LOOKBACK",
    "RETRIEVAL_TOOLS",
    "IndexEntry",
    "Recent",
    "date_words",
    "entries",
    "index_zone",
]
