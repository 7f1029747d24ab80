"""What the agent may promise about a call from the clinic: in whose timezone, in which
daily window, and when it will come.

The time a caller is told is the dispatcher's own rule (`db.promised_calls.first_call`)
on the clinic's opening hours and closures, in the callee's timezone: the patient's
when their record has one, else the dialled location's, else the clinic's first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg

from db import scheduling, world
from db.calling_window import DailyWindow
from db.opening import Closure
from db.promised_calls import clinic_window, first_call
from db.scheduling import Location
from flows.clinic_calendar import dialled_location
from flows.graph_session import GraphSession
from language.spoken import say_calling_time

# Said when no calling time is found in the weeks ahead (the clinic closed throughout):
# the task still waits for the next time the clinic is open.
WHEN_OPEN_AGAIN = "once the clinic is open again"


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
        return replace(self, at=first_call(after, window=self.window,
                                           callee_timezone=self.timezone, places=self.places,
                                           closures=self.closures))

    def not_before(self, now: datetime) -> datetime:
        return self.at or now

    def when(self, now: datetime) -> str:
        """'tomorrow morning from 9 AM': the time as the callee hears it, in their zone."""
        if self.at is None:
            return WHEN_OPEN_AGAIN
        return say_calling_time(self.at.astimezone(ZoneInfo(self.timezone)), now)


async def plan_call(
    session: GraphSession, pool: asyncpg.Pool, now: datetime, *,
    dialled_number: str | None = None,
    hours: tuple[time, time, tuple[int, ...]] | None = None,
) -> CallPlan:
    """The plan for a call to this session's caller from `now`: within `hours` (start,
    end, weekdays) in their timezone when given, else the clinic's business hours."""
    places, closures = await clinic_calendar(session, pool, now.date())
    zone = await callee_timezone(session, pool, places, dialled_number)
    window = DailyWindow(*hours, zone) if hours else clinic_window(places, zone)
    return CallPlan(zone, window, None, places, closures).from_(now)


async def clinic_calendar(session: GraphSession, pool: asyncpg.Pool, today: date
                          ) -> tuple[Sequence[Location], Sequence[Closure]]:
    """The clinic's locations and closures: as the call loaded them, else read now."""
    if session.locations or not session.service_id:
        return session.locations, session.closures
    return (await scheduling.locations(pool, session.service_id),
            await scheduling.closures(pool, session.service_id, today - timedelta(days=1)))


async def callee_timezone(session: GraphSession, pool: asyncpg.Pool,
                          places: Sequence[Location], dialled_number: str | None) -> str:
    """The identified patient's timezone, else the dialled location's, else the clinic's
    first location's (UTC with none)."""
    patient = session.patient
    if patient is not None:
        chart = session.chart
        if chart is not None and chart.patient.id == patient.id:
            zone = chart.patient.timezone
        else:
            records = await world.patients_by_ids(pool, [patient.id])
            zone = records[0].timezone if records else None
        if zone:
            return zone
    place = dialled_location(places, dialled_number) or (places[0] if places else None)
    return place.timezone if place is not None else "UTC"
