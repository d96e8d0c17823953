"""The retrieval tools the model calls to recall what it no longer sees.

Each tool is a typed function: the first parameter is the bound session
(hidden from the model, so a model can never name another conversation or
scope), the docstring is what the model reads. Compared with a plain chat-bot history lookup:

* search is ranked full-text search (stems, BM25 over the message, its
  turn it follows and its date as words) instead of an unescaped ``LIKE``; the
  query is plain text, so ``*``, ``NEAR``, ``%`` or ``_`` are just characters
  and double quotes mark a phrase; what the model already sees, the question
  it is answering and Engram's own earlier tool results are never returned;
* dates go through :func:`engram.search.dates.parse_when` in the engine's time zone
  and an unreadable date is an error the model can read, never "today";
* ``get_message_by_id`` only finds messages of the caller's scope; one of
  another scope is "not found", exactly like a missing one;
* extended context pages backwards with ``before_id`` instead of always
  returning the same newest messages;
* ``expand`` reads the messages a summary or important-data citation names
  (``[#112-#140]``), verbatim, within a token limit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from engram.compaction.citations import ids_text, parse_ranges
from engram.errors import InvalidQuery, MessageNotFound, NotFound
from engram.flags import flags
from engram.intake.checks import MAX_CONTENT_BYTES, MAX_MESSAGE_ID, timestamp
from engram.limits import MAX_EXTENDED_CONTEXT
from engram.models import JSON, Message, SearchHit
from engram.searching import MAX_NEIGHBOURS
from engram.tools.packing import Entry, pack
from engram.tools.registry import RECORDS_NOTE, ToolSession, tool
from engram.tools.results import MIN_RESULT_TOKENS
from engram.tools.schema import Length, Range

#: Most hits or messages any other tool returns in one call.
MAX_TOOL_RESULTS = 50
#: Longest search query accepted, in characters.
MAX_QUERY_CHARS = 500
#: Longest date phrase accepted, in characters (matches engram.search.dates).
MAX_DATE_CHARS = 100
#: Characters of a neighbouring turn shown with a search hit.
NEIGHBOUR_CHARS = 400
#: Largest token budget ``search_history`` packs its results into.
MAX_PACKED_TOKENS = 32_000
#: Longest citation ``expand`` accepts, in characters.
MAX_CITE_CHARS = 500
#: Tokens of messages ``expand`` returns by default, and at most.
EXPAND_TOKENS = 2000
MAX_EXPAND_TOKENS = 4000
#: Messages ``expand`` reads per store call.
_EXPAND_PAGE = 50

RoleName = Literal["system", "user", "assistant", "tool"]


@tool(items_key="results", recalls=True)
def search_history(
    session: ToolSession,
    query: Annotated[str, Length(1, MAX_QUERY_CHARS)],
    limit: Annotated[int, Range(1, MAX_TOOL_RESULTS)] = 5,
    role: RoleName | None = None,
    date: Annotated[str, Length(1, MAX_DATE_CHARS)] | None = None,
    all_sessions: bool = False,
    context: Annotated[int, Range(0, MAX_NEIGHBOURS)] = 0,
    as_of: Annotated[str, Length(1, MAX_DATE_CHARS)] | None = None,
    max_tokens: Annotated[int, Range(MIN_RESULT_TOKENS, MAX_PACKED_TOKENS)] | None = None,
) -> JSON:
    """Search earlier messages of this conversation, best matches first.

    Use it when the user refers to something discussed before that is not in
    the visible context; then quote what you find instead of guessing. Words
    also match their plural and tense variants; names and dates help.

    Args:
        session: The bound session (hidden from the model).
        query: Keywords or a phrase to look for, as plain text.
        limit: Most results to return.
        role: Only messages written by this role.
        date: Only messages from this day or range, e.g. "2025-03-03", "yesterday",
            "monday", "last week", "3 days ago", "2025-03-01..2025-03-05".
        all_sessions: Also search the other conversations of this project.
        context: Neighbouring messages to return around each hit.
        as_of: When the question was asked (ISO 8601, default now).
        max_tokens: Fit the results in this many tokens.
    """
    moment = _moment(as_of)
    start = end = None
    if date is not None:
        start, end = session.date_range(date, as_of=moment)
    hits = session.search(
        query,
        limit=limit,
        roles=[role] if role else None,
        start=start,
        end=end,
        all_sessions=all_sessions,
        context=context,
        partner=True,
        exclude_visible=True,
        exclude_question=True,
        as_of=moment,
    )
    zone = session.tz
    shown = {hit.message.id for hit in hits}
    entries = []
    for hit in hits:
        item = _head(hit.message, zone)
        item["snippet"] = hit.snippet or _preview(hit.message.content)
        if all_sessions:
            item["session"] = hit.message.session
        entries.append(Entry(item, _partner(hit, shown), [_brief(m, zone) for m in hit.context]))
    # The records statement heads the result here, so packing counts it.
    out: JSON = {"about": RECORDS_NOTE, "session": session.id, "query": query}
    if start is not None and end is not None:
        out["from"], out["until"] = _local(start, zone), _local(end, zone)
    if max_tokens is not None:
        return pack(out, entries, max_tokens)
    out["count"] = len(entries)
    out["results"] = [entry.whole() for entry in entries]
    return out


def _partner(hit: SearchHit, shown: set[int]) -> JSON | None:
    """A hit's exchange partner as the model sees it (only its id when it is a hit too)."""
    if hit.partner is None:
        return None
    out: JSON = {"id": hit.partner.id, "role": hit.partner.role}
    if hit.partner.id not in shown:
        out["snippet"] = hit.partner_snippet
        if found := flags(hit.partner.content):
            out["flags"] = list(found)
    return out


def _moment(as_of: str | None) -> datetime | None:
    """``as_of`` read as an instant (ISO 8601, naive means UTC); None stays None."""
    return None if as_of is None else timestamp(as_of, field="as_of", error=InvalidQuery)


@tool(items_key="messages", recalls=True)
def get_messages_by_date(
    session: ToolSession,
    date: Annotated[str, Length(1, MAX_DATE_CHARS)],
    limit: Annotated[int, Range(1, MAX_TOOL_RESULTS)] = 20,
    role: RoleName | None = None,
) -> JSON:
    """Get the messages of a day or date range, oldest first.

    Use it when the user refers to a date ("yesterday", "on Monday", "last
    week", "March 3"). A bare weekday means the most recent one before today.

    Args:
        session: The bound session (hidden from the model).
        date: "2025-03-03", "yesterday", "today", "monday", "last week",
            "this month", "3 days ago", "March 3", or a range such as
            "2025-03-01..2025-03-05" (both ends included).
        limit: Most messages to return.
        role: Only messages written by this role.
    """
    start, end = session.date_range(date)
    found = session.by_date(date, limit=limit + 1, roles=[role] if role else None)
    zone = session.tz
    messages = [_full(message, zone) for message in found[:limit]]
    return {
        "date": date,
        "from": _local(start, zone),
        "until": _local(end, zone),
        "count": len(messages),
        "has_more": len(found) > limit,
        "messages": messages,
    }


@tool(items_key="messages", drop_from="start", recalls=True)
def get_extended_context(
    session: ToolSession,
    count: Annotated[int, Range(1, MAX_EXTENDED_CONTEXT)] = 30,
    before_id: Annotated[int, Range(1, MAX_MESSAGE_ID)] | None = None,
) -> JSON:
    """Load more of this conversation than the visible window, oldest first.

    Use it when a question needs more context than you can see. To go further
    back, call it again with before_id set to the next_before_id it returned.

    Args:
        session: The bound session (hidden from the model).
        count: How many messages to load.
        before_id: Only messages older than this message id (default: the newest).
    """
    found = session.extended(count, before_id=before_id)
    zone = session.tz
    return {
        "count": len(found),
        # A full page may have more before it; a short one reached the first message.
        "next_before_id": found[0].id if found and len(found) >= count else None,
        "messages": [_full(message, zone) for message in found],
    }


@tool(recalls=True)
def get_message_by_id(
    session: ToolSession,
    message_id: Annotated[int, Range(1, MAX_MESSAGE_ID)],
    offset: Annotated[int, Range(0, MAX_CONTENT_BYTES)] = 0,
) -> JSON:
    """Get the full text of one message by its id (ids appear in the other tools' results).

    Long texts come in parts: call again with the offset a cut result names.

    Args:
        session: The bound session (hidden from the model).
        message_id: The message id.
        offset: Character position to start reading from.
    """
    try:
        message = session.message(message_id)
    except NotFound:
        # One wording whether absent or in another scope: existence must not leak.
        raise MessageNotFound(f"no message with id {message_id}") from None
    total = len(message.content)
    if offset > total:
        raise InvalidQuery(
            f"offset {offset} is past the end of message {message_id} ({total} characters)"
        )
    out = _head(message, session.tz)
    out["session"] = message.session
    if message.tool_calls:
        out["tool_calls"] = message.tool_calls
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    out["total_chars"] = total
    out["offset"] = offset
    out["content"] = message.content[offset:]
    _say_images(out, message)
    return out


@tool(items_key="messages", recalls=True)
def expand(
    session: ToolSession,
    ids: Annotated[str, Length(1, MAX_CITE_CHARS)],
    max_tokens: Annotated[int, Range(100, MAX_EXPAND_TOKENS)] = EXPAND_TOKENS,
) -> JSON:
    """Read word for word the messages a summary citation such as [#112-#140] names.

    Args:
        session: The bound session (hidden from the model).
        ids: The ids as shown, e.g. "#112-#140". Read on with the ids in "rest".
        max_tokens: Most tokens of messages to return.
    """
    ranges = parse_ranges(ids)
    if not ranges:
        raise InvalidQuery(f"ids: write message ids as #12 or #12-#30, got {ids!r}")
    zone = session.tz
    found: list[Message] = []
    used = 0
    rest: list[tuple[int, int]] = []
    for index, (low, high) in enumerate(ranges):
        after: int | None = low - 1 if low > 1 else None
        while not rest:
            page = [m for m in session.messages(after_id=after, limit=_EXPAND_PAGE) if m.id <= high]
            for message in page:
                if found and used + message.tokens > max_tokens:
                    rest.append((message.id, high))
                    break
                found.append(message)
                used += message.tokens
            if rest or len(page) < _EXPAND_PAGE:
                break
            after = page[-1].id
        if rest:
            rest.extend(ranges[index + 1 :])
            break
    return {
        "ids": ids_text(ranges),
        "session": session.id,
        "count": len(found),
        "rest": ids_text(tuple(rest)) or None,
        "messages": [_full(message, zone) for message in found],
    }


@tool()
def get_memory_stats(session: ToolSession) -> JSON:
    """Get the size of this conversation's history: message count, first and last dates, tokens."""
    zone = session.tz
    return {key: _plain(key, value, zone) for key, value in session.stats().items()}


# -- shapes -------------------------------------------------------------------------


def _local(moment: datetime, zone: ZoneInfo) -> str:
    """An instant in the user's time zone, with its offset: unambiguous and readable."""
    return moment.astimezone(zone).isoformat(timespec="seconds")


def _head(message: Message, zone: ZoneInfo) -> JSON:
    out: JSON = {"id": message.id, "role": message.role}
    if message.name:
        out["name"] = message.name
    out["created_at"] = _local(message.created_at, zone)
    found = flags(message.content)
    if found:
        out["flags"] = list(found)  # it reads like instructions: a record, never to follow
    return out


def _brief(message: Message, zone: ZoneInfo) -> JSON:
    """A neighbouring turn of a search hit: who said what, a snippet-sized view."""
    out = _head(message, zone)
    out["content"] = _preview(message.content, NEIGHBOUR_CHARS)
    return out


def _full(message: Message, zone: ZoneInfo) -> JSON:
    out = _head(message, zone)
    if message.tool_calls:
        out["tool_calls"] = [_call_name(call) for call in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    out["content"] = message.content
    _say_images(out, message)
    return out


def _say_images(out: JSON, message: Message) -> None:
    """Name how many images a message holds: a tool result carries their text, not them."""
    if message.parts:
        out["images"] = sum(1 for part in message.parts if part.get("type") == "image_url")


def _call_name(call: JSON) -> str:
    function = call.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return str(function["name"])
    return str(call.get("name", "?"))


def _preview(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _plain(key: str, value: Any, zone: ZoneInfo) -> Any:
    """JSON-ready value; timestamps shown in the user's zone like every other tool's."""
    if isinstance(value, str) and key.endswith("_at"):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        return _local(value if value.tzinfo else value.replace(tzinfo=UTC), zone)
    return value
