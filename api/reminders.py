"""A clinic's reminders over HTTP: on or off, a call or a text, how many hours before the
appointment, and which appointment types (none: every type), by name or id.

Reading needs any key; a change needs an admin and writes its audit row in the same
transaction. Another workspace's clinic, an unknown id and a malformed one answer 404; a
type the clinic does not have (live) answers 422 naming it. Mounted before the clinic
routes, whose `/{clinic_id}/{part}` would otherwise take the path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import asyncpg
from fastapi import APIRouter, Depends, HTTPException, status
from loguru import logger
from pydantic import BaseModel, ConfigDict, Field

from api.audit import in_transaction
from api.deps import AUTH_RESPONSES, Caller, Role, get_runtime, require_role
from call.voice_settings import PlainText
from db import audit, control
from db import reminder_campaigns as campaigns
from db.repositories import as_uuid
from runner.runtime import AppRuntime

MAX_TYPES = 200


class ErrorOut(BaseModel):
    detail: Any


class TypeOut(BaseModel):
    id: str
    name: str


CHANNEL = ("How patients are reminded: a call (the agent phones them), or a text from "
           "the clinic's number (needs the Twilio account; a patient who texted STOP gets "
           "none)")


class RemindersOut(BaseModel):
    clinic_id: str
    enabled: bool
    channel: Literal["call", "text"] = Field(description=CHANNEL)
    lead_hours: int = Field(description="How long before the appointment the reminder goes")
    appointment_types: list[TypeOut] = Field(
        description="The types reminded of; empty: every type")
    stored: bool = Field(description="False: the clinic has no campaign yet (these are the "
                                     "defaults, and no reminders go)")


class RemindersIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool
    channel: Literal["call", "text"] = Field(default="call", description=CHANNEL)
    lead_hours: int = Field(ge=campaigns.MIN_LEAD_HOURS, le=campaigns.MAX_LEAD_HOURS)
    appointment_types: list[Annotated[PlainText, Field(max_length=200)]] = Field(
        default_factory=list, max_length=MAX_TYPES,
        description="Names (any case) or ids of the clinic's appointment types; empty: every type")


router = APIRouter(prefix="/api/clinics", tags=["reminder calls"], responses=AUTH_RESPONSES)
read_only = require_role(Role.READ_ONLY)
admin = require_role(Role.ADMIN)
NOT_FOUND = {404: {"model": ErrorOut, "description": "No such clinic in this workspace"}}


def _not_found() -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, "clinic not found")


async def _types(conn: asyncpg.Connection | asyncpg.Pool, service_id: str) -> list[dict[str, Any]]:
    """The clinic's appointment types (retired ones too: a campaign may still name one)."""
    rows = await conn.fetch(
        "SELECT id, name, retired_at IS NOT NULL AS retired FROM appointment_types "
        "WHERE service_id = $1 ORDER BY name", as_uuid(service_id))
    return [dict(row) for row in rows]


async def _out(conn: asyncpg.Connection | asyncpg.Pool, workspace_id: str,
               service_id: str) -> RemindersOut:
    campaign = await campaigns.get_campaign(conn, workspace_id, service_id)
    names = {str(t["id"]): t["name"] for t in await _types(conn, service_id)}
    if campaign is None:
        return RemindersOut(clinic_id=service_id, enabled=False, channel="call",
                            lead_hours=campaigns.DEFAULT_LEAD_HOURS, appointment_types=[],
                            stored=False)
    return RemindersOut(
        clinic_id=service_id, enabled=campaign.enabled, channel=campaign.channel,
        lead_hours=campaign.lead_hours,
        appointment_types=[TypeOut(id=t, name=names.get(t, t))
                           for t in campaign.appointment_type_ids], stored=True)


def _type_ids(given: list[str], types: list[dict[str, Any]]) -> list[str]:
    """Each given name (any case, live types only) or id as the type's id; a name no live
    type has is passed on as it is, for the campaign to refuse by name."""
    by_name = {t["name"].casefold(): str(t["id"]) for t in types if not t["retired"]}
    return [by_name.get(g.strip().casefold(), g.strip()) for g in given]


@router.get("/{clinic_id}/reminders", response_model=RemindersOut, responses=NOT_FOUND)
async def get_reminders(clinic_id: str, caller: Caller = Depends(read_only),
                        runtime: AppRuntime = Depends(get_runtime)) -> RemindersOut:
    """The clinic's reminders as set (off, by call, 24 hours, every type, until set)."""
    pool = runtime.db.pool

    async def read() -> RemindersOut | None:
        if await control.get_service(pool, caller.workspace_id, clinic_id) is None:
            return None
        return await _out(pool, caller.workspace_id, clinic_id)

    out = await runtime.db.bounded(read(), what="reminders read")
    if out is None:
        raise _not_found()
    return out


@router.put("/{clinic_id}/reminders", response_model=RemindersOut,
            responses={**NOT_FOUND, 422: {"model": ErrorOut, "description": (
                "A field is invalid, or a type is not one of the clinic's")}})
async def put_reminders(clinic_id: str, body: RemindersIn, caller: Caller = Depends(admin),
                        runtime: AppRuntime = Depends(get_runtime)) -> RemindersOut:
    """Set the clinic's reminders whole (audited). `channel` "call" (the default) has the
    agent phone each patient; "text" texts them from the clinic's number instead (the
    deployment's Twilio account; a patient who texted STOP gets none, one who asked not
    to be called still gets the text), at the same lead time and never at night."""
    workspace_id = caller.workspace_id

    async def change(conn: asyncpg.Connection) -> RemindersOut:
        if await control.get_service(conn, workspace_id, clinic_id) is None:
            raise _not_found()
        before = await _out(conn, workspace_id, clinic_id)
        try:
            await campaigns.put_campaign(
                conn, workspace_id, clinic_id, enabled=body.enabled, lead_hours=body.lead_hours,
                channel=body.channel,
                appointment_type_ids=_type_ids(body.appointment_types,
                                               await _types(conn, clinic_id)))
        except campaigns.ClinicNotFound:
            raise _not_found() from None
        except campaigns.CampaignRefused as refused:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(refused)) from None
        after = await _out(conn, workspace_id, clinic_id)
        await audit.record_change(
            conn, workspace_id, actor=caller.actor, action="reminder_campaign.replace",
            target=clinic_id, before=before.model_dump() if before.stored else None,
            after=after.model_dump())
        return after

    out = await in_transaction(runtime, change, what="reminders write")
    logger.info(f"clinic {clinic_id}: reminder {out.channel}s {'on' if out.enabled else 'off'}, "
                f"{out.lead_hours} h ahead, by {caller.actor}")
    return out
