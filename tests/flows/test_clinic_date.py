"""A caller's "tomorrow" is the clinic's tomorrow at every hour of the day, whatever the
server's clock and timezone: the engine reads the days a caller asks for against the
clinic's own date (its location's timezone), never UTC's or the server's. The demo
clinic is in Chicago; at 6:30 PM there it is already tomorrow in UTC, and a server in
Kiritimati (UTC+14) is a day ahead of Chicago at any hour.
"""

from __future__ import annotations

import time as clock
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from db.scheduling import Location
from flows.clinic_calendar import clinic_today
from tests.flows.callers import PRIYA_PHONE, call_from

CHICAGO = ZoneInfo("America/Chicago")
HOURS = [time(0, 30), time(4), time(9), time(18, 30), time(23, 30)]


def next_weekday(weekday: int) -> date:
    """That weekday, at least two days from now (its slots all still ahead)."""
    soon = date.today() + timedelta(days=2)
    return soon + timedelta(days=(weekday - soon.weekday()) % 7)


MONDAY, FRIDAY = next_weekday(0), next_weekday(4)


def in_chicago(day: date, at: time) -> datetime:
    """That clinic time, as the server's clock (UTC) reads it."""
    return datetime.combine(day, at, CHICAGO).astimezone(UTC)


def place(timezone: str, phone: str | None = None) -> Location:
    return Location("loc", "Downtown", timezone, "1 Main St", phone, {})


@pytest.fixture(params=["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago"])
def server_timezone(request, monkeypatch):
    """The server's own timezone, which must not matter."""
    monkeypatch.setenv("TZ", request.param)
    clock.tzset()
    yield request.param
    monkeypatch.undo()
    clock.tzset()


@pytest.mark.parametrize("at", HOURS)
def test_the_clinic_date_is_its_own_at_every_hour(at):
    moment = in_chicago(MONDAY, at)

    assert clinic_today([place("America/Chicago")], moment) == MONDAY
    assert clinic_today([], moment) == moment.date()  # no locations: UTC's


def test_the_dialled_location_sets_the_date():
    moment = in_chicago(MONDAY, time(23, 30))  # Tuesday 05:30 UTC, Tuesday 14:30 in Tokyo
    places = [place("America/Chicago"), place("Asia/Tokyo", "+15550100999")]

    assert clinic_today(places, moment) == MONDAY
    assert clinic_today(places, moment, "+15550100999") == MONDAY + timedelta(days=1)


@pytest.mark.parametrize("at", HOURS)
async def test_tomorrow_morning_is_the_clinics_tomorrow_morning_at_every_hour(
        db, clinic, server_timezone, at):
    moment = in_chicago(MONDAY, at)
    caller = await call_from(db, clinic, PRIYA_PHONE, now=lambda: moment)

    offered = await caller.says("I need a checkup tomorrow morning.")

    slots = [s.starts_at.astimezone(CHICAGO) for s in caller.engine.session.offered.values()]
    assert offered.startswith("I have Tuesday"), offered
    assert slots and all(s.date() == MONDAY + timedelta(days=1) and s.hour < 12 for s in slots)


@pytest.mark.parametrize("at", HOURS)
async def test_nothing_tomorrow_is_never_answered_with_today(db, clinic, at):
    # no annual physicals on Saturdays: the nearest after it, never Friday's
    moment = in_chicago(FRIDAY, at)
    caller = await call_from(db, clinic, PRIYA_PHONE, now=lambda: moment)

    await caller.says("I need a checkup tomorrow morning.")

    slots = [s.starts_at.astimezone(CHICAGO) for s in caller.engine.session.offered.values()]
    assert slots and min(s.date() for s in slots) > FRIDAY
    (search,) = caller.tool_calls("CheckAvailability")
    assert search.output.startswith("Nothing is open when they asked")
