"""Times, prices and hours are said the way a receptionist would say them."""

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

from language.spoken import (
    say_calling_time,
    say_clock,
    say_day,
    say_days,
    say_hours,
    say_list,
    say_opening,
    say_price,
    say_time,
)


def test_times_prices_and_lists():
    zone = ZoneInfo("America/Chicago")
    assert say_time(datetime(2026, 12, 1, 9, 0, tzinfo=zone)) == "Tuesday, December 1 at 9 AM"
    assert say_time(datetime(2026, 12, 1, 14, 30, tzinfo=zone)) == "Tuesday, December 1 at 2:30 PM"
    assert (say_price(12000), say_price(8550)) == ("$120", "$85.50")
    assert say_list(["a", "b", "c"], "or") == "a, b or c"


def test_days_with_the_same_hours_are_said_once():
    week = {day: ["08:00", "17:00"] for day in ("mon", "tue", "wed")}
    week |= {"thu": ["08:00", "19:00"], "sat": ["09:00", "12:00"]}
    assert say_hours(week) == (
        "Monday to Wednesday 8 AM to 5 PM, Thursday 8 AM to 7 PM and Saturday 9 AM to 12 PM"
    )
    assert say_hours({}) == "by appointment only"


def test_the_next_opening_is_said_from_where_the_clinic_is():
    denver = ZoneInfo("America/Denver")
    monday_evening = datetime(2026, 3, 10, 2, 30, tzinfo=UTC)  # 8:30 PM Monday in Denver
    assert say_opening(datetime(2026, 3, 10, 8, tzinfo=denver), monday_evening) == (
        "tomorrow at 8 AM")  # already Tuesday on the server's clock, not in Denver
    assert say_opening(datetime(2026, 3, 9, 21, tzinfo=denver), monday_evening) == (
        "today at 9 PM")
    assert say_opening(datetime(2026, 3, 13, 8, 30, tzinfo=denver), monday_evening) == (
        "Friday at 8:30 AM")
    assert say_opening(datetime(2026, 3, 23, 8, tzinfo=denver), monday_evening) == (
        "Monday, March 23 at 8 AM")


def test_days_clock_times_and_date_ranges():
    today = date(2026, 12, 21)
    assert say_day(date(2026, 12, 24), today) == "Thursday"
    assert say_day(date(2026, 12, 24), today, with_date=True) == "Thursday, December 24"
    assert (say_clock(time(17)), say_clock(time(8, 30)), say_clock(time(0))) == (
        "5 PM", "8:30 AM", "12 AM")
    assert say_days(date(2026, 12, 24), date(2026, 12, 24)) == "December 24"
    assert say_days(date(2026, 12, 24), date(2026, 12, 26)) == "December 24 to 26"
    assert say_days(date(2026, 12, 30), date(2027, 1, 2)) == "December 30 to January 2"


def test_when_the_clinic_will_call_is_said_from_where_the_caller_is():
    chicago = ZoneInfo("America/Chicago")
    friday_noon = datetime(2026, 12, 4, 12, 0, tzinfo=chicago)
    said = {
        datetime(2026, 12, 4, 12, 5, tzinfo=chicago): "shortly",
        datetime(2026, 12, 4, 14, 7, tzinfo=chicago): "later today after 2 PM",
        datetime(2026, 12, 5, 9, 0, tzinfo=chicago): "tomorrow morning from 9 AM",
        datetime(2026, 12, 5, 13, 30, tzinfo=chicago): "tomorrow afternoon from 1:30 PM",
        datetime(2026, 12, 7, 9, 0, tzinfo=chicago): "on Monday from 9 AM",
        datetime(2026, 12, 14, 8, 0, tzinfo=chicago): "on Monday, December 14 from 8 AM",
    }
    assert {moment: say_calling_time(moment, friday_noon) for moment in said} == said
    # 11 PM Friday on a UTC server is still Friday afternoon in Chicago
    assert say_calling_time(datetime(2026, 12, 5, 9, tzinfo=chicago),
                            datetime(2026, 12, 4, 23, tzinfo=UTC)) == "tomorrow morning from 9 AM"
