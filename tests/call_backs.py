"""A call on the demo clinic (Chicago) whose pipeline can ask for a call back, on a fixed
clock: a caller at 6 PM on a Friday is called back Saturday from 9 AM (Northside's
Saturday hours)."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg

from call.call_session import CallLog, CallSession, SessionMode
from call.identity import CallIdentity
from db import repositories as repo
from db.call_backs import CallBacks, Caller
from db.promised_calls import Callee
from db.seed import seed_clinic
from tests.fakes import CollectingWriter

CHICAGO = ZoneInfo("America/Chicago")
UNKNOWN_CALLER = "+15550100298"  # no patient record has this number


def next_friday() -> date:
    soon = date.today() + timedelta(days=2)
    return soon + timedelta(days=(4 - soon.weekday()) % 7)


FRIDAY_EVENING = datetime.combine(next_friday(), time(18), CHICAGO).astimezone(UTC)
SATURDAY_9 = datetime.combine(next_friday() + timedelta(days=1), time(9), CHICAGO)


async def clinic_call(db, workspace_id: str, writer: CollectingWriter, *,
                      mode: SessionMode = SessionMode.PHONE,
                      now: datetime = FRIDAY_EVENING) -> tuple[CallSession, CallBacks]:
    """A call from an unknown number to a clinic of its own seeded with the demo clinic,
    and the call backs its pipeline would be given."""
    service = await repo.create_service(db.pool, workspace_id, f"clinic-{uuid.uuid4().hex[:6]}")
    await seed_clinic(db.pool, workspace_id, service["id"], now.date())
    call_id = await repo.create_call(
        db.pool, workspace_id=workspace_id, service_id=service["id"], call_sid=None,
        direction="inbound", from_number=UNKNOWN_CALLER, to_number=None,
        status="in_progress")
    identity = CallIdentity(call_id, workspace_id, service["id"], UNKNOWN_CALLER)
    session = CallSession(identity=identity, mode=mode, log=CallLog(call_id, writer),
                          clinic_name="Riverside Clinic")
    caller = Caller(workspace_id=workspace_id, call_id=call_id, caller_number=UNKNOWN_CALLER,
                    callee=Callee(service_id=service["id"]))
    return session, CallBacks(db.pool, lambda: caller, now=lambda: now)


async def call_back_tasks(db, call_id: str) -> list[asyncpg.Record]:
    """The callback tasks a call wrote, with the request each belongs to."""
    return await db.pool.fetch(
        "SELECT t.*, r.id AS request FROM outbound_tasks t "
        "LEFT JOIN callback_requests r ON r.id = t.callback_request_id "
        "WHERE t.source_call = $1", uuid.UUID(call_id))
