"""Reminder calls: a `reminder` task for each upcoming appointment a clinic's campaign
covers, due `lead_hours` before it starts.

A periodic sweep (`reminder_sweep`, every few minutes) makes them for appointments
starting within the lead time plus one sweep interval, so each task exists before it is
due. A reminder is never due in the past nor after its appointment, is dialled within
the clinic's business hours, and is made once per appointment however often the sweep
runs (a unique index). A cancelled appointment gets none, and a reminder still waiting
when its appointment is cancelled is called off (`db/waitlist.slot_freed`).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import asyncpg

from db import outbound, scheduling
from db.calling_window import next_calling_time
from db.promised_calls import clinic_window
from db.reminder_campaigns import Campaign, enabled_campaigns

SWEEP_JOB = "reminder_sweep"
REMINDER_PRIORITY = 4
REMINDER_ATTEMPTS, REMINDER_BACKOFF_MIN = 3, 60


async def sweep_reminders(pool: asyncpg.Pool, now: datetime, *,
                          interval: timedelta) -> list[str]:
    """Make the reminder tasks every enabled campaign is due; their ids."""
    made: list[str] = []
    for campaign in await enabled_campaigns(pool):
        made += await remind(pool, campaign, now, interval=interval)
    return made


async def remind(pool: asyncpg.Pool, campaign: Campaign, now: datetime, *,
                 interval: timedelta) -> list[str]:
    """The campaign's reminder tasks for live appointments of its types starting within
    its lead time (plus `interval`) that have none yet, skipping patients who asked not
    to be called or have no number, and appointments no call can reach in time."""
    lead = timedelta(hours=campaign.lead_hours)
    rows = await pool.fetch(
        """SELECT a.id, a.patient_id, a.starts_at, a.location_id, p.timezone,
                  t.name AS type_name
           FROM appointments a
           JOIN locations l ON l.id = a.location_id
           JOIN patients p ON p.id = a.patient_id
           JOIN appointment_types t ON t.id = a.appointment_type_id
           WHERE l.service_id = $1 AND p.workspace_id = $2 AND a.status = ANY($3)
             AND a.starts_at > $4 AND a.starts_at <= $5
             AND (cardinality($6::uuid[]) = 0 OR a.appointment_type_id = ANY($6::uuid[]))
             AND NOT p.do_not_call AND p.phone IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM do_not_call_numbers d
                             WHERE d.workspace_id = p.workspace_id AND d.phone = p.phone)
             AND NOT EXISTS (SELECT 1 FROM outbound_tasks o
                             WHERE o.kind = 'reminder' AND o.appointment_id = a.id)
           ORDER BY a.starts_at""",
        uuid.UUID(campaign.service_id), uuid.UUID(campaign.workspace_id),
        list(scheduling.LIVE), now, now + lead + interval,
        [uuid.UUID(t) for t in campaign.appointment_type_ids])
    if not rows:
        return []
    places = {loc.id: loc for loc in await scheduling.locations(pool, campaign.service_id)}
    closures = await scheduling.closures(pool, campaign.service_id,
                                         now.date() - timedelta(days=1))
    made: list[str] = []
    async with pool.acquire() as conn:
        for row in rows:
            place = places.get(str(row["location_id"]))
            if place is None:
                continue
            zone = row["timezone"] or place.timezone
            window = clinic_window([place], zone)
            due = max(now, row["starts_at"] - lead)
            at = next_calling_time(due, task_window=window, patient_timezone=zone,
                                   places=[place], closures=closures)
            if at is None or at >= row["starts_at"]:
                continue  # no calling time before the appointment
            spec = outbound.TaskSpec(
                workspace_id=campaign.workspace_id, service_id=campaign.service_id,
                kind="reminder", reason=f"Reminder of their {row['type_name']} appointment",
                goal="Remind them of the appointment; confirm, cancel or move it as they ask",
                timezone=zone, not_before=due, priority=REMINDER_PRIORITY,
                patient_id=str(row["patient_id"]), window_start=window.start,
                window_end=window.end, window_days=window.days,
                max_attempts=REMINDER_ATTEMPTS, retry_backoff_minutes=REMINDER_BACKOFF_MIN,
                written_by="reminder_campaign", appointment_id=str(row["id"]))
            try:
                async with conn.transaction():  # a sweep running beside this one made it
                    made.append(await outbound.create_task(conn, spec))
            except asyncpg.UniqueViolationError:
                continue
    return made
