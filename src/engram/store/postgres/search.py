"""Full-text search of the PostgreSQL backend: a weighted tsvector, one OR query.

``messages.search`` is a stored, generated tsvector with four weights: the
content ``A``, the neighbour context ``B`` (the turn a message follows, written
at append), the date words ``C`` and the speaker's name ``D`` (see
:mod:`engram.search.index`), under a GIN index. A search ORs the plan's terms
(``plainto_tsquery`` each, so user text is never tsquery syntax) and phrases
(``phraseto_tsquery``), scores the matches BM25-like with IDFs from the word
statistics (:mod:`engram.store.postgres.ranking`), the neighbour context apart,
times the plan's rank factors (participants, a date range, questions), and
caps each message lifted by its context below the turn it follows
(:func:`engram.search.lift.settle`). Snippets come from ``ts_headline`` for the
hits only.

Only the messages that rare words, phrases and rare pairs of common words find
are scored (:func:`engram.search.query.tiers`, without weightless words); the
share of messages holding each word in their *own* text (not the neighbour
context) is read from the extended statistics ``messages_own_words`` (kept by
ANALYZE and autovacuum; before PostgreSQL 14 the statistics of the whole
``search``; no statistics yet: every word is rare). When they find fewer hits
than asked for, a second pass with every word fills in below.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.models import NewMessage, SearchHit
from engram.search.index import (
    FLAG_OWN_RESULT,
    LOOKBACK,
    Recent,
    entries,
)
from engram.search.lift import Scored, missing_sources, pool_size, settle
from engram.search.query import (
    SearchQuery,
    Tiers,
    parse,
    tiers,
)
from engram.search.stems import WHOLE_CHARS, Stemmer, highlight
from engram.store.common import clamp, utc
from engram.store.postgres import ranking
from engram.store.postgres.connection import Conn, PostgresConnections
from engram.store.postgres.migrations import OWN_WORDS
from engram.store.postgres.rows import MESSAGE_COLUMNS, MESSAGE_WIDTH, message

#: Text-search configuration made by migration 001 (English stems, no stop words).
TS_CONFIG = "engram_english"
#: ``ts_headline`` options: ``[``/``]`` around matches, about 64 words of the content.
HEADLINE_OPTIONS = (
    "StartSel=[, StopSel=], MaxWords=64, MinWords=32, ShortWord=2, HighlightAll=false"
)

#: ``ts_headline`` options for a short message: all of it, matches marked.
WHOLE_OPTIONS = "StartSel=[, StopSel=], HighlightAll=true"


def index_values(
    conn: Conn, scope: str, session: str, batch: Sequence[NewMessage], zone: ZoneInfo
) -> list[tuple[str, str, int]]:
    """``(search_context, search_dates, search_flags)`` of each message of ``batch``."""
    rows = conn.execute(
        "SELECT role, content, tool_calls FROM messages WHERE scope = %s AND session = %s"
        " ORDER BY id DESC LIMIT %s",
        (scope, session, LOOKBACK),
    ).fetchall()
    previous = [
        Recent(r, c, t if isinstance(t, list) else (json.loads(t) if t else None))
        for r, c, t in reversed(rows)
    ]
    return [(e.context, e.dates, e.flags) for e in entries(previous, batch, zone)]


def refresh_context(
    conn: Conn, scope: str, session: str, deleted: Sequence[int], zone: ZoneInfo
) -> None:
    """Rewrite the neighbour context of the turns after deleted messages (no deleted text stays)."""
    around = (
        "SELECT id, role, content, tool_calls, created_at FROM messages"
        " WHERE scope = %s AND session = %s AND id {} %s ORDER BY id {} LIMIT %s"
    )
    for anchor in sorted(set(deleted)):
        before = conn.execute(around.format("<", "DESC"), (scope, session, anchor, LOOKBACK))
        after = conn.execute(around.format(">", "ASC"), (scope, session, anchor, LOOKBACK))
        rows_before, rows_after = before.fetchall(), after.fetchall()
        if not rows_after:
            continue
        previous = [Recent(r, c, _calls(t)) for _, r, c, t, _ in reversed(rows_before)]
        following = [
            NewMessage(role=r, content=c, created_at=at, tool_calls=_calls(t))
            for _, r, c, t, at in rows_after
        ]
        for row, entry in zip(rows_after, entries(previous, following, zone), strict=True):
            conn.execute(
                "UPDATE messages SET search_context = %s WHERE id = %s", (entry.context, row[0])
            )


def _calls(value: Any) -> Any:
    return value if isinstance(value, list) else (json.loads(value) if value else None)


def record_speakers(conn: Conn, scope: str, session: str, batch: Sequence[NewMessage]) -> None:
    """Remember the names and metadata speakers of ``batch`` as the session's participants."""
    names: set[str] = set()
    for m in batch:
        speaker = m.metadata.get("speaker") if m.metadata else None
        names.update(n for n in (m.name, speaker) if isinstance(n, str) and 0 < len(n) <= 64)
    if names:
        conn.execute(
            "INSERT INTO participants (scope, session, name)"
            " SELECT %s, %s, unnest(%s::text[]) ON CONFLICT DO NOTHING",
            (scope, session, sorted(names)),
        )


class PostgresSearch(PostgresConnections):
    """The search half of :class:`~engram.store.postgres.backend.PostgresStore`."""

    _shares: tuple[float, dict[str, float], float] | None = None

    def speakers(self, scope: str, session: str | None = None) -> list[str]:
        """Names of the participants of a session (or of every session of the scope)."""
        sql = "SELECT DISTINCT name FROM participants WHERE scope = %s"
        params: list[Any] = [scope]
        if session is not None:
            sql += " AND session = %s"
            params.append(session)

        def work(conn: Conn) -> list[str]:
            return sorted(str(row[0]) for row in conn.execute(sql + " LIMIT 1000", params))

        return self._read(work)

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
        """Full-text search over content, context, date words and name, best first.

        The query text is never parsed as tsquery syntax: each word goes through
        ``plainto_tsquery`` and each quoted phrase through ``phraseto_tsquery``,
        OR-ed together (see the module docstring for how it ranks).
        """
        plan = parse(query) if isinstance(query, str) else query
        if plan.empty or clamp(limit) == 0:
            return []
        params: dict[str, Any] = {"scope": scope, "limit": clamp(limit)}
        every = _tsquery(plan, plan.terms, (), params)
        finders = [every]
        split = self._tiers(plan)
        if split is not None and split.common:
            finders.insert(0, _tsquery(plan, split.rare, split.pairs, params))
        where = _filters(plan, params, session, roles, start, end)
        shares, params["avg_length"] = self._statistics()
        own, lift = ranking.score(plan, params, ranking.weights(plan, shares))
        labelled = ranking.queries(plan, params)
        columns = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        params["options"] = HEADLINE_OPTIONS
        params["whole"] = WHOLE_OPTIONS
        params["pool"] = pool_size(params["limit"])
        words = plan.words()

        def work(conn: Conn) -> list[SearchHit]:
            ranked: list[tuple[int, float]] = []
            for finder in finders:
                # Never prepared: with the words as constants the planner folds the
                # tsquery and estimates from the tsvector statistics. A later pass
                # fills in below the hits of the earlier one.
                sql = _RANK.format(
                    query=every, finder=finder, labelled=labelled, own=own, lift=lift, where=where
                )
                seen = {mid for mid, _ in ranked}
                found = conn.execute(sql, params, prepare=False).fetchall()
                pool = [
                    Scored(int(row[0]), float(row[1]), float(row[2]), int(row[3]))
                    for row in found
                    if row[0] not in seen
                ]
                sources = {row[0]: row[4] for row in found if row[4] is not None}
                sources = {mid: src for mid, src in sources.items() if src not in seen}
                missing = missing_sources(pool, sources)
                outside = _outside(conn, missing, every, labelled, (own, lift), where, params)
                ranked += settle(pool, sources, outside)[: params["limit"] - len(ranked)]
                if len(ranked) >= params["limit"]:
                    break
            if not ranked:
                return []
            params["ids"] = [mid for mid, _ in ranked]
            rows = conn.execute(_ROWS.format(query=every, columns=columns), params, prepare=False)
            by_id = {row[0]: row for row in rows}
            return _hits([(by_id[mid], score) for mid, score in ranked if mid in by_id], words)

        return self._read(work)

    def _tiers(self, plan: SearchQuery) -> Tiers | None:
        """The plan's words sorted by their share of messages (None: search with all)."""
        if not plan.tiered or len(plan.terms) + len(plan.phrases) < 2:
            return None
        shares, _ = self._statistics()
        stemmer = Stemmer()
        counts = {t: round(shares.get(stemmer.stem(t), 0.0) * _PER) for t in plan.terms}
        return tiers(plan, counts, _PER, bm25=False)

    def _statistics(self) -> tuple[dict[str, float], float]:
        """The shares of messages holding each frequent lexeme, and a message's mean length.

        Shares count a message's own text (not its neighbour context); the length is
        its lexeme count. Both are cached for :data:`SHARES_MAX_AGE_S`.
        """
        cached = self._shares
        if cached is not None and time.monotonic() - cached[0] < SHARES_MAX_AGE_S:
            return cached[1], cached[2]

        def work(conn: Conn) -> tuple[dict[str, float], float]:
            known = conn.execute(_HAS_EXPRESSION_STATS).fetchone()
            row = conn.execute(_SHARES).fetchone() if known and known[0] else None
            if row is None:  # before PostgreSQL 14, or not analyzed since the statistics
                row = conn.execute(_ALL_SHARES).fetchone()
            mean = conn.execute(_MEAN_LENGTH).fetchone()
            length = float(mean[0]) if mean and mean[0] else 30.0
            if row is None or not row[0]:
                return {}, length
            return dict(zip(row[0], row[1], strict=False)), length

        shares, length = self._read(work)
        self._shares = (time.monotonic(), shares, length)
        return shares, length


# Share of rows are read as counts per this many rows (search_query.tiers takes counts).
_PER = 1_000_000

#: Seconds the lexeme shares of the statistics are kept before they are read again.
SHARES_MAX_AGE_S = 300.0

# ANALYZE keeps the most common lexemes of a tsvector with the share of rows holding each
# (autovacuum refreshes them as the table grows); a lexeme not listed is rarer. The
# extended statistics of the messages' own words (no neighbour context) come first; the
# statistics of the whole ``search`` serve where they are missing (PostgreSQL before 14).
_SHARES = f"""
    SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats_ext_exprs
    WHERE statistics_schemaname = current_schema() AND statistics_name = '{OWN_WORDS}'
      AND most_common_elems IS NOT NULL
"""
_HAS_EXPRESSION_STATS = "SELECT to_regclass('pg_catalog.pg_stats_ext_exprs') IS NOT NULL"
# The mean lexeme count of the newest messages (BM25's average length).
_MEAN_LENGTH = (
    "SELECT avg(length(search)) FROM (SELECT search FROM messages ORDER BY id DESC LIMIT 1000) r"
)
_ALL_SHARES = """
    SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats
    WHERE schemaname = current_schema() AND tablename = 'messages' AND attname = 'search'
"""

# {query}: every word, which scores; {finder}: the words that find the candidates. The
# turn each of the best matches follows (its context's source) only for those lifted by it.
_RANK = """
    WITH q AS NOT MATERIALIZED (
        SELECT ({query}) AS query, ({finder}) AS finder, {labelled}
    ),
    top AS (
        SELECT * FROM (
            SELECT m.id, m.scope, m.session, {own} AS own, {lift} AS lift, m.search_flags
            FROM messages m, q
            WHERE numnode(q.finder) > 0 AND m.search @@ q.finder AND {where}
        ) found ORDER BY found.own + found.lift DESC, found.id DESC LIMIT %(pool)s
    )
    SELECT top.id, top.own, top.lift, top.search_flags,
           CASE WHEN top.lift > 0 THEN (
               SELECT p.id FROM messages p
               WHERE p.scope = top.scope AND p.session = top.session AND p.id < top.id
                 AND p.role IN ('user', 'assistant') AND btrim(p.content, E' \\t\\n\\r') <> ''
               ORDER BY p.id DESC LIMIT 1) END
    FROM top
"""

# Scores of sources that are not among the best matches (with the same filters).
_OUTSIDE = """
    WITH q AS NOT MATERIALIZED (SELECT ({query}) AS query, {labelled})
    SELECT m.id, {own}, {lift}, m.search_flags FROM messages m, q
    WHERE m.id = ANY(%(missing)s) AND m.search @@ q.query AND {where}
"""

_ROWS = f"""
    WITH q AS NOT MATERIALIZED (SELECT ({{query}}) AS query)
    SELECT m.id, {{columns}},
           ts_headline('{TS_CONFIG}', m.content, q.query,
                       CASE WHEN length(m.content) <= {WHOLE_CHARS}
                            THEN %(whole)s ELSE %(options)s END) AS snippet
    FROM messages m, q WHERE m.id = ANY(%(ids)s)
"""


def _outside(
    conn: Conn,
    missing: list[int],
    query: str,
    labelled: str,
    scores: tuple[str, str],
    where: str,
    params: dict[str, Any],
) -> dict[int, Scored]:
    """Scores of the ``missing`` sources that match under the same filters."""
    if not missing:
        return {}
    own, lift = scores
    sql = _OUTSIDE.format(query=query, labelled=labelled, own=own, lift=lift, where=where)
    rows = conn.execute(sql, {**params, "missing": missing}, prepare=False)
    return {
        int(row[0]): Scored(int(row[0]), float(row[1]), float(row[2]), int(row[3])) for row in rows
    }


def _tsquery(
    plan: SearchQuery,
    terms: Sequence[str],
    pairs: Sequence[tuple[str, str]],
    params: dict[str, Any],
) -> str:
    """A tsquery OR-ing ``terms``, the plan's phrases and ``pairs`` (both words), all bound."""

    def word(term: str) -> str:
        key = f"t{plan.terms.index(term)}"
        params[key] = term
        return f"plainto_tsquery('{TS_CONFIG}', %({key})s)"

    parts = [word(t) for t in terms]
    parts += [f"({word(a)} && {word(b)})" for a, b in pairs]
    for i, phrase in enumerate(plan.phrases):
        params[f"p{i}"] = " ".join(phrase)
        parts.append(f"phraseto_tsquery('{TS_CONFIG}', %(p{i})s)")
    return " || ".join(parts)


def _hits(rows: Sequence[tuple[Any, float]], words: Sequence[str]) -> list[SearchHit]:
    """Hits of ``(row of _ROWS, score)`` pairs, in that order."""
    stemmer = Stemmer()
    wanted = stemmer.stems(words)
    hits = []
    for full, score in rows:
        row = full[1:]
        snippet = str(row[MESSAGE_WIDTH])
        if "[" not in snippet:
            # ts_headline tokenizes the raw text (``3.14`` is one token), and a
            # hit by its context marks nothing: mark (or show) in Python.
            snippet = highlight(row[4], stemmer.words(row[4]), wanted, name=row[7])
        hits.append(
            SearchHit(message=message(row[:MESSAGE_WIDTH]), score=float(score), snippet=snippet)
        )
    return hits


def _filters(
    plan: SearchQuery,
    params: dict[str, Any],
    session: str | None,
    roles: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
) -> str:
    filters = ["m.scope = %(scope)s"]
    if session is not None:
        filters.append("m.session = %(session)s")
        params["session"] = session
    if roles is not None:
        filters.append("m.role = ANY(%(roles)s)")
        params["roles"] = list(roles)
    if start is not None:
        filters.append("m.created_at >= %(start)s")
        params["start"] = utc(start)
    if end is not None:
        filters.append("m.created_at < %(end)s")
        params["end"] = utc(end)
    if not plan.include_own_results:
        filters.append(f"(m.search_flags & {FLAG_OWN_RESULT}) = 0")
    if plan.exclude_ids:
        filters.append("m.id <> ALL(%(exclude)s::bigint[])")
        params["exclude"] = sorted(plan.exclude_ids)
    return " AND ".join(filters)


__all__ = [
    "HEADLINE_OPTIONS",
    "TS_CONFIG",
    "PostgresSearch",
    "index_values",
    "record_speakers",
    "refresh_context",
]
