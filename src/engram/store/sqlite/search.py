"""Full-text search of the SQLite backend: FTS5 matching, weighted BM25, snippets.

The index is ``messages_fts`` (FTS5, Porter stemming, external content on
``messages``) over four columns: the message's ``content``, the speaker's
``name``, ``search_context`` (the turn the message follows) and
``search_dates`` (the day as words), all written at append (see
:mod:`engram.search.index`). A search is one OR query over the plan's terms
and phrases (:mod:`engram.search.query`), ranked by BM25 with per-column
weights, times rank factors: a participant the query names, a date range it
names, and a message that only asks; a message lifted by its context is then
capped below the turn it follows (:func:`engram.search.lift.settle`). Results
of Engram's own retrieval tools and the ids the plan excludes are never
returned. How common a word is (the tiers, :mod:`engram.store.sqlite.terms`)
counts the messages that say it, outside the context column.

It runs in two steps: rank the matches with no snippet (a snippet costs far
more than a score), then fetch the winners' rows and snippets by id. Ranking
joins nothing but the messages: a session or scope filter is on
``m.session_id``, so each match costs one primary-key lookup; within a session,
one seek in the index ``(session_id, id, search_flags)`` instead, unless a
filter or a boost reads more of the row.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.models import NewMessage, SearchHit
from engram.search.index import (
    FLAG_ANSWER,
    FLAG_OWN_RESULT,
    FLAG_QUESTION,
    LOOKBACK,
    Recent,
    entries,
)
from engram.search.lift import Scored, missing_sources, pool_size, settle
from engram.search.query import (
    ANSWER_FACTOR,
    DATE_BOOST,
    NAME_WEIGHT,
    SPEAKER_BOOST,
    SearchQuery,
    fts5_candidates,
    fts5_query,
    parse,
    tiers,
)
from engram.search.stems import WHOLE_CHARS
from engram.store.sqlite.connection import SQLiteConnections
from engram.store.sqlite.connection import clamp as _clamp
from engram.store.sqlite.rows import MSG_COLUMNS, MSG_WIDTH, message
from engram.store.sqlite.rows import parse_ts as _parse_ts
from engram.store.sqlite.rows import roles_clause as _roles_clause
from engram.store.sqlite.rows import ts as _ts
from engram.store.sqlite.terms import TermCounts

#: Tokens of a snippet (FTS5 ``snippet``): about 64, or the whole message when shorter.
SNIPPET_TOKENS = 64

#: Column weights of ``bm25()`` by default: content, name, context, date words (the
#: context is scored in a second ``bm25()`` call, see ``_rank``).
BM25_WEIGHTS = (1.0, NAME_WEIGHT, 0.5, 0.5)

# A short message is shown whole (matches marked), a longer one as a snippet of its content.
_SNIPPET = (
    f"CASE WHEN length(m.content) <= {WHOLE_CHARS} THEN highlight(messages_fts, 0, '[', ']')"
    f" ELSE snippet(messages_fts, 0, '[', ']', '…', {SNIPPET_TOKENS}) END"
)
_COLUMNS = ("content", "name", "search_context", "search_dates")
_CANDIDATES = (
    " AND +messages_fts.rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)"
)
_RECENT = (
    "SELECT role, content, tool_calls FROM messages INDEXED BY messages_session_id"
    " WHERE session_id = ? ORDER BY id DESC LIMIT ?"
)


def index_values(
    conn: sqlite3.Connection, pk: int, batch: Sequence[NewMessage], zone: ZoneInfo
) -> list[tuple[str, str, int]]:
    """``(search_context, search_dates, search_flags)`` of each message of ``batch``.

    Reads the session's newest :data:`~engram.search.index.LOOKBACK` rows once.
    """
    rows = conn.execute(_RECENT, (pk, LOOKBACK)).fetchall()
    previous = [Recent(r, c, json.loads(t) if t else None) for r, c, t in reversed(rows)]
    return [(e.context, e.dates, e.flags) for e in entries(previous, batch, zone)]


def refresh_context(
    conn: sqlite3.Connection, pk: int, deleted: Sequence[int], zone: ZoneInfo
) -> None:
    """Rewrite the neighbour context of the turns after deleted messages (no deleted text stays)."""
    for anchor in sorted(set(deleted)):
        before = conn.execute(_AROUND_BEFORE, (pk, anchor, LOOKBACK)).fetchall()
        after = conn.execute(_AROUND_AFTER, (pk, anchor, LOOKBACK)).fetchall()
        if not after:
            continue
        previous = [
            Recent(r, c, json.loads(t) if t else None) for _, r, c, t, _ in reversed(before)
        ]
        following = [
            NewMessage(
                role=r, content=c, created_at=_parse_ts(at), tool_calls=json.loads(t) if t else None
            )
            for _, r, c, t, at in after
        ]
        for (mid, *_), entry in zip(after, entries(previous, following, zone), strict=True):
            conn.execute(
                "UPDATE messages SET search_context = ? WHERE id = ?", (entry.context, mid)
            )


_AROUND = "SELECT id, role, content, tool_calls, created_at FROM messages WHERE session_id = ?"
_AROUND_BEFORE = _AROUND + " AND id < ? ORDER BY id DESC LIMIT ?"
_AROUND_AFTER = _AROUND + " AND id > ? ORDER BY id LIMIT ?"


def record_speakers(conn: sqlite3.Connection, pk: int, batch: Sequence[NewMessage]) -> None:
    """Remember the names and metadata speakers of ``batch`` as the session's participants."""
    names = {n for m in batch for n in (m.name, _meta_speaker(m)) if n}
    if names:
        conn.executemany(
            "INSERT OR IGNORE INTO participants(session_id, name) VALUES (?, ?)",
            [(pk, name) for name in sorted(names)],
        )


def _meta_speaker(m: NewMessage) -> str | None:
    speaker = m.metadata.get("speaker") if m.metadata else None
    return speaker if isinstance(speaker, str) and len(speaker) <= 64 else None


class SQLiteSearch(SQLiteConnections):
    """The search half of :class:`~engram.store.sqlite.backend.SQLiteStore`."""

    _terms: TermCounts

    def speakers(self, scope: str, session: str | None = None) -> list[str]:
        """Names of the participants of a session (or of every session of the scope)."""
        conn = self._conn()
        if session is None:
            rows = conn.execute(
                "SELECT DISTINCT p.name FROM participants p JOIN sessions s ON s.id = p.session_id"
                " JOIN scopes c ON c.id = s.scope_id WHERE c.name = ? LIMIT 1000",
                (scope,),
            )
        else:
            rows = conn.execute(
                "SELECT p.name FROM participants p JOIN sessions s ON s.id = p.session_id"
                " JOIN scopes c ON c.id = s.scope_id WHERE c.name = ? AND s.external_id = ?"
                " LIMIT 1000",
                (scope, session),
            )
        return sorted({row[0] for row in rows})

    def search(
        self,
        scope: str,
        query: str | SearchQuery,
        *,
        session: str | None = None,
        roles: Sequence[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int = 10,
    ) -> list[SearchHit]:
        """Full-text search, best first. ``query`` is plain user text or a plan, never syntax.

        Words are matched on their stems (Porter) in the content, the speaker's
        name, the neighbour context and the date words, ranked by weighted BM25
        times the plan's rank factors (see :mod:`engram.search.query`). Snippets
        mark matches with ``[`` and ``]``. A query with no searchable word
        returns no hit.
        """
        plan = parse(query) if isinstance(query, str) else query
        limit = _clamp(limit)
        if plan.empty or limit == 0:
            return []
        conn = self._conn()
        where, params = _roles_clause("m.role", roles)
        if start is not None:
            where += " AND m.created_at >= ?"
            params.append(_ts(start))
        if end is not None:
            where += " AND m.created_at < ?"
            params.append(_ts(end))
        if not plan.include_own_results:
            where += f" AND (m.search_flags & {FLAG_OWN_RESULT}) = 0"
        if plan.exclude_ids:
            where += " AND m.id NOT IN (SELECT value FROM json_each(?))"
            params.append("[" + ",".join(str(int(i)) for i in sorted(plan.exclude_ids)) + "]")
        if session is None:
            scope_pk = self._scope_pk(conn, scope)
            if scope_pk is None:
                return []
            sql_where = " AND m.session_id IN (SELECT id FROM sessions WHERE scope_id = ?)"
            return _search(
                conn,
                scope,
                plan,
                None,
                sql_where + where,
                [scope_pk, *params],
                limit,
                self._terms,
                "messages m",
            )
        pk = self._lookup_session(conn, scope, session)
        if pk is None:
            return []
        # Within a session, the index (session_id, id, search_flags) holds all the ranking
        # reads unless a filter or a boost needs more of the row.
        covered = roles is None and start is None and end is None and _covered(plan)
        return _search(
            conn,
            scope,
            plan,
            session,
            " AND m.session_id = ?" + where,
            [pk, *params],
            limit,
            self._terms,
            _COVERED if covered else "messages m",
        )


@dataclass(frozen=True, slots=True)
class _Rank:
    """SQL expressions of a message's own score and its context's (higher is better)."""

    own: str
    lift: str
    params: list[Any]


def _rank(plan: SearchQuery) -> _Rank:
    """The plan's score expressions, rank factors applied, and their parameters."""
    # The message's own columns, then the neighbour context scored apart: BM25 of a
    # word sums its columns before saturating, so the context would otherwise
    # outweigh the message's own words. BM25 is negative (lower is better): negated.
    weights = (1.0, NAME_WEIGHT, 0.0, plan.date_weight)
    own = "(-bm25(messages_fts, " + ", ".join(repr(float(w)) for w in weights) + "))"
    factor, params = _factors(plan)
    if plan.context_weight <= 0:
        return _Rank(f"{own}{factor}", "0.0", params)
    weight, answer = float(plan.context_weight), float(plan.context_weight * ANSWER_FACTOR)
    lift = (
        f"(CASE WHEN (m.search_flags & {FLAG_ANSWER}) != 0 THEN {answer!r} ELSE {weight!r} END"
        " * -bm25(messages_fts, 0.0, 0.0, 1.0, 0.0))"
    )
    return _Rank(f"{own}{factor}", f"{lift}{factor}", params + params)


def _factors(plan: SearchQuery) -> tuple[str, list[Any]]:
    """The plan's rank factors as a product (`` * (...)`` each) and its parameters."""
    expr, params = "", []
    if plan.speakers:
        marks = ", ".join("?" * len(plan.speakers))
        expr += (
            f" * (CASE WHEN lower(m.name) IN ({marks}) OR (m.metadata IS NOT NULL AND"
            f" lower(json_extract(m.metadata, '$.speaker')) IN ({marks}))"
            f" THEN {SPEAKER_BOOST} ELSE 1.0 END)"
        )
        params += [*plan.speakers, *plan.speakers]
    if plan.boost_start is not None and plan.boost_end is not None:
        expr += (
            f" * (CASE WHEN m.created_at >= ? AND m.created_at < ? THEN {DATE_BOOST} ELSE 1.0 END)"
        )
        params += [_ts(plan.boost_start), _ts(plan.boost_end)]
    if plan.question_factor != 1.0:
        expr += (
            f" * (CASE WHEN (m.search_flags & {FLAG_QUESTION}) != 0"
            f" THEN {float(plan.question_factor)!r} ELSE 1.0 END)"
        )
    return expr, params


_SCORED = (
    "SELECT m.id, {own} AS own, {lift} AS lift, m.search_flags"
    " FROM messages_fts CROSS JOIN {table} ON m.id = messages_fts.rowid"
    " WHERE messages_fts MATCH ?{restrict}{where}"
)
# The messages of a session read through (session_id, id, search_flags) alone: a match
# costs one seek in that narrow index instead of a read of its wide row (the content and
# its neighbour context), which on a large session is mostly a page-cache miss.
_COVERED = "messages m INDEXED BY messages_session_id"


def _covered(plan: SearchQuery) -> bool:
    """Whether the plan's ranking reads nothing of a message but its id and flags."""
    return not plan.speakers and (plan.boost_start is None or plan.boost_end is None)


# The turn each message follows: the previous user or assistant message with text.
_SOURCES = (
    "SELECT b.id, (SELECT p.id FROM messages p INDEXED BY messages_session_id"
    " WHERE p.session_id = b.session_id AND p.id < b.id AND p.role IN ('user', 'assistant')"
    " AND trim(p.content, ' ' || char(9, 10, 11, 12, 13)) != '' ORDER BY p.id DESC LIMIT 1)"
    " FROM messages b WHERE b.id IN ({marks})"
)


def _search(
    conn: sqlite3.Connection,
    scope: str,
    plan: SearchQuery,
    session: str | None,
    where: str,
    params: Sequence[Any],
    limit: int,
    counts: TermCounts,
    table: str,
) -> list[SearchHit]:
    columns = ["content", "name"]
    columns += ["search_context"] if plan.context_weight > 0 else []
    columns += ["search_dates"] if plan.date_weight > 0 else []
    match = fts5_query(plan, columns if len(columns) < 4 else None)
    rank = _rank(plan)
    ranked: list[tuple[int, float]] = []
    for scored, found in _passes(conn, plan, columns if len(columns) < 4 else None, counts):
        # CROSS JOIN: the full-text index is the outer loop, always; each match then
        # costs one lookup of its message (by primary key, or in the session's index).
        # ``+rowid`` keeps the candidate list out of FTS5 (as a rowid constraint FTS5
        # would restart once per id).
        restrict = _CANDIDATES if found else ""
        sql = _SCORED.format(
            own=rank.own, lift=rank.lift, table=table, restrict=restrict, where=where
        )
        pool = [
            Scored(*row)
            for row in conn.execute(
                sql + " ORDER BY own + lift DESC, m.id DESC LIMIT ?",
                (*rank.params, scored, *((found,) if found else ()), *params, pool_size(limit)),
            )
        ]
        seen = {mid for mid, _ in ranked}
        pool = [item for item in pool if item.id not in seen]
        settled = _settle(conn, pool, rank, scored, table, where, params, seen)
        # A later pass fills in below the hits of the earlier ones (their order stays).
        ranked += settled[: limit - len(ranked)]
        if len(ranked) >= limit:
            break
    if not ranked:
        return []
    return _hits(conn, scope, session, match, ranked)


def _settle(
    conn: sqlite3.Connection,
    pool: list[Scored],
    rank: _Rank,
    scored: str,
    table: str,
    where: str,
    params: Sequence[Any],
    ranked: set[int],
) -> list[tuple[int, float]]:
    """``pool`` best first, each message lifted by its context capped below its source."""
    capped = [item.id for item in pool if item.capped]
    if not capped:
        return settle(pool, {})
    marks = ", ".join("?" * len(capped))
    sources = {
        mid: source
        for mid, source in conn.execute(_SOURCES.format(marks=marks), capped)
        if source is not None and source not in ranked
    }
    missing = missing_sources(pool, sources)
    outside: dict[int, Scored] = {}
    if missing:
        marks = ", ".join("?" * len(missing))
        # A rowid constraint: FTS5 looks each id up instead of walking the matches.
        sql = _SCORED.format(
            own=rank.own,
            lift=rank.lift,
            table=table,
            restrict=f" AND messages_fts.rowid IN ({marks})",
            where=where,
        )
        found = conn.execute(sql, (*rank.params, scored, *missing, *params))
        outside = {row[0]: Scored(*row) for row in found}
    return settle(pool, sources, outside)


def _passes(
    conn: sqlite3.Connection,
    plan: SearchQuery,
    columns: Collection[str] | None,
    counts: TermCounts,
) -> list[tuple[str, str | None]]:
    """``(match scored, match finding the candidates)`` of each pass, cheapest first.

    The first pass scores the candidates that rare words, phrases and pairs of
    common words find (see :func:`~engram.search.query.tiers`); when it finds
    fewer hits than asked for, the next one lets each common word find
    messages too, and the last one every word, as a search with no tiers does;
    their hits come after those of the earlier passes.
    """
    every = fts5_query(plan, columns)
    if not plan.tiered or len(plan.terms) + len(plan.phrases) < 2:
        return [(every, None)]
    # How many messages hold a word in their own text: a word said in few messages is
    # rare even though the replies after them hold it in their neighbour context.
    own = [c for c in (columns or _COLUMNS) if c != "search_context"]
    rows, known = counts.counts(conn, plan.terms, own)
    split = tiers(plan, known, rows)
    scored = fts5_query(replace(plan, terms=split.rare + split.common), columns)
    out: list[tuple[str, str | None]] = []
    found = fts5_candidates(plan, split, columns)
    words = [*split.rare, *(w for pair in split.pairs for w in pair)]
    if split.common and sorted(words) == sorted(split.rare + split.common):
        # Each scored word once in the candidates' expression ("cat" AND "name"): it is
        # its own match, and BM25 scores its words as the OR of them would.
        out.append((found, None))
    elif split.common:
        out.append((scored, found))
    out.append((scored, None))
    if split.weightless:
        out.append((every, None))
    return out


def _hits(
    conn: sqlite3.Connection,
    scope: str,
    session: str | None,
    match: str,
    ranked: Sequence[Any],
) -> list[SearchHit]:
    """The ranked ids' messages with their snippets, in rank order."""
    marks = ", ".join("?" * len(ranked))
    # Columns: the message (9), its session's name, the snippet. CROSS JOIN keeps the
    # index as the outer loop: with few ids the planner would otherwise walk the
    # messages and run the full-text query once per id.
    name, join = "?", ""
    if session is None:
        name, join = "s.external_id", " CROSS JOIN sessions s ON s.id = m.session_id"
    rows = {
        row[0]: row
        for row in conn.execute(
            f"SELECT {MSG_COLUMNS}, {name}, {_SNIPPET}"
            f" FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid{join}"
            f" WHERE messages_fts MATCH ? AND messages_fts.rowid IN ({marks})",
            (*((session,) if session is not None else ()), match, *(mid for mid, _ in ranked)),
        )
    }
    return [
        SearchHit(
            message=message(scope, row[MSG_WIDTH], row),
            score=score,
            snippet=row[MSG_WIDTH + 1],
        )
        for mid, score in ranked
        if (row := rows.get(mid)) is not None
    ]


__all__ = [
    "BM25_WEIGHTS",
    "SNIPPET_TOKENS",
    "SQLiteSearch",
    "index_values",
    "record_speakers",
    "refresh_context",
]
