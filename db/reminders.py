"""Reminders: for each upcoming appointment a clinic's campaign covers, a `reminder`
call task due `lead_hours` before it starts, or, for a campaign that texts, a
`reminder_text` job run then (`db/reminder_texts.py`).

A periodic sweep (`reminder_sweep`, every few minutes) makes them for appointments
starting within the lead time plus one sweep interval, so each exists before it is due.
A reminder is never due in the past nor after its appointment, goes within the clinic's
business hours (`db/reminder_timing.py`), and is made once per appointment however often
the sweep runs (a unique index). A cancelled appointment gets none, and a reminder call
still waiting when its appointment is cancelled is called off (`db/waitlist.slot_freed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from db import outbound
from db.reminder_campaigns import Campaign, enabled_campaigns
from db.reminder_texts import queue_texts
from db.reminder_timing import due_reminders

SWEEP_JOB = "reminder_sweep"
REMINDER_PRIORITY = 4
REMINDER_ATTEMPTS, REMINDER_BACKOFF_MIN = 3, 60


@dataclass(frozen=True)
class Swept:
    """What one sweep made: reminder call tasks and reminder text jobs (their ids), and
    the clinics whose campaign texts though this deployment cannot text."""

    tasks: list[str]
    text_jobs: list[int]
    untexted: list[str]


async def sweep_reminders(pool: asyncpg.Pool, now: datetime, *, interval: timedelta,
                          can_text: bool = True) -> Swept:
    """Make the reminders every enabled campaign is due. `can_text`: this deployment
    sends texts (else a campaign that texts makes nothing, and is named)."""
    tasks: list[str] = []
    text_jobs: list[int] = []
    untexted: list[str] = []
    for campaign in await enabled_campaigns(pool):
        if campaign.channel == "call":
            tasks += await remind(pool, campaign, now, interval=interval)
        elif can_text:
            text_jobs += await queue_texts(pool, campaign, now, interval=interval)
        else:
            untexted.append(campaign.service_id)
    return Swept(tasks, text_jobs, untexted)


async def remind(pool: asyncpg.Pool, campaign: Campaign, now: datetime, *,
                 interval: timedelta) -> list[str]:
    """The campaign's reminder tasks for live appointments of its types starting within
    its lead time (plus `interval`) that have no reminder yet (called or texted),
    skipping patients who asked not to be called or have no number, and appointments no
    call can reach in time."""
    due = await due_reminders(pool, campaign, now, interval=interval, channel="call")
    made: list[str] = []
    async with pool.acquire() as conn:
        for row, when in due:
            window = when.window
            spec = outbound.TaskSpec(
                workspace_id=campaign.workspace_id, service_id=campaign.service_id,
                kind="reminder", reason=f"Reminder of their {row['type_name']} appointment",
                goal="Remind them of the appointment; confirm, cancel or move it as they ask",
                timezone=when.timezone, not_before=when.due, priority=REMINDER_PRIORITY,
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
