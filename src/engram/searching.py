"""From a question to a search plan, and from hits to hits with their neighbours.

:meth:`Session.search` and :meth:`Engram.search` call :func:`plan`, which turns
what was typed into a :class:`~engram.search.query.SearchQuery` for the store:

* content words and quoted phrases (:func:`engram.search.query.parse`);
* words naming a participant of the searched conversations become a rank
  boost for that participant's messages (:func:`~engram.search.query.with_speakers`);
* a date phrase ("yesterday", "last week", "3 days ago", "on Monday",
  "8 May 2023", "May 2023") is read by the parser of ``get_messages_by_date``
  (:func:`engram.search.dates.parse_when`, in the engine's time zone) and boosts the
  messages of that range; relative phrases leave the match, absolute dates
  stay (each message's date is indexed as words);
* the ids to leave out (the visible prompt, the question being asked).

:func:`add_neighbours` fetches the turns around each hit (``context=1``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from zoneinfo import ZoneInfo

from engram import telemetry
from engram.errors import ConfigError, DateParseError, install_hint
from engram.models import Message, SearchHit
from engram.runtime import Runtime
from engram.search.query import SearchQuery, parse, with_dates, with_speakers
from engram.search.vectors import CANDIDATES_PER_HIT, check_mode, dense_hits, fuse, keeps_vectors
from engram.store.base import PlannedSearch, Store, plans_search

#: Most neighbouring turns returned on each side of a hit.
MAX_NEIGHBOURS = 3

_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_NUMBER = r"(?:\d{1,4}|one|two|three|four|five|six|seven|eight|nine|ten)"
# Relative phrases leave the match (no message says "yesterday" about itself).
_RELATIVE = re.compile(
    r"\b(yesterday|today|(?:last|this|past|previous) (?:week|month)"
    rf"|{_NUMBER} (?:day|week|month)s? ago|(?:past|last) {_NUMBER} (?:day|week)s?"
    rf"|(?:last|this) {_WEEKDAY})\b"
)
# Absolute dates stay in the match too (they are indexed as words).
_ABSOLUTE = re.compile(
    rf"\b(\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH},? \d{{4}}"
    rf"|{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}"
    rf"|{_MONTH} \d{{4}}|\d{{4}}-\d{{2}}-\d{{2}})\b"
)
_ON_WEEKDAY = re.compile(rf"\bon ({_WEEKDAY})\b")


def date_phrase(
    text: str, now: datetime, tz: ZoneInfo
) -> tuple[datetime, datetime, frozenset[str]] | None:
    """The first date phrase of ``text`` as a UTC range, with the words to drop from the match.

    Returns None when the text names no date the parser reads.
    """
    lowered = " ".join(text.lower().replace(",", " ").split())
    if not any(p.search(lowered) for p in (_RELATIVE, _ON_WEEKDAY, _ABSOLUTE)):
        return None
    from engram.search import dates  # the date parser (and dateutil) only when a date is named

    for pattern, drop in ((_RELATIVE, True), (_ON_WEEKDAY, True), (_ABSOLUTE, False)):
        for found in pattern.finditer(lowered):
            phrase = found.group(1)
            try:
                start, end = dates.parse_when(phrase, now=now, tz=tz)
            except DateParseError:
                continue
            words = frozenset(phrase.split()) if drop else frozenset()
            return start, end, words
    return None


def plan(
    store: PlannedSearch,
    scope: str,
    session: str | None,
    text: str,
    *,
    now: datetime,
    tz: ZoneInfo,
    exclude: Collection[int] = (),
    include_own_results: bool = False,
) -> SearchQuery:
    """The plan ``store`` searches with for ``text`` (see the module docstring)."""
    query = parse(text)
    if query.empty:
        return query
    found = date_phrase(text, now, tz)
    if found is not None:
        query = with_dates(query, *found)
    names = store.speakers(scope, session)
    if names:
        query = with_speakers(query, names)
    return replace(query, exclude_ids=frozenset(exclude), include_own_results=include_own_results)


def search(
    store: Store,
    scope: str,
    session: str | None,
    text: str,
    *,
    now: datetime,
    tz: ZoneInfo,
    exclude: Collection[int] = (),
    include_own_results: bool = False,
    roles: Sequence[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 10,
) -> list[SearchHit]:
    """Plan and run one search, best first (a store that takes no plan gets the text)."""
    if not plans_search(store):
        return store.search(
            scope, text, session=session, roles=roles, start=start, end=end, limit=limit
        )
    planned = plan(
        store,
        scope,
        session,
        text,
        now=now,
        tz=tz,
        exclude=exclude,
        include_own_results=include_own_results,
    )
    return store.search(
        scope, planned, session=session, roles=roles, start=start, end=end, limit=limit
    )


@dataclass(frozen=True, slots=True)
class Request:
    """One search, its filters checked (see :meth:`engram.Session.search`)."""

    scope: str
    session: str | None
    text: str
    now: datetime
    tz: ZoneInfo
    exclude: frozenset[int] = frozenset()
    include_own_results: bool = False
    roles: Sequence[str] | None = None
    start: datetime | None = None
    end: datetime | None = None
    limit: int = 10


def run(runtime: Runtime, request: Request, mode: str = "keyword") -> list[SearchHit]:
    """Search by keywords, by meaning or both (see :mod:`engram.search.vectors`), best first.

    Raises:
        ConfigError: an unknown mode, or a semantic mode on an engine without
            embeddings or on a backend that keeps no vectors.
    """
    check_mode(mode)
    with telemetry.memory_span(
        "search_memory", request.scope, session=request.session, **{"engram.search.mode": mode}
    ) as traced:
        hits = _run(runtime, request, mode)
        if traced.recording:
            traced.set({"gen_ai.memory.record.count": len(hits)})
            records = [
                {"id": str(h.message.id), "score": h.score, "content": h.message.content}
                for h in hits
            ]
            traced.content(
                {"gen_ai.memory.query.text": request.text, "gen_ai.memory.records": records}
            )
    return hits


def _run(runtime: Runtime, request: Request, mode: str) -> list[SearchHit]:
    store, r = runtime.store, request
    fetch = partial(store.get_message, r.scope)
    wide = r.limit * CANDIDATES_PER_HIT if mode == "hybrid" else r.limit
    keyword: list[SearchHit] = []
    if mode != "semantic":
        keyword = search(
            store, r.scope, r.session, r.text, now=r.now, tz=r.tz, exclude=r.exclude,
            include_own_results=r.include_own_results, roles=r.roles, start=r.start,
            end=r.end, limit=wide,
        )  # fmt: skip
        if mode == "keyword":
            return keyword
    embedder = runtime.embedder
    if embedder is None or not keeps_vectors(store):
        raise ConfigError(
            f"{mode} search needs vectors: open Engram with embeddings=True "
            f"({install_hint('embeddings')}) on a backend that keeps them (SQLite, PostgreSQL)"
        )

    def keep(message: Message) -> bool:
        return (
            (r.session is None or message.session == r.session)
            and (r.roles is None or message.role in r.roles)
            and (r.start is None or message.created_at >= r.start)
            and (r.end is None or message.created_at < r.end)
        )

    dense = dense_hits(
        store, embedder, fetch, scope=r.scope, session=r.session,
        text=r.text, exclude=r.exclude, keep=keep, limit=wide,
    )  # fmt: skip
    return dense[: r.limit] if mode == "semantic" else fuse(keyword, dense, r.limit)


def add_neighbours(store: Store, hits: Sequence[SearchHit], turns: int) -> list[SearchHit]:
    """``hits`` with up to ``turns`` messages before and after each, from its own session."""
    if turns <= 0:
        return list(hits)
    turns = min(turns, MAX_NEIGHBOURS)
    out = []
    for hit in hits:
        m = hit.message
        before = store.tail(m.scope, m.session, limit=turns, before_id=m.id)
        after = store.page(m.scope, m.session, after_id=m.id, limit=turns)
        out.append(replace(hit, context=(*before, *after)))
    return out


__all__ = [
    "MAX_NEIGHBOURS",
    "Request",
    "add_neighbours",
    "date_phrase",
    "plan",
    "run",
    "search",
]
