"""Recall states: what a graph looks up before the caller speaks, by the name it gives.

Every recall first identifies the caller by the number they call from (one patient on
that number: identified; several: the graph asks who is calling). Then the graph's own
recall runs: a booking call loads the clinic's services, locations, closures and the
caller's upcoming bookings; a companion check-in loads what the person said on earlier calls
and their open reminders. A graph naming an unknown recall does not load.

An identified caller's strongest memories of earlier calls, and their calls of today
already analysed, are loaded with their chart (each one indexed query; a failure leaves
the call without them, never without its chart).

An outbound call identifies nobody by number: the person who answers is only the
callee once the right-person check passes (flows/right_person.py). Its recall loads the
callee's record and what the call is about into `session.callee`, held apart until then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import asyncpg
from loguru import logger

from db import companion, memories, world
from db import scheduling as db
from db.call_analyses import earlier_calls
from db.slots import Slot
from flows.callee import Callee
from flows.clinic_calendar import clinic_zone
from flows.graph import ContextGraph, StateType
from flows.graph_session import GraphSession

Recall = Callable[[GraphSession, asyncpg.Pool], Awaitable[None]]


async def identify_by_phone(session: GraphSession, pool: asyncpg.Pool) -> None:
    if session.callee is not None:  # an outbound call: the right-person check decides
        return
    if session.caller_number:
        session.phone_matches = await db.patients_by_phone(
            pool, session.workspace_id, session.caller_number
        )
    if len(session.phone_matches) == 1:
        session.patient = session.phone_matches[0]


async def caller_context(session: GraphSession, pool: asyncpg.Pool) -> None:
    await clinic_context(session, pool)
    await identify_by_phone(session, pool)
    if session.patient is not None:
        session.upcoming = await db.upcoming_appointments(
            pool, session.patient.id, datetime.now().astimezone()
        )
        await load_chart(session, pool)


async def clinic_context(session: GraphSession, pool: asyncpg.Pool) -> None:
    """The clinic's services, locations, closures and practitioners."""
    session.services = await db.appointment_types(pool, session.service_id)
    session.services_read = bool(session.services)
    session.locations = await db.locations(pool, session.service_id)
    # from yesterday: today in a timezone behind the server's is still the server's yesterday
    session.closures = await db.closures(pool, session.service_id,
                                         date.today() - timedelta(days=1))
    session.practitioners = await db.practitioner_names(pool, session.service_id)


# The identified caller's memories the ambient channel carries.
AMBIENT_MEMORIES = 5


async def load_chart(session: GraphSession, pool: asyncpg.Pool) -> None:
    """The identified caller's chart (the ambient channel's patient context), and what
    they told earlier calls when the caller is someone new to this call."""
    session.chart_stale = False
    loaded = session.chart.patient.id if session.chart is not None else None
    session.chart = (await world.clinical_context(pool, session.patient.id)
                     if session.patient is not None else None)
    if session.identified_patient_id() != loaded:
        await load_earlier(session, pool)


async def load_earlier(session: GraphSession, pool: asyncpg.Pool) -> None:
    """The identified caller's strongest memories and their analysed calls of today (in
    the clinic's timezone), this call left out; nothing for an unidentified caller."""
    session.told_before, session.earlier_today = [], []
    patient_id = session.identified_patient_id()
    if patient_id is None:
        return
    now = datetime.now().astimezone()
    zone = clinic_zone(session.locations)
    start_of_today = datetime.combine(now.astimezone(zone).date(), time(0), tzinfo=zone)
    try:
        session.told_before = await memories.recall(
            pool, patient_id, AMBIENT_MEMORIES, policy=session.memory_policy)
        session.earlier_today = await earlier_calls(pool, patient_id, start_of_today,
                                                    before_call=session.call_id)
    except (asyncpg.PostgresError, OSError) as error:
        logger.warning(f"call {session.call_id}: earlier calls not loaded "
                       f"({type(error).__name__})")


async def person_memories(session: GraphSession, pool: asyncpg.Pool) -> None:
    """A check-in: the person's earlier words and open reminders (an outbound check-in's
    are the callee's, kept out of every prompt until they are confirmed)."""
    await identify_by_phone(session, pool)
    await load_callee(session, pool)
    person = session.patient or (session.callee.patient if session.callee else None)
    if person is not None:
        session.memories = await memories.recent(pool, person.id,
                                                 policy=session.memory_policy)
        session.reminders = await companion.open_reminders(pool, person.id)


async def outbound_callee(session: GraphSession, pool: asyncpg.Pool) -> None:
    """An outbound call: the clinic's context, and the callee with what the call is about."""
    await clinic_context(session, pool)
    await load_callee(session, pool)


async def load_callee(session: GraphSession, pool: asyncpg.Pool) -> None:
    """The task's patient (in this workspace only), their upcoming bookings, the
    reminder's appointment (theirs only) and the waitlist slot on offer."""
    callee = session.callee
    if callee is None or callee.call.patient_id is None:
        return
    records = await world.patients_by_ids(pool, [callee.call.patient_id])
    record = next((r for r in records if r.workspace_id == session.workspace_id), None)
    if record is None:
        logger.warning(f"call {session.call_id}: the outbound task's patient is not on file")
        return
    callee.patient = record.as_patient()
    now = datetime.now().astimezone()
    callee.upcoming = await db.upcoming_appointments(pool, record.id, now)
    if callee.call.appointment_id is not None:
        appointment = await db.get_appointment(pool, callee.call.appointment_id)
        if appointment is not None and appointment.patient_id == record.id:
            callee.appointment = appointment
    if callee.call.offer:
        await _load_offer(session, callee, pool, now)


async def _load_offer(session: GraphSession, callee: Callee, pool: asyncpg.Pool,
                      now: datetime) -> None:
    """The offered slot as the clinic's schedule has it (its practitioner and place by
    name); not among the open times any more: it is gone already."""
    offer = callee.call.offer or {}
    callee.offer_type = next(
        (t for t in session.services if t.id == str(offer.get("appointment_type_id"))), None)
    try:
        starts = datetime.fromisoformat(str(offer["starts_at"]))
    except (KeyError, ValueError):
        logger.warning(f"call {session.call_id}: the waitlist offer has no start time")
        callee.slot_gone = True
        return
    place = next((loc for loc in session.locations if loc.id == str(offer.get("location_id"))),
                 None)
    if callee.offer_type is None or place is None:
        callee.slot_gone = True
        return
    day = starts.astimezone(ZoneInfo(place.timezone)).date()
    slots = await db.available_slots(
        pool, session.service_id, appointment_type=callee.offer_type, first_day=day,
        last_day=day, now=now, location_id=place.id,
        practitioner_id=str(offer.get("practitioner_id")))
    callee.offer = next((s for s in slots if offered(s, offer)), None)
    callee.slot_gone = callee.offer is None


def offered(slot: Slot, offer: dict) -> bool:
    """`slot` is the one the waitlist offer names."""
    try:
        starts = datetime.fromisoformat(str(offer["starts_at"]))
    except (KeyError, ValueError):
        return False
    return (slot.practitioner_id, slot.location_id, slot.appointment_type_id,
            slot.starts_at) == (str(offer.get("practitioner_id")), str(offer.get("location_id")),
                                str(offer.get("appointment_type_id")), starts)


RECALLS: dict[str, Recall] = {
    "caller_context": caller_context,
    "person_memories": person_memories,
    "outbound_callee": outbound_callee,
}


def unknown_recalls(graph: ContextGraph) -> list[str]:
    """Recall names the graph uses that this engine cannot look up (empty: all known)."""
    return sorted({
        spec.recall for spec in graph.states.values()
        if spec.type is StateType.RECALL and spec.recall not in RECALLS
    })
