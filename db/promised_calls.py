"""When a call the clinic promises can come: the clinic's business hours as a task's
daily window, and the first moment the dispatcher may dial it.

A promise is only as good as the time it names, so the time told to a caller is the
one the dispatcher will use: `db.calling_window.next_calling_time` over the task's
window, the callee's calling hours and the clinic's opening hours and closures, in the
callee's timezone: the patient's when their record has one, else the dialled
location's, else the clinic's first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg

from db import scheduling, world
from db.calling_window import DailyWindow, calling_hours, next_calling_time
from db.opening import Closure, Place, weekly_blocks
from db.scheduling import Location, dialled_location
from language.spoken import say_calling_time

BUSINESS_HOURS = (time(9), time(17))  # a clinic with no opening hours on record
WEEKDAYS = (0, 1, 2, 3, 4)
# Said when no calling time is found in the weeks ahead (the clinic closed throughout):
# the task still waits for the next time the clinic is open.
WHEN_OPEN_AGAIN = "once the clinic is open again"


def clinic_window(places: Sequence[Place], timezone: str) -> DailyWindow:
    """The clinic's business hours as one daily window in `timezone`: from the earliest
    opening to the latest closing of its locations in that timezone, on the days any of
    them opens. When its hours are kept in another timezone the window is the callee's
    calling hours (each location's own hours are checked when the call is placed); with
    no hours on record, 9 to 5 on weekdays."""
    blocks = [(day, block) for place in places if place.timezone == timezone
              for day in range(7) for block in weekly_blocks(place.opening_hours, day)]
    if not blocks:
        if any(place.opening_hours for place in places):
            return calling_hours(timezone)
        return DailyWindow(*BUSINESS_HOURS, WEEKDAYS, timezone)
    start = min(opens for _, (opens, _) in blocks)
    end = max(closes for _, (_, closes) in blocks)
    return DailyWindow(start, end, tuple(sorted({day for day, _ in blocks})), timezone)


@dataclass(frozen=True)
class CallPlan:
    """When a promised call can come: `at` is the first moment it may be dialled."""

    timezone: str  # the callee's
    window: DailyWindow
    at: datetime | None  # None: no calling time in the weeks ahead
    places: Sequence[Location] = ()
    closures: Sequence[Closure] = ()

    def from_(self, after: datetime) -> CallPlan:
        """The same call, no sooner than `after`."""
        return replace(self, at=next_calling_time(
            after, task_window=self.window, patient_timezone=self.timezone,
            places=self.places, closures=self.closures))

    def not_before(self, now: datetime) -> datetime:
        return self.at or now

    def when(self, now: datetime) -> str:
        """'tomorrow morning from 9 AM': the time as the callee hears it, in their zone."""
        if self.at is None:
            return WHEN_OPEN_AGAIN
        return say_calling_time(self.at.astimezone(ZoneInfo(self.timezone)), now)


@dataclass(frozen=True)
class Callee:
    """Whom a promised call is for, and what the call already knows of the clinic (empty
    `places`: read from the database)."""

    service_id: str | None
    patient_id: str | None = None
    patient_timezone: str | None = None  # from the chart the call loaded, when it did
    dialled_number: str | None = None
    places: Sequence[Location] = ()
    closures: Sequence[Closure] = ()


async def plan_call(pool: asyncpg.Pool, callee: Callee, now: datetime, *,
                    hours: tuple[time, time, tuple[int, ...]] | None = None) -> CallPlan:
    """The plan for a call to `callee` from `now`: within `hours` (start, end, weekdays)
    in their timezone when given, else the clinic's business hours."""
    places, closures = await clinic_calendar(pool, callee, now)
    zone = await callee_timezone(pool, callee, places)
    window = DailyWindow(*hours, zone) if hours else clinic_window(places, zone)
    return CallPlan(zone, window, None, places, closures).from_(now)


async def clinic_calendar(pool: asyncpg.Pool, callee: Callee, now: datetime
                          ) -> tuple[Sequence[Location], Sequence[Closure]]:
    """The clinic's locations and closures: as the call loaded them, else read now."""
    if callee.places or not callee.service_id:
        return callee.places, callee.closures
    return (await scheduling.locations(pool, callee.service_id),
            await scheduling.closures(pool, callee.service_id,
                                      now.date() - timedelta(days=1)))


async def callee_timezone(pool: asyncpg.Pool, callee: Callee,
                          places: Sequence[Location]) -> str:
    """The patient's timezone, else the dialled location's, else the clinic's first
    location's (UTC with none)."""
    if callee.patient_id is not None:
        zone = callee.patient_timezone
        if zone is None:
            records = await world.patients_by_ids(pool, [callee.patient_id])
            zone = records[0].timezone if records else None
        if zone:
            return zone
    place = dialled_location(places, callee.dialled_number) or (places[0] if places else None)
    return place.timezone if place is not None else "UTC"
