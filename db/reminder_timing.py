"""When a reminder goes, called or texted: its lead time before the appointment (never
in the past), moved to the first moment the clinic's business hours, the patient's 8 am
to 9 pm and the clinic's closures all allow, so no reminder comes at night. None when
no such moment comes before the appointment starts.

The same rule as a promised call's (`db.calling_window.next_calling_time` over
`db.promised_calls.clinic_window`), in the patient's timezone, else the location's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from db import scheduling
from db.calling_window import DailyWindow, next_calling_time
from db.opening import Closure
from db.promised_calls import clinic_window
from db.scheduling import Location


@dataclass(frozen=True)
class ClinicHours:
    """A clinic's live locations (by id) and the closures from yesterday on."""

    places: dict[str, Location]
    closures: list[Closure]


async def clinic_hours(pool: asyncpg.Pool, service_id: str, now: datetime) -> ClinicHours:
    places = {loc.id: loc for loc in await scheduling.locations(pool, service_id)}
    closures = await scheduling.closures(pool, service_id, now.date() - timedelta(days=1))
    return ClinicHours(places, closures)


@dataclass(frozen=True)
class ReminderTime:
    due: datetime  # lead hours before the appointment, not before now
    at: datetime  # the first moment from `due` the hours allow; before the appointment
    window: DailyWindow  # the clinic's business hours, in `timezone`
    timezone: str  # the patient's, else the location's


def reminder_time(hours: ClinicHours, *, location_id: str, patient_timezone: str | None,
                  starts_at: datetime, lead: timedelta, now: datetime) -> ReminderTime | None:
    """When the reminder of an appointment at `location_id` starting at `starts_at` goes;
    None for a retired location or no moment before the appointment."""
    place = hours.places.get(location_id)
    if place is None:
        return None
    zone = patient_timezone or place.timezone
    window = clinic_window([place], zone)
    due = max(now, starts_at - lead)
    at = next_calling_time(due, task_window=window, patient_timezone=zone, places=[place],
                           closures=hours.closures)
    if at is None or at >= starts_at:
        return None
    return ReminderTime(due, at, window, zone)
