"""What the task views show beside an outbound task: who it calls, the clinic's timezone,
where the task came from (the callback request, the waitlist slot, the appointment), and
counts by status and outcome. Reads only; every change goes through `db.outbound`.

Every read is scoped by the workspace: another workspace's task, patient or clinic is
"not found" (None), as an unknown one is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import asyncpg

from db.outbound import OUTCOMES, OutboundTask, task_from_row
from db.repositories import _row_or_none, as_uuid
from db.service_numbers import IS_CLINIC

Executor = asyncpg.Pool | asyncpg.Connection
STATUSES = ("pending", "in_progress", "claimed", "done", "failed", "cancelled")
ATTEMPT_OUTCOMES = ("answered", "voicemail", "no_answer", "busy", "failed", "opted_out")
# A clinic's timezone: that of its first live location by name (as a call lists them).
_CLINIC_ZONE = """(SELECT l.timezone FROM locations l
                   WHERE l.service_id = {service} AND l.retired_at IS NULL
                   ORDER BY l.name LIMIT 1)"""
_TASK_ROW = f"""SELECT t.*, p.first_name, p.last_name, p.phone AS patient_phone,
                       {_CLINIC_ZONE.format(service="t.service_id")} AS clinic_timezone
                FROM outbound_tasks t LEFT JOIN patients p ON p.id = t.patient_id"""
_FILTERS = """t.workspace_id = $1 AND ($2::text IS NULL OR t.status = $2)
              AND ($3::text IS NULL OR t.kind = $3) AND ($4::uuid IS NULL OR t.patient_id = $4)"""


@dataclass(frozen=True)
class TaskView:
    """A task with the callee's name and number and the clinic's timezone (None: the
    task has no patient, or its clinic no location)."""

    task: OutboundTask
    patient_name: str | None
    phone: str | None  # the number the dialer will call: the patient's, else the task's
    clinic_timezone: str | None


def _view(row: asyncpg.Record) -> TaskView:
    name = " ".join(p for p in (row["first_name"], row["last_name"]) if p) or None
    return TaskView(task_from_row(row), name, row["patient_phone"] or row["phone"],
                    row["clinic_timezone"])


async def task_page(
    pool: Executor, workspace_id: str, *, status: str | None = None, kind: str | None = None,
    patient_id: str | None = None, limit: int = 50, before: datetime | None = None,
) -> tuple[list[TaskView], datetime | None]:
    """A page of the workspace's tasks, newest first, created before `before`, and the
    `before` of the next page (None: no more). Tasks created at the same moment stay on
    one page (it may then hold more than `limit`), so paging by time never skips one."""
    args = (as_uuid(workspace_id), status, kind, as_uuid(patient_id))
    rows = await pool.fetch(
        f"""{_TASK_ROW}
            WHERE {_FILTERS} AND ($5::timestamptz IS NULL OR t.created_at < $5)
              AND t.created_at >= COALESCE((
                  SELECT t.created_at FROM outbound_tasks t
                  WHERE {_FILTERS} AND ($5::timestamptz IS NULL OR t.created_at < $5)
                  ORDER BY t.created_at DESC OFFSET $6 - 1 LIMIT 1), '-infinity')
            ORDER BY t.created_at DESC, t.id DESC""",
        *args, before, limit)
    if not rows:
        return [], None
    oldest = rows[-1]["created_at"]
    more = await pool.fetchval(
        f"SELECT EXISTS (SELECT 1 FROM outbound_tasks t WHERE {_FILTERS} AND t.created_at < $5)",
        *args, oldest)
    return [_view(row) for row in rows], oldest if more else None


async def task_view(pool: Executor, workspace_id: str, task_id: str) -> TaskView | None:
    row = await pool.fetchrow(f"{_TASK_ROW} WHERE t.id = $1 AND t.workspace_id = $2",
                              as_uuid(task_id), as_uuid(workspace_id))
    return _view(row) if row else None


@dataclass(frozen=True)
class Summary:
    """Tasks by status and by outcome, and dial attempts by outcome (every key present)."""

    by_status: dict[str, int]
    by_outcome: dict[str, int]
    attempts_by_outcome: dict[str, int]


async def summary(pool: Executor, workspace_id: str, *, kind: str | None = None) -> Summary:
    workspace = as_uuid(workspace_id)
    rows = await pool.fetch(
        """SELECT status, outcome, count(*) AS n FROM outbound_tasks
           WHERE workspace_id = $1 AND ($2::text IS NULL OR kind = $2)
           GROUP BY status, outcome""", workspace, kind)
    attempts = await pool.fetch(
        """SELECT a.outcome, count(*) AS n FROM outbound_attempts a
           JOIN outbound_tasks t ON t.id = a.task_id
           WHERE t.workspace_id = $1 AND ($2::text IS NULL OR t.kind = $2)
             AND a.outcome IS NOT NULL
           GROUP BY a.outcome""", workspace, kind)
    by_status = dict.fromkeys(STATUSES, 0)
    by_outcome = dict.fromkeys(OUTCOMES, 0)
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + row["n"]
        if row["outcome"] is not None:
            by_outcome[row["outcome"]] = by_outcome.get(row["outcome"], 0) + row["n"]
    by_attempt = dict.fromkeys(ATTEMPT_OUTCOMES, 0)
    by_attempt.update({row["outcome"]: row["n"] for row in attempts})
    return Summary(by_status, by_outcome, by_attempt)


# --- A new task's callee and clinic ---------------------------------------------------


@dataclass(frozen=True)
class Callee:
    id: str
    phone: str | None
    timezone: str | None


async def callee(pool: Executor, workspace_id: str, patient_id: str) -> Callee | None:
    """A patient of the workspace a task may be made for; None when not theirs."""
    row = await pool.fetchrow(
        "SELECT id, phone, timezone FROM patients WHERE id = $1 AND workspace_id = $2",
        as_uuid(patient_id), as_uuid(workspace_id))
    return Callee(str(row["id"]), row["phone"], row["timezone"]) if row else None


async def clinic_timezone(pool: Executor, service_id: str) -> str | None:
    """The clinic's timezone (None: it has no live location)."""
    return await pool.fetchval(f"SELECT {_CLINIC_ZONE.format(service='$1')}",
                               as_uuid(service_id))


async def patient_appointment(pool: Executor, patient_id: str,
                              appointment_id: str) -> bool:
    """Is the appointment the patient's?"""
    return bool(await pool.fetchval(
        "SELECT true FROM appointments WHERE id = $1 AND patient_id = $2",
        as_uuid(appointment_id), as_uuid(patient_id)))


# --- Where a task came from ----------------------------------------------------------


async def callback_request(pool: Executor, request_id: str) -> dict[str, Any] | None:
    """The callback request a task returns: why, the caller's message, how urgent."""
    row = await pool.fetchrow(
        """SELECT id, call_id, reason, message, urgent, status, created_at
           FROM callback_requests WHERE id = $1""", as_uuid(request_id))
    return _row_or_none(row)


async def appointment(pool: Executor, appointment_id: str) -> dict[str, Any] | None:
    """The appointment a reminder is about, with its type, practitioner and place."""
    row = await pool.fetchrow(
        """SELECT a.id, a.starts_at, a.ends_at, a.status, at.name AS appointment_type,
                  pr.name AS practitioner, l.name AS location, l.timezone
           FROM appointments a
           JOIN appointment_types at ON at.id = a.appointment_type_id
           JOIN practitioners pr ON pr.id = a.practitioner_id
           JOIN locations l ON l.id = a.location_id
           WHERE a.id = $1""", as_uuid(appointment_id))
    return _row_or_none(row)


async def offer_slot(pool: Executor, offer: dict[str, Any]) -> dict[str, Any]:
    """A waitlist offer's slot, its ids named (a name not found stays None)."""
    row = await pool.fetchrow(
        """SELECT (SELECT name FROM practitioners WHERE id = $1) AS practitioner,
                  (SELECT name FROM locations WHERE id = $2) AS location,
                  (SELECT timezone FROM locations WHERE id = $2) AS timezone,
                  (SELECT name FROM appointment_types WHERE id = $3) AS appointment_type""",
        as_uuid(offer.get("practitioner_id")), as_uuid(offer.get("location_id")),
        as_uuid(offer.get("appointment_type_id")))
    return {"starts_at": offer.get("starts_at"), "ends_at": offer.get("ends_at"), **dict(row)}


async def workspace_clinics(pool: Executor, workspace_id: str) -> list[str]:
    """The workspace's clinics (services with a live location), oldest first."""
    rows = await pool.fetch(
        f"SELECT s.id FROM services s WHERE s.workspace_id = $1 AND {IS_CLINIC} "
        "ORDER BY s.created_at, s.id", as_uuid(workspace_id))
    return [str(row["id"]) for row in rows]


@dataclass(frozen=True)
class PatientMatch:
    id: str
    name: str
    date_of_birth: date
    phone: str | None


def _like(text: str) -> str:
    """`text` matched anywhere by LIKE, its own wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def find_patients(pool: Executor, workspace_id: str, text: str, *,
                        limit: int = 10) -> list[PatientMatch]:
    """The workspace's patients whose name contains `text` (any case), or whose number
    contains its digits (three or more), by name."""
    digits = "".join(ch for ch in text if ch.isdigit())
    rows = await pool.fetch(
        r"""SELECT id, first_name, last_name, date_of_birth, phone FROM patients
            WHERE workspace_id = $1
              AND ((first_name || ' ' || last_name) ILIKE $2
                   OR (length($3) >= 3
                       AND regexp_replace(coalesce(phone, ''), '\D', '', 'g') LIKE $4))
            ORDER BY last_name, first_name, date_of_birth LIMIT $5""",
        as_uuid(workspace_id), _like(" ".join(text.split())), digits, _like(digits), limit)
    return [PatientMatch(str(r["id"]), f"{r['first_name']} {r['last_name']}",
                         r["date_of_birth"], r["phone"]) for r in rows]
