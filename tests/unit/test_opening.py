"""When a clinic is open: weekly hours minus closures, in each location's own timezone."""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from db.opening import (
    Closure,
    closes_at,
    closure_on,
    earliest_opening,
    is_open,
    next_opening,
    status,
    upcoming_closures,
)

CHICAGO = ZoneInfo("America/Chicago")
WEEKDAYS_8_TO_5 = {day: ["08:00", "17:00"] for day in ("mon", "tue", "wed", "thu", "fri")}


@dataclass(frozen=True)
class Place:
    id: str
    name: str
    timezone: str = "America/Chicago"
    opening_hours: dict = field(default_factory=lambda: dict(WEEKDAYS_8_TO_5))


DOWNTOWN = Place("downtown", "Downtown")
NORTHSIDE = Place("northside", "Northside", opening_hours={
    **{day: ["09:00", "17:00"] for day in ("mon", "tue", "wed", "thu")},
    "fri": ["09:00", "13:00"], "sat": ["09:00", "12:00"]})
CLINIC = [DOWNTOWN, NORTHSIDE]
TUESDAY = date(2026, 12, 1)


def chicago(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), CHICAGO)


def test_a_late_evening_call_finds_the_clinic_closed_until_the_next_morning():
    evening = chicago(TUESDAY, 22)
    assert not is_open(DOWNTOWN, evening)
    assert next_opening(DOWNTOWN, evening) == chicago(TUESDAY + timedelta(days=1), 8)
    found = status(CLINIC, evening)
    assert not found.open and found.closure is None
    assert (found.next_opening.place, found.next_opening.at) == (
        DOWNTOWN, chicago(TUESDAY + timedelta(days=1), 8))


def test_opening_and_closing_times_are_the_edges_of_the_day():
    assert is_open(DOWNTOWN, chicago(TUESDAY, 8))
    assert closes_at(DOWNTOWN, chicago(TUESDAY, 16, 59)) == chicago(TUESDAY, 17)
    assert not is_open(DOWNTOWN, chicago(TUESDAY, 17))
    assert not is_open(DOWNTOWN, chicago(TUESDAY, 7, 59))


def test_over_the_weekend_the_clinic_opens_first_thing_monday_where_it_opens_earliest():
    saturday_afternoon = chicago(date(2026, 12, 5), 14)  # Northside shut at noon
    assert is_open(NORTHSIDE, chicago(date(2026, 12, 5), 11))
    found = status(CLINIC, saturday_afternoon)
    assert not found.open
    assert (found.next_opening.place.name, found.next_opening.at) == (
        "Downtown", chicago(date(2026, 12, 7), 8))


def test_a_holiday_on_a_weekday_is_skipped_and_is_why_the_clinic_is_closed():
    thanksgiving = Closure(None, date(2026, 11, 26), date(2026, 11, 26), "Thanksgiving")
    on_the_day = chicago(date(2026, 11, 26), 10)
    assert not is_open(DOWNTOWN, on_the_day, [thanksgiving])
    found = status(CLINIC, on_the_day, [thanksgiving])
    assert not found.open and found.closure == thanksgiving
    assert found.next_opening.at == chicago(date(2026, 11, 27), 8)
    # the evening before, the clinic is closed for the night, and the holiday is why it
    # stays closed tomorrow
    eve = status(CLINIC, chicago(date(2026, 11, 25), 21), [thanksgiving])
    assert eve.next_opening.at == chicago(date(2026, 11, 27), 8)
    assert eve.closure == thanksgiving


def test_an_ordinary_night_has_no_closure_behind_it():
    next_week = Closure(None, date(2026, 12, 10), date(2026, 12, 10), "staff training")
    assert status(CLINIC, chicago(TUESDAY, 22), [next_week]).closure is None


def test_a_multi_day_closure_is_skipped_as_a_whole():
    holidays = Closure(None, date(2026, 12, 24), date(2026, 12, 26), "the holidays")
    wednesday_night = chicago(date(2026, 12, 23), 20)
    found = status(CLINIC, wednesday_night, [holidays])
    assert found.next_opening.at == chicago(date(2026, 12, 28), 8)  # Monday
    assert found.closure == holidays
    assert next_opening(NORTHSIDE, wednesday_night, [holidays]) == chicago(date(2026, 12, 28), 9)


def test_a_location_only_closure_leaves_the_other_location_open():
    training = Closure("northside", date(2026, 12, 7), date(2026, 12, 7), "staff training")
    monday_morning = chicago(date(2026, 12, 7), 10)
    assert not is_open(NORTHSIDE, monday_morning, [training])
    assert is_open(DOWNTOWN, monday_morning, [training])
    assert closure_on([training], date(2026, 12, 7), "northside") == training
    assert closure_on([training], date(2026, 12, 7), "downtown") is None
    found = status(CLINIC, monday_morning, [training])
    assert found.open and found.open_places == (DOWNTOWN,)
    # Northside alone opens again the day after
    assert next_opening(NORTHSIDE, monday_morning, [training]) == chicago(date(2026, 12, 8), 9)
    # and a closed clinic is not said to be closed for one location's training
    evening = status(CLINIC, chicago(date(2026, 12, 6), 20), [training])
    assert evening.closure is None


def test_a_clinic_wide_closure_is_found_before_a_location_one():
    wide = Closure(None, date(2026, 12, 7), date(2026, 12, 7), "a power cut")
    local = Closure("northside", date(2026, 12, 7), date(2026, 12, 8), "repairs")
    assert closure_on([local, wide], date(2026, 12, 7), "northside") == wide
    assert closure_on([local, wide], date(2026, 12, 8), "northside") == local


def test_a_closure_covering_the_whole_search_finds_no_opening_and_says_why():
    rebuilding = Closure(None, date(2026, 12, 1), date(2027, 6, 30), "rebuilding")
    found = status(CLINIC, chicago(TUESDAY, 10), [rebuilding])
    assert not found.open
    assert found.next_opening is None
    assert found.closure == rebuilding
    assert earliest_opening(CLINIC, chicago(TUESDAY, 10), [rebuilding]) is None
    # a bound that reaches past it finds the day it opens
    assert next_opening(DOWNTOWN, chicago(TUESDAY, 10), [rebuilding], within_days=220) == (
        chicago(date(2027, 7, 1), 8))


def test_a_clinic_in_denver_is_read_in_denver_time_from_a_utc_server_clock():
    denver = Place("denver", "Cherry Creek", "America/Denver")
    server_now = datetime(2026, 3, 10, 2, 30, tzinfo=UTC)  # 8:30 PM Monday in Denver
    assert not is_open(denver, server_now)
    opens = next_opening(denver, server_now)
    assert opens == datetime(2026, 3, 10, 8, 0, tzinfo=ZoneInfo("America/Denver"))
    assert opens.astimezone(UTC) == datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    # 3 PM UTC on that Tuesday is 9 AM in Denver: open
    assert is_open(denver, datetime(2026, 3, 10, 15, 0, tzinfo=UTC))


def test_across_a_daylight_saving_change_8_am_stays_8_am_local():
    london = Place("london", "Marylebone", "Europe/London")
    friday_evening_utc = datetime(2026, 3, 27, 18, 0, tzinfo=UTC)  # clocks go forward Sunday
    opens = next_opening(london, friday_evening_utc)
    assert opens.astimezone(ZoneInfo("Europe/London")).time() == time(8)
    assert opens.astimezone(UTC) == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)  # BST, UTC+1
    # a closure is on London's calendar day, whatever the UTC date
    monday = Closure(None, date(2026, 3, 30), date(2026, 3, 30), "a bank holiday")
    assert next_opening(london, friday_evening_utc, [monday]).astimezone(UTC) == datetime(
        2026, 3, 31, 7, 0, tzinfo=UTC)


def test_a_day_ending_at_midnight_is_open_until_midnight():
    late = Place("late", "Late clinic", opening_hours={"fri": ["18:00", "24:00"]})
    friday = date(2026, 12, 4)
    assert is_open(late, chicago(friday, 23, 30))
    assert closes_at(late, chicago(friday, 23, 30)) == chicago(friday + timedelta(days=1), 0)


def test_only_closures_in_the_coming_fortnight_are_upcoming():
    past = Closure(None, date(2026, 11, 20), date(2026, 11, 21), "a past one")
    running = Closure(None, date(2026, 11, 30), date(2026, 12, 2), "repairs")
    soon = Closure("northside", date(2026, 12, 10), date(2026, 12, 10), "training")
    later = Closure(None, date(2026, 12, 24), date(2026, 12, 26), "the holidays")
    found = upcoming_closures([later, soon, past, running], TUESDAY)
    assert found == [running, soon]
