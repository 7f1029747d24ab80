"""A small clinic in Chicago for the follow-through tests: one location open 8 AM to
8 PM every day, one physiotherapist, two appointment types; patients, bookings and
waitlist entries made at exact times."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from db import repositories as repo

CHICAGO = ZoneInfo("America/Chicago")
EVERY_DAY_8_TO_8 = {d: ["08:00", "20:00"]
                    for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}


@dataclass
class SmallClinic:
    db: object
    workspace_id: str
    service_id: str
    location_id: str
    practitioner_id: str
    physio: str  # appointment type ids
    flu_shot: str
    _phones: int = 0

    async def patient(self, first: str, *, phone: bool = True, do_not_call: bool = False,
                      timezone: str | None = None) -> str:
        self._phones += 1
        return str(await self.db.pool.fetchval(
            """INSERT INTO patients (workspace_id, first_name, last_name, date_of_birth, phone,
                                     do_not_call, timezone)
               VALUES ($1, $2, $3, '1980-01-01', $4, $5, $6) RETURNING id""",
            uuid.UUID(self.workspace_id), first, f"Tester{self._phones}",
            f"+1555020{self._phones:04d}" if phone else None, do_not_call, timezone))

    async def book(self, patient_id: str, starts_at: datetime, *, kind: str | None = None,
                   minutes: int = 45) -> str:
        return str(await self.db.pool.fetchval(
            """INSERT INTO appointments (patient_id, practitioner_id, location_id,
                                         appointment_type_id, starts_at, ends_at)
               VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
            uuid.UUID(patient_id), uuid.UUID(self.practitioner_id),
            uuid.UUID(self.location_id), uuid.UUID(kind or self.physio), starts_at,
            starts_at + timedelta(minutes=minutes)))

    async def waits(self, patient_id: str, kind: str | None, since: datetime) -> str:
        """A waitlist entry made at `since` (for `kind`; None: any appointment)."""
        return str(await self.db.pool.fetchval(
            """INSERT INTO waitlist_entries (patient_id, appointment_type_id, created_at)
               VALUES ($1, $2, $3) RETURNING id""",
            uuid.UUID(patient_id), uuid.UUID(kind) if kind else None, since))


async def small_clinic(db, workspace_id: str) -> SmallClinic:
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    service_id = uuid.UUID(service["id"])
    location = await db.pool.fetchval(
        """INSERT INTO locations (service_id, name, timezone, opening_hours)
           VALUES ($1, 'Main Street', 'America/Chicago', $2) RETURNING id""",
        service_id, EVERY_DAY_8_TO_8)
    practitioner = await db.pool.fetchval(
        "INSERT INTO practitioners (service_id, name) VALUES ($1, 'Aisha Rahman') RETURNING id",
        service_id)
    physio, flu = [await db.pool.fetchval(
        """INSERT INTO appointment_types (service_id, name, duration_min, price_cents)
           VALUES ($1, $2, $3, 1000) RETURNING id""", service_id, name, minutes)
        for name, minutes in (("Physiotherapy session", 45), ("Flu shot", 15))]
    return SmallClinic(db, workspace_id, str(service_id), str(location), str(practitioner),
                       str(physio), str(flu))
