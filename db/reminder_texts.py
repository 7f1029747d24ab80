"""Reminder texts: for a campaign that texts, one `reminder_text` job per upcoming
appointment it covers, run when its reminder is due (`db/reminder_timing.py`: lead
hours before, never at night, never once the appointment has started), and what that
job reads when it runs (`to_send`).

Covered: a live appointment of the campaign's types starting within its lead time (plus
one sweep interval), whose patient has a phone and did not text STOP, with no reminder
text and no reminder call yet. Texts are not calls: a patient who asked not to be
called is still texted; one who texted STOP is not. The job's dedupe key keeps one job
per appointment while it waits or runs, the text's record one text after it
(`db/text_messages.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from db import jobs, scheduling
from db.reminder_campaigns import Campaign
from db.reminder_timing import due_reminders
from db.repositories import as_uuid
from db.scheduling import Appointment

TEXT_JOB = "reminder_text"


def text_key(appointment_id: str) -> str:
    """The dedupe key of an appointment's reminder text job."""
    return f"{TEXT_JOB}:{appointment_id}"


async def queue_texts(pool: asyncpg.Pool, campaign: Campaign, now: datetime, *,
                      interval: timedelta) -> list[int]:
    """Queue a reminder text job for each appointment the campaign covers that has none
    yet; the new jobs' ids (one already waiting is not queued twice)."""
    queued: list[int] = []
    for row, when in await due_reminders(pool, campaign, now, interval=interval,
                                         channel="text"):
        appointment_id = str(row["id"])
        job_id = await jobs.enqueue(pool, TEXT_JOB, {"appointment_id": appointment_id},
                                    delay=when.at - now, dedupe_key=text_key(appointment_id))
        if job_id is not None:
            queued.append(job_id)
    return queued


@dataclass(frozen=True)
class ReminderText:
    """What an appointment's reminder text needs, read when it is sent."""

    workspace_id: str
    patient_id: str
    phone: str
    clinic_name: str
    clinic_number: str | None  # the clinic's first number; None: it has none
    appointment: Appointment


async def to_send(pool: asyncpg.Pool, appointment_id: str, now: datetime) -> ReminderText | None:
    """The appointment's reminder text as things stand; None when none is to go: the
    appointment is cancelled, moved or under way, its patient has no phone, or its
    clinic's campaign is off or calls instead."""
    row = await pool.fetchrow(
        """SELECT p.workspace_id, a.patient_id, p.phone, s.name AS clinic_name,
                  (SELECT n.phone_number FROM service_numbers n WHERE n.service_id = s.id
                   ORDER BY n.created_at, n.phone_number LIMIT 1) AS clinic_number
           FROM appointments a
           JOIN patients p ON p.id = a.patient_id
           JOIN locations l ON l.id = a.location_id
           JOIN services s ON s.id = l.service_id
           JOIN reminder_campaigns c ON c.service_id = s.id AND c.enabled
                                    AND c.channel = 'text'
           WHERE a.id = $1 AND a.status = ANY($2) AND a.starts_at > $3
             AND p.phone IS NOT NULL""",
        as_uuid(appointment_id), list(scheduling.LIVE), now)
    if row is None:
        return None
    appointment = await scheduling.get_appointment(pool, appointment_id)
    if appointment is None:
        return None
    return ReminderText(str(row["workspace_id"]), str(row["patient_id"]), row["phone"],
                        row["clinic_name"], row["clinic_number"], appointment)
