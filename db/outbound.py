"""Outbound tasks: every call the clinic owes someone, and each attempt to make it.

A task is the promise ("we'll call you back"); it is written together with its dial job
(`outbound_dial`, keyed `outbound:<task id>`), so a task exists exactly when something
will dial it. A person may claim a task instead of the dialer; a callee who asks not to
be called again has every open task of theirs cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time
from typing import Any

import asyncpg

from db import jobs
from db.repositories import as_uuid

DIAL_JOB = "outbound_dial"
OPEN_STATUSES = ("pending", "in_progress")
KINDS = ("scheduled", "callback", "waitlist_offer", "reminder", "checkin")
OUTCOMES = ("answered", "voicemail", "no_answer", "busy", "failed", "opted_out",
            "wrong_person", "slot_gone", "claimed")
WEEKDAYS = (0, 1, 2, 3, 4)
EVERY_DAY = (0, 1, 2, 3, 4, 5, 6)


def dial_key(task_id: str) -> str:
    """The dedupe key of a task's dial job: one queued or running per task."""
    return f"outbound:{task_id}"


@dataclass(frozen=True)
class TaskSpec:
    """A task to create; `not_before` is the earliest it may be dialled."""

    workspace_id: str
    service_id: str | None
    kind: str
    reason: str
    goal: str
    timezone: str
    not_before: datetime
    priority: int = 5
    patient_id: str | None = None
    phone: str | None = None
    window_start: time = time(9)
    window_end: time = time(17)
    window_days: tuple[int, ...] = WEEKDAYS
    max_attempts: int = 3
    retry_backoff_minutes: int = 60
    written_by: str = "system"
    confidence: str = "verified"
    source_call: str | None = None
    callback_request_id: str | None = None
    waitlist_entry_id: str | None = None
    appointment_id: str | None = None
    offer: dict[str, Any] | None = None


@dataclass(frozen=True)
class OutboundTask:
    id: str
    workspace_id: str
    service_id: str | None
    kind: str
    status: str
    outcome: str | None
    reason: str
    goal: str
    priority: int
    patient_id: str | None
    phone: str | None
    timezone: str
    window_start: time
    window_end: time
    window_days: tuple[int, ...]
    not_before: datetime
    next_attempt_at: datetime | None
    max_attempts: int
    retry_backoff_minutes: int
    attempts_made: int
    claimed_by: str | None
    claimed_at: datetime | None
    last_error: str | None
    source_call: str | None
    callback_request_id: str | None
    waitlist_entry_id: str | None
    appointment_id: str | None
    offer: dict[str, Any] | None
    written_by: str
    created_at: datetime
    updated_at: datetime


def _id(value: Any) -> str | None:
    return str(value) if value is not None else None


def task_from_row(row: asyncpg.Record) -> OutboundTask:
    return OutboundTask(
        id=str(row["id"]), workspace_id=str(row["workspace_id"]),
        service_id=_id(row["service_id"]), kind=row["kind"], status=row["status"],
        outcome=row["outcome"], reason=row["reason"], goal=row["goal"],
        priority=row["priority"], patient_id=_id(row["patient_id"]), phone=row["phone"],
        timezone=row["timezone"], window_start=row["window_start"],
        window_end=row["window_end"], window_days=tuple(row["window_days"]),
        not_before=row["not_before"], next_attempt_at=row["next_attempt_at"],
        max_attempts=row["max_attempts"], retry_backoff_minutes=row["retry_backoff_minutes"],
        attempts_made=row["attempts"], claimed_by=row["claimed_by"],
        claimed_at=row["claimed_at"], last_error=row["last_error"],
        source_call=_id(row["source_call"]),
        callback_request_id=_id(row["callback_request_id"]),
        waitlist_entry_id=_id(row["waitlist_entry_id"]),
        appointment_id=_id(row["appointment_id"]), offer=row["offer"],
        written_by=row["written_by"], created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


async def create_task(conn: asyncpg.Connection, spec: TaskSpec) -> str:
    """Write the task and queue its dial job for `not_before`, in the caller's
    transaction (open one around this call: both are written or neither)."""
    if spec.kind not in KINDS:
        raise ValueError(f"unknown task kind {spec.kind!r}")
    task_id = await conn.fetchval(
        """INSERT INTO outbound_tasks (workspace_id, service_id, kind, patient_id, phone,
               reason, goal, priority, timezone, window_start, window_end, window_days,
               not_before, next_attempt_at, max_attempts, retry_backoff_minutes, written_by,
               confidence, source_call, callback_request_id, waitlist_entry_id,
               appointment_id, offer)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14, $15,
                   $16, $17, $18, $19, $20, $21, $22)
           RETURNING id""",
        as_uuid(spec.workspace_id), as_uuid(spec.service_id), spec.kind,
        as_uuid(spec.patient_id), spec.phone, spec.reason, spec.goal, spec.priority,
        spec.timezone, spec.window_start, spec.window_end, list(spec.window_days),
        spec.not_before, spec.max_attempts, spec.retry_backoff_minutes, spec.written_by,
        spec.confidence, as_uuid(spec.source_call), as_uuid(spec.callback_request_id),
        as_uuid(spec.waitlist_entry_id), as_uuid(spec.appointment_id), spec.offer,
    )
    await schedule_dial(conn, str(task_id), spec.not_before, spec.priority)
    return str(task_id)


async def schedule_dial(conn: asyncpg.Connection | asyncpg.Pool, task_id: str,
                        at: datetime, priority: int) -> int | None:
    """Queue the task's dial job for `at` (skipped when one is already queued)."""
    delay = at - datetime.now(UTC)
    return await jobs.enqueue(conn, DIAL_JOB, {"task_id": task_id}, priority=priority,
                              delay=delay if delay.total_seconds() > 0 else None,
                              dedupe_key=dial_key(task_id))


async def get_task(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str | None,
                   task_id: str) -> OutboundTask | None:
    """A task (of that workspace, when one is given); None for an unknown id."""
    row = await pool.fetchrow(
        "SELECT * FROM outbound_tasks WHERE id = $1 AND ($2::uuid IS NULL OR workspace_id = $2)",
        as_uuid(task_id), as_uuid(workspace_id))
    return task_from_row(row) if row else None


async def list_tasks(
    pool: asyncpg.Pool, workspace_id: str, *, status: str | None = None,
    kind: str | None = None, patient_id: str | None = None, limit: int = 100,
    before: datetime | None = None,
) -> list[OutboundTask]:
    """A workspace's tasks, newest first, filtered."""
    rows = await pool.fetch(
        """SELECT * FROM outbound_tasks
           WHERE workspace_id = $1 AND ($2::text IS NULL OR status = $2)
             AND ($3::text IS NULL OR kind = $3) AND ($4::uuid IS NULL OR patient_id = $4)
             AND ($5::timestamptz IS NULL OR created_at < $5)
           ORDER BY created_at DESC LIMIT $6""",
        as_uuid(workspace_id), status, kind, as_uuid(patient_id), before, limit)
    return [task_from_row(r) for r in rows]


async def _close_open(conn: asyncpg.Connection, workspace_id: str | None, task_id: str, *,
                      status: str, outcome: str | None, claimed_by: str | None = None) -> bool:
    row = await conn.fetchrow(
        """UPDATE outbound_tasks
           SET status = $3, outcome = COALESCE($4, outcome), claimed_by = $5,
               claimed_at = CASE WHEN $5::text IS NULL THEN claimed_at ELSE now() END,
               next_attempt_at = NULL, updated_at = now()
           WHERE id = $1 AND ($2::uuid IS NULL OR workspace_id = $2)
             AND status = ANY($6::text[])
           RETURNING id""",
        as_uuid(task_id), as_uuid(workspace_id), status, outcome, claimed_by,
        list(OPEN_STATUSES))
    if row is None:
        return False
    await jobs.cancel_key(conn, dial_key(task_id))
    return True


async def cancel_task(pool: asyncpg.Pool, workspace_id: str, task_id: str) -> bool:
    """Cancel an open task and its dial job; False when it is not open (or not theirs)."""
    async with pool.acquire() as conn, conn.transaction():
        return await _close_open(conn, workspace_id, task_id, status="cancelled", outcome=None)


async def claim_task(pool: asyncpg.Pool, workspace_id: str, task_id: str, *,
                     actor: str) -> bool:
    """A person takes the task: the dialer will not call; False when it is not open."""
    async with pool.acquire() as conn, conn.transaction():
        return await _close_open(conn, workspace_id, task_id, status="claimed",
                                 outcome="claimed", claimed_by=actor)


async def retry_task(pool: asyncpg.Pool, workspace_id: str, task_id: str, *,
                     at: datetime | None = None) -> bool:
    """A failed or cancelled task is pending again with one more attempt allowed and is
    dialled from `at` (now); False when the task is open or done (or not theirs)."""
    at = at or datetime.now(UTC)
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """UPDATE outbound_tasks
               SET status = 'pending', outcome = NULL, last_error = NULL,
                   max_attempts = LEAST(10, GREATEST(max_attempts, attempts + 1)),
                   not_before = $3, next_attempt_at = $3, updated_at = now()
               WHERE id = $1 AND workspace_id = $2 AND status IN ('failed', 'cancelled')
               RETURNING priority""",
            as_uuid(task_id), as_uuid(workspace_id), at)
        if row is None:
            return False
        await schedule_dial(conn, task_id, at, row["priority"])
        return True


async def finish_task(pool: asyncpg.Pool | asyncpg.Connection, task_id: str, *,
                      outcome: str, status: str = "done", detail: str = "") -> bool:
    """Close an open task with its outcome (the conversation's, or the dialer's when the
    attempts are spent); False when it was already closed."""
    if outcome not in OUTCOMES or status not in ("done", "failed"):
        raise ValueError(f"cannot finish a task as {status}/{outcome}")
    row = await pool.fetchrow(
        """UPDATE outbound_tasks
           SET status = $2, outcome = $3, last_error = NULLIF($4, ''), next_attempt_at = NULL,
               updated_at = now()
           WHERE id = $1 AND status = ANY($5::text[]) RETURNING id""",
        as_uuid(task_id), status, outcome, detail, list(OPEN_STATUSES))
    return row is not None


async def set_do_not_call(pool: asyncpg.Pool, workspace_id: str, *, patient_id: str | None,
                          phone: str | None, call_id: str | None) -> int:
    """Record "please don't call me again" for the patient (else the number) and cancel
    every open task that would call them; how many tasks were cancelled."""
    async with pool.acquire() as conn, conn.transaction():
        if patient_id is not None:
            await conn.execute(
                "UPDATE patients SET do_not_call = true, do_not_call_at = now() "
                "WHERE id = $1 AND workspace_id = $2", as_uuid(patient_id), as_uuid(workspace_id))
        if phone:
            await conn.execute(
                """INSERT INTO do_not_call_numbers (workspace_id, phone, call_id)
                   VALUES ($1, $2, $3) ON CONFLICT (workspace_id, phone) DO NOTHING""",
                as_uuid(workspace_id), phone, as_uuid(call_id))
        rows = await conn.fetch(
            """SELECT id FROM outbound_tasks
               WHERE workspace_id = $1 AND status = ANY($4::text[])
                 AND (($2::uuid IS NOT NULL AND patient_id = $2)
                      OR ($3::text IS NOT NULL AND phone = $3))""",
            as_uuid(workspace_id), as_uuid(patient_id), phone, list(OPEN_STATUSES))
        for row in rows:
            await conn.execute(
                "UPDATE outbound_tasks SET status = 'cancelled', outcome = 'opted_out', "
                "next_attempt_at = NULL, updated_at = now() WHERE id = $1", row["id"])
            await jobs.cancel_key(conn, dial_key(str(row["id"])))
        return len(rows)


async def may_call(pool: asyncpg.Pool | asyncpg.Connection, workspace_id: str, *,
                   patient_id: str | None, phone: str | None) -> bool:
    """False when the patient or the number asked not to be called."""
    return not await pool.fetchval(
        """SELECT EXISTS (SELECT 1 FROM patients
                          WHERE id = $2 AND workspace_id = $1 AND do_not_call)
               OR EXISTS (SELECT 1 FROM do_not_call_numbers
                          WHERE workspace_id = $1 AND phone = $3)""",
        as_uuid(workspace_id), as_uuid(patient_id), phone or "")


@dataclass(frozen=True)
class Attempt:
    id: str
    task_id: str
    number: int
    call_id: str | None
    call_sid: str | None
    to_number: str
    from_number: str | None
    status: str
    outcome: str | None
    detail: str
    started_at: datetime
    ended_at: datetime | None


def attempt_from_row(row: asyncpg.Record) -> Attempt:
    return Attempt(
        id=str(row["id"]), task_id=str(row["task_id"]), number=row["number"],
        call_id=_id(row["call_id"]), call_sid=row["call_sid"], to_number=row["to_number"],
        from_number=row["from_number"], status=row["status"], outcome=row["outcome"],
        detail=row["detail"], started_at=row["started_at"], ended_at=row["ended_at"])


async def attempts(pool: asyncpg.Pool, task_id: str) -> list[Attempt]:
    """A task's dial attempts, first first."""
    rows = await pool.fetch(
        "SELECT * FROM outbound_attempts WHERE task_id = $1 ORDER BY number", as_uuid(task_id))
    return [attempt_from_row(r) for r in rows]

