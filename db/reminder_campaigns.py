"""Reminder campaigns, one per clinic: on or off, how many hours before an appointment
the reminder call may come, and which appointment types it covers (none listed: all).
The reminder sweep (`db/reminders.py`) reads the enabled ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from db.repositories import as_uuid

DEFAULT_LEAD_HOURS = 24


@dataclass(frozen=True)
class Campaign:
    service_id: str
    workspace_id: str
    enabled: bool
    lead_hours: int
    appointment_type_ids: tuple[str, ...]  # empty: every type


def _campaign(row: asyncpg.Record) -> Campaign:
    return Campaign(str(row["service_id"]), str(row["workspace_id"]), row["enabled"],
                    row["lead_hours"], tuple(str(t) for t in row["appointment_type_ids"]))


async def get_campaign(pool: asyncpg.Pool, workspace_id: str, service_id: str) -> Campaign:
    """The clinic's campaign; a clinic that never set one has it off, 24 hours ahead, for
    every type."""
    row = await pool.fetchrow(
        "SELECT * FROM reminder_campaigns WHERE service_id = $1 AND workspace_id = $2",
        as_uuid(service_id), as_uuid(workspace_id))
    if row is None:
        return Campaign(service_id, workspace_id, False, DEFAULT_LEAD_HOURS, ())
    return _campaign(row)


async def put_campaign(
    pool: asyncpg.Pool, workspace_id: str, service_id: str, *, enabled: bool, lead_hours: int,
    appointment_type_ids: Sequence[str],
) -> Campaign:
    """Set the clinic's campaign (the clinic must be the workspace's; its listed types
    must be the clinic's own). Raises LookupError for another workspace's clinic and
    ValueError for a lead time out of 1 to 336 hours or a type the clinic does not offer."""
    if not 1 <= lead_hours <= 336:
        raise ValueError("lead_hours must be 1 to 336")
    types = list(dict.fromkeys(as_uuid(t) for t in appointment_type_ids))
    async with pool.acquire() as conn, conn.transaction():
        if not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM services WHERE id = $1 AND workspace_id = $2)",
                as_uuid(service_id), as_uuid(workspace_id)):
            raise LookupError("no such clinic in this workspace")
        if None in types or await conn.fetchval(
                """SELECT count(*) FROM appointment_types
                   WHERE service_id = $1 AND id = ANY($2::uuid[])""",
                as_uuid(service_id), types) != len(types):
            raise ValueError("an appointment type is not one this clinic offers")
        row = await conn.fetchrow(
            """INSERT INTO reminder_campaigns (service_id, workspace_id, enabled, lead_hours,
                                               appointment_type_ids)
               VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (service_id) DO UPDATE
               SET enabled = $3, lead_hours = $4, appointment_type_ids = $5, updated_at = now()
               RETURNING *""",
            as_uuid(service_id), as_uuid(workspace_id), enabled, lead_hours, types)
    return _campaign(row)


async def enabled_campaigns(pool: asyncpg.Pool) -> list[Campaign]:
    """Every clinic's campaign that is on."""
    rows = await pool.fetch("SELECT * FROM reminder_campaigns WHERE enabled ORDER BY service_id")
    return [_campaign(r) for r in rows]
