"""What the outbound dispatcher writes around each dial, so that a process killed at any
point leaves rows that say exactly how far it got.

An attempt is written (`dialing`, no call SID) together with its task's move to
`in_progress`, and committed, before Twilio is asked to place the call; the SID Twilio
gives back is stored after. An attempt still `dialing` without a SID is therefore one
whose outcome at Twilio is unknown: the dispatcher asks Twilio before dialling again.
An attempt ends once (`settle`), and its task's next step (another try at a time, or
closed with its outcome) is written in the same transaction, with the task's dial job
moved to that time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from db import jobs
from db.outbound import (
    DIAL_JOB,
    OPEN_STATUSES,
    Attempt,
    OutboundTask,
    attempt_from_row,
    dial_key,
)
from db.repositories import as_uuid

Executor = asyncpg.Pool | asyncpg.Connection
# The attempt's progress, in the order it can only move forward.
PROGRESS = ("dialing", "ringing", "in_progress", "ended")


async def get_attempt(pool: Executor, attempt_id: str) -> Attempt | None:
    attempt = as_uuid(attempt_id)
    if attempt is None:
        return None
    row = await pool.fetchrow("SELECT * FROM outbound_attempts WHERE id = $1", attempt)
    return attempt_from_row(row) if row else None


async def latest_attempt(pool: Executor, task_id: str) -> Attempt | None:
    row = await pool.fetchrow(
        "SELECT * FROM outbound_attempts WHERE task_id = $1 ORDER BY number DESC LIMIT 1",
        as_uuid(task_id))
    return attempt_from_row(row) if row else None


async def attempt_for_call(pool: Executor, call_id: str) -> Attempt | None:
    """The attempt whose answered call is `call_id`."""
    row = await pool.fetchrow("SELECT * FROM outbound_attempts WHERE call_id = $1",
                              as_uuid(call_id))
    return attempt_from_row(row) if row else None


async def sids_taken(pool: Executor, sids: list[str]) -> set[str]:
    """Which of these call SIDs an attempt already holds."""
    rows = await pool.fetch(
        "SELECT call_sid FROM outbound_attempts WHERE call_sid = ANY($1::text[])", sids)
    return {row["call_sid"] for row in rows}


async def recent_dials(pool: Executor, workspace_id: str, number: str, since: datetime, *,
                       excluding: str | None = None) -> list[datetime]:
    """When the workspace's attempts to `number` since `since` started, oldest first."""
    rows = await pool.fetch(
        """SELECT a.started_at FROM outbound_attempts a
             JOIN outbound_tasks t ON t.id = a.task_id
            WHERE t.workspace_id = $1 AND a.to_number = $2 AND a.started_at > $3
              AND ($4::uuid IS NULL OR a.id <> $4)
            ORDER BY a.started_at""",
        as_uuid(workspace_id), number, since, as_uuid(excluding))
    return [row["started_at"] for row in rows]


async def begin_attempt(pool: asyncpg.Pool, task: OutboundTask, *, to_number: str,
                        from_number: str, at: datetime) -> Attempt | None:
    """The task's next attempt, written `dialing` with the task `in_progress`, in one
    transaction; None when the task moved meanwhile (no longer pending, or another
    attempt was begun), so no two dials can start from one pending task."""
    async with pool.acquire() as conn, conn.transaction():
        number = await conn.fetchval(
            """UPDATE outbound_tasks
                  SET status = 'in_progress', attempts = attempts + 1, next_attempt_at = NULL,
                      last_error = NULL, updated_at = now()
                WHERE id = $1 AND status = 'pending' AND attempts = $2
            RETURNING attempts""",
            as_uuid(task.id), task.attempts_made)
        if number is None:
            return None
        row = await conn.fetchrow(
            """INSERT INTO outbound_attempts (task_id, number, to_number, from_number,
                                              status, started_at)
               VALUES ($1, $2, $3, $4, 'dialing', $5) RETURNING *""",
            as_uuid(task.id), number, to_number, from_number, at)
        return attempt_from_row(row)


async def progress(pool: Executor, attempt_id: str, *, status: str,
                   sid: str | None = None) -> bool:
    """The attempt reached `status` (never moved back, never past `ended`), with its call
    SID when it had none; False when it has another SID (not this attempt's call)."""
    result = await pool.execute(
        """UPDATE outbound_attempts
              SET call_sid = COALESCE(call_sid, $2),
                  status = CASE WHEN array_position($4::text[], status)
                                     < array_position($4::text[], $3) THEN $3 ELSE status END
            WHERE id = $1 AND ($2::text IS NULL OR call_sid IS NULL OR call_sid = $2)""",
        as_uuid(attempt_id), sid, status, list(PROGRESS))
    return result == "UPDATE 1"


async def answered(pool: Executor, attempt_id: str, *, sid: str | None, outcome: str,
                   call_id: str | None, detail: str) -> None:
    """What answered the attempt's call (a person, a machine, a fax) and the call record
    it has, decided once at the answer."""
    await pool.execute(
        """UPDATE outbound_attempts
              SET call_sid = COALESCE(call_sid, $2), outcome = COALESCE(outcome, $3),
                  call_id = COALESCE(call_id, $4), detail = $5,
                  status = CASE WHEN status = 'ended' THEN status ELSE 'in_progress' END
            WHERE id = $1""",
        as_uuid(attempt_id), sid, outcome, as_uuid(call_id), detail)


async def wait(pool: Executor, task_id: str, *, until: datetime | None,
               why: str | None) -> None:
    """An open task waits: when it is next tried (None: unknown), and why it has not been
    (None: only the time has not come; what it said before stays)."""
    await pool.execute(
        """UPDATE outbound_tasks
              SET next_attempt_at = $2, last_error = COALESCE($3, last_error),
                  updated_at = now()
            WHERE id = $1 AND status = ANY($4::text[])""",
        as_uuid(task_id), until, why, list(OPEN_STATUSES))


async def call_off(pool: Executor, task_id: str, outcome: str) -> bool:
    """The call is no longer wanted (`opted_out`: the callee asked not to be called;
    `slot_gone`: the offered slot went): the task is cancelled with that outcome."""
    result = await pool.execute(
        """UPDATE outbound_tasks
              SET status = 'cancelled', outcome = $3, next_attempt_at = NULL,
                  updated_at = now()
            WHERE id = $1 AND status = ANY($2::text[])""",
        as_uuid(task_id), list(OPEN_STATUSES), outcome)
    return result == "UPDATE 1"


async def back_to_pending(pool: Executor, task_id: str, *, why: str | None) -> None:
    """A task marked in progress with no attempt to follow is pending again."""
    await pool.execute(
        """UPDATE outbound_tasks SET status = 'pending', last_error = $2, updated_at = now()
            WHERE id = $1 AND status = 'in_progress'""", as_uuid(task_id), why)


async def fresh_retries(pool: Executor, task_id: str) -> None:
    """A dial job that waits (for a calling window, a free line) has not failed: it keeps
    all its retries for a real error."""
    await jobs.forgive_failures(pool, dial_key(task_id))


async def wake(conn: Executor, task_id: str, *, delay: timedelta, priority: int) -> None:
    """The task's dial job runs `delay` from now (queued if none is queued or running)."""
    await jobs.run_in(conn, DIAL_JOB, {"task_id": task_id}, dedupe_key=dial_key(task_id),
                      delay=delay, priority=priority)


@dataclass(frozen=True)
class Retry:
    """Try the task again at `at` (`delay` from now)."""

    at: datetime
    delay: timedelta
    why: str


@dataclass(frozen=True)
class Close:
    """Close the task with its outcome."""

    status: str  # done | failed | cancelled
    outcome: str
    why: str = ""


@dataclass(frozen=True)
class Keep:
    """Leave the task as it is: the answered call's own end closes it (with what the
    conversation found), and the dispatcher after it if that end never comes."""


NextStep = Retry | Close | Keep


async def settle(pool: asyncpg.Pool, attempt: Attempt, *, outcome: str, detail: str,
                 at: datetime, step: NextStep, priority: int) -> Attempt | None:
    """End the attempt with `outcome` and take the task's next step, in one transaction;
    None when the attempt had already ended (a status callback repeated, or the
    dispatcher got there first)."""
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """UPDATE outbound_attempts
                  SET status = 'ended', outcome = $2, ended_at = $3,
                      detail = CASE WHEN detail = '' THEN $4 ELSE detail || '; ' || $4 END
                WHERE id = $1 AND status <> 'ended'
            RETURNING *""",
            as_uuid(attempt.id), outcome, at, detail)
        if row is None:
            return None
        if isinstance(step, Retry):
            moved = await conn.execute(
                """UPDATE outbound_tasks
                      SET status = 'pending', next_attempt_at = $2, last_error = $3,
                          updated_at = now()
                    WHERE id = $1 AND status = ANY($4::text[])""",
                as_uuid(attempt.task_id), step.at, step.why, list(OPEN_STATUSES))
            if moved == "UPDATE 1":
                await wake(conn, attempt.task_id, delay=step.delay, priority=priority)
        elif isinstance(step, Close):
            await conn.execute(
                """UPDATE outbound_tasks
                      SET status = $2, outcome = $3, last_error = NULLIF($4, ''),
                          next_attempt_at = NULL, updated_at = now()
                    WHERE id = $1 AND status = ANY($5::text[])""",
                as_uuid(attempt.task_id), step.status, step.outcome, step.why,
                list(OPEN_STATUSES))
        return attempt_from_row(row)


async def note_on_unstreamed_call(pool: Executor, call_id: str, type_: str,
                                  data: dict[str, Any]) -> None:
    """An event on an outbound call's record that never streamed (a machine, a fax, a
    callee we could not talk to); a streamed call's own log numbers its events, so
    nothing is added to one."""
    await pool.execute(
        """INSERT INTO call_events (call_id, seq, type, data, at_ms)
           SELECT c.id, COALESCE((SELECT max(seq) FROM call_events WHERE call_id = c.id), 0)
                        + 1, $2, $3, 0
             FROM calls c WHERE c.id = $1 AND c.connected_at IS NULL
           ON CONFLICT (call_id, seq) DO NOTHING""",
        as_uuid(call_id), type_, data)

