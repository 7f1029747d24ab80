"""What a clinic change means for its bookings. Bookings are never changed by a clinic
change: these only count them (never say whose they are)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import asyncpg

from db import scheduling
from db.clinic.kinds import APPOINTMENT_TYPES, Kind
from db.opening import closure_on

LIVE = ("booked", "confirmed")


@dataclass(frozen=True)
class Uses:
    upcoming: int  # live bookings still to come: the entry cannot go
    any: int  # bookings (and waitlist entries) of any time or status: it is retired, kept


async def uses_of(connection: asyncpg.Connection, kind: Kind, entry_id: uuid.UUID,
                  now: datetime) -> Uses:
    row = await connection.fetchrow(
        f"""SELECT count(*) FILTER (WHERE status = ANY ($2) AND starts_at > $3) AS upcoming,
                   count(*) AS total
            FROM appointments WHERE {kind.booking_column} = $1""",
        entry_id, list(LIVE), now)
    total = row["total"]
    if kind is APPOINTMENT_TYPES:
        total += await connection.fetchval(
            "SELECT count(*) FROM waitlist_entries WHERE appointment_type_id = $1", entry_id)
    return Uses(upcoming=row["upcoming"], any=total)


@dataclass(frozen=True)
class Misplaced:
    outside_hours: frozenset[uuid.UUID]
    on_closure: frozenset[uuid.UUID]


async def misplaced_bookings(connection: asyncpg.Connection, service_id: uuid.UUID,
                             now: datetime) -> Misplaced:
    """The clinic's upcoming live bookings that no schedule covers, and those on a
    closure."""
    bookings = await connection.fetch(
        """SELECT a.id, a.practitioner_id, a.location_id, a.starts_at, a.ends_at, l.timezone
           FROM appointments a JOIN practitioners p ON p.id = a.practitioner_id
           JOIN locations l ON l.id = a.location_id
           WHERE p.service_id = $1 AND a.status = ANY ($2) AND a.starts_at > $3""",
        service_id, list(LIVE), now)
    if not bookings:
        return Misplaced(frozenset(), frozenset())
    hours = await connection.fetch(
        """SELECT s.practitioner_id, s.location_id, s.weekday, s.starts, s.ends, s.valid_from,
                  s.valid_until
           FROM schedules s JOIN practitioners p ON p.id = s.practitioner_id
           WHERE p.service_id = $1""", service_id)
    # Bookings start after `now`: closures that ended before yesterday cover none.
    closures = await scheduling.closures(connection, str(service_id),
                                         now.date() - timedelta(days=1))
    outside, closed = set(), set()
    for booking in bookings:
        zone = ZoneInfo(booking["timezone"])
        starts, ends = booking["starts_at"].astimezone(zone), booking["ends_at"].astimezone(zone)
        day = starts.date()
        if not any(_covers(row, booking, starts, ends) for row in hours):
            outside.add(booking["id"])
        if closure_on(closures, day, str(booking["location_id"])) is not None:
            closed.add(booking["id"])
    return Misplaced(frozenset(outside), frozenset(closed))


def _covers(row, booking, starts: datetime, ends: datetime) -> bool:
    day = starts.date()
    return (row["practitioner_id"] == booking["practitioner_id"]
            and row["location_id"] == booking["location_id"]
            and row["weekday"] == day.weekday() and ends.date() == day
            and row["valid_from"] <= day <= (row["valid_until"] or date.max)
            and row["starts"] <= starts.time() and ends.time() <= row["ends"])
