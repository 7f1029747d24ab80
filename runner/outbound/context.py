"""Who an outbound task calls, from which clinic, and the first moment every rule allows.

The callee's number and timezone are read again each time (a patient's number may have
changed since the task was written). The rules: the task's own window, the callee's
calling hours (8 am to 9 pm where they are), the clinic's opening hours and closures
(db/calling_window.py), and at most so many attempts to one number in any 24 hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from db import scheduling
from db.calling_window import DailyWindow, next_calling_time
from db.opening import Closure
from db.outbound import OutboundTask
from db.repositories import SERVICE_COLUMNS, JsonDict, _row_or_none, as_uuid
from db.scheduling import Location
from db.service_numbers import workspace_clinics

DAY = timedelta(hours=24)


@dataclass(frozen=True)
class Callee:
    """Whom the task calls: the patient (None: a caller never identified) or a number."""

    patient_id: str | None
    first_name: str | None
    phone: str | None  # the patient's number now, else the task's
    timezone: str  # the patient's, else the task's


@dataclass(frozen=True)
class Clinic:
    """The clinic that calls: its service row, the number it calls from (None: it has
    none) and its calendar."""

    service: JsonDict
    number: str | None
    places: Sequence[Location]
    closures: Sequence[Closure]

    @property
    def name(self) -> str:
        return str(self.service["name"])

    @property
    def service_id(self) -> str:
        return str(self.service["id"])


async def load_callee(pool: asyncpg.Pool, task: OutboundTask) -> Callee:
    row = None
    if task.patient_id is not None:
        row = await pool.fetchrow(
            "SELECT first_name, phone, timezone FROM patients WHERE id = $1 AND workspace_id = $2",
            as_uuid(task.patient_id), as_uuid(task.workspace_id))
    if row is None:
        return Callee(None, None, task.phone, task.timezone)
    return Callee(task.patient_id, row["first_name"], row["phone"] or task.phone,
                  row["timezone"] or task.timezone)


async def load_clinic(pool: asyncpg.Pool, task: OutboundTask, today: datetime) -> Clinic | None:
    """The task's clinic (a task that names none: the workspace's only clinic); None when
    there is no such clinic."""
    if task.service_id is not None:
        service = _row_or_none(await pool.fetchrow(
            f"SELECT {SERVICE_COLUMNS} FROM services s WHERE s.id = $1 AND s.workspace_id = $2",
            as_uuid(task.service_id), as_uuid(task.workspace_id)))
    else:
        clinics = await workspace_clinics(pool, task.workspace_id)
        service = clinics[0] if len(clinics) == 1 else None
    if service is None:
        return None
    numbers = list(service.get("phone_numbers") or [])
    service_id = str(service["id"])
    return Clinic(
        service=service, number=numbers[0] if numbers else None,
        places=await scheduling.locations(pool, service_id),
        closures=await scheduling.closures(pool, service_id,
                                           today.date() - timedelta(days=1)))


def freed_at(dials: Sequence[datetime], limit: int) -> datetime | None:
    """When a number dialled at `dials` (the last 24 hours, oldest first) is under the
    daily limit again; None when it is now."""
    if len(dials) < limit:
        return None
    return sorted(dials)[len(dials) - limit] + DAY


def earliest_dial(now: datetime, task: OutboundTask, callee: Callee, clinic: Clinic,
                  dials: Sequence[datetime], limit: int) -> datetime | None:
    """The first moment from `now` (and not before the task's own next time) that the
    calling window and the number's daily limit both allow; None: no calling window
    within the search bound."""
    at = max(now, task.next_attempt_at or task.not_before)
    window = DailyWindow(task.window_start, task.window_end, task.window_days, task.timezone)
    for _ in range(limit + 2):
        opens = next_calling_time(at, task_window=window, patient_timezone=callee.timezone,
                                  places=clinic.places, closures=clinic.closures)
        if opens is None:
            return None
        freed = freed_at([d for d in dials if d > opens - DAY], limit)
        if freed is None or freed <= opens:
            return opens
        at = freed
    return None
