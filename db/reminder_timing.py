"""When a reminder goes, called or texted: its lead time before the appointment (never
in the past), moved to the first moment the clinic's business hours, the patient's 8 am
to 9 pm and the clinic's closures all allow, so no reminder comes at night. None when
no such moment comes before the appointment starts.

The same rule as a promised call's (`db.calling_window.next_calling_time` over
`db.promised_calls.clinic_window`), in the patient's timezone, else the location's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from db import scheduling
from db.calling_window import DailyWindow, next_calling_time
from db.opening import Closure
from db.promised_calls import clinic_window
from db.reminder_campaigns import Campaign
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


# Whom a reminder can reach, by how it is sent: a call needs a patient and a number that
# may be called; a text a number that did not text STOP (a patient who asked not to be
# called is still texted).
REACHABLE = {
    "call": """NOT p.do_not_call
               AND NOT EXISTS (SELECT 1 FROM do_not_call_numbers d
                               WHERE d.workspace_id = p.workspace_id AND d.phone = p.phone)""",
    "text": """NOT EXISTS (SELECT 1 FROM text_opt_outs s
                           WHERE s.workspace_id = p.workspace_id AND s.phone = p.phone)""",
}


async def due_appointments(pool: asyncpg.Pool, campaign: Campaign, now: datetime, *,
                           interval: timedelta, channel: str) -> list[asyncpg.Record]:
    """The live appointments of the campaign's types starting within its lead time (plus
    `interval`) whose patient has a number the `channel` can reach, with no reminder yet
    (neither a call nor a text), soonest first."""
    lead = timedelta(hours=campaign.lead_hours)
    return await pool.fetch(
        f"""SELECT a.id, a.patient_id, a.starts_at, a.location_id, p.timezone,
                   t.name AS type_name
            FROM appointments a
            JOIN locations l ON l.id = a.location_id
            JOIN patients p ON p.id = a.patient_id
            JOIN appointment_types t ON t.id = a.appointment_type_id
            WHERE l.service_id = $1 AND p.workspace_id = $2 AND a.status = ANY($3)
              AND a.starts_at > $4 AND a.starts_at <= $5
              AND (cardinality($6::uuid[]) = 0 OR a.appointment_type_id = ANY($6::uuid[]))
              AND p.phone IS NOT NULL AND {REACHABLE[channel]}
              AND NOT EXISTS (SELECT 1 FROM outbound_tasks o
                              WHERE o.kind = 'reminder' AND o.appointment_id = a.id)
              AND NOT EXISTS (SELECT 1 FROM text_messages m
                              WHERE m.kind = 'reminder' AND m.appointment_id = a.id)
            ORDER BY a.starts_at""",
        uuid.UUID(campaign.service_id), uuid.UUID(campaign.workspace_id),
        list(scheduling.LIVE), now, now + lead + interval,
        [uuid.UUID(t) for t in campaign.appointment_type_ids])


async def due_reminders(pool: asyncpg.Pool, campaign: Campaign, now: datetime, *,
                        interval: timedelta, channel: str
                        ) -> list[tuple[asyncpg.Record, ReminderTime]]:
    """The appointments the campaign is due to remind by `channel` (`due_appointments`),
    each with when its reminder goes; one no daytime moment before its start can reach
    is left out."""
    rows = await due_appointments(pool, campaign, now, interval=interval, channel=channel)
    if not rows:
        return []
    hours = await clinic_hours(pool, campaign.service_id, now)
    lead = timedelta(hours=campaign.lead_hours)
    due = [(row, reminder_time(hours, location_id=str(row["location_id"]),
                               patient_timezone=row["timezone"], starts_at=row["starts_at"],
                               lead=lead, now=now)) for row in rows]
    return [(row, when) for row, when in due if when is not None]
