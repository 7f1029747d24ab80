"""Calls left open that no one will close: found, then closed with a reason and an event.

Two kinds: the calls of an instance that is gone (`db/instances.gone_owners`), and
answered calls whose media stream never came. Each close is one transaction that takes
the call only if it is still open (two pods sweeping at once close it once), stamps
`updated_at` so a late replay of an older update cannot reopen it, and appends its
events after the call's last one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from db.repositories import as_uuid

# The latest sign of life of an open call: its start, its stream, its owner's heartbeat,
# its last event (never later than now).
_LAST_SEEN = """LEAST(now(), GREATEST(c.started_at, c.connected_at, i.heartbeat_at,
                     (SELECT max(e.created_at) FROM call_events e WHERE e.call_id = c.id)))"""


@dataclass(frozen=True)
class OpenCall:
    call_id: str
    owner: str | None
    status: str
    connected: bool
    last_seen: datetime


@dataclass(frozen=True)
class Closure:
    """How to close one call: its reason, when it ended, its events (type, data), its
    recording (if one was found), and whether a stream that came meanwhile keeps it open."""

    call_id: str
    reason: str
    ended_at: datetime | None = None  # None: now
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    recording_path: str | None = None
    only_if_never_streamed: bool = False


def _open_call(row: asyncpg.Record) -> OpenCall:
    return OpenCall(call_id=str(row["id"]), owner=row["owner_instance"], status=row["status"],
                    connected=row["connected_at"] is not None, last_seen=row["last_seen"])


async def calls_of(pool: asyncpg.Pool, owners: Sequence[str], *, unowned_older_than_s: float,
                   limit: int) -> list[OpenCall]:
    """Open calls (`ringing` or `in_progress`, no end) owned by `owners`, and open calls with
    no owner whose row is older than `unowned_older_than_s` (no live call lasts that
    long; a `started_at` given by an import does not count), oldest first."""
    rows = await pool.fetch(
        f"""SELECT c.id, c.owner_instance, c.status, c.connected_at, {_LAST_SEEN} AS last_seen
            FROM calls c LEFT JOIN service_instances i ON i.id = c.owner_instance
            WHERE c.ended_at IS NULL AND c.status IN ('ringing', 'in_progress')
              AND (c.owner_instance = ANY($1::text[])
                   OR (c.owner_instance IS NULL
                       AND c.created_at < now() - make_interval(secs => $2)))
            ORDER BY c.started_at LIMIT $3""",
        list(owners), unowned_older_than_s, limit,
    )
    return [_open_call(row) for row in rows]


async def never_streamed(pool: asyncpg.Pool, owner: str, *, older_than_s: float, limit: int
                         ) -> list[OpenCall]:
    """Answered calls (`ringing`) owned by `owner` or by no one, whose media stream has not
    come `older_than_s` after the answer (the row's creation), oldest first."""
    rows = await pool.fetch(
        f"""SELECT c.id, c.owner_instance, c.status, c.connected_at, {_LAST_SEEN} AS last_seen
            FROM calls c LEFT JOIN service_instances i ON i.id = c.owner_instance
            WHERE c.ended_at IS NULL AND c.connected_at IS NULL AND c.status = 'ringing'
              AND (c.owner_instance = $1 OR c.owner_instance IS NULL)
              AND c.created_at < now() - make_interval(secs => $2)
            ORDER BY c.started_at LIMIT $3""",
        owner, older_than_s, limit,
    )
    return [_open_call(row) for row in rows]


async def close(pool: asyncpg.Pool, closure: Closure) -> bool:
    """Close one call if it is still open; False when it was closed (or streamed) meanwhile."""
    call = as_uuid(closure.call_id)
    if call is None:
        return False
    async with pool.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            """UPDATE calls SET status = 'completed', ended_at = COALESCE($2, now()),
                   completion_reason = $3,
                   duration_s = CASE WHEN connected_at IS NULL THEN NULL ELSE GREATEST(0,
                       EXTRACT(EPOCH FROM (COALESCE($2, now()) - connected_at)))::float8 END,
                   recording_path = COALESCE(recording_path, $4),
                   updated_at = GREATEST(updated_at, now())
               WHERE id = $1 AND ended_at IS NULL AND (NOT $5 OR connected_at IS NULL)
               RETURNING ended_at, COALESCE(connected_at, started_at) AS since""",
            call, closure.ended_at, closure.reason, closure.recording_path,
            closure.only_if_never_streamed,
        )
        if row is None:
            return False
        at_ms = max(0, int((row["ended_at"] - row["since"]).total_seconds() * 1000))
        for type_, data in closure.events:
            await conn.execute(
                """INSERT INTO call_events (call_id, seq, type, data, at_ms)
                   SELECT $1, COALESCE(max(seq), 0) + 1, $2, $3, $4
                   FROM call_events WHERE call_id = $1""",
                call, type_, data, at_ms,
            )
    return True
