"""When a clinic is open: each location's weekly opening hours minus its closures (pure).

Opening hours are local wall-clock times in the location's timezone
(`{"mon": ["08:00", "17:00"], ...}`; a day left out is closed; "24:00" ends at
midnight). A closure shuts one location, or every location of the clinic, for whole
local days, both ends included. Every moment given here is timezone-aware and is read
in the location's own timezone, so 8 AM stays 8 AM across a daylight-saving change and
a server on UTC answers for a clinic in Denver as Denver sees it. Searches for the next
opening are bounded: nothing within the bound is an honest "not known", never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

DAY_KEYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# How far ahead the next opening is looked for.
SEARCH_DAYS = 60
# How far ahead closures are worth telling a caller about.
UPCOMING_DAYS = 14


class Place(Protocol):
    """A location as the calendar needs it (db.scheduling.Location is one)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def opening_hours(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Closure:
    """Whole local days a location (None: every location) is closed, with the reason."""

    location_id: str | None
    starts_on: date
    ends_on: date  # inclusive
    reason: str

    def covers(self, day: date, location_id: str | None) -> bool:
        """Closed on `day` at that location (a clinic-wide closure covers every one)."""
        return (self.starts_on <= day <= self.ends_on
                and (self.location_id is None or self.location_id == location_id))


@dataclass(frozen=True)
class Opening:
    """When a place next opens (aware, in its own timezone)."""

    place: Place
    at: datetime


@dataclass(frozen=True)
class Status:
    """Open or not at a moment, for one place or several taken together."""

    open: bool
    open_places: tuple[Place, ...]  # the places open now, each with `closes`
    closes: tuple[datetime, ...]  # when each open place closes, in the same order
    next_opening: Opening | None  # when closed: the earliest opening (None: none in bound)
    closure: Closure | None  # when closed: the closure that keeps every place shut, if any


def _clock(text: str) -> time:
    if text in ("24:00", "24:00:00"):
        return time.max
    return time.fromisoformat(text)


def weekly_blocks(opening_hours: Mapping[str, Any], weekday: int) -> list[tuple[time, time]]:
    """The opening hours on a weekday (0 = Monday) as blocks; [] when closed."""
    hours = opening_hours.get(DAY_KEYS[weekday]) or []
    if len(hours) != 2:
        return []
    opens, closes = _clock(str(hours[0])), _clock(str(hours[1]))
    return [(opens, closes)] if opens < closes else []


def closure_on(closures: Iterable[Closure], day: date, location_id: str | None) -> Closure | None:
    """The closure that shuts that location on that day (a clinic-wide one first)."""
    covering = [c for c in closures if c.covers(day, location_id)]
    return min(covering, key=lambda c: c.location_id is not None, default=None)


def blocks_on(place: Place, day: date, closures: Iterable[Closure] = ()
              ) -> list[tuple[datetime, datetime]]:
    """The place's open hours on a local day as aware times; [] when it is closed."""
    if closure_on(closures, day, place.id) is not None:
        return []
    zone = ZoneInfo(place.timezone)
    return [(datetime.combine(day, start, zone),
             datetime.combine(day, end, zone) if end != time.max
             else datetime.combine(day + timedelta(days=1), time(), zone))
            for start, end in weekly_blocks(place.opening_hours, day.weekday())]


def local_day(place: Place, moment: datetime) -> date:
    """The date it is at the place at that moment."""
    return moment.astimezone(ZoneInfo(place.timezone)).date()


def closes_at(place: Place, moment: datetime, closures: Iterable[Closure] = ()
              ) -> datetime | None:
    """When the place closes if it is open at `moment`; None when it is closed then."""
    closures = list(closures)
    today = local_day(place, moment)
    for day in (today - timedelta(days=1), today):  # a block ending at midnight
        for start, end in blocks_on(place, day, closures):
            if start <= moment < end:
                return end
    return None


def is_open(place: Place, moment: datetime, closures: Iterable[Closure] = ()) -> bool:
    return closes_at(place, moment, closures) is not None


def next_opening(place: Place, moment: datetime, closures: Iterable[Closure] = (), *,
                 within_days: int = SEARCH_DAYS) -> datetime | None:
    """The first time at or after `moment` the place opens, skipping closed days and
    closures; None when it does not open within `within_days`."""
    closures = list(closures)
    today = local_day(place, moment)
    for offset in range(within_days + 1):
        for start, _end in blocks_on(place, today + timedelta(days=offset), closures):
            if start >= moment:
                return start
    return None


def earliest_opening(places: Sequence[Place], moment: datetime,
                     closures: Iterable[Closure] = (), *,
                     within_days: int = SEARCH_DAYS) -> Opening | None:
    """The earliest next opening of any of the places (the clinic's, given them all)."""
    closures = list(closures)
    found = [Opening(place, at) for place in places
             if (at := next_opening(place, moment, closures, within_days=within_days))]
    return min(found, key=lambda opening: opening.at, default=None)


def status(places: Sequence[Place], moment: datetime, closures: Iterable[Closure] = (),
           *, within_days: int = SEARCH_DAYS) -> Status:
    """Whether any of the places is open at `moment` (the clinic is closed only when every
    location is); when closed, the next opening and the closure behind it, if one is."""
    closures = list(closures)
    open_now = [(place, end) for place in places
                if (end := closes_at(place, moment, closures)) is not None]
    if open_now:
        return Status(True, tuple(p for p, _ in open_now), tuple(e for _, e in open_now),
                      None, None)
    opening = earliest_opening(places, moment, closures, within_days=within_days)
    return Status(False, (), (), opening, _closure_behind(places, moment, opening, closures))


def _closure_behind(places: Sequence[Place], moment: datetime, opening: Opening | None,
                    closures: list[Closure]) -> Closure | None:
    """The closure shutting every one of the places on a day from today until the day it
    opens again (today first): why the clinic is closed, beyond its usual hours."""
    if not places:
        return None
    today = local_day(places[0], moment)
    last = (local_day(places[0], opening.at) - timedelta(days=1) if opening is not None
            else today + timedelta(days=SEARCH_DAYS))
    day = today
    while day <= last:
        shut = [closure_on(closures, day, place.id) for place in places]
        if all(shut):
            return shut[0]
        day += timedelta(days=1)
    return None


def upcoming_closures(closures: Iterable[Closure], today: date, *,
                      days: int = UPCOMING_DAYS) -> list[Closure]:
    """Closures that overlap the next `days` days from `today`, soonest first."""
    last = today + timedelta(days=days - 1)
    return sorted((c for c in closures if c.ends_on >= today and c.starts_on <= last),
                  key=lambda c: (c.starts_on, c.location_id is not None))
