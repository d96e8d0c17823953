"""Full-text search of the PostgreSQL backend: a weighted tsvector, one OR query.

``messages.search`` is a stored, generated tsvector with four weights: the
content ``A``, the neighbour context ``B`` (the previous turns, written at
append), the date words ``C`` and the speaker's name ``D`` (see
:mod:`engram.search.index`), under a GIN index. A search ORs the plan's terms
(``plainto_tsquery`` each, so user text is never tsquery syntax) and phrases
(``phraseto_tsquery``), and ranks with ``ts_rank_cd`` and the plan's column
weights (the neighbour context apart, with ``ts_rank``) times its rank factors
(participants, a date range, questions).

``ts_rank_cd`` is not BM25: it scores by how often and how close together
the query words occur, normalised by nothing unless asked, and it has no
inverse document frequency, so a rare word counts no more than a common one.
Rankings therefore differ from the SQLite backend's in detail (BM25 favours
the message holding the rarest query word); both put messages that hold more
of the query words, in the content rather than the context, first.

Only the messages that rare words, phrases and rare pairs of common words find
are scored (:func:`engram.search.query.tiers`, without weightless words: every
word counts in ``ts_rank_cd``); the share of messages holding each word is
read from the planner's statistics of ``messages.search`` (``pg_stats``, kept
by ANALYZE and autovacuum; no statistics yet: every word is rare). When they
find fewer hits than asked for, a second pass with every word fills in below.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.models import NewMessage, SearchHit
from engram.search.index import FLAG_OWN_RESULT, FLAG_QUESTION, LOOKBACK, Recent, entries
from engram.search.query import (
    DATE_BOOST,
    NAME_WEIGHT,
    SPEAKER_BOOST,
    SearchQuery,
    Tiers,
    parse,
    tiers,
)
from engram.search.stems import WHOLE_CHARS, Stemmer, highlight
from engram.store.common import clamp, utc
from engram.store.postgres.connection import Conn, PostgresConnections
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

    _shares: tuple[float, dict[str, float]] | None = None

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
        score = _score(plan, params)
        columns = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        params["options"] = HEADLINE_OPTIONS
        params["whole"] = WHOLE_OPTIONS
        words = plan.words()

        def work(conn: Conn) -> list[SearchHit]:
            rows: list[Any] = []
            for finder in finders:
                # Never prepared: with the words as constants the planner folds the
                # tsquery and estimates from the tsvector statistics. A later pass
                # fills in below the hits of the earlier one.
                sql = _SEARCH.format(
                    query=every, finder=finder, score=score, where=where, columns=columns
                )
                seen = {row[0] for row in rows}
                more = conn.execute(sql, params, prepare=False).fetchall()
                rows += [row for row in more if row[0] not in seen][: params["limit"] - len(rows)]
                if len(rows) >= params["limit"]:
                    break
            return _hits(rows, words)

        return self._read(work)

    def _tiers(self, plan: SearchQuery) -> Tiers | None:
        """The plan's words sorted by their share of messages (None: search with all)."""
        if not plan.tiered or len(plan.terms) + len(plan.phrases) < 2:
            return None
        shares = self._lexeme_shares()
        stemmer = Stemmer()
        counts = {t: round(shares.get(stemmer.stem(t), 0.0) * _PER) for t in plan.terms}
        return tiers(plan, counts, _PER, bm25=False)

    def _lexeme_shares(self) -> dict[str, float]:
        """Share of messages holding each frequent lexeme, from the planner's statistics."""
        cached = self._shares
        if cached is not None and time.monotonic() - cached[0] < SHARES_MAX_AGE_S:
            return cached[1]

        def work(conn: Conn) -> dict[str, float]:
            row = conn.execute(_SHARES).fetchone()
            if row is None or not row[0]:
                return {}
            return dict(zip(row[0], row[1], strict=False))

        shares = self._read(work)
        self._shares = (time.monotonic(), shares)
        return shares


# Share of rows are read as counts per this many rows (search_query.tiers takes counts).
_PER = 1_000_000

#: Seconds the lexeme shares of the statistics are kept before they are read again.
SHARES_MAX_AGE_S = 300.0

# ANALYZE keeps the most common lexemes of a tsvector column with the share of rows holding
# each (autovacuum refreshes them as the table grows); a lexeme not listed is rarer.
_SHARES = """
    SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats
    WHERE schemaname = current_schema() AND tablename = 'messages' AND attname = 'search'
"""

# {query}: every word, which scores; {finder}: the words that find the candidates.
_SEARCH = f"""
    WITH q AS NOT MATERIALIZED (SELECT ({{query}}) AS query, ({{finder}}) AS finder),
    top AS (
        SELECT m.id, {{score}} AS score FROM messages m, q
        WHERE numnode(q.finder) > 0 AND m.search @@ q.finder AND {{where}}
        ORDER BY score DESC, m.id DESC LIMIT %(limit)s
    )
    SELECT top.id, {{columns}}, top.score,
           ts_headline('{TS_CONFIG}', m.content, q.query,
                       CASE WHEN length(m.content) <= {WHOLE_CHARS}
                            THEN %(whole)s ELSE %(options)s END) AS snippet
    FROM top JOIN messages m ON m.id = top.id, q
    ORDER BY top.score DESC, top.id DESC
"""


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


def _hits(rows: Sequence[Any], words: Sequence[str]) -> list[SearchHit]:
    stemmer = Stemmer()
    wanted = stemmer.stems(words)
    hits = []
    for full in rows:
        row = full[1:]
        snippet = str(row[MESSAGE_WIDTH + 1])
        if "[" not in snippet:
            # ts_headline tokenizes the raw text (``3.14`` is one token), and a
            # hit by its context marks nothing: mark (or show) in Python.
            snippet = highlight(row[4], stemmer.words(row[4]), wanted, name=row[7])
        hits.append(
            SearchHit(
                message=message(row[:MESSAGE_WIDTH]),
                score=float(row[MESSAGE_WIDTH]),
                snippet=snippet,
            )
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


def _score(plan: SearchQuery, params: dict[str, Any]) -> str:
    # Weights are {D, C, B, A}: name, date words, context, content. ts_rank_cd adds up
    # every occurrence with no saturation, so the context (two whole turns) is scored
    # apart and squashed into [0, 1) (normalization 32): it lifts a message, never
    # outweighs the message's own words. It is scored by ts_rank, a third of the cost of
    # ts_rank_cd per message, with the same recall on the retrieval benchmark.
    params["weights"] = [NAME_WEIGHT, plan.date_weight, 0.0, 1.0]
    score = "(ts_rank_cd(%(weights)s::float4[], m.search, q.query)"
    if plan.context_weight > 0:
        params["context_weight"] = plan.context_weight
        score += (
            " + %(context_weight)s * 0.1 * ts_rank('{0, 0, 1, 0}'::float4[], m.search, q.query, 32)"
        )
    score += ")"
    if plan.speakers:
        params["speakers"] = list(plan.speakers)
        score += (
            " * (CASE WHEN lower(m.name) = ANY(%(speakers)s)"
            " OR lower(m.metadata->>'speaker') = ANY(%(speakers)s)"
            f" THEN {SPEAKER_BOOST} ELSE 1.0 END)"
        )
    if plan.boost_start is not None and plan.boost_end is not None:
        params["boost_start"], params["boost_end"] = utc(plan.boost_start), utc(plan.boost_end)
        score += (
            " * (CASE WHEN m.created_at >= %(boost_start)s AND m.created_at < %(boost_end)s"
            f" THEN {DATE_BOOST} ELSE 1.0 END)"
        )
    if plan.question_factor != 1.0:
        score += (
            f" * (CASE WHEN (m.search_flags & {FLAG_QUESTION}) <> 0"
            f" THEN {float(plan.question_factor)!r} ELSE 1.0 END)"
        )
    return score


__all__ = [
    "HEADLINE_OPTIONS",
    "TS_CONFIG",
    "PostgresSearch",
    "index_values",
    "record_speakers",
    "refresh_context",
]
