"""Full-text search of the PostgreSQL backend: the query and the decoding of its rows.

Messages holding every word rank first, then the others, each by
``ts_rank_cd`` of the any-word query; snippets come from ``ts_headline``,
or are marked in Python when it tokenized the text its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from engram.models import SearchHit
from engram.store.common import utc
from engram.store.postgres_rows import MESSAGE_COLUMNS as _MESSAGE_COLUMNS
from engram.store.postgres_rows import message as _message
from engram.store.snippets import Stemmer, highlight

#: Text-search configuration made by migration 001 (English stems, no stop words).
TS_CONFIG = "engram_english"
#: ``ts_headline`` options: ``[``/``]`` around matches, a short fragment.
HEADLINE_OPTIONS = (
    "StartSel=[, StopSel=], MaxWords=30, MinWords=12, ShortWord=2, HighlightAll=false"
)


def search_sql(
    terms: list[str],
    params: dict[str, Any],
    *,
    session: str | None,
    roles: Sequence[str] | None,
    start: datetime | None,
    end: datetime | None,
) -> str:
    """The search statement for ``terms`` (never parsed as tsquery syntax), filling ``params``.

    ``params`` holds ``scope``, ``limit`` and ``options`` already.
    """
    names = [f"t{i}" for i in range(len(terms))]
    params.update(zip(names, terms, strict=True))
    any_query = " || ".join(f"plainto_tsquery('{TS_CONFIG}', %({n})s)" for n in names)
    all_query = " && ".join(f"plainto_tsquery('{TS_CONFIG}', %({n})s)" for n in names)
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
    where = " AND ".join(filters)
    # Messages holding every word rank first, then the others, each by the score
    # of the any-word query. Two index scans instead of scoring every any-word
    # match: the second runs only when the first leaves room (a one-time filter),
    # and only for several words. numnode = 0: only stop words, nothing to scan.
    some = ""
    if len(terms) > 1:
        some = f"""
        UNION ALL (
            SELECT m.id, ts_rank_cd(m.search, q.query) AS score, false AS has_all
            FROM messages m, q
            WHERE numnode(q.query) > 0
              AND (SELECT count(*) FROM every_hit) < %(limit)s
              AND m.search @@ q.query AND NOT (m.search @@ q.every) AND {where}
            ORDER BY score DESC, m.id DESC
            LIMIT %(limit)s
        )"""
    columns = ", ".join(f"m.{c.strip()}" for c in _MESSAGE_COLUMNS.split(","))
    sql = f"""
        WITH q AS NOT MATERIALIZED (SELECT ({any_query}) AS query, ({all_query}) AS every),
        every_hit AS (
            SELECT m.id, ts_rank_cd(m.search, q.query) AS score, true AS has_all
            FROM messages m, q
            WHERE numnode(q.query) > 0 AND m.search @@ q.every AND {where}
            ORDER BY score DESC, m.id DESC
            LIMIT %(limit)s
        ),
        top AS (
            (SELECT * FROM every_hit){some}
            ORDER BY has_all DESC, score DESC, id DESC
            LIMIT %(limit)s
        )
        SELECT {columns}, top.score, top.has_all,
               ts_headline('{TS_CONFIG}', m.content, q.query, %(options)s) AS snippet
        FROM top JOIN messages m ON m.id = top.id, q
        ORDER BY top.has_all DESC, top.score DESC, top.id DESC
    """
    return sql


def search_hits(rows: Sequence[Sequence[Any]], terms: list[str]) -> list[SearchHit]:
    """Hits from search rows: the message, score (+1 when every word matched), snippet."""
    stemmer = Stemmer()
    wanted = stemmer.stems(terms)
    hits = []
    for row in rows:
        snippet = str(row[13])
        if "[" not in snippet:
            # ts_headline tokenizes the raw text (``3.14`` is one token): mark in Python.
            snippet = highlight(row[4], stemmer.words(row[4]), wanted, name=row[7])
        hits.append(
            SearchHit(
                message=_message(row[:11]),
                score=float(row[11]) + (1.0 if row[12] else 0.0),
                snippet=snippet,
            )
        )
    return hits
