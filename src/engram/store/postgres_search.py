"""Full-text search of the PostgreSQL backend: a weighted tsvector, one OR query.

``messages.search`` is a stored, generated tsvector with four weights: the
content ``A``, the neighbour context ``B`` (the previous turns, written at
append), the date words ``C`` and the speaker's name ``D`` (see
:mod:`engram.search_index`), under a GIN index. A search ORs the plan's terms
(``plainto_tsquery`` each, so user text is never tsquery syntax) and phrases
(``phraseto_tsquery``), and ranks with ``ts_rank_cd`` and the plan's column
weights times its rank factors (participants, a date range, questions).

``ts_rank_cd`` is not BM25: it scores by how often and how close together
the query words occur, normalised by nothing unless asked, and it has no
inverse document frequency, so a rare word counts no more than a common one.
Rankings therefore differ from the SQLite backend's in detail (BM25 favours
the message holding the rarest query word); both put messages that hold more
of the query words, in the content rather than the context, first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from engram.models import NewMessage, SearchHit
from engram.search_index import FLAG_OWN_RESULT, FLAG_QUESTION, LOOKBACK, Recent, entries
from engram.search_query import DATE_BOOST, NAME_WEIGHT, SPEAKER_BOOST, SearchQuery, parse
from engram.store.common import clamp, utc
from engram.store.postgres_connection import Conn, PostgresConnections
from engram.store.postgres_rows import MESSAGE_COLUMNS, MESSAGE_WIDTH, message
from engram.store.snippets import WHOLE_CHARS, Stemmer, highlight

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
    """The search half of :class:`~engram.store.postgres.PostgresStore`."""

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
        parts = []
        for i, term in enumerate(plan.terms):
            params[f"t{i}"] = term
            parts.append(f"plainto_tsquery('{TS_CONFIG}', %(t{i})s)")
        for i, phrase in enumerate(plan.phrases):
            params[f"p{i}"] = " ".join(phrase)
            parts.append(f"phraseto_tsquery('{TS_CONFIG}', %(p{i})s)")
        where = _filters(plan, params, session, roles, start, end)
        score = _score(plan, params)
        columns = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
        params["options"] = HEADLINE_OPTIONS
        params["whole"] = WHOLE_OPTIONS
        sql = f"""
            WITH q AS NOT MATERIALIZED (SELECT ({" || ".join(parts)}) AS query),
            top AS (
                SELECT m.id, {score} AS score FROM messages m, q
                WHERE numnode(q.query) > 0 AND m.search @@ q.query AND {where}
                ORDER BY score DESC, m.id DESC LIMIT %(limit)s
            )
            SELECT {columns}, top.score,
                   ts_headline('{TS_CONFIG}', m.content, q.query,
                               CASE WHEN length(m.content) <= {WHOLE_CHARS}
                                    THEN %(whole)s ELSE %(options)s END) AS snippet
            FROM top JOIN messages m ON m.id = top.id, q
            ORDER BY top.score DESC, top.id DESC
        """
        words = plan.words()

        def work(conn: Conn) -> list[SearchHit]:
            # Never prepared: with the words as constants the planner folds the
            # tsquery and estimates from the tsvector statistics.
            rows = conn.execute(sql, params, prepare=False).fetchall()
            stemmer = Stemmer()
            wanted = stemmer.stems(words)
            hits = []
            for row in rows:
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

        return self._read(work)


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
    # outweighs the message's own words.
    params["weights"] = [NAME_WEIGHT, plan.date_weight, 0.0, 1.0]
    score = "(ts_rank_cd(%(weights)s::float4[], m.search, q.query)"
    if plan.context_weight > 0:
        params["context_weight"] = plan.context_weight
        score += (
            " + %(context_weight)s * 0.1"
            " * ts_rank_cd('{0, 0, 1, 0}'::float4[], m.search, q.query, 32)"
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
