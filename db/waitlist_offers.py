"""Offering a freed slot to the waitlist: one `waitlist_offer` task per patient, for the
first patients waiting for that kind of appointment (first come, first offered), each
dialled in the next calling window; the first to say yes books it.

An offer is made only while the slot is still ahead (with time to reach someone before
it starts) and still free, never to the patient who gave it up nor to anyone who asked
not to be called, and never twice for the same entry and slot (a unique index), so the
job that makes them can run again safely. An offer is dialled only while its slot is
still open (`offer_still_open`): an offer whose slot went, or whose first call went
unanswered until too late, is called off rather than tried again.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg

from db import outbound, scheduling
from db.calling_window import next_calling_time
from db.promised_calls import clinic_window
from db.repositories import as_uuid

# An offer must be able to reach its callee at least this long before the slot starts.
OFFER_NOTICE = timedelta(minutes=30)
FIRST_OFFER_PRIORITY = 8  # the first in line; each next one a step lower
OFFER_ATTEMPTS, OFFER_BACKOFF_MIN = 2, 30  # a slot does not wait long


@dataclass(frozen=True)
class FreedSlot:
    """A cancelled appointment's slot, as the offer carries it."""

    appointment_id: str
    workspace_id: str
    service_id: str
    given_up_by: str  # the patient whose appointment it was
    practitioner_id: str
    practitioner_name: str
    location: scheduling.Location
    appointment_type_id: str
    type_name: str
    starts_at: datetime
    ends_at: datetime

    def offer(self) -> dict[str, Any]:
        """The task's `offer`: the slot's ids and times (ISO, in the location's
        timezone), with the names the call says."""
        zone = ZoneInfo(self.location.timezone)
        return {
            "practitioner_id": self.practitioner_id, "location_id": self.location.id,
            "appointment_type_id": self.appointment_type_id,
            "starts_at": self.starts_at.astimezone(zone).isoformat(),
            "ends_at": self.ends_at.astimezone(zone).isoformat(),
            "practitioner_name": self.practitioner_name, "location_name": self.location.name,
            "type_name": self.type_name, "timezone": self.location.timezone,
        }


@dataclass(frozen=True)
class Waiting:
    entry_id: str
    patient_id: str
    timezone: str | None


async def freed_slot(pool: asyncpg.Pool, appointment_id: str) -> FreedSlot | None:
    """The slot of a cancelled appointment (None: not cancelled, or unknown)."""
    row = await pool.fetchrow(
        """SELECT a.*, p.name AS practitioner_name, t.name AS type_name,
                  l.service_id, s.workspace_id
           FROM appointments a
           JOIN practitioners p ON p.id = a.practitioner_id
           JOIN appointment_types t ON t.id = a.appointment_type_id
           JOIN locations l ON l.id = a.location_id
           JOIN services s ON s.id = l.service_id
           WHERE a.id = $1 AND a.status = 'cancelled'""", as_uuid(appointment_id))
    if row is None:
        return None
    location = next(loc for loc in await scheduling.locations(pool, str(row["service_id"]))
                    if loc.id == str(row["location_id"]))
    return FreedSlot(
        str(row["id"]), str(row["workspace_id"]), str(row["service_id"]),
        str(row["patient_id"]), str(row["practitioner_id"]), row["practitioner_name"],
        location, str(row["appointment_type_id"]), row["type_name"], row["starts_at"],
        row["ends_at"])


async def still_free(pool: asyncpg.Pool | asyncpg.Connection, slot: FreedSlot) -> bool:
    """No live booking of the practitioner overlaps the slot."""
    return await _free(pool, slot.practitioner_id, slot.starts_at, slot.ends_at)


async def offer_still_open(pool: asyncpg.Pool, offer: Mapping[str, Any], now: datetime) -> bool:
    """The offered slot (a task's `offer`) can still be booked: it starts later than
    OFFER_NOTICE from now and nobody has booked over it (a waitlisted patient who said
    yes, the front desk, another caller)."""
    try:
        starts_at = datetime.fromisoformat(str(offer["starts_at"]))
        ends_at = datetime.fromisoformat(str(offer["ends_at"]))
        practitioner_id = str(uuid.UUID(str(offer["practitioner_id"])))
    except (KeyError, ValueError):
        return False
    return (starts_at > now + OFFER_NOTICE
            and await _free(pool, practitioner_id, starts_at, ends_at))


async def _free(pool: asyncpg.Pool | asyncpg.Connection, practitioner_id: str,
                starts_at: datetime, ends_at: datetime) -> bool:
    return not await pool.fetchval(
        """SELECT EXISTS (SELECT 1 FROM appointments WHERE practitioner_id = $1
               AND status = ANY($2) AND starts_at < $4 AND $3 < ends_at)""",
        uuid.UUID(practitioner_id), list(scheduling.LIVE), starts_at, ends_at)


async def first_waiting(pool: asyncpg.Pool | asyncpg.Connection, slot: FreedSlot,
                        limit: int) -> list[Waiting]:
    """The first `limit` patients waiting for the slot's kind of appointment (or for any
    at this clinic) who can be offered it: one entry each, oldest first; not the patient
    who gave it up, not anyone who asked not to be called or has no number, not anyone
    with an offer waiting already, not an entry this slot was offered to before."""
    rows = await pool.fetch(
        """SELECT entry_id, patient_id, timezone FROM (
               SELECT DISTINCT ON (w.patient_id) w.id AS entry_id, w.patient_id,
                      p.timezone, w.created_at
               FROM waitlist_entries w
               JOIN patients p ON p.id = w.patient_id
               LEFT JOIN calls c ON c.id = w.created_by_call
               WHERE p.workspace_id = $1 AND w.patient_id <> $4
                 AND (w.appointment_type_id = $3
                      OR (w.appointment_type_id IS NULL
                          AND (c.service_id IS NULL OR c.service_id = $2)))
                 AND NOT p.do_not_call AND p.phone IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM do_not_call_numbers d
                                 WHERE d.workspace_id = p.workspace_id AND d.phone = p.phone)
                 AND NOT EXISTS (SELECT 1 FROM outbound_tasks o
                                 WHERE o.kind = 'waitlist_offer' AND o.patient_id = w.patient_id
                                   AND (o.status = ANY($7::text[])
                                        OR (o.offer ->> 'practitioner_id' = $5
                                            AND (o.offer ->> 'starts_at')::timestamptz = $6)))
               ORDER BY w.patient_id, w.created_at, w.id) first_entries
           ORDER BY created_at, entry_id LIMIT $8""",
        uuid.UUID(slot.workspace_id), uuid.UUID(slot.service_id),
        uuid.UUID(slot.appointment_type_id), uuid.UUID(slot.given_up_by),
        slot.practitioner_id, slot.starts_at, list(outbound.OPEN_STATUSES), limit)
    return [Waiting(str(r["entry_id"]), str(r["patient_id"]), r["timezone"]) for r in rows]


async def offers_made(pool: asyncpg.Pool | asyncpg.Connection, slot: FreedSlot) -> int:
    """How many offers of this slot exist (in any state)."""
    return await pool.fetchval(
        """SELECT count(*) FROM outbound_tasks
           WHERE kind = 'waitlist_offer' AND offer ->> 'practitioner_id' = $1
             AND (offer ->> 'starts_at')::timestamptz = $2""",
        slot.practitioner_id, slot.starts_at)


async def offer_freed_slot(pool: asyncpg.Pool, appointment_id: str, *, limit: int,
                           now: datetime) -> list[str]:
    """Offer a cancelled appointment's slot to the first `limit` waitlisted patients
    (fewer when some were offered it already); the ids of the tasks made. Nothing when
    the slot is past, too close to reach anyone, or booked again."""
    slot = await freed_slot(pool, appointment_id)
    if slot is None or slot.starts_at <= now + OFFER_NOTICE or not await still_free(pool, slot):
        return []
    closures = await scheduling.closures(pool, slot.service_id, now.date() - timedelta(days=1))
    made: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        position = await offers_made(conn, slot)
        for waiting in await first_waiting(conn, slot, max(0, limit - position)):
            zone = waiting.timezone or slot.location.timezone
            window = clinic_window([slot.location], zone)
            at = next_calling_time(now, task_window=window, patient_timezone=zone,
                                   places=[slot.location], closures=closures)
            if at is None or at > slot.starts_at - OFFER_NOTICE:
                continue  # they cannot be reached in time
            spec = outbound.TaskSpec(
                workspace_id=slot.workspace_id, service_id=slot.service_id,
                kind="waitlist_offer", reason=f"A {slot.type_name} time opened up",
                goal="Offer them the time; book it if they say yes",
                timezone=zone, not_before=at,
                priority=max(1, FIRST_OFFER_PRIORITY - position), patient_id=waiting.patient_id,
                window_start=window.start, window_end=window.end, window_days=window.days,
                max_attempts=OFFER_ATTEMPTS, retry_backoff_minutes=OFFER_BACKOFF_MIN,
                written_by="waitlist", waitlist_entry_id=waiting.entry_id,
                appointment_id=None, offer=slot.offer())
            try:
                async with conn.transaction():  # another run made it first: skip it
                    made.append(await outbound.create_task(conn, spec))
            except asyncpg.UniqueViolationError:
                continue
            position += 1
    return made
