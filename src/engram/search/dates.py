"""Natural date phrases to UTC ranges, for ``get_messages_by_date`` and search filters.

:func:`parse_when` turns what a model or a person writes ("yesterday",
"monday", "last week", "March 3", "2025-03-01..2025-03-05") into a half-open
range ``[start, end)`` of timezone-aware UTC datetimes.

* Days are calendar days of the configured time zone, converted to UTC at the
  end, so a day that changes to or from daylight saving time lasts 23 or 25
  hours, as it does on the wall clock.
* Weeks run Monday to Sunday. A bare weekday ("monday", "last monday") is the
  most recent such day *before* today: on a Monday, "monday" is a week ago
  (since "what did we say on Monday" asked on a Monday means
  the previous one). "this monday" is the Monday of the current week.
* A month and day without a year is the most recent such date that is not in
  the future.
* Anything unreadable raises :class:`~engram.errors.DateParseError` naming the
  input and listing the accepted forms. Nothing ever falls back to "today": that
  answers questions about the wrong day.

``dateutil`` reads ISO timestamps and month-name dates, but it silently fills
missing parts from a default date, so every result is checked: a phrase must
match one of the accepted shapes before dateutil sees it, and the parts
dateutil found are compared across two different defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engram.errors import ConfigError, DateParseError

#: Longest phrase read; anything longer is refused before parsing.
MAX_PHRASE_LENGTH = 100
#: Largest N in "N days ago", "past N days"... (about 27 years of days).
MAX_COUNT = 10_000

#: Shown in every DateParseError so the caller (often a model) can retry.
ACCEPTED_FORMS = (
    "2025-03-03, 2025-03, 2025, 2025-03-03T14:30 (ISO, with or without offset), "
    "today, yesterday, monday / last monday / this monday, last week, this week, "
    "last month, this month, N days ago, N weeks ago, N months ago, "
    "past N days / last N days (also weeks), March 3, 3 March, Mar 3 2024, March 2024, "
    "and ranges 'A..B', 'A to B', 'from A to B', 'between A and B' (inclusive end)"
)

_WEEKDAYS = {
    name: index
    for index, names in enumerate(
        [
            ("monday", "mon"),
            ("tuesday", "tue", "tues"),
            ("wednesday", "wed"),
            ("thursday", "thu", "thur", "thurs"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        ]
    )
    for name in names
}
_MONTHS = {
    name: index + 1
    for index, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip

_RANGE_SPLIT = re.compile(r"^(?:from\s+)?(.+?)\s*(?:\.\.|\s+to\s+|\s+until\s+|\s+[-–—]\s+)(.+)$")
_BETWEEN = re.compile(r"^between\s+(.+?)\s+and\s+(.+)$")
_COUNT = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_AGO = re.compile(_COUNT + r"\s+(day|week|month)s?\s+ago$")
_PAST = re.compile(r"(?:past|last|previous)\s+" + _COUNT + r"\s+(day|week)s?$")
_WEEKDAY = re.compile(r"(?:(last|past|previous|this)\s+)?([a-z]+)$")
_ISO = re.compile(
    r"^(\d{4})(?:-(\d{2})(?:-(\d{2})"
    r"(?:[t ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?"
    r"(z|[+-]\d{2}(?::?\d{2})?)?)?)?)?$"
)
# Month-name dates: only letters of month names, digits, ordinal suffixes,
# "of"/"the", commas and an optional leading weekday; dateutil reads what passes.
_WORD = re.compile(r"[a-z]+|\d+")
_ALLOWED_FILLERS = frozenset({"of", "the", "st", "nd", "rd", "th"})
_MONTH_PHRASE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789 ,")


def parse_when(
    text: str, *, now: datetime, tz: str | ZoneInfo = "UTC"
) -> tuple[datetime, datetime]:
    """The half-open UTC range ``[start, end)`` that a date phrase means.

    Args:
        text: An ISO date or datetime, a phrase such as "yesterday", "monday",
            "last week", "3 days ago", "March 3", or a range of two of them
            joined by "..", "to", "until" or "between ... and ..." (both ends
            included).
        now: The current instant (timezone-aware); relative phrases count from it.
        tz: The time zone whose calendar days the phrase refers to.

    Returns:
        ``(start, end)``, aware UTC datetimes with ``start < end``.

    Raises:
        DateParseError: ``text`` is not one of the accepted forms, names an
            impossible date (2025-02-30), or a range ends before it starts.
        ConfigError: ``now`` is naive or ``tz`` is not a known time zone.
    """
    zone = _zone(tz)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ConfigError("parse_when needs a timezone-aware 'now'")
    if not isinstance(text, str):
        raise DateParseError(
            f"date must be text, got {type(text).__name__}; {_forms()}", field="when"
        )
    phrase = " ".join(text.strip().lower().split()).rstrip(".")
    if not phrase:
        raise DateParseError(f"empty date; {_forms()}", field="when")
    if len(phrase) > MAX_PHRASE_LENGTH:
        raise DateParseError(
            f"date phrase longer than {MAX_PHRASE_LENGTH} characters: {text[:40]!r}...; {_forms()}",
            field="when",
        )
    local_now = now.astimezone(zone)
    try:
        start, end = _parse_any(phrase, local_now, zone)
    except DateParseError as exc:
        raise DateParseError(
            f"cannot read date {text!r}: {exc}; {_forms()}", field="when"
        ) from None
    except (ValueError, OverflowError):
        # Dates past year 9999 or before year 1 ("99999 days ago").
        raise DateParseError(
            f"no such date, or out of range: {text!r}; {_forms()}", field="when"
        ) from None
    return start.astimezone(UTC), end.astimezone(UTC)


def _forms() -> str:
    return f"accepted forms: {ACCEPTED_FORMS}"


def _zone(tz: str | ZoneInfo) -> ZoneInfo:
    if isinstance(tz, ZoneInfo):
        return tz
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ConfigError(f"unknown time zone {tz!r}", field="tz") from None


def _parse_any(phrase: str, now: datetime, zone: ZoneInfo) -> tuple[datetime, datetime]:
    match = _BETWEEN.match(phrase) or _RANGE_SPLIT.match(phrase)
    if match and not _ISO.match(phrase):
        first, _ = _parse_single(match.group(1).strip(), now, zone)
        _, last = _parse_single(match.group(2).strip(), now, zone)
        if last <= first:
            raise DateParseError("the range ends before it starts")
        return first, last
    return _parse_single(phrase, now, zone)


def _parse_single(phrase: str, now: datetime, zone: ZoneInfo) -> tuple[datetime, datetime]:
    if phrase.startswith("on "):
        phrase = phrase[3:].strip()
    for reader in _READERS:
        found = reader(phrase, now, zone)
        if found is not None:
            return found
    raise DateParseError("not a date this parser knows")


# -- calendar helpers (all in local dates, converted to instants at the edges) -----


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    # fold=0 picks the offset in force before a transition, which for a skipped
    # midnight is exactly the first instant of that day; for a repeated one, the first.
    return datetime.combine(day, time(), tzinfo=zone)


def _days(first: date, last: date, zone: ZoneInfo) -> tuple[datetime, datetime]:
    """Local calendar days ``first`` to ``last`` inclusive."""
    return _midnight(first, zone), _midnight(last + timedelta(days=1), zone)


def _month_start(year: int, month: int) -> date:
    return date(year, month, 1)


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + (day.month - 1) + months
    return date(index // 12, index % 12 + 1, 1)


def _month(first: date, zone: ZoneInfo) -> tuple[datetime, datetime]:
    return _midnight(first, zone), _midnight(_add_months(first, 1), zone)


def _week_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _count(word: str) -> int:
    value = _NUMBER_WORDS.get(word)
    if value is None:
        value = int(word)
    if value > MAX_COUNT:
        raise DateParseError(f"{value} is more than {MAX_COUNT}")
    return value


# -- readers: each returns a range or None when the phrase is not its shape ---------

_Range = tuple[datetime, datetime]


def _read_keyword(phrase: str, now: datetime, zone: ZoneInfo) -> _Range | None:
    today = now.date()
    if phrase == "today":
        return _days(today, today, zone)
    if phrase == "yesterday":
        day = today - timedelta(days=1)
        return _days(day, day, zone)
    if phrase in ("last week", "previous week", "past week"):
        if phrase == "past week":  # a rolling week: today and the six days before
            return _days(today - timedelta(days=6), today, zone)
        monday = _week_of(today) - timedelta(days=7)
        return _days(monday, monday + timedelta(days=6), zone)
    if phrase == "this week":
        monday = _week_of(today)
        return _days(monday, monday + timedelta(days=6), zone)
    if phrase in ("last month", "previous month"):
        return _month(_add_months(today.replace(day=1), -1), zone)
    if phrase == "this month":
        return _month(today.replace(day=1), zone)
    if phrase in ("last year", "previous year"):
        return _midnight(date(today.year - 1, 1, 1), zone), _midnight(date(today.year, 1, 1), zone)
    if phrase == "this year":
        return _midnight(date(today.year, 1, 1), zone), _midnight(date(today.year + 1, 1, 1), zone)
    return None


def _read_ago(phrase: str, now: datetime, zone: ZoneInfo) -> _Range | None:
    match = _AGO.fullmatch(phrase)
    if match is None:
        return None
    n, unit = _count(match.group(1)), match.group(2)
    today = now.date()
    if unit == "day":
        day = today - timedelta(days=n)
        return _days(day, day, zone)
    if unit == "week":  # the Monday-to-Sunday week that held the day N weeks back
        monday = _week_of(today - timedelta(weeks=n))
        return _days(monday, monday + timedelta(days=6), zone)
    return _month(_add_months(today.replace(day=1), -n), zone)


def _read_past(phrase: str, now: datetime, zone: ZoneInfo) -> _Range | None:
    match = _PAST.fullmatch(phrase)
    if match is None:
        return None
    n, unit = _count(match.group(1)), match.group(2)
    if n < 1:
        raise DateParseError("the number of days must be at least 1")
    days = n if unit == "day" else 7 * n
    today = now.date()
    # Today counts as one of the N days: "past 7 days" is today and the 6 before.
    return _days(today - timedelta(days=days - 1), today, zone)


def _read_weekday(phrase: str, now: datetime, zone: ZoneInfo) -> _Range | None:
    match = _WEEKDAY.fullmatch(phrase)
    if match is None or match.group(2) not in _WEEKDAYS:
        return None
    target = _WEEKDAYS[match.group(2)]
    today = now.date()
    if match.group(1) == "this":
        day = _week_of(today) + timedelta(days=target)
    else:
        back = (today.weekday() - target) % 7 or 7  # never today itself
        day = today - timedelta(days=back)
    return _days(day, day, zone)


def _read_iso(phrase: str, now: datetime, zone: ZoneInfo) -> _Range | None:
    match = _ISO.fullmatch(phrase)
    if match is None:
        return None
    year, month, day, hour, minute, second, offset = match.groups()
    if day is None:
        first = date(int(year), int(month or 1), 1)  # ValueError for month 13
        if month is None:
            return _midnight(first, zone), _midnight(date(first.year + 1, 1, 1), zone)
        return _month(first, zone)
    if hour is None:
        one = date.fromisoformat(f"{year}-{month}-{day}")
        return _days(one, one, zone)
    try:
        moment = _dateutil().isoparse(phrase.upper())
    except ValueError:
        raise DateParseError("not a valid ISO date and time") from None
    if offset is None:
        moment = moment.replace(tzinfo=zone)
    step = (
        timedelta(seconds=1) if second else timedelta(minutes=1) if minute else timedelta(hours=1)
    )
    start = moment.astimezone(UTC)
    return start, start + step


def _read_month_name(phrase: str, now: datetime, zone: ZoneInfo) -> _Range | None:
    words = _WORD.findall(phrase)
    months = [w for w in words if w in _MONTHS]
    if len(months) != 1:
        return None
    weekdays = [w for w in words if w in _WEEKDAYS]
    numbers = [w for w in words if w.isdigit()]
    others = [w for w in words if w not in _MONTHS and w not in _WEEKDAYS and not w.isdigit()]
    if others and not set(others) <= _ALLOWED_FILLERS:
        return None
    if len(weekdays) > 1 or not set(phrase) <= _MONTH_PHRASE_CHARS or not _numbers_ok(numbers):
        return None
    month = _MONTHS[months[0]]
    if not numbers:  # "march": the most recent March that has begun
        today = now.date()
        year = today.year if month <= today.month else today.year - 1
        return _month(date(year, month, 1), zone)
    parts = _dateutil_parts(" ".join(w for w in words if w not in _ALLOWED_FILLERS))
    for number in numbers:  # dateutil reads "march 32" as March 2032: hold it to our reading
        if parts.get("day" if len(number) <= 2 else "year") != int(number):
            raise DateParseError("no such date")
    if parts.get("month") != month or "hour" in parts or "minute" in parts:
        return None
    if "day" not in parts:  # "march 2024"
        if "year" not in parts:
            return None
        return _month(date(parts["year"], month, 1), zone)
    day_of_month = parts["day"]
    if "year" in parts:
        found = date(parts["year"], month, day_of_month)
    else:
        found = _latest(month, day_of_month, now.date())
    if weekdays and found.weekday() != _WEEKDAYS[weekdays[0]]:
        raise DateParseError(f"{found.isoformat()} is not a {weekdays[0]}")
    return _days(found, found, zone)


def _numbers_ok(numbers: list[str]) -> bool:
    """At most one day (1-2 digits) and one year (4 digits)."""
    days = [n for n in numbers if len(n) <= 2]
    years = [n for n in numbers if len(n) == 4]
    return len(days) <= 1 and len(years) <= 1 and len(days) + len(years) == len(numbers)


def _dateutil_parts(phrase: str) -> dict[str, int]:
    """The fields dateutil actually read: those equal under two different defaults."""
    # Both default years are leap years so "feb 29" survives; days 1 and 2 exist in every month.
    first_default = datetime(2000, 1, 1, 0, 0, 0)  # noqa: DTZ001 - naive on purpose: fields only
    second_default = datetime(2004, 2, 2, 1, 1, 1)  # noqa: DTZ001
    try:
        first = _dateutil().parse(phrase, default=first_default)
        second = _dateutil().parse(phrase, default=second_default)
    except (_dateutil().ParserError, ValueError, OverflowError):
        raise DateParseError("no such date") from None
    parts: dict[str, int] = {}
    for field in ("year", "month", "day", "hour", "minute"):
        if getattr(first, field) == getattr(second, field):
            parts[field] = getattr(first, field)
    return parts


def _latest(month: int, day: int, today: date) -> date:
    """The most recent ``month``/``day`` not after ``today`` (Feb 29 looks back to a leap year)."""
    for year in range(today.year, today.year - 9, -1):
        try:
            found = date(year, month, day)
        except ValueError:
            continue
        if found <= today:
            return found
    raise DateParseError(f"no such date: month {month}, day {day}")


_READERS: tuple[Callable[[str, datetime, ZoneInfo], _Range | None], ...] = (
    _read_keyword,
    _read_iso,
    _read_ago,
    _read_past,
    _read_weekday,
    _read_month_name,
)


def _dateutil() -> Any:
    """``dateutil.parser``, imported on the first date phrase that needs it."""
    from dateutil import parser

    return parser
