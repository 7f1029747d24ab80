"""Times, prices and hours are said the way a receptionist would say them."""

from datetime import datetime
from zoneinfo import ZoneInfo

from language.spoken import say_hours, say_list, say_price, say_time


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
