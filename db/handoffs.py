"""Warm hand-offs on record: where a call was put through, and how it ended.

An outcome moves once, from `dialling` (a late or repeated callback changes nothing);
`ended_at` is when the conference ended, after an answered hand-off.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from db.repositories import _row, as_uuid

OUTCOMES = ("answered", "no_answer", "busy", "failed", "declined")


@dataclass(frozen=True)
class Handoff:
    id: str
    call_id: str
    workspace_id: str
    reason: str
    destination: str
    number: str
    conference: str
    caller_call_sid: str
    operator_call_sid: str | None
    outcome: str
    summary: str
    seq_base: int
    started_at: datetime
    answered_at: datetime | None
    ended_at: datetime | None
    resumed_at: datetime | None = None
    caller_moved_at: datetime | None = None

    @property
    def reached(self) -> bool:
        return self.outcome == "answered"


def _handoff(row: asyncpg.Record) -> Handoff:
    values = dict(row)
    for name in ("id", "call_id", "workspace_id"):
        values[name] = str(values[name])
    return Handoff(**values)


async def begin(pool: asyncpg.Pool, *, call_id: str, workspace_id: str, reason: str,
                destination: str, number: str, conference: str, caller_call_sid: str,
                summary: str, seq_base: int = 0) -> Handoff:
    row = await pool.fetchrow(
        """INSERT INTO handoffs (call_id, workspace_id, reason, destination, number,
                                 conference, caller_call_sid, summary, seq_base)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *""",
        as_uuid(call_id), as_uuid(workspace_id), reason, destination, number, conference,
        caller_call_sid, summary, seq_base)
    return _handoff(row)


async def operator_dialled(pool: asyncpg.Pool, handoff_id: str, sid: str) -> None:
    await pool.execute("UPDATE handoffs SET operator_call_sid = $2 WHERE id = $1",
                       as_uuid(handoff_id), sid)


async def caller_moved(pool: asyncpg.Pool, handoff_id: str, at: datetime) -> Handoff:
    """The caller is in the conference now; the hand-off as it stands (its outcome may
    already be settled by the person's leg failing first)."""
    row = await pool.fetchrow(
        "UPDATE handoffs SET caller_moved_at = $2 WHERE id = $1 RETURNING *",
        as_uuid(handoff_id), at)
    return _handoff(row)


async def get(pool: asyncpg.Pool, handoff_id: str) -> Handoff | None:
    row = await pool.fetchrow("SELECT * FROM handoffs WHERE id = $1", as_uuid(handoff_id))
    return None if row is None else _handoff(row)


async def settle(pool: asyncpg.Pool, handoff_id: str, outcome: str,
                 at: datetime) -> Handoff | None:
    """The hand-off's outcome, if it had none yet; None when it already had one."""
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown hand-off outcome {outcome!r}")
    row = await pool.fetchrow(
        """UPDATE handoffs SET outcome = $2,
               answered_at = CASE WHEN $2 = 'answered' THEN $3 ELSE answered_at END,
               ended_at = CASE WHEN $2 = 'answered' THEN ended_at ELSE $3 END
           WHERE id = $1 AND outcome = 'dialling' RETURNING *""",
        as_uuid(handoff_id), outcome, at)
    return None if row is None else _handoff(row)


async def ended(pool: asyncpg.Pool, handoff_id: str, at: datetime) -> None:
    """The conference is over (after an answered hand-off)."""
    await pool.execute("UPDATE handoffs SET ended_at = coalesce(ended_at, $2) WHERE id = $1",
                       as_uuid(handoff_id), at)


async def resume_call(pool: asyncpg.Pool, call_id: str, owner_instance: str | None
                      ) -> tuple[dict, Handoff] | None:
    """Open the call's record again for the agent, once, after a hand-off that did not
    reach anyone: the call row as it is now, and that hand-off. None when the call had no
    such hand-off, or was taken back already (a stream cannot claim it twice)."""
    async with pool.acquire() as connection, connection.transaction():
        handoff = await connection.fetchrow(
            """UPDATE handoffs SET resumed_at = now()
               WHERE id = (SELECT id FROM handoffs WHERE call_id = $1 AND resumed_at IS NULL
                             AND outcome IN ('no_answer', 'busy', 'failed', 'declined')
                           ORDER BY started_at DESC LIMIT 1)
               RETURNING *""", as_uuid(call_id))
        if handoff is None:
            return None
        call = await connection.fetchrow(
            """UPDATE calls SET status = 'in_progress', ended_at = NULL,
                   completion_reason = NULL, owner_instance = coalesce($2, owner_instance)
               WHERE id = $1 RETURNING *""", as_uuid(call_id), owner_instance)
    return _row(call), _handoff(handoff)


async def live_for(pool: asyncpg.Pool, call_id: str) -> Handoff | None:
    """The call's hand-off still under way (ringing, or the person joined and the
    conference has not ended); None when there is none."""
    row = await pool.fetchrow(
        """SELECT * FROM handoffs WHERE call_id = $1 AND ended_at IS NULL
               AND outcome IN ('dialling', 'answered')
           ORDER BY started_at DESC LIMIT 1""", as_uuid(call_id))
    return None if row is None else _handoff(row)


async def for_call(pool: asyncpg.Pool, call_id: str) -> list[Handoff]:
    rows = await pool.fetch("SELECT * FROM handoffs WHERE call_id = $1 ORDER BY started_at",
                            as_uuid(call_id))
    return [_handoff(row) for row in rows]
