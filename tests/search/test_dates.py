from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import ConfigError, DateParseError
from engram.search.dates import parse_when

#: Wednesday 2025-03-05, 15:00 UTC.
NOW = datetime(2025, 3, 5, 15, 0, tzinfo=UTC)
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
]


def utc_days(first: str, last: str | None = None) -> tuple[datetime, datetime]:
    """[first 00:00 UTC, day after last 00:00 UTC)."""
    start = datetime.fromisoformat(first).replace(tzinfo=UTC)
    end = datetime.fromisoformat(last or first).replace(tzinfo=UTC) + timedelta(days=1)
    return start, end


class TestAcceptedForms:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2025-03-03", utc_days("2025-03-03")),
            ("  2025-03-03 ", utc_days("2025-03-03")),
            ("today", utc_days("2025-03-05")),
            ("Today", utc_days("2025-03-05")),
            ("yesterday", utc_days("2025-03-04")),
            ("monday", utc_days("2025-03-03")),
            ("on Monday", utc_days("2025-03-03")),
            ("last monday", utc_days("2025-03-03")),
            ("this monday", utc_days("2025-03-03")),
            ("wednesday", utc_days("2025-02-26")),  # today is Wednesday: a week ago
            ("this wednesday", utc_days("2025-03-05")),
            ("thu", utc_days("2025-02-27")),
            ("last week", utc_days("2025-02-24", "2025-03-02")),
            ("this week", utc_days("2025-03-03", "2025-03-09")),
            ("past week", utc_days("2025-02-27", "2025-03-05")),
            ("last month", utc_days("2025-02-01", "2025-02-28")),
            ("this month", utc_days("2025-03-01", "2025-03-31")),
            ("3 days ago", utc_days("2025-03-02")),
            ("0 days ago", utc_days("2025-03-05")),
            ("a day ago", utc_days("2025-03-04")),
            ("2 weeks ago", utc_days("2025-02-17", "2025-02-23")),
            ("1 month ago", utc_days("2025-02-01", "2025-02-28")),
            ("past 7 days", utc_days("2025-02-27", "2025-03-05")),
            ("last 3 days", utc_days("2025-03-03", "2025-03-05")),
            ("past 2 weeks", utc_days("2025-02-20", "2025-03-05")),
            ("March 3", utc_days("2025-03-03")),
            ("3 March", utc_days("2025-03-03")),
            ("3rd of March", utc_days("2025-03-03")),
            ("March 6", utc_days("2024-03-06")),  # not yet this year: last year's
            ("Mar 3 2024", utc_days("2024-03-03")),
            ("March 3, 2024", utc_days("2024-03-03")),
            ("Sunday, March 3 2024", utc_days("2024-03-03")),
            ("feb 29", utc_days("2024-02-29")),
            ("march 2024", utc_days("2024-03-01", "2024-03-31")),
            ("april", utc_days("2024-04-01", "2024-04-30")),
            ("2025-03", utc_days("2025-03-01", "2025-03-31")),
            ("2024", utc_days("2024-01-01", "2024-12-31")),
            ("2025-03-01..2025-03-05", utc_days("2025-03-01", "2025-03-05")),
            ("2025-03-01 .. 2025-03-05", utc_days("2025-03-01", "2025-03-05")),
            ("2025-03-01 to 2025-03-05", utc_days("2025-03-01", "2025-03-05")),
            ("from march 1 to march 3", utc_days("2025-03-01", "2025-03-03")),
            ("between monday and today", utc_days("2025-03-03", "2025-03-05")),
            ("2025-03-01 - 2025-03-02", utc_days("2025-03-01", "2025-03-02")),
        ],
    )
    def test_utc(self, text: str, expected: tuple[datetime, datetime]) -> None:
        assert parse_when(text, now=NOW) == expected

    def test_iso_datetime_has_its_precision(self) -> None:
        start, end = parse_when("2025-03-03T10:00Z", now=NOW)
        assert (start, end - start) == (datetime(2025, 3, 3, 10, tzinfo=UTC), timedelta(minutes=1))
        start, end = parse_when("2025-03-03 10", now=NOW)
        assert end - start == timedelta(hours=1)
        start, end = parse_when("2025-03-03T10:00:05+01:00", now=NOW)
        assert (start, end - start) == (
            datetime(2025, 3, 3, 9, 0, 5, tzinfo=UTC),
            timedelta(seconds=1),
        )

    def test_naive_iso_datetime_is_read_in_the_zone(self) -> None:
        start, _ = parse_when("2025-03-03T10:00", now=NOW, tz="Asia/Tokyo")
        assert start == datetime(2025, 3, 3, 1, 0, tzinfo=UTC)

    def test_results_are_utc(self) -> None:
        start, end = parse_when("yesterday", now=NOW, tz="Europe/Berlin")
        assert start.tzinfo is UTC and end.tzinfo is UTC

    def test_monday_asked_on_monday_is_a_week_ago(self) -> None:
        monday = datetime(2025, 3, 3, 12, tzinfo=UTC)
        assert parse_when("monday", now=monday) == utc_days("2025-02-24")
        assert parse_when("this monday", now=monday) == utc_days("2025-03-03")

    def test_last_week_on_sunday_and_monday(self) -> None:
        sunday = datetime(2025, 3, 9, 23, tzinfo=UTC)
        monday = datetime(2025, 3, 10, 0, 30, tzinfo=UTC)
        assert parse_when("last week", now=sunday) == utc_days("2025-02-24", "2025-03-02")
        assert parse_when("last week", now=monday) == utc_days("2025-03-03", "2025-03-09")

    def test_last_month_in_january(self) -> None:
        january = datetime(2025, 1, 15, tzinfo=UTC)
        assert parse_when("last month", now=january) == utc_days("2024-12-01", "2024-12-31")

    def test_zone_object_is_accepted(self) -> None:
        assert parse_when("today", now=NOW, tz=ZoneInfo("UTC")) == utc_days("2025-03-05")


class TestTimeZones:
    def test_today_is_the_local_day(self) -> None:
        # 02:00 UTC on March 5 is still March 4 in New York (EST, UTC-5).
        now = datetime(2025, 3, 5, 2, 0, tzinfo=UTC)
        start, end = parse_when("today", now=now, tz="America/New_York")
        assert start == datetime(2025, 3, 4, 5, 0, tzinfo=UTC)
        assert end == datetime(2025, 3, 5, 5, 0, tzinfo=UTC)

    def test_tokyo_is_ahead(self) -> None:
        now = datetime(2025, 3, 5, 20, 0, tzinfo=UTC)  # 05:00 on March 6 in Tokyo
        assert parse_when("yesterday", now=now, tz="Asia/Tokyo") == (
            datetime(2025, 3, 4, 15, 0, tzinfo=UTC),
            datetime(2025, 3, 5, 15, 0, tzinfo=UTC),
        )

    def test_spring_forward_day_lasts_23_hours(self) -> None:
        start, end = parse_when("2025-03-09", now=NOW, tz="America/New_York")
        assert start == datetime(2025, 3, 9, 5, 0, tzinfo=UTC)  # midnight EST
        assert end == datetime(2025, 3, 10, 4, 0, tzinfo=UTC)  # midnight EDT
        assert end - start == timedelta(hours=23)

    def test_fall_back_day_lasts_25_hours(self) -> None:
        start, end = parse_when("2025-11-02", now=NOW, tz="America/New_York")
        assert end - start == timedelta(hours=25)

    def test_yesterday_across_the_change(self) -> None:
        now = datetime(2025, 3, 31, 9, 0, tzinfo=UTC)  # Monday after Berlin's change
        start, end = parse_when("yesterday", now=now, tz="Europe/Berlin")
        assert start == datetime(2025, 3, 29, 23, 0, tzinfo=UTC)  # 00:00 CET
        assert end == datetime(2025, 3, 30, 22, 0, tzinfo=UTC)  # 00:00 CEST
        assert end - start == timedelta(hours=23)

    def test_week_spanning_a_change(self) -> None:
        now = datetime(2025, 3, 12, 15, tzinfo=UTC)
        start, end = parse_when("last week", now=now, tz="America/New_York")
        assert end - start == timedelta(days=7) - timedelta(hours=1)

    def test_skipped_midnight_starts_at_the_first_real_instant(self) -> None:
        # Sao Paulo, 2018-11-04: clocks jumped from 00:00 to 01:00.
        start, end = parse_when("2018-11-04", now=NOW, tz="America/Sao_Paulo")
        assert start == datetime(2018, 11, 4, 3, 0, tzinfo=UTC)
        assert end - start == timedelta(hours=23)


class TestRefusals:
    @pytest.mark.parametrize(
        "text",
        [
            "",
            "   ",
            "banana",
            "2025-02-30",
            "2025-13-01",
            "2025-03-3x",
            "march 32",
            "feb 30",
            "mar 0",
            "march 3 5",
            "march 3 10:00",
            "13/03/2025",
            "03/13/2025",
            "2025-03-05..2025-03-01",
            "99999 days ago",
            "past 0 days",
            "monday march 3 2024",  # March 3, 2024 was a Sunday
            "next monday please",
            "mayday",
            "x" * 500,
        ],
    )
    def test_raises_date_parse_error(self, text: str) -> None:
        with pytest.raises(DateParseError):
            parse_when(text, now=NOW)

    def test_message_names_the_input_and_the_forms(self) -> None:
        with pytest.raises(DateParseError) as caught:
            parse_when("banana", now=NOW)
        message = str(caught.value)
        assert "'banana'" in message
        assert "yesterday" in message and "2025-03-03" in message and "last week" in message

    def test_not_text(self) -> None:
        with pytest.raises(DateParseError):
            parse_when(20250303, now=NOW)  # type: ignore[arg-type]

    def test_naive_now_is_a_config_error(self) -> None:
        with pytest.raises(ConfigError):
            parse_when("today", now=datetime(2025, 3, 5))  # noqa: DTZ001

    def test_unknown_zone_is_a_config_error(self) -> None:
        with pytest.raises(ConfigError, match="Mars/Olympus"):
            parse_when("today", now=NOW, tz="Mars/Olympus")


# -- properties -------------------------------------------------------------------

nows = st.datetimes(
    min_value=datetime(1990, 1, 1),  # noqa: DTZ001 - hypothesis wants naive bounds
    max_value=datetime(2060, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)
zones = st.sampled_from(ZONES)
WORDS = [
    "today", "yesterday", "monday", "last", "this", "week", "month", "days", "ago",
    "past", "march", "3", "2024", "..", "to", "from", "between", "and", "of", "the",
    "2025-03-03", "sunday", "feb", "29", "-", ",", "t10:00", "a", "weeks",
]  # fmt: skip


class TestProperties:
    @settings(max_examples=200, deadline=None)
    @given(
        text=st.one_of(
            st.text(max_size=30), st.lists(st.sampled_from(WORDS), max_size=5).map(" ".join)
        ),
        now=nows,
        tz=zones,
    )
    def test_a_valid_range_or_date_parse_error(self, text: str, now: datetime, tz: str) -> None:
        try:
            start, end = parse_when(text, now=now, tz=tz)
        except DateParseError:
            return
        assert start.tzinfo is UTC and end.tzinfo is UTC
        assert start < end

    @settings(max_examples=200, deadline=None)
    @given(now=nows, tz=zones)
    def test_today_contains_now(self, now: datetime, tz: str) -> None:
        start, end = parse_when("today", now=now, tz=tz)
        assert start <= now < end
        assert timedelta(hours=22) <= end - start <= timedelta(hours=26)

    @settings(max_examples=200, deadline=None)
    @given(day=st.dates(min_value=date(1990, 1, 1), max_value=date(2060, 1, 1)), tz=zones)
    def test_an_iso_day_is_that_local_day(self, day: date, tz: str) -> None:
        zone = ZoneInfo(tz)
        start, end = parse_when(day.isoformat(), now=NOW, tz=tz)
        assert start.astimezone(zone).date() == day
        assert end.astimezone(zone).date() == day + timedelta(days=1)
        assert (end - timedelta(microseconds=1)).astimezone(zone).date() == day

    @settings(max_examples=200, deadline=None)
    @given(
        now=nows,
        tz=zones,
        weekday=st.sampled_from(
            ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        ),
    )
    def test_weekday_is_the_last_one_before_today(
        self, now: datetime, tz: str, weekday: str
    ) -> None:
        zone = ZoneInfo(tz)
        today = now.astimezone(zone).date()
        start, _ = parse_when(weekday, now=now, tz=tz)
        day = start.astimezone(zone).date()
        assert day.strftime("%A").lower() == weekday
        assert today - timedelta(days=7) <= day < today

    @settings(max_examples=100, deadline=None)
    @given(now=nows, tz=zones, n=st.integers(1, 400))
    def test_past_n_days(self, now: datetime, tz: str, n: int) -> None:
        zone = ZoneInfo(tz)
        start, end = parse_when(f"past {n} days", now=now, tz=tz)
        assert start <= now < end
        assert start.astimezone(zone).date() == now.astimezone(zone).date() - timedelta(days=n - 1)

    @settings(max_examples=100, deadline=None)
    @given(now=nows, tz=zones, month=st.integers(1, 12), day=st.integers(1, 28))
    def test_month_day_without_year_is_the_latest_not_in_the_future(
        self, now: datetime, tz: str, month: int, day: int
    ) -> None:
        zone = ZoneInfo(tz)
        today = now.astimezone(zone).date()
        name = date(2000, month, 1).strftime("%B")
        start, _ = parse_when(f"{name} {day}", now=now, tz=tz)
        found = start.astimezone(zone).date()
        assert (found.month, found.day) == (month, day)
        assert today - timedelta(days=366) < found <= today

    @settings(max_examples=100, deadline=None)
    @given(
        a=st.sampled_from(["monday", "yesterday", "2025-01-02", "last week", "3 days ago"]),
        b=st.sampled_from(["today", "yesterday", "2025-06-01", "this week"]),
        tz=zones,
    )
    def test_a_range_spans_its_ends(self, a: str, b: str, tz: str) -> None:
        first, last = parse_when(a, now=NOW, tz=tz), parse_when(b, now=NOW, tz=tz)
        if last[1] <= first[0]:
            with pytest.raises(DateParseError):
                parse_when(f"{a}..{b}", now=NOW, tz=tz)
            return
        for joined in (f"{a}..{b}", f"{a} to {b}", f"from {a} to {b}", f"between {a} and {b}"):
            assert parse_when(joined, now=NOW, tz=tz) == (first[0], last[1])
