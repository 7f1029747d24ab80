"""Reads and writes of the scheduling world model (db/migrations/0003_scheduling.sql).

Every write names the call that made it. Booking writes lock the practitioner's
row for the transaction, so two callers confirming the same time never both get it:
the second write finds the overlap and raises `SlotTaken`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg

from db import outbound, practice_writes, waitlist
from db.opening import Closure
from db.repositories import as_uuid
from db.slots import Booked, Slot, WeeklyHours, open_slots

LIVE = ("booked", "confirmed")


class SlotTaken(Exception):
    """The slot was booked by someone else since it was offered."""


class SlotGone(SlotTaken):
    """The slot's practitioner, location or type was retired since it was offered: it is
    offered no more, and the next open time is offered in its place."""


class NotFound(Exception):
    """The record does not exist, or does not belong to this patient."""


@dataclass(frozen=True)
class Patient:
    id: str
    first_name: str
    last_name: str
    date_of_birth: date
    phone: str | None

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}"


@dataclass(frozen=True)
class AppointmentType:
    id: str
    name: str
    description: str
    duration_min: int
    price_cents: int
    currency: str
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class Location:
    id: str
    name: str
    timezone: str
    address: str
    phone_number: str | None
    opening_hours: dict[str, list[str]]


def dialled_location(locations: Sequence[Location], dialled: str | None) -> Location | None:
    """The location whose own number the caller dialled (None: the clinic's number)."""
    return next((loc for loc in locations if dialled and loc.phone_number == dialled), None)


@dataclass(frozen=True)
class Appointment:
    id: str
    patient_id: str
    practitioner_name: str
    location_name: str
    timezone: str
    type_name: str
    starts_at: datetime
    ends_at: datetime
    status: str

    @property
    def local_start(self) -> datetime:
        """The start in the location's own timezone: the time the caller is told."""
        return self.starts_at.astimezone(ZoneInfo(self.timezone))


def _patient(row: asyncpg.Record) -> Patient:
    return Patient(str(row["id"]), row["first_name"], row["last_name"], row["date_of_birth"],
                   row["phone"])


# --- Patients ----------------------------------------------------------------------


async def patients_by_phone(pool: asyncpg.Pool, workspace_id: str, phone: str) -> list[Patient]:
    rows = await pool.fetch(
        "SELECT * FROM patients WHERE workspace_id = $1 AND phone = $2 ORDER BY first_name",
        uuid.UUID(workspace_id), phone,
    )
    return [_patient(row) for row in rows]


async def find_patients(
    pool: asyncpg.Pool, workspace_id: str, *, first_name: str | None = None,
    last_name: str | None = None, date_of_birth: date | None = None,
) -> list[Patient]:
    """Patients matching every given field (names case-insensitively)."""
    rows = await pool.fetch(
        """SELECT * FROM patients WHERE workspace_id = $1
           AND ($2::text IS NULL OR lower(first_name) = lower($2))
           AND ($3::text IS NULL OR lower(last_name) = lower($3))
           AND ($4::date IS NULL OR date_of_birth = $4)
           ORDER BY last_name, first_name LIMIT 20""",
        uuid.UUID(workspace_id), first_name, last_name, date_of_birth,
    )
    return [_patient(row) for row in rows]


# --- Clinic profile ------------------------------------------------------------------


async def appointment_types(pool: asyncpg.Pool, service_id: str) -> list[AppointmentType]:
    rows = await pool.fetch(
        "SELECT * FROM appointment_types WHERE service_id = $1 AND retired_at IS NULL"
        " ORDER BY name",
        uuid.UUID(service_id),
    )
    return [
        AppointmentType(str(r["id"]), r["name"], r["description"], r["duration_min"],
                        r["price_cents"], r["currency"], tuple(r["keywords"]))
        for r in rows
    ]


async def practitioner_names(pool: asyncpg.Pool, service_id: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT name FROM practitioners WHERE service_id = $1 AND retired_at IS NULL"
        " ORDER BY name",
        uuid.UUID(service_id),
    )
    return [r["name"] for r in rows]


async def locations(pool: asyncpg.Pool, service_id: str) -> list[Location]:
    rows = await pool.fetch(
        "SELECT * FROM locations WHERE service_id = $1 AND retired_at IS NULL ORDER BY name",
        uuid.UUID(service_id),
    )
    return [
        Location(str(r["id"]), r["name"], r["timezone"], r["address"], r["phone_number"],
                 dict(r["opening_hours"] or {}))
        for r in rows
    ]


async def closures(pool: asyncpg.Pool, service_id: str, from_day: date) -> list[Closure]:
    """The clinic's closures that end on or after `from_day`, soonest first."""
    rows = await pool.fetch(
        """SELECT location_id, starts_on, ends_on, reason FROM closures
           WHERE service_id = $1 AND ends_on >= $2 ORDER BY starts_on, ends_on""",
        uuid.UUID(service_id), from_day,
    )
    return [Closure(str(r["location_id"]) if r["location_id"] else None, r["starts_on"],
                    r["ends_on"], r["reason"]) for r in rows]


# --- Availability ----------------------------------------------------------------------


async def available_slots(
    pool: asyncpg.Pool, service_id: str, *, appointment_type: AppointmentType,
    first_day: date, last_day: date, now: datetime, location_id: str | None = None,
    practitioner_id: str | None = None, part_of_day: str | None = None,
) -> list[Slot]:
    """Open slots of one type over a date range, never on a closure: three queries, then
    pure computation."""
    schedule_rows = await pool.fetch(
        """SELECT s.*, p.name AS practitioner_name, l.name AS location_name, l.timezone
           FROM schedules s
           JOIN practitioners p ON p.id = s.practitioner_id
           JOIN locations l ON l.id = s.location_id
           WHERE p.service_id = $1 AND $2 = ANY (s.appointment_type_ids)
             AND p.retired_at IS NULL AND l.retired_at IS NULL
             AND ($3::uuid IS NULL OR s.location_id = $3)
             AND ($4::uuid IS NULL OR s.practitioner_id = $4)""",
        uuid.UUID(service_id), uuid.UUID(appointment_type.id), as_uuid(location_id),
        as_uuid(practitioner_id),
    )
    if not schedule_rows:
        return []
    practitioners = list({row["practitioner_id"] for row in schedule_rows})
    booked_rows = await pool.fetch(
        """SELECT practitioner_id, starts_at, ends_at FROM appointments
           WHERE practitioner_id = ANY ($1) AND status = ANY ($2)
             AND ends_at > $3 AND starts_at < $4""",
        practitioners, list(LIVE), _day_start(first_day - timedelta(days=1)),
        _day_start(last_day + timedelta(days=2)),
    )
    schedules = [
        WeeklyHours(
            str(r["practitioner_id"]), r["practitioner_name"], str(r["location_id"]),
            r["location_name"], r["timezone"], r["weekday"], r["starts"], r["ends"],
            frozenset(str(t) for t in r["appointment_type_ids"]), r["valid_from"],
            r["valid_until"],
        )
        for r in schedule_rows
    ]
    booked = [Booked(str(r["practitioner_id"]), r["starts_at"], r["ends_at"]) for r in booked_rows]
    return open_slots(
        schedules, booked, appointment_type_id=appointment_type.id,
        duration=timedelta(minutes=appointment_type.duration_min), first_day=first_day,
        last_day=last_day, not_before=now, part_of_day=part_of_day,
        closures=await closures(pool, service_id, first_day),
    )


# --- Appointments ------------------------------------------------------------------------

_APPOINTMENT_SELECT = """
    SELECT a.*, p.name AS practitioner_name, l.name AS location_name, l.timezone,
           t.name AS type_name
    FROM appointments a
    JOIN practitioners p ON p.id = a.practitioner_id
    JOIN locations l ON l.id = a.location_id
    JOIN appointment_types t ON t.id = a.appointment_type_id"""


def _appointment(row: asyncpg.Record) -> Appointment:
    return Appointment(
        str(row["id"]), str(row["patient_id"]), row["practitioner_name"], row["location_name"],
        row["timezone"], row["type_name"], row["starts_at"], row["ends_at"], row["status"],
    )


async def upcoming_appointments(
    pool: asyncpg.Pool, patient_id: str, now: datetime
) -> list[Appointment]:
    rows = await pool.fetch(
        _APPOINTMENT_SELECT
        + " WHERE a.patient_id = $1 AND a.status = ANY ($2) AND a.starts_at >= $3"
        " ORDER BY a.starts_at",
        uuid.UUID(patient_id), list(LIVE), now,
    )
    return [_appointment(row) for row in rows]


async def get_appointment(pool: asyncpg.Pool, appointment_id: str) -> Appointment | None:
    row = await pool.fetchrow(_APPOINTMENT_SELECT + " WHERE a.id = $1", uuid.UUID(appointment_id))
    return None if row is None else _appointment(row)


async def _fetch_appointment(
    connection: asyncpg.Connection, appointment_id: uuid.UUID
) -> Appointment:
    row = await connection.fetchrow(_APPOINTMENT_SELECT + " WHERE a.id = $1", appointment_id)
    return _appointment(row)


async def book(
    pool: asyncpg.Pool, slot: Slot, *, patient_id: str, call_id: str | None,
    replaces: str | None = None, push_after: timedelta | None = None,
) -> Appointment:
    """Write the booking (and cancel the one it replaces, for a reschedule) atomically.

    A slot whose practitioner, location or type was retired since it was offered is no
    longer bookable (`SlotGone`). `push_after`: an external practice system is to get the
    booking too; it is marked pending and its push job queued in the same transaction,
    to run after that delay unless the write at booking time gets there first.
    """
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute(
            "SELECT 1 FROM practitioners WHERE id = $1 FOR UPDATE",
            uuid.UUID(slot.practitioner_id),
        )
        if not await connection.fetchval(
            """SELECT EXISTS (SELECT 1 FROM practitioners p, locations l, appointment_types t
               WHERE p.id = $1 AND l.id = $2 AND t.id = $3 AND p.retired_at IS NULL
                 AND l.retired_at IS NULL AND t.retired_at IS NULL)""",
            uuid.UUID(slot.practitioner_id), uuid.UUID(slot.location_id),
            uuid.UUID(slot.appointment_type_id),
        ):
            raise SlotGone(slot.starts_at.isoformat())
        clash = await connection.fetchval(
            """SELECT EXISTS (SELECT 1 FROM appointments WHERE practitioner_id = $1
               AND status = ANY ($2) AND starts_at < $4 AND $3 < ends_at
               AND ($5::uuid IS NULL OR id <> $5))""",
            uuid.UUID(slot.practitioner_id), list(LIVE), slot.starts_at, slot.ends_at,
            as_uuid(replaces),
        )
        if clash:
            raise SlotTaken(slot.starts_at.isoformat())
        if replaces is not None:
            await _set_status(connection, replaces, patient_id, "cancelled", call_id)
        appointment_id = await connection.fetchval(
            """INSERT INTO appointments (patient_id, practitioner_id, location_id,
                   appointment_type_id, starts_at, ends_at, created_by_call, rescheduled_from)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id""",
            uuid.UUID(patient_id), uuid.UUID(slot.practitioner_id), uuid.UUID(slot.location_id),
            uuid.UUID(slot.appointment_type_id), slot.starts_at, slot.ends_at,
            as_uuid(call_id), as_uuid(replaces),
        )
        if push_after is not None:
            await practice_writes.queue_push(connection, str(appointment_id), delay=push_after)
        return await _fetch_appointment(connection, appointment_id)


async def cancel(
    pool: asyncpg.Pool, appointment_id: str, *, patient_id: str, call_id: str | None
) -> Appointment:
    """Cancel one live appointment of this patient (NotFound for anyone else's)."""
    async with pool.acquire() as connection, connection.transaction():
        return await _set_status(connection, appointment_id, patient_id, "cancelled", call_id)


async def confirm(
    pool: asyncpg.Pool, appointment_id: str, *, patient_id: str, call_id: str | None
) -> Appointment:
    async with pool.acquire() as connection, connection.transaction():
        return await _set_status(connection, appointment_id, patient_id, "confirmed", call_id)


async def _set_status(
    connection: asyncpg.Connection, appointment_id: str, patient_id: str, status: str,
    call_id: str | None,
) -> Appointment:
    """Change one live appointment of this patient; the appointment as it now is."""
    changed = await connection.fetchval(
        """UPDATE appointments SET status = $3, changed_by_call = $4, updated_at = now()
           WHERE id = $1 AND patient_id = $2 AND status = ANY ($5) RETURNING id""",
        as_uuid(appointment_id), uuid.UUID(patient_id), status, as_uuid(call_id),
        list(LIVE),
    )
    if changed is None:
        raise NotFound(appointment_id)
    if status == "cancelled":  # its reminder is called off, its slot offered to the waitlist
        await waitlist.slot_freed(connection, str(changed))
    return await _fetch_appointment(connection, changed)


# --- Waitlist and callbacks ------------------------------------------------------------


async def add_to_waitlist(
    pool: asyncpg.Pool, *, patient_id: str, appointment_type_id: str | None, note: str,
    call_id: str | None,
) -> str:
    entry = await pool.fetchval(
        """INSERT INTO waitlist_entries (patient_id, appointment_type_id, note, created_by_call)
           VALUES ($1, $2, $3, $4) RETURNING id""",
        uuid.UUID(patient_id), as_uuid(appointment_type_id), note, as_uuid(call_id),
    )
    return str(entry)


async def request_callback(
    pool: asyncpg.Pool, *, service_id: str | None, call_id: str | None, patient_id: str | None,
    phone: str | None, reason: str, message: str, urgent: bool,
    task: outbound.TaskSpec | None = None,
) -> tuple[str, str | None]:
    """Log a callback request for the clinic team and, given `task`, the task that calls
    them back (its `callback_request_id` filled in), in one transaction: both are written
    or neither is. (request id, task id or None)."""
    async with pool.acquire() as connection, connection.transaction():
        entry = await connection.fetchval(
            """INSERT INTO callback_requests (service_id, call_id, patient_id, phone, reason,
                                              message, urgent)
               VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id""",
            as_uuid(service_id), as_uuid(call_id), as_uuid(patient_id), phone,
            reason, message, urgent,
        )
        task_id = None
        if task is not None:
            task_id = await outbound.create_task(
                connection, replace(task, callback_request_id=str(entry)))
    return str(entry), task_id


def _day_start(day: date) -> datetime:
    """Midnight UTC: with a day's margin either side it bounds any timezone's day."""
    return datetime.combine(day, time(), tzinfo=UTC)
