"""The search pipeline step by step, from a plain OR query to the default search.

Each step adds one part of the plan :func:`engram.searching.plan` builds, in
the order it composes them; the last is exactly the default search (checked).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from engram import searching
from engram.search.query import (
    CONTEXT_WEIGHT,
    DATE_WEIGHT,
    QUESTION_FACTOR,
    SearchQuery,
    parse,
    with_speakers,
)
from engram.store.base import PlannedSearch

UTC_ZONE = ZoneInfo("UTC")
#: Name of the step that is exactly the default keyword search.
DEFAULT_STEP = "+ exclusions, answers above questions (default)"

#: ``(store, scope, question text, asked at, id of the stored question or None) -> plan``
Step = Callable[[PlannedSearch, str, str, datetime, int | None], SearchQuery]


def _composed(
    store: PlannedSearch,
    scope: str,
    text: str,
    asked: datetime,
    *,
    speakers: bool,
    dates: bool,
    context: bool,
) -> SearchQuery:
    """The plan with some steps on, composed in the order searching.plan uses."""
    query = replace(
        parse(text),
        context_weight=CONTEXT_WEIGHT if context else 0.0,
        date_weight=DATE_WEIGHT if dates else 0.0,
        question_factor=1.0,
        include_own_results=True,
    )
    if dates:
        query = searching.with_time(query, text, asked, UTC_ZONE)
    return with_speakers(query, store.speakers(scope)) if speakers else query


def _plain(
    store: PlannedSearch, scope: str, text: str, asked: datetime, qid: int | None
) -> SearchQuery:
    return _composed(store, scope, text, asked, speakers=False, dates=False, context=False)


def _participants(
    store: PlannedSearch, scope: str, text: str, asked: datetime, qid: int | None
) -> SearchQuery:
    return _composed(store, scope, text, asked, speakers=True, dates=False, context=False)


def _dates(
    store: PlannedSearch, scope: str, text: str, asked: datetime, qid: int | None
) -> SearchQuery:
    return _composed(store, scope, text, asked, speakers=True, dates=True, context=False)


def _context(
    store: PlannedSearch, scope: str, text: str, asked: datetime, qid: int | None
) -> SearchQuery:
    return _composed(store, scope, text, asked, speakers=True, dates=True, context=True)


def default(
    store: PlannedSearch, scope: str, text: str, asked: datetime, qid: int | None
) -> SearchQuery:
    """The default search's plan (asserted equal to the last step composed here)."""
    exclude = set() if qid is None else {qid}
    shipped = searching.plan(store, scope, None, text, now=asked, tz=UTC_ZONE, exclude=exclude)
    built = replace(
        _context(store, scope, text, asked, qid), exclude_ids=frozenset(exclude),
        include_own_results=False, question_factor=QUESTION_FACTOR,
    )  # fmt: skip
    assert built == shipped, (built, shipped)  # the last step is exactly the default search
    return shipped


STEPS: list[tuple[str, Step]] = [
    ("+ query cleanup (stop words, one OR query)", _plain),
    ("+ participants as a boost", _participants),
    ("+ dates as words, date phrases", _dates),
    ("+ neighbour context column", _context),
    (DEFAULT_STEP, default),
]

__all__ = ["DEFAULT_STEP", "STEPS", "UTC_ZONE", "Step", "default"]
