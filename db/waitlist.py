"""What a freed appointment sets off, and how a waitlist offer is settled.

When a booked appointment is cancelled (or moved away), its reminder call is called off
and the offer of its slot to the waitlist is queued as a job (`waitlist_offer`), both in
the cancellation's own transaction: the caller who cancelled never waits for the offers
(`db/waitlist_offers.py` makes them), and a crash loses none. The first waitlisted
callee to book the slot settles it (`settle_offer`): the other offers of that slot that
are still waiting are cancelled (one being dialled hears the slot is gone when it tries
to book), and the patient who booked leaves the waitlist.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from db import jobs, outbound
from db.repositories import as_uuid

OFFER_JOB = "waitlist_offer"


def offer_key(appointment_id: str) -> str:
    """The dedupe key of a freed appointment's offer job: one per appointment."""
    return f"waitlist:{appointment_id}"


async def slot_freed(conn: asyncpg.Connection, appointment_id: str) -> None:
    """In the cancellation's transaction: call off the appointment's reminder call and
    queue the offer of its slot to the waitlist."""
    reminders = await conn.fetch(
        """UPDATE outbound_tasks SET status = 'cancelled', next_attempt_at = NULL,
               updated_at = now()
           WHERE appointment_id = $1 AND kind = 'reminder' AND status = 'pending'
           RETURNING id""", as_uuid(appointment_id))
    for row in reminders:
        await jobs.cancel_key(conn, outbound.dial_key(str(row["id"])))
    await jobs.enqueue(conn, OFFER_JOB, {"appointment_id": appointment_id},
                       dedupe_key=offer_key(appointment_id))


async def settle_offer(pool: asyncpg.Pool, offer: Mapping[str, Any], *, patient_id: str) -> int:
    """After `patient_id` booked an offered slot (`offer`: practitioner_id,
    appointment_type_id, starts_at ISO): cancel the slot's other offers still waiting to
    be dialled (outcome `slot_gone`), and take the patient off the waitlist for that
    kind of appointment, with any other offer waiting for them; how many offers of the
    slot were cancelled. Safe to call again."""
    starts_at = datetime.fromisoformat(str(offer["starts_at"]))
    practitioner = str(offer["practitioner_id"])
    async with pool.acquire() as conn, conn.transaction():
        others = await conn.fetch(
            """UPDATE outbound_tasks
               SET status = 'cancelled', outcome = 'slot_gone', next_attempt_at = NULL,
                   updated_at = now()
               WHERE kind = 'waitlist_offer' AND status = 'pending'
                 AND offer ->> 'practitioner_id' = $1
                 AND (offer ->> 'starts_at')::timestamptz = $2
                 AND patient_id IS DISTINCT FROM $3
               RETURNING id""", practitioner, starts_at, as_uuid(patient_id))
        entries = [r["id"] for r in await conn.fetch(
            """SELECT id FROM waitlist_entries
               WHERE patient_id = $1
                 AND (appointment_type_id IS NULL OR appointment_type_id = $2)""",
            as_uuid(patient_id), as_uuid(str(offer.get("appointment_type_id") or "")))]
        theirs = await conn.fetch(
            """UPDATE outbound_tasks SET status = 'cancelled', next_attempt_at = NULL,
                   updated_at = now()
               WHERE kind = 'waitlist_offer' AND status = 'pending'
                 AND waitlist_entry_id = ANY($1::uuid[])
                 AND NOT (offer ->> 'practitioner_id' = $2
                          AND (offer ->> 'starts_at')::timestamptz = $3)
               RETURNING id""", entries, practitioner, starts_at)
        for row in [*others, *theirs]:
            await jobs.cancel_key(conn, outbound.dial_key(str(row["id"])))
        await conn.execute("DELETE FROM waitlist_entries WHERE id = ANY($1::uuid[])", entries)
    return len(others)
