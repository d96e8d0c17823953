"""From a question to a search plan, and from hits to hits with their neighbours.

:meth:`Session.search` and :meth:`Engram.search` call :func:`plan`, which turns
what was typed into a :class:`~engram.search.query.SearchQuery` for the store:

* content words and quoted phrases (:func:`engram.search.query.parse`);
* words naming a participant of the searched conversations become a rank
  boost for that participant's messages (:func:`~engram.search.query.with_speakers`);
* a date phrase ("yesterday", "last Saturday", "three weeks ago", "on
  Monday", "8 May 2023", "May 2023") is read by the parser of
  ``get_messages_by_date`` (:func:`engram.search.dates.parse_when`, in the
  engine's time zone, against the moment the question is asked: ``as_of``)
  and boosts the messages of that range; relative phrases leave the match,
  absolute dates stay (each message's date is indexed as words); the words of
  "how many days ago" leave it too (:mod:`engram.search.when`);
* the ids to leave out (the visible prompt, the question being asked).

:func:`add_neighbours` fetches the turns around each hit (``context=1``);
:func:`add_partners` the other half of each hit's exchange.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from zoneinfo import ZoneInfo

from engram import telemetry
from engram.errors import ConfigError, install_hint
from engram.models import Message, SearchHit
from engram.runtime import Runtime
from engram.search.query import SearchQuery, parse, with_dates, with_speakers
from engram.search.stems import Stemmer, highlight
from engram.search.vectors import CANDIDATES_PER_HIT, check_mode, dense_hits, fuse, keeps_vectors
from engram.search.when import date_phrase, elapsed_words
from engram.store.base import PlannedSearch, Store, plans_search

#: Most neighbouring turns returned on each side of a hit.
MAX_NEIGHBOURS = 3


def with_time(query: SearchQuery, text: str, now: datetime, tz: ZoneInfo) -> SearchQuery:
    """``query`` with the date phrase of ``text`` (read at ``now``) and elapsed-time words."""
    found = date_phrase(text, now, tz)
    if found is not None:
        query = with_dates(query, *found)
    elapsed = elapsed_words(text)
    if elapsed and any(t not in elapsed for t in query.terms):
        query = replace(query, terms=tuple(t for t in query.terms if t not in elapsed))
    return query


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
    query = with_time(query, text, now, tz)
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


def resolve_mode(runtime: Runtime, request: Request, mode: str) -> str:
    """The mode ``"auto"`` stands for: hybrid where it measurably helps, else keyword.

    Hybrid when the engine keeps vectors and the searched conversations name no
    participant (a person and an assistant: on the retrieval benchmark, hybrid
    gains there); keyword search otherwise (friends chatting by name: the
    vectors add noise to names and short turns). Any other mode stays itself.
    """
    if mode != "auto":
        return mode
    store = runtime.store
    if runtime.embedder is None or not keeps_vectors(store):
        return "keyword"
    named = plans_search(store) and store.speakers(request.scope, request.session)
    return "keyword" if named else "hybrid"


def run(runtime: Runtime, request: Request, mode: str = "auto") -> list[SearchHit]:
    """Search by keywords, by meaning or both (see :mod:`engram.search.vectors`), best first.

    Raises:
        ConfigError: an unknown mode, or a semantic mode on an engine without
            embeddings or on a backend that keeps no vectors.
    """
    mode = resolve_mode(runtime, request, check_mode(mode))
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


#: Newest messages read to find the question being asked (search leaves it out).
QUESTION_LOOKBACK = 8


def question_ids(store: Store, scope: str, session: str) -> list[int]:
    """The id of the question being asked (the newest user message), if any."""
    newest = store.tail(scope, session, limit=QUESTION_LOOKBACK)
    return next(([m.id] for m in reversed(newest) if m.role == "user"), [])


#: Characters of one hit with its exchange partner: the hit's snippet, the partner's after it.
PAIR_CHARS = 640
#: Fewest characters of a partner shown, however long the hit's snippet.
PARTNER_MIN_CHARS = 160
#: Messages read on each side of a hit to find its exchange partner.
PARTNER_LOOKBACK = 12


def exchange_partner(store: Store, message: Message) -> Message | None:
    """The other half of ``message``'s exchange, or None (other roles, no partner).

    The answer to a user message is the last assistant message with text before
    the next user message; the question of an assistant message is the user
    message before it.
    """
    m = message
    if m.role == "user":
        found = None
        for later in store.page(m.scope, m.session, after_id=m.id, limit=PARTNER_LOOKBACK):
            if later.role == "user":
                break
            if later.role == "assistant" and later.content.strip():
                found = later
        return found
    if m.role == "assistant" and m.content.strip():
        earlier = store.tail(m.scope, m.session, limit=PARTNER_LOOKBACK, before_id=m.id)
        return next((e for e in reversed(earlier) if e.role == "user"), None)
    return None


def add_partners(store: Store, hits: Sequence[SearchHit], text: str) -> list[SearchHit]:
    """``hits`` with their exchange partners, each shown within :data:`PAIR_CHARS`.

    The partner's snippet is a window around its first match of ``text``'s words,
    cut to what the hit's own snippet leaves (at least :data:`PARTNER_MIN_CHARS`).
    """
    stemmer = Stemmer()
    wanted = stemmer.stems(parse(text).words())
    out = []
    for hit in hits:
        partner = exchange_partner(store, hit.message)
        if partner is None or not partner.content.strip():
            out.append(hit)
            continue
        room = max(PARTNER_MIN_CHARS, PAIR_CHARS - len(hit.snippet))
        view = highlight(partner.content, stemmer.words(partner.content), wanted)
        out.append(replace(hit, partner=partner, partner_snippet=cut(view, room)))
    return out


def without(hits: Sequence[SearchHit], ids: Collection[int]) -> list[SearchHit]:
    """``hits`` whose partners and neighbours in ``ids`` are left out (the model sees them)."""
    if not ids:
        return list(hits)
    out = []
    for hit in hits:
        context = tuple(m for m in hit.context if m.id not in ids)
        if hit.partner is not None and hit.partner.id in ids:
            hit = replace(hit, partner=None, partner_snippet="")
        out.append(replace(hit, context=context))
    return out


def cut(text: str, chars: int) -> str:
    """``text`` cut to at most ``chars`` characters at a word boundary, with ``…``."""
    if len(text) <= chars:
        return text
    head = text[: max(0, chars - 1)]
    space = head.rfind(" ")
    return (head[:space] if space > chars // 2 else head).rstrip() + "…"


__all__ = [
    "MAX_NEIGHBOURS",
    "PAIR_CHARS",
    "PARTNER_MIN_CHARS",
    "Request",
    "add_neighbours",
    "add_partners",
    "cut",
    "date_phrase",
    "exchange_partner",
    "plan",
    "question_ids",
    "resolve_mode",
    "run",
    "search",
    "with_time",
    "without",
]
