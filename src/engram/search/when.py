"""When a question is asked, and the dates it names: date phrases, elapsed-time questions.

A question is read against the moment it is asked (``as_of``, default now):
"last Saturday", "three weeks ago" or "yesterday" become a UTC range that
lifts the messages inside it (:func:`date_phrase`, the parser of
``get_messages_by_date``); "how many days ago did I..." names no range, and
its words only leave the match (:func:`elapsed_words`), as no message says
"days ago" about itself.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from engram.errors import DateParseError
from engram.intake.checks import optional_timestamp

_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_NUMBER = r"(?:\d{1,4}|one|two|three|four|five|six|seven|eight|nine|ten)"
# Relative phrases leave the match (no message says "yesterday" about itself).
_RELATIVE = re.compile(
    r"\b(yesterday|today|(?:last|this|past|previous) (?:week|month|year)"
    rf"|(?:an?|{_NUMBER}) (?:day|week|month)s? ago|(?:past|last) {_NUMBER} (?:day|week)s?"
    rf"|(?:last|this) {_WEEKDAY})\b"
)
# A question about elapsed time names no range: its words only leave the match.
_ELAPSED = re.compile(
    r"\bhow (?:many|much) (?:days?|weeks?|months?|years?|time|hours?) (?:ago|before|since|has)\b"
    r"|\bhow long ago\b|\bhow long (?:has it been|since)\b"
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


def elapsed_words(text: str) -> frozenset[str]:
    """The words of elapsed-time phrases in ``text`` ("how many days ago"), to leave the match."""
    lowered = " ".join(text.lower().replace(",", " ").split())
    return frozenset(w for found in _ELAPSED.finditer(lowered) for w in found.group(0).split())


def moment(as_of: object) -> datetime:
    """The instant a question is asked: ``as_of`` as aware UTC (naive means UTC), else now.

    Raises:
        InvalidQuery: ``as_of`` is not a datetime, ISO-8601 text or unix time.
    """
    found = optional_timestamp("as_of", as_of)
    return datetime.now(UTC) if found is None else found


__all__ = ["date_phrase", "elapsed_words", "moment"]
