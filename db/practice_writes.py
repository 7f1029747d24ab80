"""Bookings on their way to an external practice system, and the review items a person
acts on when one cannot get there or is doubted after it did.

With a practice system to reach (Cliniko) a booking is written there when the caller
says yes. The appointment row says how far that got (`practice_status`, migration
0012): 'pending' while a `practice_push` job holds the write (queued in the transaction
that holds the slot, so the job exists exactly when the booking does), 'pushed' once it
is there, 'failed' once the job gave up (the clinic is told), 'local' when nothing is to
be written. A review item is a flagged clinical event (the review queue) whose
`review_action` says what to do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

import asyncpg

from db import jobs
from db.repositories import as_uuid

PUSH_JOB = "practice_push"
FAILED_EVENT = "practice_write_failed"  # the review item of a booking never written there
PracticeStatus = Literal["local", "pending", "pushed", "failed"]
Reached = Literal["booking", "patient"]
# Events whose write a booking carries to the practice system when the caller says yes:
# the booking itself, and the patient's details it needs there.
BOOKING_EVENTS = frozenset({"appointment_booked", "appointment_rescheduled"})
PATIENT_EVENTS = frozenset({"patient_created", "registration_corrected"})


def push_key(appointment_id: str) -> str:
    """The push job's dedupe key: one queued or running push per appointment."""
    return f"{PUSH_JOB}:{appointment_id}"


@dataclass(frozen=True)
class PracticeWrite:
    """One appointment as its push sees it."""

    appointment_id: str
    workspace_id: str
    patient_id: str
    call_id: str | None  # the call that booked it
    status: str  # the booking's own: booked, confirmed, cancelled, completed
    practice_status: PracticeStatus
    practice_error: str | None
    replaces: str | None
    type_name: str
    practitioner_name: str
    location_name: str
    starts_at: datetime
    timezone: str

    @property
    def local_start(self) -> datetime:
        return self.starts_at.astimezone(ZoneInfo(self.timezone))


async def queue_push(conn: asyncpg.Connection, appointment_id: str, *,
                     delay: timedelta) -> None:
    """Mark the booking pending and queue its push (in the caller's transaction)."""
    await conn.execute(
        "UPDATE appointments SET practice_status = 'pending', practice_error = NULL "
        "WHERE id = $1", as_uuid(appointment_id))
    await jobs.enqueue(conn, PUSH_JOB, {"appointment_id": str(appointment_id)},
                       delay=delay, dedupe_key=push_key(str(appointment_id)))


async def write_state(pool: asyncpg.Pool | asyncpg.Connection,
                      appointment_id: str) -> PracticeWrite | None:
    try:
        key = uuid.UUID(str(appointment_id))
    except ValueError:
        return None
    row = await pool.fetchrow(
        """SELECT a.id, a.patient_id, a.created_by_call, a.status, a.practice_status,
                  a.practice_error, a.rescheduled_from, a.starts_at, pt.workspace_id,
                  t.name AS type_name, p.name AS practitioner_name,
                  l.name AS location_name, l.timezone
           FROM appointments a
           JOIN patients pt ON pt.id = a.patient_id
           JOIN practitioners p ON p.id = a.practitioner_id
           JOIN locations l ON l.id = a.location_id
           JOIN appointment_types t ON t.id = a.appointment_type_id
           WHERE a.id = $1""", key)
    if row is None:
        return None
    return PracticeWrite(
        str(row["id"]), str(row["workspace_id"]), str(row["patient_id"]),
        str(row["created_by_call"]) if row["created_by_call"] else None, row["status"],
        row["practice_status"], row["practice_error"],
        str(row["rescheduled_from"]) if row["rescheduled_from"] else None, row["type_name"],
        row["practitioner_name"], row["location_name"], row["starts_at"], row["timezone"])


async def mark_pushed(pool: asyncpg.Pool, appointment_id: str, *,
                      cancel_queued: bool = False) -> None:
    """It is in the practice system; `cancel_queued`: the push job still waiting to run
    is no longer needed (never one running: it is finishing this same write)."""
    async with pool.acquire() as conn, conn.transaction():
        await _set(conn, appointment_id, "pushed", None)
        if cancel_queued:
            await jobs.cancel_key(conn, push_key(appointment_id), only_queued=True)


async def mark_not_needed(pool: asyncpg.Pool, appointment_id: str) -> None:
    """Nothing to write: the booking was gone before it reached the practice system."""
    await _set(pool, appointment_id, "local", None)


async def note_error(pool: asyncpg.Pool, appointment_id: str, error: str) -> None:
    """The last try failed; the job tries again (still pending)."""
    await pool.execute("UPDATE appointments SET practice_error = $2 WHERE id = $1",
                       as_uuid(appointment_id), error[:300])


async def mark_failed(pool: asyncpg.Pool, appointment_id: str, error: str) -> None:
    await _set(pool, appointment_id, "failed", error[:300])


async def _set(conn: asyncpg.Pool | asyncpg.Connection, appointment_id: str,
               status: PracticeStatus, error: str | None) -> None:
    await conn.execute(
        "UPDATE appointments SET practice_status = $2, practice_error = $3 WHERE id = $1",
        as_uuid(appointment_id), status, error)


# --- Review items ----------------------------------------------------------------------


async def flag_unwritten(pool: asyncpg.Pool, write: PracticeWrite, *, system: str,
                         reason: str, action: str) -> str:
    """The review item of a booking the practice system never took (one open item per
    booking: a second give-up updates it); its id."""
    async with pool.acquire() as conn, conn.transaction():
        existing = await conn.fetchval(
            """SELECT id FROM clinical_events WHERE entity_table = 'appointments'
                 AND entity_id = $1 AND type = $2 AND verification = 'flagged'
               ORDER BY occurred_at DESC LIMIT 1 FOR UPDATE""",
            as_uuid(write.appointment_id), FAILED_EVENT)
        note = [{"stage": "practice", "verdict": "flag", "reason": reason[:300],
                 "judge": system}]
        if existing is not None:
            await conn.execute(
                """UPDATE clinical_events SET review_action = $2,
                       verification_notes = verification_notes || $3::jsonb WHERE id = $1""",
                existing, action, note)
            return str(existing)
        said = (f"{write.type_name} with {write.practitioner_name} at {write.location_name}, "
                f"{write.local_start:%a %d %b %Y %H:%M}")
        event_id = await conn.fetchval(
            """INSERT INTO clinical_events (workspace_id, patient_id, call_id, type, payload,
                   summary, source, written_by, confidence, verification,
                   verification_notes, entity_table, entity_id, review_action)
               VALUES ($1, $2, $3, $4, $5, $6, 'practice', $7, 'high', 'flagged', $8,
                       'appointments', $9, $10) RETURNING id""",
            as_uuid(write.workspace_id), as_uuid(write.patient_id), as_uuid(write.call_id),
            FAILED_EVENT, {"appointment_id": write.appointment_id, "replaces": write.replaces,
                           "system": system},
            f"Not in {system.title()}: {said}.", f"practice:{system}", note,
            as_uuid(write.appointment_id), action)
        return str(event_id)


async def resolve_unwritten(pool: asyncpg.Pool, appointment_id: str, *, system: str) -> int:
    """The booking reached the practice system after all: its open review items are
    settled (approved, with a note saying so); how many."""
    note = [{"stage": "practice", "verdict": "resolved",
             "reason": "written on a later try", "judge": system}]
    rows = await pool.fetch(
        """UPDATE clinical_events SET verification = 'approved', review_action = NULL,
               verification_notes = verification_notes || $3::jsonb
           WHERE entity_table = 'appointments' AND entity_id = $1 AND type = $2
             AND verification = 'flagged' RETURNING id""",
        as_uuid(appointment_id), FAILED_EVENT, note)
    return len(rows)


async def set_review_action(pool: asyncpg.Pool, event_id: str, action: str) -> None:
    await pool.execute("UPDATE clinical_events SET review_action = $2 WHERE id = $1",
                       as_uuid(event_id), action[:500])


async def reached(pool: asyncpg.Pool, system: str, *, event_type: str,
                  appointment_id: str | None, patient_id: str | None) -> Reached | None:
    """What an event wrote that is already in the practice system, or on its way there
    (written at booking time, not held back by a flag): its booking, or the patient
    created there for a booking; None when the flag holds everything back."""
    if event_type in BOOKING_EVENTS and appointment_id:
        row = await pool.fetchrow(
            """SELECT a.practice_status, EXISTS (SELECT 1 FROM external_refs r
                   WHERE r.system = $2 AND r.entity_table = 'appointments'
                     AND r.entity_id = a.id) AS known
               FROM appointments a WHERE a.id = $1""", as_uuid(appointment_id), system)
        if row and (row["known"] or row["practice_status"] in ("pending", "pushed")):
            return "booking"
    if event_type in PATIENT_EVENTS and patient_id and await pool.fetchval(
            """SELECT EXISTS (SELECT 1 FROM external_refs WHERE system = $1
                 AND entity_table = 'patients' AND entity_id = $2)""",
            system, as_uuid(patient_id)):
        return "patient"
    return None
