"""Reminder campaigns: per clinic, whether its patients get a reminder, by a call or a
text, how many hours before the appointment, and for which appointment types (none
listed: every type).

A clinic with no stored campaign has none running. A campaign only ever names the
clinic's own appointment types, and only a clinic of the workspace that sets it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

import asyncpg

from db.repositories import as_uuid

Executor = asyncpg.Pool | asyncpg.Connection
MIN_LEAD_HOURS = 1
MAX_LEAD_HOURS = 336  # two weeks
DEFAULT_LEAD_HOURS = 24
Channel = Literal["call", "text"]
CHANNELS: tuple[Channel, ...] = ("call", "text")


class CampaignRefused(ValueError):
    """The campaign cannot be stored as asked; the message says why."""


class ClinicNotFound(CampaignRefused):
    """The clinic is unknown, or belongs to another workspace."""


@dataclass(frozen=True)
class Campaign:
    service_id: str
    workspace_id: str
    enabled: bool
    lead_hours: int
    appointment_type_ids: tuple[str, ...]  # empty: every type of the clinic
    channel: Channel = "call"


def _campaign(row: asyncpg.Record) -> Campaign:
    return Campaign(service_id=str(row["service_id"]), workspace_id=str(row["workspace_id"]),
                    enabled=row["enabled"], lead_hours=row["lead_hours"],
                    appointment_type_ids=tuple(str(t) for t in row["appointment_type_ids"]),
                    channel=row["channel"])


async def get_campaign(pool: Executor, workspace_id: str, service_id: str) -> Campaign | None:
    """The clinic's campaign; None when none is stored (or the clinic is not the
    workspace's)."""
    row = await pool.fetchrow(
        "SELECT * FROM reminder_campaigns WHERE service_id = $1 AND workspace_id = $2",
        as_uuid(service_id), as_uuid(workspace_id))
    return _campaign(row) if row else None


async def put_campaign(pool: Executor, workspace_id: str, service_id: str, *, enabled: bool,
                       lead_hours: int, appointment_type_ids: tuple[str, ...] | list[str],
                       channel: Channel = "call") -> Campaign:
    """Store the clinic's campaign (created or replaced). Raises `ClinicNotFound` for a
    clinic that is not the workspace's, `CampaignRefused` for a lead time out of range,
    a channel that is neither a call nor a text, or a type that is not one of the
    clinic's live types. Given a connection, it writes in the caller's transaction."""
    if isinstance(pool, asyncpg.Pool):
        async with pool.acquire() as conn, conn.transaction():
            return await _put(conn, workspace_id, service_id, enabled, lead_hours,
                              appointment_type_ids, channel)
    return await _put(pool, workspace_id, service_id, enabled, lead_hours, appointment_type_ids,
                      channel)


async def _put(conn: asyncpg.Connection, workspace_id: str, service_id: str, enabled: bool,
               lead_hours: int, type_ids: tuple[str, ...] | list[str],
               channel: Channel) -> Campaign:
    if channel not in CHANNELS:
        raise CampaignRefused(f"a reminder is a call or a text, not {channel!r}")
    if not MIN_LEAD_HOURS <= lead_hours <= MAX_LEAD_HOURS:
        raise CampaignRefused(f"the lead time is {MIN_LEAD_HOURS} to {MAX_LEAD_HOURS} hours, "
                              f"not {lead_hours}")
    service = as_uuid(service_id)
    workspace = as_uuid(workspace_id)
    # Locked so a campaign is never written for a clinic being deleted.
    if service is None or not await conn.fetchval(
            "SELECT true FROM services WHERE id = $1 AND workspace_id = $2 FOR SHARE",
            service, workspace):
        raise ClinicNotFound("no such clinic in this workspace")
    wanted = _as_ids(type_ids)
    live = {row["id"] for row in await conn.fetch(
        """SELECT id FROM appointment_types
           WHERE service_id = $1 AND id = ANY($2::uuid[]) AND retired_at IS NULL FOR SHARE""",
        service, [t for t in wanted if t is not None])}
    foreign = [str(given) for given, t in zip(type_ids, wanted, strict=True) if t not in live]
    if foreign:
        raise CampaignRefused("not appointment types of this clinic: " + ", ".join(foreign))
    row = await conn.fetchrow(
        """INSERT INTO reminder_campaigns (service_id, workspace_id, enabled, lead_hours,
               appointment_type_ids, channel)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (service_id) DO UPDATE
               SET enabled = EXCLUDED.enabled, lead_hours = EXCLUDED.lead_hours,
                   appointment_type_ids = EXCLUDED.appointment_type_ids,
                   channel = EXCLUDED.channel, updated_at = now()
           RETURNING *""",
        service, workspace, enabled, lead_hours, list(dict.fromkeys(wanted)), channel)
    return _campaign(row)


def _as_ids(type_ids: tuple[str, ...] | list[str]) -> list[uuid.UUID | None]:
    """Each given type as a UUID (None: not an id at all)."""
    return [as_uuid(str(t)) for t in type_ids]


async def enabled_campaigns(pool: Executor) -> list[Campaign]:
    """Every clinic's campaign that is on, in every workspace."""
    rows = await pool.fetch(
        "SELECT * FROM reminder_campaigns WHERE enabled ORDER BY workspace_id, service_id")
    return [_campaign(row) for row in rows]
