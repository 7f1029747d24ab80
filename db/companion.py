"""A person's reminders, for companion check-in calls.

Reminders are what the clinic asked the agent to bring up until the person confirms
them (what the person said on earlier calls is in db/memories.py). Reads and writes are
always scoped to one patient: an id that is not theirs is `NotFound`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import asyncpg

from db.scheduling import NotFound


@dataclass(frozen=True)
class Reminder:
    id: str
    text: str


async def open_reminders(pool: asyncpg.Pool, patient_id: str) -> list[Reminder]:
    rows = await pool.fetch(
        """SELECT id, text FROM reminders WHERE patient_id = $1 AND acknowledged_at IS NULL
           ORDER BY created_at""",
        uuid.UUID(patient_id),
    )
    return [Reminder(str(r["id"]), r["text"]) for r in rows]


async def acknowledge_reminder(
    pool: asyncpg.Pool, reminder_id: str, *, patient_id: str, call_id: str
) -> Reminder:
    """Mark the person's open reminder done (NotFound: not theirs, or already done)."""
    try:
        key = uuid.UUID(reminder_id)
    except ValueError:
        raise NotFound(reminder_id) from None
    row = await pool.fetchrow(
        """UPDATE reminders SET acknowledged_at = now(), acknowledged_by_call = $3
           WHERE id = $1 AND patient_id = $2 AND acknowledged_at IS NULL
           RETURNING id, text""",
        key, uuid.UUID(patient_id), uuid.UUID(call_id),
    )
    if row is None:
        raise NotFound(reminder_id)
    return Reminder(str(row["id"]), row["text"])
