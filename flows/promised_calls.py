"""What the agent may promise about a call from the clinic, from what this call knows: the
caller as identified so far, the number they gave for the call back and the clinic's
calendar as the call loaded it.

The plan and the write are the database layer's (`db.promised_calls`, `db.call_backs`),
shared with the pipeline's own call backs (the no-LLM responder, the time limit), so
every promise is made and timed the same way.
"""

from __future__ import annotations

from datetime import datetime, time

import asyncpg

from db import promised_calls
from db.call_backs import Caller
from db.promised_calls import Callee, CallPlan
from flows.graph_session import GraphSession


def callee_of(session: GraphSession, dialled_number: str | None) -> Callee:
    """The clinic and the identified patient (with the timezone their chart gives)."""
    patient, chart = session.patient, session.chart
    zone = (chart.patient.timezone if patient is not None and chart is not None
            and chart.patient.id == patient.id else None)
    return Callee(service_id=session.service_id, patient_id=session.identified_patient_id(),
                  patient_timezone=zone, dialled_number=dialled_number,
                  places=session.locations, closures=session.closures)


def caller_of(session: GraphSession, dialled_number: str | None) -> Caller:
    """The person on this call, as the call knows them now."""
    return Caller(workspace_id=session.workspace_id, call_id=session.call_id,
                  caller_number=session.caller_number,
                  callee=callee_of(session, dialled_number),
                  callback_phone=session.callback_phone)


async def plan_call(
    session: GraphSession, pool: asyncpg.Pool, now: datetime, *,
    dialled_number: str | None = None,
    hours: tuple[time, time, tuple[int, ...]] | None = None,
) -> CallPlan:
    """The plan for a call to this session's caller from `now`: within `hours` (start,
    end, weekdays) in their timezone when given, else the clinic's business hours."""
    return await promised_calls.plan_call(pool, callee_of(session, dialled_number), now,
                                          hours=hours)
